#!/usr/bin/env python
"""Conversions and hostile files shared by the corpus builders (`make_dev_corpus.sh`,
`make_outside_corpora.sh`), so that every corpus gets the same kinds of copies and traps.

    corpus_tools.py docx TEXT_FILE OUT.docx      # a DOCX copy of a plain-text manual (paragraphs, headings)
    corpus_tools.py hostile OUT_DIR HTML PDF     # keyword stuffing, a duplicate, empty, truncated, fake, NUL
"""

from __future__ import annotations

import random
import re
import shutil
import sys
from pathlib import Path

STUFFING = "backup server restore archive network firewall kernel package install upgrade debian release".split()


def to_docx(text_file: Path, out: Path) -> None:
    """Blank-line separated blocks become paragraphs; short numbered lines become headings."""
    from docx import Document

    doc = Document()
    for block in re.split(r"\n\s*\n", text_file.read_text(encoding="utf-8", errors="replace")):
        text = " ".join(block.split())
        if re.match(r"^\d+(\.\d+)*\. \S", text) and len(text) < 120:
            doc.add_heading(text, level=min(3, text.split(" ")[0].count(".")))
        elif text:
            doc.add_paragraph(text)
    doc.save(out)


def hostile(out: Path, html: Path, pdf: Path) -> None:
    """Files an ingest must survive and report, none of which may answer a question."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    (out / "keywords.txt").write_text(" ".join(rng.choice(STUFFING) for _ in range(330000)) + "\n")
    shutil.copyfile(html, out / f"copy-of-{html.name.split('.')[0]}.html")
    (out / "empty.txt").write_bytes(b"")
    (out / "truncated.pdf").write_bytes(pdf.read_bytes()[:20000])
    (out / "random.docx").write_bytes(rng.randbytes(4096))
    (out / "nul.txt").write_bytes(b"plain text\0with NUL\0bytes\n")


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "docx":
        to_docx(Path(argv[1]), Path(argv[2]))
    elif len(argv) == 4 and argv[0] == "hostile":
        hostile(Path(argv[1]), Path(argv[2]), Path(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
