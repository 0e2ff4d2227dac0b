"""Hostile documents: decompression bombs, absurd nesting and empty page runs are skipped with a reason,
in bounded memory, and the rest of the folder is indexed (RELIABILITY.md)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from knowledge.ingest.folder import ingest

from .kb_helpers import assert_consistent, make_docx, open_kb, statuses

_TYPES = ('<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
          '<Default Extension="xml" ContentType="application/xml"/></Types>')
_DEPTH = 50_000


def _bomb(path: Path, member: str, megabytes: int) -> Path:
    """A docx-looking zip whose `member` inflates to `megabytes` of one repeated byte."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _TYPES)
        with z.open(member, "w", force_zip64=True) as f:
            block = b"A" * 2**20
            for _ in range(megabytes):
                f.write(block)
    return path


def _empty_pages_pdf(path: Path, pages: int) -> Path:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    for _ in range(pages):
        pdf.new_page(612, 792)
    pdf.save(str(path))
    return path


def _hostile_folder(d: Path) -> Path:
    d.mkdir()
    _bomb(d / "media-bomb.docx", "word/media/image1.png", 300)  # 300 MB of "image" in a 300 KB file
    _bomb(d / "xml-bomb.docx", "word/document.xml", 40)  # 40 MB of XML: lxml would need ~700 MB
    (d / "nested.html").write_text("<html><body>" + "<div>" * _DEPTH + "deep" + "</div>" * _DEPTH + "</body></html>")
    (d / "nested-list.html").write_text("<html><body>" + "<ul><li>" * _DEPTH + "x" + "</li></ul>" * _DEPTH
                                        + "</body></html>")
    (d / "nested-list.md").write_text("".join(" " * (2 * i) + "- level\n" for i in range(3000)))
    _empty_pages_pdf(d / "empty-pages.pdf", 3000)
    make_docx(d / "fine.docx", "Fine", [("Parking", "Visitors park on level minus two.")])
    return d


def test_hostile_documents_are_skipped_with_reasons_and_the_rest_indexed(tmp_path, embedder):
    d = _hostile_folder(tmp_path / "hostile")
    kb = open_kb(tmp_path / "data", embedder)
    got = statuses(ingest(kb, d))
    assert got["media-bomb.docx"][0] == "failed" and "decompression bomb" in got["media-bomb.docx"][1]
    assert got["xml-bomb.docx"][0] == "failed" and "MB of XML" in got["xml-bomb.docx"][1]
    for name in ("nested.html", "nested-list.html"):
        assert got[name] == ("failed", "nested too deeply to read (thousands of levels of elements)")
    assert got["empty-pages.pdf"][0] == "failed" and "no text layer" in got["empty-pages.pdf"][1]
    assert got["nested-list.md"][0] == "new"  # deep but plain text: readable, so indexed
    assert got["fine.docx"][0] == "new"
    assert_consistent(kb)


def test_hostile_documents_load_in_bounded_memory(tmp_path):
    """Each file is loaded in a fresh process; the largest resident size of any of them is bounded."""
    d = _hostile_folder(tmp_path / "hostile")
    peaks = {}
    for path in sorted(d.iterdir()):
        out = subprocess.run([sys.executable, "-c", _LOAD_AND_REPORT_PEAK, str(path)], check=True, timeout=300,
                             capture_output=True, text=True).stdout
        peaks[path.name] = int(out.split()[-1]) / 1024
    # Without the zip limits the media bomb alone took 2.1 GB; the loaders' own floor is ~60 MB.
    assert max(peaks.values()) < 600, peaks


_LOAD_AND_REPORT_PEAK = """
import re, sys
from pathlib import Path
from knowledge.loaders import LoaderError, load
p = Path(sys.argv[1])
try:
    load(p, p.read_bytes())
except LoaderError:
    pass
# VmHWM, not ru_maxrss: Linux carries the parent's peak into a forked child's ru_maxrss.
print(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
"""
