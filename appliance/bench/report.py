"""Bench output: results.json (raw records + summaries), report.md (table + machine), PNG charts."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from appliance.bench.load import RunResult, summarise
from appliance.bench.runner import NOT_AVAILABLE

COLUMNS = [("target", "target"), ("concurrency", "users"), ("ok", "ok"), ("rejected_503", "503"),
           ("errors", "err"), ("out_tok_s", "out tok/s"), ("req_s", "req/s"), ("ttft_p50_ms", "TTFT p50 ms"),
           ("ttft_p95_ms", "TTFT p95 ms"), ("tpot_p50_ms", "TPOT p50 ms"), ("tpot_p95_ms", "TPOT p95 ms"),
           ("latency_p99_ms", "e2e p99 ms"), ("peak_running", "peak running"), ("peak_kv_used", "peak KV"),
           ("prefix_hit_rate", "prefix hit"), ("spec_accept_rate", "draft accept"),
           ("ceiling_fraction", "of ceiling")]


def machine() -> dict:
    """CPU, GPU and core count, for the report header."""
    from appliance.doctor import cpu_model
    from appliance.plan import detect_device_bytes

    cpu = cpu_model()
    mem, where = detect_device_bytes()
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 2**30, 1), "memory_kind": where,
            "python": platform.python_version()}


def write(out: Path, runs: list[RunResult], meta: dict, ladder: bool) -> list[Path]:
    """Write everything to `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    summaries = [summarise(r) for r in runs]
    (out / "results.json").write_text(json.dumps({"meta": meta, "runs": [r.to_dict() for r in runs]}, indent=1))
    (out / "report.md").write_text(markdown(summaries, meta, ladder))
    files = [out / "results.json", out / "report.md"]
    files += charts(out, summaries, ladder)
    return files


def table(summaries: list[dict], ladder: bool) -> str:
    cols = list(COLUMNS) + ([("ratio", "× first")] if ladder else [])
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    base = summaries[0]["out_tok_s"] if summaries else 0
    for s in summaries:
        row = dict(s, ratio=round(s["out_tok_s"] / base, 2) if base else None)
        lines.append("| " + " | ".join(_fmt(row.get(k)) for k, _ in cols) + " |")
    return "\n".join(lines)


def markdown(summaries: list[dict], meta: dict, ladder: bool) -> str:
    m = meta.get("machine", {})
    head = [f"# appliance bench — {meta.get('workload')} workload", "",
            f"- when: {meta.get('when')}", f"- machine: {m.get('cpu')}, {m.get('cores')} cores, "
            f"{m.get('memory_gib')} GiB {m.get('memory_kind')}",
            f"- model: {meta.get('model')}; engine config: {json.dumps(meta.get('engine', {}))}",
            f"- the bench's own servers also set: {json.dumps(meta.get('server_overrides', {}))}",
            f"- requests per user: {meta.get('requests')}" + ("; interrupted (partial)" if meta.get("partial") else ""),
            *([f"- this machine's rates through our runner: prefill {meta['rates']['prefill_tok_s']} tok/s, decode "
               + ", ".join(f"batch {b}: {r}" for b, r in meta["rates"]["decode_tok_s"].items()) + " tok/s; "
               "'of ceiling' = throughput / (generated ÷ (uncached prompt ÷ prefill + generated ÷ decode at "
               "the observed batch))"] if meta.get("rates") else []),
            "", table(summaries, ladder)]
    if ladder:
        head += ["", "Each rung is its own server with one engine switch changed; ratio is output tokens/s "
                 "against the first rung."] + [f"- not run: {n}" for n in NOT_AVAILABLE]
    return "\n".join(head) + "\n"


def charts(out: Path, summaries: list[dict], ladder: bool) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    if ladder:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar([s["target"] for s in summaries], [s["out_tok_s"] for s in summaries], color="#3b6ea5")
        ax.set_ylabel("output tokens/s")
        ax.set_title("optimisation ladder")
        files.append(_save(fig, out / "ladder.png"))
        return files
    by_target: dict[str, list[dict]] = {}
    for s in summaries:
        by_target.setdefault(s["target"], []).append(s)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, ss in by_target.items():
        ax.plot([s["concurrency"] for s in ss], [s["out_tok_s"] for s in ss], marker="o", label=name)
    ax.set_xlabel("concurrent users")
    ax.set_ylabel("output tokens/s")
    ax.legend()
    files.append(_save(fig, out / "throughput.png"))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, ss in by_target.items():
        xs = [s["concurrency"] for s in ss]
        ax.plot(xs, [s["ttft_p50_ms"] or 0 for s in ss], marker="o", label=f"{name} p50")
        ax.plot(xs, [s["ttft_p95_ms"] or 0 for s in ss], marker="x", linestyle="--", label=f"{name} p95")
    ax.set_xlabel("concurrent users")
    ax.set_ylabel("TTFT ms")
    ax.legend()
    files.append(_save(fig, out / "ttft.png"))
    return files


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def meta_for(opts, engine: dict | None = None) -> dict:
    """Run description for results.json and report.md (including what the bench overrode)."""
    from appliance.bench.runner import sizing

    own_server = not opts.url or opts.with_appliance
    overrides = {**sizing(max(opts.concurrency)), **opts.server_env} if own_server else {}
    return {"workload": opts.workload, "concurrency": opts.concurrency, "requests": opts.requests,
            "ladder": opts.ladder, "model": opts.model if opts.url else "appliance default",
            "engine": engine or {}, "server_overrides": overrides, "machine": machine(),
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}


def write_metrics(out: Path, result: dict) -> None:
    """A flat benchmark's numbers: JSON to `out`, a two-column Markdown table to stdout."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print("| metric | value |\n|---|---|")
    for k, v in result.items():
        print(f"| {k} | {v} |")
    print(f"\nwritten: {out}")
