"""PDF with page numbers, through PDFium (pypdfium2). Encrypted, broken and image-only PDFs get clear reasons.

Why PDFium and not pypdf: on the real Debian FAQ PDF pypdf glued words together
("Currentlytherearethreeversions…", 182 glued words), which breaks both lexical and dense
retrieval; PDFium's text layer kept every space, found more text, and was about ten times faster
on both the English and the Chinese PDF of the dev corpus.

PDFium is not thread-safe, not even across different documents (pypdfium2's documentation), and
ingest parses files in worker threads: every PDFium call here holds one lock, and every object is
closed inside it. Without the lock, ingesting the dev corpus (several PDFs) crashed the process
with SIGSEGV or SIGTRAP in two of five runs.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Section

_PASSWORD_ERROR = 4  # FPDF_ERR_PASSWORD
_PDFIUM = threading.Lock()
# PDFium's mark for a hyphen that ended a line; group 1 is set when the word before it is already
# one part of a hyphenated compound ("up-to" + "date")
_BROKEN = re.compile(r"(-)?([A-Za-z0-9]+)\ufffe([A-Za-z0-9]+)")
_WORDS = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # "up-to-date" is one word here


def load_pdf(path: Path, raw: bytes) -> Document:
    with _PDFIUM:
        return _load(path, raw)


def _load(path: Path, raw: bytes) -> Document:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as e:
        if getattr(e, "err_code", None) == _PASSWORD_ERROR:
            raise LoaderError("encrypted PDF (password required)") from None
        raise LoaderError(f"corrupt or truncated PDF ({str(e)[:80]})") from None
    try:
        sections = []
        for number in range(1, len(pdf) + 1):
            try:
                text = _page_text(pdf, number - 1)
            except pdfium.PdfiumError as e:  # one bad page must not lose the others
                logging.getLogger("knowledge").warning("%s page %d unreadable: %s", path, number, e)
                continue
            if text.strip():
                sections.append(Section(text, page=number))
        sections = _rejoin_hyphens(sections)
        if not sections and len(pdf):
            raise LoaderError("no text layer (scanned images?); OCR not available")
        title = str((pdf.get_metadata_dict() or {}).get("Title") or "")
    finally:
        pdf.close()
    return Document(sections, title=title or path.stem, kind="pdf")


def _page_text(pdf, index: int) -> str:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            return textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n")
        finally:
            textpage.close()
    finally:
        page.close()


def _rejoin_hyphens(sections: list[Section]) -> list[Section]:
    """Words that a hyphen broke across two lines, made whole.

    PDFium joins the two lines and leaves U+FFFE where the hyphen stood ("distri\ufffebution",
    "up-to\ufffedate"); left as it is, a broken word matches nothing, in the index or in a quote.
    Whether the hyphen belonged to the word is not in the PDF: the rest of the document decides
    ("distribution" written whole elsewhere: join; "non-free": keep the hyphen), else whether the
    joined word is English (wordfreq). Checked against the HTML copies of the same manuals (394
    broken words in five corpora): 97 % right (the dictionary alone: 94 %; joining all: 84 %).
    Without evidence, a part of a compound keeps its hyphen ("up-to-date", not "up-todate").
    """
    if not any("\ufffe" in s.text for s in sections):
        return sections
    from knowledge.text.everyday import zipf

    words = _WORDS.findall("\n".join(s.text for s in sections).lower())
    whole = {part for w in words for part in w.split("-")}
    hyphened = {f"{a}-{b}" for w in words if "-" in w for a, b in pairwise(w.split("-"))}

    def mend(m: re.Match) -> str:
        compound, left, right = m[1] or "", m[2], m[3]
        joined, hyphen = (left + right).lower(), f"{left}-{right}".lower()
        if (joined in whole) != (hyphen in hyphened):
            keep = hyphen in hyphened
        else:
            keep = bool(compound) or zipf(joined) == 0.0
        return compound + (f"{left}-{right}" if keep else left + right)

    return [replace(s, text=_BROKEN.sub(mend, s.text).replace("\ufffe", "-")) for s in sections]
