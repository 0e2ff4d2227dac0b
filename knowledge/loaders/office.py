"""DOCX with headings; PPTX (one section per slide) and XLSX (one per sheet) are cheap extras."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Outline, Section

# What the parts of one Office file may expand to. The Office libraries read every part into memory
# and lxml builds a tree about 17 times the XML's size (24 MB of short paragraphs: 420 MB resident,
# 33 s), so a 1 MB "document" that inflates to gigabytes would take the machine's memory. XML parts
# are capped tighter than media. zipfile never yields more than a member's declared size, so
# checking the declared sizes is enough.
MAX_UNZIPPED = 256 * 2**20
MAX_XML = 32 * 2**20


def _open_zip(raw: bytes) -> zipfile.ZipFile:
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise LoaderError("not a valid Office file (corrupt or not a zip container)") from None
    total = sum(info.file_size for info in zf.infolist())
    xml = sum(info.file_size for info in zf.infolist() if info.filename.endswith((".xml", ".rels")))
    if total > MAX_UNZIPPED or xml > MAX_XML:
        zf.close()
        raise LoaderError(f"expands to {total // 2**20} MB ({xml // 2**20} MB of XML) from {len(raw) // 2**10} KB "
                          f"(limits {MAX_UNZIPPED // 2**20} MB unpacked, {MAX_XML // 2**20} MB of XML): "
                          f"a decompression bomb, or too large to read")
    return zf


def load_docx(path: Path, raw: bytes) -> Document:
    _open_zip(raw).close()
    try:
        import docx

        doc = docx.Document(io.BytesIO(raw))
    except Exception as e:  # noqa: BLE001 - python-docx raises many types on bad input
        raise LoaderError(f"unreadable DOCX ({type(e).__name__})") from None
    outline = Outline()
    buf: list[str] = []

    def flush() -> None:
        if buf:
            outline.add("\n\n".join(buf))
            buf.clear()

    for para in doc.paragraphs:
        text = para.text.strip()
        style = (para.style.name if para.style is not None else "") or ""
        level = _heading_level(style)
        if level and text:
            flush()
            outline.heading(level, text)
        elif text:
            buf.append(text)
    for table in doc.tables:
        rows = [" | ".join(c.text.strip() for c in row.cells) for row in table.rows]
        if rows:
            buf.append("\n".join(rows))
    flush()
    title = (doc.core_properties.title or "") if doc.core_properties else ""
    return Document(outline.close(), title=title or path.stem, kind="docx")


def _heading_level(style: str) -> int:
    s = style.lower()
    if s == "title":
        return 1
    if s.startswith("heading"):
        digits = "".join(ch for ch in s if ch.isdigit())
        return int(digits) if digits else 1
    return 0


def load_pptx(path: Path, raw: bytes) -> Document:
    _open_zip(raw).close()
    try:
        from pptx import Presentation
    except ImportError:
        raise LoaderError("PPTX support needs python-pptx (pip install python-pptx)") from None
    try:
        prs = Presentation(io.BytesIO(raw))
    except Exception as e:  # noqa: BLE001
        raise LoaderError(f"unreadable PPTX ({type(e).__name__})") from None
    sections = []
    for number, slide in enumerate(prs.slides, start=1):
        texts = [sh.text_frame.text for sh in slide.shapes if getattr(sh, "has_text_frame", False)]
        body = "\n".join(t for t in texts if t.strip())
        if body:
            sections.append(Section(body, [f"Slide {number}"], page=number))
    return Document(sections, title=path.stem, kind="pptx")


def load_xlsx(path: Path, raw: bytes) -> Document:
    _open_zip(raw).close()
    try:
        from openpyxl import load_workbook
    except ImportError:
        raise LoaderError("XLSX support needs openpyxl (pip install openpyxl)") from None
    try:
        wb = load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    except Exception as e:  # noqa: BLE001
        raise LoaderError(f"unreadable XLSX ({type(e).__name__})") from None
    sections = []
    for ws in wb.worksheets:
        rows = [" | ".join("" if v is None else str(v) for v in row)
                for row in ws.iter_rows(values_only=True)]
        body = "\n".join(r for r in rows if r.strip(" |"))
        if body:
            sections.append(Section(body, [ws.title]))
    return Document(sections, title=path.stem, kind="xlsx")
