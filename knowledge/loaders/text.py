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

    matches = list(from_bytes(raw[:200_000]))
    encoding = _choose(raw, matches)
    try:
        return raw.decode(encoding, errors="replace")
    except LookupError:
        return raw.decode("latin-1")


_GB = ("gb2312", "gbk", "hz")
_MULTIBYTE = ("gb18030", "gb2312", "gbk", "hz", "big5", "big5hkscs", "cp950", "shift_jis", "cp932",
              "euc_jp", "euc_kr", "cp949", "utf_16", "utf_32", "iso2022_jp", "iso2022_kr")


def _choose(raw: bytes, matches) -> str:
    """The detector's guess, except that mostly-ASCII single-byte text is read as Windows-1252.

    Why: on accented Western text the detector often prefers a Baltic or Central European code
    page that decodes just as cleanly (è becomes č), while company shares hold Windows-1252 or
    Latin-1 files. Text that is mostly high bytes (Cyrillic, Greek) keeps the detector's choice.
    """
    best = matches[0].encoding if matches else "latin_1"
    if best in _GB:
        return "gb18030"  # the superset: never loses a character GBK cannot encode
    if best in _MULTIBYTE:
        return best
    letters = [b for b in raw[:100_000] if b >= 0x80 or chr(b).isalpha()]
    ascii_share = sum(1 for b in letters if b < 0x80) / max(1, len(letters))
    if ascii_share >= 0.7:
        try:
            raw.decode("cp1252")
            return "cp1252"
        except UnicodeDecodeError:
            return "latin-1"
    return best


def load_text(path: Path, raw: bytes) -> Document:
    text = decode_bytes(raw)
    if "\x00" in text[:4096]:
        raise LoaderError("binary file (NUL bytes); not text")
    return Document([Section(text)], title=path.stem, kind="text")
