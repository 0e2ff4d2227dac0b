"""Loader fidelity: what a reader sees in each file against what our loaders keep of it.

The reference is `knowledge.eval.plaintext` (other libraries, no choice of what is content). Its
text is cut into sentences; a *content* sentence (four words or more, or eight Chinese characters)
that is not in our loaded text is lost. Sentences inside navigation (by the reference's own generic
reading: nav/header/footer elements, navigation roles and class names, blocks that are nearly all
link text) are counted apart: dropping them is on purpose. Comparison folds case, compatibility
forms, whitespace and punctuation, so that two correct extractions of one page compare equal.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from knowledge.answer.sentences import sentences
from knowledge.errors import LoaderError
from knowledge.eval.plaintext import HTML_SUFFIXES, Block, html_blocks, markdown_blocks, plain_text
from knowledge.loaders import load, supported

_CJK = re.compile(r"[\u3400-\u9fff]")
_NOT_WORD = re.compile(r"[\W_]+")
MIN_WORDS, MIN_CJK = 4, 8
SHOWN_BLOCKS = 20  # lost blocks listed per file


def fold(text: str) -> str:
    """Letters and digits only, compatibility forms folded, lower case."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).casefold())


def is_content_sentence(sentence: str) -> bool:
    return len(sentence.split()) >= MIN_WORDS or len(_CJK.findall(sentence)) >= MIN_CJK


def reference_blocks(path: Path) -> list[Block] | None:
    """The file as the reference reads it, in blocks; None where it does not read this kind."""
    suffix = path.suffix.lower()
    try:
        if suffix in HTML_SUFFIXES:
            return html_blocks(path.read_bytes())
        if suffix in (".md", ".markdown"):
            return markdown_blocks(path.read_bytes())
    except Exception:  # noqa: BLE001 - an unreadable reference reads nothing; reported as such
        return None
    text = plain_text(path)
    return None if text is None else [Block(line) for line in text.splitlines() if line.strip()]


def _loaded(path: Path) -> str:
    """What our loaders keep: each section's text and its heading path (chunks carry both)."""
    doc = load(path, path.read_bytes())
    return "\n".join(" ".join(s.heading) + "\n" + s.text for s in doc.sections)


def file_fidelity(path: Path, root: Path) -> dict:
    """One file: content and navigation sentences of the reference, which of them our loaders lost."""
    source = path.relative_to(root).as_posix()
    blocks = reference_blocks(path)
    if blocks is None:
        return {"source": source, "status": "no reference reading"}
    try:
        ours, status = fold(_loaded(path)), "loaded"
    except (LoaderError, OSError) as e:
        ours, status = "", f"skipped by our loader: {e}"
    row = {"source": source, "status": status, "content": 0, "lost": 0, "navigation": 0, "navigation_dropped": 0,
           "lost_blocks": []}
    for block in blocks:
        said = [s for s in sentences(block.text) if is_content_sentence(s)]
        missing = [s for s in said if fold(s) not in ours]
        if block.navigation:
            row["navigation"] += len(said)
            row["navigation_dropped"] += len(missing)
            continue
        row["content"] += len(said)
        row["lost"] += len(missing)
        if missing and len(row["lost_blocks"]) < SHOWN_BLOCKS:
            row["lost_blocks"].append({"element": block.element, "sentences": len(missing),
                                       "first_words": " ".join(missing[0].split()[:12])})
    row["lost_share"] = round(row["lost"] / row["content"], 4) if row["content"] else 0.0
    return row


def folder_fidelity(folder: Path, progress=None) -> dict:
    """Every file our loaders read under `folder`, and the totals (the share is over content sentences).
    `progress(total)` is called after each file, with the number of files to read."""
    folder = Path(folder)
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and supported(p))
    rows = []
    for path in paths:
        rows.append(file_fidelity(path, folder))
        if progress:
            progress(len(paths))
    measured = [r for r in rows if "content" in r]
    total = {k: sum(r[k] for r in measured) for k in ("content", "lost", "navigation", "navigation_dropped")}
    total["lost_share"] = round(total["lost"] / total["content"], 4) if total["content"] else 0.0
    return {"folder": str(folder), "files": len(rows), "measured": len(measured), **total, "rows": rows}
