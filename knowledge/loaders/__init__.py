"""Loader registry keyed by file type; the type comes from the content where the extension lies."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Section
from knowledge.loaders.html import load_html
from knowledge.loaders.markdown import load_markdown
from knowledge.loaders.office import load_docx, load_pptx, load_xlsx
from knowledge.loaders.pdf import load_pdf
from knowledge.loaders.text import load_text

Loader = Callable[[Path, bytes], Document]

LOADERS: dict[str, Loader] = {
    "pdf": load_pdf, "docx": load_docx, "pptx": load_pptx, "xlsx": load_xlsx,
    "html": load_html, "markdown": load_markdown, "text": load_text,
}
EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown",
    ".txt": "text", ".text": "text", ".rst": "text", ".csv": "text", ".log": "text",
}
_IMAGES = {b"\x89PNG": "PNG", b"\xff\xd8\xff": "JPEG", b"GIF8": "GIF", b"II*\x00": "TIFF",
           b"MM\x00*": "TIFF", b"BM": "BMP"}
_IMAGE_EXT = {".png", ".jpg", ".jpeg", ".gif", ".tif", ".tiff", ".bmp", ".webp", ".heic"}


def supported(path: Path) -> bool:
    """Whether the ingest should look at this file at all (by extension)."""
    suffix = path.suffix.lower()
    return suffix in EXTENSIONS or suffix in _IMAGE_EXT


def detect_kind(path: Path, raw: bytes) -> str:
    """The real file type: magic bytes first, then the extension."""
    head = raw[:16]
    if head.startswith(b"%PDF") or b"%PDF-" in raw[:1024]:
        return "pdf"
    for magic, _name in _IMAGES.items():
        if head.startswith(magic):
            return "image"
    if head.startswith(b"PK\x03\x04"):
        return _office_kind(raw) or "zip"
    by_ext = EXTENSIONS.get(path.suffix.lower())
    if path.suffix.lower() in _IMAGE_EXT:
        return "image"
    if by_ext in ("pdf", "docx", "pptx", "xlsx"):
        return by_ext  # claims a binary format but has no magic: the loader will refuse it
    sniff = raw[:2048].lstrip().lower()
    if sniff.startswith((b"<!doctype html", b"<html")) or (by_ext != "markdown" and b"<body" in sniff):
        return "html"
    return by_ext or "text"


def _office_kind(raw: bytes) -> str | None:
    try:
        names = zipfile.ZipFile(io.BytesIO(raw)).namelist()
    except zipfile.BadZipFile:
        return None
    for prefix, kind in (("word/", "docx"), ("ppt/", "pptx"), ("xl/", "xlsx")):
        if any(n.startswith(prefix) for n in names):
            return kind
    return None


def load(path: Path, raw: bytes) -> Document:
    """Load a file's bytes with the loader its content calls for. Raises LoaderError."""
    kind = detect_kind(path, raw)
    if kind == "image":
        raise LoaderError("image without a text layer; OCR not available")
    if kind == "zip":
        raise LoaderError("zip archive, not a document")
    if not raw.strip():
        raise LoaderError("empty file")
    try:
        doc = LOADERS[kind](path, raw)
    except RecursionError:  # parsers and our tree walks recurse per nesting level
        raise LoaderError("nested too deeply to read (thousands of levels of elements)") from None
    if doc.text_chars == 0:
        raise LoaderError("no text found")
    doc.kind = kind
    return doc


def read_text(path: Path) -> str:
    """A file's whole text as the loaders read it, sections joined by blank lines (for measuring
    against what ingest sees). Raises LoaderError or OSError."""
    return "\n\n".join(s.text for s in load(path, path.read_bytes()).sections)


__all__ = ["Document", "LoaderError", "Section", "detect_kind", "load", "read_text", "supported"]
