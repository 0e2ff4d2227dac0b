"""Calibration and held-out text for `appliance quantize`, from the team's own documents.

The documents (a folder read with the ingest loaders, or the indexed knowledge base) are cut into
blocks of about `BLOCK_CHARS` at paragraph ends; every `HOLDOUT_EVERY`-th block is held out for the
quality gate and never used for calibration. Both sets are shuffled (fixed seed), so a token budget
samples every file. Calibration also mixes in a small bundled general text
(prose, code, arithmetic, English and Chinese), at most `GENERAL_SHARE` of its tokens, so that a
narrow corpus does not tune the importance matrix to a single style.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from appliance.quant.types import QuantError

BLOCK_CHARS = 1500
HOLDOUT_EVERY = 5
GENERAL_SHARE = 0.25
GENERAL_TEXT = Path(__file__).with_name("general.txt")


@dataclass
class CalibText:
    """Blocks for calibration and blocks held out, with where they came from."""

    calibration: list[str]
    held_out: list[str]
    origin: str
    files: int
    skipped: list[str] = field(default_factory=list)


def from_dir(root: Path) -> tuple[list[str], list[str]]:
    """Each readable document's text under `root` (sorted by path), and the files skipped, with why."""
    from knowledge.errors import LoaderError
    from knowledge.index.chunking import document_text
    from knowledge.loaders import load, supported

    if not root.is_dir():
        raise QuantError(f"--calib {root}: not a folder")
    texts, skipped = [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and supported(p)):
        try:
            texts.append(document_text(load(path, path.read_bytes())))
        except (LoaderError, OSError) as e:
            skipped.append(f"{path.relative_to(root)}: {e}")
    return texts, skipped


def from_kb(data_dir: Path, kb: str) -> tuple[list[str], list[str]]:
    """Each indexed source's text, rebuilt from its chunks without the overlap between neighbours,
    and the sources' names in the same order (so the report can say what it calibrated on)."""
    from knowledge.index.db import KnowledgeDB

    db = KnowledgeDB(Path(data_dir) / "knowledge.db")
    try:
        rows = db.chunks_in_order(kb)
    finally:
        db.close()
    by_source: dict[str, list[str]] = {}
    for row in rows:
        by_source.setdefault(row["source"], []).append(row["text"])
    return [_join_overlapping(chunks) for chunks in by_source.values()], list(by_source)


def describe_sources(sources: list[str], shown: int = 5) -> str:
    """'3 documents: a.md, b.pdf, c.html', naming at most `shown` of them."""
    names = ", ".join(sources[:shown]) + (f", … ({len(sources) - shown} more)" if len(sources) > shown else "")
    return f"{len(sources)} document{'s' if len(sources) != 1 else ''}: {names}"


def _join_overlapping(chunks: list[str]) -> str:
    # Neighbouring chunks repeat a few sentences (the chunk overlap); drop the repeat so a held-out
    # block never shares text with a calibration block.
    out = chunks[0] if chunks else ""
    for nxt in chunks[1:]:
        cut = next((k for k in range(min(len(out), len(nxt), 1000), 0, -1) if out.endswith(nxt[:k])), 0)
        out += "\n" + nxt[cut:] if cut == 0 else nxt[cut:]
    return out


def blocks(text: str, size: int = BLOCK_CHARS) -> list[str]:
    """`text` in blocks of about `size` characters, cut at paragraph (or line) ends."""
    out, cur = [], ""
    for para in text.replace("\r\n", "\n").split("\n"):
        if cur and len(cur) + len(para) > size:
            out.append(cur.strip())
            cur = ""
        cur += para + "\n"
    if cur.strip():
        out.append(cur.strip())
    return [b for b in out if b]


def split(texts: list[str], origin: str, skipped: list[str] | None = None) -> CalibText:
    """Blocks of every text; every HOLDOUT_EVERY-th held out (at least one when there are two)."""
    all_blocks = [b for t in texts for b in blocks(t)]
    if len(all_blocks) < 2:
        raise QuantError(f"{origin}: too little text to calibrate and check ({len(all_blocks)} block); "
                         "give a folder with more documents")
    held = [b for i, b in enumerate(all_blocks) if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1] or [all_blocks[-1]]
    held_ids = {id(b) for b in held}
    calib = [b for b in all_blocks if id(b) not in held_ids]
    # A token budget takes blocks from the front: a fixed shuffle makes that front a sample of every
    # file rather than the first files alphabetically.
    rng = random.Random(0)
    rng.shuffle(calib)
    rng.shuffle(held)
    return CalibText(calib, held, origin, len(texts), skipped or [])


def windows(tokenize: Callable[[str], list[int]], texts: list[str], n_ctx: int, max_tokens: int,
            bos: int | None) -> list[list[int]]:
    """Token windows of at most `n_ctx` tokens (BOS first when the model uses one), `max_tokens` in all."""
    stream: list[int] = []
    for text in texts:
        stream += tokenize(text + "\n\n")
        if len(stream) >= max_tokens:
            break
    stream = stream[:max_tokens]
    body = n_ctx - (1 if bos is not None else 0)
    prefix = [bos] if bos is not None else []
    out = [prefix + stream[i:i + body] for i in range(0, len(stream), body)]
    return [w for w in out if len(w) >= min(64, n_ctx)]  # a short tail scores too few tokens to count


def general_text() -> list[str]:
    """The bundled general calibration text, in blocks."""
    return blocks(GENERAL_TEXT.read_text(encoding="utf-8"))
