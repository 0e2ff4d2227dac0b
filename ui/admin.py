"""The admin tab: live metrics plots, users and API keys, documents. Admins only."""

from __future__ import annotations

import time
from collections import deque

import gradio as gr
import pandas as pd

from appliance.server.services import Services
from ui.i18n import say, t
from ui.session import SessionGuard

_WINDOW = 300  # samples kept (10 minutes at one per 2 s)


def build_admin_tab(svc: Services, guard: SessionGuard) -> None:
    samples: deque = deque(maxlen=_WINDOW)
    last = {"tokens": 0, "t": time.monotonic()}
    is_admin = guard.is_admin

    def sample(request: gr.Request):
        if not is_admin(request):
            return [gr.update()] * 4 + [say(request, "admins_only")]
        snap, now = svc.engine.snapshot(), time.monotonic()
        rate = (snap["generated_tokens"] - last["tokens"]) / max(1e-3, now - last["t"])
        last.update(tokens=snap["generated_tokens"], t=now)
        samples.append({"time": pd.Timestamp.now(), "ttft_p50_s": snap["ttft"]["p50"] or 0.0,
                        "tpot_p50_s": snap["tpot"]["p50"] or 0.0, "tokens_per_s": rate,
                        "running": snap["running"], "waiting": snap["waiting"], "kv_used": snap["kv_cells_used"],
                        "kv_cached": snap["kv_cells_cached"], "kv_free": snap["kv_cells_free"],
                        "prefix_hit_rate": snap["prefix_hit_rate"]})
        df = pd.DataFrame(list(samples))
        long = lambda cols: df.melt("time", cols, "series", "value")  # noqa: E731
        status = (f"running {snap['running']}, waiting {snap['waiting']}, KV {snap['kv_cells_used']}/"
                  f"{snap['kv_cells_total']} cells, prefix hit rate {snap['prefix_hit_rate']:.0%}"
                  + "".join(f", speculative {proposer}: {rate:.0%} of drafts accepted"
                            for proposer, rate in snap.get("spec_accept_rate", {}).items()))
        return (long(["ttft_p50_s", "tpot_p50_s"]), long(["tokens_per_s"]), long(["running", "waiting"]),
                long(["kv_used", "kv_cached", "kv_free"]), status)

    with gr.Tab(t("tab_admin")):
        status = gr.Markdown()
        with gr.Row():
            lat = gr.LinePlot(x="time", y="value", color="series", title=t("latency"))
            thr = gr.LinePlot(x="time", y="value", color="series", title=t("throughput"))
        with gr.Row():
            load = gr.LinePlot(x="time", y="value", color="series", title=t("requests"))
            kv = gr.LinePlot(x="time", y="value", color="series", title=t("kv_cells"))
        gr.Timer(2.0).tick(sample, None, [lat, thr, load, kv, status])
        users = gr.Dataframe(headers=["user", "role", "active keys"], interactive=False, label=t("users"))
        with gr.Row():
            name = gr.Textbox(label=t("user"))
            password = gr.Textbox(label=t("new_password"), type="password")
            admin = gr.Checkbox(label=t("administrator"))
        with gr.Row():
            add = gr.Button(t("add_user"))
            key = gr.Button(t("create_key"))
            revoke = gr.Button(t("revoke_keys"), variant="stop")
        out = gr.Markdown()

        def table(request: gr.Request):
            if not is_admin(request):
                return []
            return [[u.name, u.role, n] for u, n in svc.users.list()]

        def guarded(fn):
            def run(n: str, p: str, a: bool, request: gr.Request):
                if not is_admin(request):
                    return say(request, "admins_only"), []
                try:
                    return fn(n.strip(), p, a), table(request)
                except Exception as e:  # noqa: BLE001 - shown to the admin
                    return f"Error: {e}", table(request)
            return run

        add.click(guarded(lambda n, p, a: f"Added {svc.users.add(n, p, a).name}."),
                  [name, password, admin], [out, users])
        key.click(guarded(lambda n, p, a: f"New key for {n} (shown once): `{svc.users.create_key(n)}`"),
                  [name, password, admin], [out, users])
        revoke.click(guarded(lambda n, p, a: f"Revoked {svc.users.revoke_key(n)} key(s) of {n}."),
                     [name, password, admin], [out, users])
        gr.Timer(10.0).tick(table, None, [users])
