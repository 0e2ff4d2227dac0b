#!/usr/bin/env python
"""Ingest benchmark: a generated corpus of mixed files (default 50 MB), first run and re-run.

    .venv/bin/python scripts/bench_ingest.py [--mb 50] [--backends torch,onnx] [--out bench-out/ingest.json]

Reports files/s, MB/s, chunks/s, the share of time in embedding versus parsing, chunking and
storing, and the time of a re-ingest with nothing changed (and its ratio to the first run).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.bench.report import write_metrics  # noqa: E402
from appliance.offline import install_guard  # noqa: E402
from knowledge.index.kb import KBConfig, KnowledgeBase  # noqa: E402
from knowledge.ingest.folder import ingest  # noqa: E402

WORDS = ("policy server network laptop backup restore certificate account printer invoice budget "
         "deploy release incident review meeting travel expense approval security password rotate "
         "quarterly report onboarding training manager customer contract support ticket escalation "
         "database migration cluster monitoring alert dashboard schedule holiday office badge").split()
ZH = "系统服务器网络备份恢复证书账号打印机发票预算部署发布事故评审会议差旅报销审批安全密码季度报告培训客户合同支持工单"


def sentence(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return "".join(rng.choice(ZH) for _ in range(rng.randint(12, 30))) + "。"
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 20))]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(3, 8)))


def generate(folder: Path, megabytes: float, seed: int = 7) -> int:
    """Write markdown, HTML, text, DOCX and PDF files until `megabytes` of text are on disk."""
    sys.path.insert(0, str(ROOT / "tests"))
    from kb_helpers import make_docx, make_pdf

    rng, total, n = random.Random(seed), 0, 0
    target = megabytes * 1024 * 1024
    while total < target:
        kind = rng.choice(["md", "md", "html", "txt", "txt", "docx", "pdf"])
        paras = [paragraph(rng) for _ in range(rng.randint(10, 60))]
        path = folder / f"dir{n % 20:02}" / f"doc{n:05}.{kind}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "md":
            path.write_text("\n\n".join(f"## Section {i}\n\n{p}" for i, p in enumerate(paras)))
        elif kind == "html":
            body = "".join(f"<h2>Part {i}</h2><p>{p}</p>" for i, p in enumerate(paras))
            path.write_text(f"<html><head><title>Doc {n}</title></head><body><nav>menu</nav>"
                            f"<main>{body}</main></body></html>")
        elif kind == "txt":
            path.write_text("\n\n".join(paras))
        elif kind == "docx":
            make_docx(path, f"Doc {n}", [(f"Heading {i}", p) for i, p in enumerate(paras[:20])])
        else:
            make_pdf(path, [p.encode("ascii", "ignore").decode()[:1500] for p in paras[:15]])
        total += path.stat().st_size
        n += 1
    return n


def _measure(kb: KnowledgeBase, docs: Path, n_files: int, size: int, prefix: str) -> dict:
    first = ingest(kb, docs)
    second = ingest(kb, docs)
    kb.close()
    t = first.timings
    work_s = sum(t[k] for k in ("parse", "chunk", "embed", "store"))
    result = {
        "chunks": first.chunks, "failed": first.count("failed"), "first_s": round(t["total"], 1),
        "files_per_s": round(n_files / t["total"], 1), "mb_per_s": round(size / 2**20 / t["total"], 2),
        "chunks_per_s": round(first.chunks / t["total"], 1),
        "share_embed": round(t["embed"] / work_s, 3),
        "share_parse": round(t["parse"] / work_s, 3), "share_chunk": round(t["chunk"] / work_s, 3),
        "share_store": round(t["store"] / work_s, 3),
        "rerun_s": round(second.timings["total"], 2),
        "rerun_ratio": round(second.timings["total"] / t["total"], 4),
        "rerun_unchanged": second.count("unchanged"),
    }
    return {prefix + k: v for k, v in result.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "ingest.json")
    ap.add_argument("--keep", action="store_true", help="keep the generated corpus and index")
    ap.add_argument("--backends", default="auto", help="embedding backends, e.g. torch,onnx (one index each)")
    args = ap.parse_args()
    install_guard()
    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        docs = work / "docs"
        t0 = time.perf_counter()
        n_files = generate(docs, args.mb)
        size = sum(p.stat().st_size for p in docs.rglob("*") if p.is_file())
        print(f"generated {n_files} files, {size / 2**20:.1f} MB in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        result: dict = {"files": n_files, "mb": round(size / 2**20, 1)}
        for backend in args.backends.split(","):
            # The same files into a fresh index per embedding backend, one after the other, in one run.
            result.update(_measure(KnowledgeBase(work / f"data-{backend}", KBConfig(embed_backend=backend)),
                                   docs, n_files, size, prefix="" if "," not in args.backends else f"{backend}_"))
        if args.backends == "torch,onnx":
            result["onnx_speedup"] = round(result["onnx_chunks_per_s"] / result["torch_chunks_per_s"], 2)
        write_metrics(args.out, result)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
