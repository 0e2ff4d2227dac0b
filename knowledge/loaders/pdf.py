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
import threading
from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Section

_PASSWORD_ERROR = 4  # FPDF_ERR_PASSWORD
_PDFIUM = threading.Lock()


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
