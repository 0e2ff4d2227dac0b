"""Browser benchmark: N real Chromium sessions ask at once; time to first visible answer text.

    .venv/bin/python scripts/bench_browser.py --concurrency 1,4,8 [--out bench-out/browser]

Starts its own appliance (temporary data directory with the sample guide), one user per browser
session, and for each level clicks "Ask" in every session together. Each page stamps, in its own
clock (Date.now, shared by all pages on this machine), when the click happened, when the first answer
text became visible and when the answer was saved. Writes results.json and report.md and prints
the table: first-visible-token p50/p95, the slowest/fastest first-token ratio, answer time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.bench.server import start_server  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
QUESTIONS = ["What colour badge must visitors wear?", "How often are passwords rotated?",
             "How do I back up the appliance?", "Which port does the server listen on?",
             "默认情况下服务监听哪个端口？", "How do I report a security incident?",
             "Who approves remote access?", "What does /metrics export?"]
# Installed in each page: stamps the first visible answer text and the end of the answer.
WATCH = """() => {
  window.__t = {click: Date.now(), first: null, done: null};
  const chat = document.querySelector('#chatbot');
  const obs = new MutationObserver(() => {
    const b = chat.querySelectorAll('.message');
    if (window.__t.first === null && b.length >= 2 && b[b.length - 1].innerText.trim().length > 0)
      window.__t.first = Date.now();
    if (window.__t.done === null && document.querySelector('#conversations label')) window.__t.done = Date.now();
  });
  obs.observe(document.body, {subtree: true, childList: true, characterData: true});
  document.querySelector('#ask').click();
}"""


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def run_level(browser, server, n: int, tag: int) -> dict:
    pages = []
    for i in range(n):
        page = browser.new_context().new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("input[type=password]", timeout=60_000)
        page.fill("input[type=text]", f"bench{tag}-{i}")  # fresh users: "done" = their first saved chat
        page.fill("input[type=password]", f"bench-password-{i}")
        page.click("button:has-text('Login')")
        page.wait_for_selector("#question textarea", timeout=60_000)
        page.fill("#question textarea", QUESTIONS[i % len(QUESTIONS)])
        pages.append(page)
    for page in pages:
        page.evaluate(WATCH)
    deadline = time.monotonic() + 900
    stamps = []
    for page in pages:
        page.wait_for_function("() => window.__t && window.__t.done !== null",
                               timeout=max(1, deadline - time.monotonic()) * 1000)
        stamps.append(page.evaluate("() => window.__t"))
    for page in pages:
        page.context.close()
    first = [(s["first"] - s["click"]) / 1000 for s in stamps if s["first"]]
    done = [(s["done"] - s["click"]) / 1000 for s in stamps]
    return {"users": n, "first_p50_s": round(_pct(first, 0.5), 2), "first_p95_s": round(_pct(first, 0.95), 2),
            "first_min_s": round(min(first), 2), "first_max_s": round(max(first), 2),
            "slowest_over_fastest": round(max(first) / max(min(first), 1e-3), 2),
            "answer_p50_s": round(statistics.median(done), 2), "answer_max_s": round(max(done), 2),
            "first_s": [round(x, 2) for x in first]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "browser")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="bench-browser-") as tmp:
        server = start_server(Path(tmp), env={"APPLIANCE_ENGINE__N_SEQ_MAX": str(max(levels)),
                                              "APPLIANCE_ENGINE__N_CTX": str(2048 * max(levels))})
        try:
            for tag, n in enumerate(levels):
                for i in range(n):
                    server.cli("users", "add", f"bench{tag}-{i}", "--password-stdin", stdin=f"bench-password-{i}\n")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                rows = [run_level(browser, server, n, tag) for tag, n in enumerate(levels)]
                browser.close()
        finally:
            server.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    head = ("| browser users | first text p50 s | p95 s | fastest s | slowest s | slowest/fastest | answer p50 s "
            "| answer max s |\n|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['users']} | {r['first_p50_s']} | {r['first_p95_s']} | {r['first_min_s']} | {r['first_max_s']}"
                   f" | {r['slowest_over_fastest']} | {r['answer_p50_s']} | {r['answer_max_s']} |\n" for r in rows)
    (args.out / "report.md").write_text(head + body)
    print(head + body)


if __name__ == "__main__":
    main()
