"""Plain text: UTF-8 (with or without BOM), else the detected encoding (GB18030, Latin-1, ...)."""

from __future__ import annotations

from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Section


def decode_bytes(raw: bytes) -> str:
    """Decode text whose encoding nobody told us."""
    for bom, enc in ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if raw.startswith(bom):
            return raw.decode(enc, errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw[:200_000]).best()
    encoding = best.encoding if best else "latin-1"
    # GBK is a subset of GB18030; decoding with the superset never loses characters.
    if encoding.lower().replace("_", "") in ("gb2312", "gbk", "hz", "big5hkscs"):
        encoding = "gb18030" if encoding.lower() != "big5hkscs" else encoding
    try:
        return raw.decode(encoding, errors="replace")
    except LookupError:
        return raw.decode("latin-1")


def load_text(path: Path, raw: bytes) -> Document:
    text = decode_bytes(raw)
    if "\x00" in text[:4096]:
        raise LoaderError("binary file (NUL bytes); not text")
    return Document([Section(text)], title=path.stem, kind="text")
