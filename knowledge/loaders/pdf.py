"""PDF with page numbers (pypdf). Encrypted, broken and image-only PDFs get clear reasons."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Section


def load_pdf(path: Path, raw: bytes) -> Document:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # broken files log a warning per object
    try:
        reader = PdfReader(io.BytesIO(raw), strict=False)
        if reader.is_encrypted:
            try:  # many "encrypted" PDFs only restrict printing and open with an empty password
                if not reader.decrypt(""):
                    raise LoaderError("encrypted PDF (password required)")
            except LoaderError:
                raise
            except Exception:  # noqa: BLE001 - unsupported cipher and friends
                raise LoaderError("encrypted PDF (password required)") from None
        pages = list(reader.pages)
    except LoaderError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, AttributeError) as e:
        raise LoaderError(f"corrupt or truncated PDF ({type(e).__name__}: {str(e)[:80]})") from None
    sections = []
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as e:  # noqa: BLE001 - one bad page must not lose the others
            logging.getLogger("knowledge").warning("%s page %d unreadable: %s", path, number, e)
            continue
        if text.strip():
            sections.append(Section(text, page=number))
    if not sections and pages:
        raise LoaderError("no text layer (scanned images?); OCR not available")
    title = ""
    try:
        title = str((reader.metadata or {}).get("/Title") or "")
    except Exception:  # noqa: BLE001 - metadata is optional
        pass
    return Document(sections, title=title or path.stem, kind="pdf")
