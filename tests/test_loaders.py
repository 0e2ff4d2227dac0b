"""One test per loader, on files the tests generate, plus content-based type detection."""

import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.errors import LoaderError
from knowledge.loaders import detect_kind, load

from .kb_helpers import make_docx, make_encrypted_pdf, make_pdf

ROOT = Path(__file__).resolve().parents[1]


def test_pdf_pages(tmp_path):
    p = make_pdf(tmp_path / "a.pdf", ["First page about VPN certificates.", "Second page about printers."])
    doc = load(p, p.read_bytes())
    assert [s.page for s in doc.sections] == [1, 2]
    assert "VPN certificates" in doc.sections[0].text and "printers" in doc.sections[1].text


def test_pdf_words_broken_at_a_line_end_are_made_whole(tmp_path):
    """PDFium leaves U+FFFE where a line-end hyphen stood: a hyphenated word is joined, a compound
    keeps its hyphen (the rest of the document says which; else whether the word is English)."""
    first = "The distri-\nbution ships non-\nfree firmware and a kern-\nelfoo tool for opera-\ntion, kept up-to-\ndate."
    p = make_pdf(tmp_path / "h.pdf", [first, "Keep it current, a non-free part of the distribution."])
    text = " ".join(s.text for s in load(p, p.read_bytes()).sections)
    assert "\ufffe" not in text
    assert "The distribution ships non-free firmware" in text  # joined / kept, as written elsewhere
    assert "kern-elfoo" in text  # neither form elsewhere and "kernelfoo" is no English word: kept
    assert "for operation," in text  # neither form elsewhere, an English word: joined
    assert "kept up-to-date." in text  # a compound's part keeps its hyphen ("todate" is in wordfreq)


def test_pdf_encrypted_truncated_and_scanned(tmp_path):
    enc = make_encrypted_pdf(tmp_path / "enc.pdf", "secret text")
    with pytest.raises(LoaderError, match="encrypted"):
        load(enc, enc.read_bytes())
    good = make_pdf(tmp_path / "g.pdf", ["hello world"]).read_bytes()
    with pytest.raises(LoaderError, match="corrupt|truncated|no text"):
        load(tmp_path / "t.pdf", good[: len(good) // 3])
    blank = make_pdf(tmp_path / "blank.pdf", [""])
    with pytest.raises(LoaderError, match="OCR not available"):
        load(blank, blank.read_bytes())


_PDF_THREADS = """
import sys, threading
from pathlib import Path
from knowledge.loaders import load
path = Path(sys.argv[1])
raw = path.read_bytes()
def work():
    for _ in range(30):
        assert len(load(path, raw).sections) == 30
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_pdfs_parse_in_parallel_threads_without_crashing(tmp_path):
    # PDFium is not thread-safe and ingest parses in worker threads: without the loader's lock this
    # script dies with SIGSEGV or "corrupted size vs. prev_size" (measured: every run of two).
    pdf = make_pdf(tmp_path / "many.pdf", [f"page {i} says something " * 20 for i in range(30)])
    run = subprocess.run([sys.executable, "-c", _PDF_THREADS, str(pdf)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


def test_docx_headings(tmp_path):
    p = make_docx(tmp_path / "guide.docx", "Guide", [("Setup", "Install the agent."), ("Usage", "Run it daily.")])
    doc = load(p, p.read_bytes())
    by_heading = {" > ".join(s.heading): s.text for s in doc.sections}
    assert by_heading["Guide > Setup"] == "Install the agent."
    assert by_heading["Guide > Usage"] == "Run it daily."


def test_random_bytes_named_docx(tmp_path):
    p = tmp_path / "fake.docx"
    p.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(LoaderError, match="not a valid Office file"):
        load(p, p.read_bytes())


def test_html_main_text_without_nav_or_script(tmp_path):
    html = ("<html><head><title>T</title><script>var secret=1</script></head><body><nav>Home | About</nav>"
            "<main><h1>Policy</h1><h2>Leave</h2><p>Twenty days per year.</p></main><footer>(c)</footer></body></html>")
    p = tmp_path / "x.html"
    p.write_text(html)
    doc = load(p, p.read_bytes())
    text = " ".join(s.text for s in doc.sections)
    assert "Twenty days" in text and "secret" not in text and "Home" not in text and "(c)" not in text
    assert doc.title == "T" and doc.sections[0].heading == ["Policy", "Leave"]


def test_html_data_table_rows_are_lines_and_layout_tables_are_paragraphs(tmp_path):
    """A data table's row is one line (quoted whole); DocBook's Note box (an icon cell, a title, then
    paragraphs in a cell) stays paragraphs."""
    html = ("<html><body><p>Ports:</p><table><tr><th>service</th><th>port</th></tr><tr><td>web chat</td>"
            "<td>8000</td></tr></table><table summary='Note'><tr><td><img alt='[Note]'></td><th>Note</th></tr>"
            "<tr><td></td><td><p>Back up first.</p><p>Then upgrade.</p></td></tr></table></body></html>")
    p = tmp_path / "t.html"
    p.write_text(html)
    text = "\n\n".join(s.text for s in load(p, p.read_bytes()).sections)
    assert "| service | port |" in text and "| web chat | 8000 |" in text
    assert "Back up first.\n\nThen upgrade." in text and "| Note" not in text


def test_markdown_heading_path_ignores_code_fences(tmp_path):
    md = "# A\nintro\n## B\nbody b\n```\n# not a heading\n```\n### C\nbody c\n# D\nbody d\n"
    p = tmp_path / "x.md"
    p.write_text(md)
    doc = load(p, p.read_bytes())
    assert [s.heading for s in doc.sections] == [["A"], ["A", "B"], ["A", "B", "C"], ["D"]]
    assert "# not a heading" in doc.sections[1].text


@pytest.mark.parametrize("encoding", ["gb18030", "latin-1", "utf-8-sig"])
def test_text_encodings(tmp_path, encoding):
    text = "知识库离线问答服务器。" * 20 if encoding == "gb18030" else "Café crème brûlée, déjà vu. " * 20
    p = tmp_path / "x.txt"
    p.write_bytes(text.encode(encoding))
    assert load(p, p.read_bytes()).sections[0].text.strip() == text.strip()


def test_detect_by_content_when_extension_lies(tmp_path):
    pdf = make_pdf(tmp_path / "a.pdf", ["x"]).read_bytes()
    assert detect_kind(tmp_path / "report.txt", pdf) == "pdf"
    assert detect_kind(tmp_path / "page.txt", b"<!DOCTYPE html><html><body>x</body></html>") == "html"
    assert detect_kind(tmp_path / "photo.pdf", b"\x89PNG\r\n\x1a\n" + b"0" * 50) == "image"


def test_empty_and_image(tmp_path):
    with pytest.raises(LoaderError, match="empty"):
        load(tmp_path / "e.txt", b"")
    with pytest.raises(LoaderError, match="OCR not available"):
        load(tmp_path / "scan.png", b"\x89PNG\r\n\x1a\n" + b"0" * 50)


def test_pptx_and_xlsx_load_by_default(tmp_path):
    """python-pptx and openpyxl are installed with the product: the UI offers these types."""
    from openpyxl import Workbook
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Quarterly backup drill"
    box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
    box.text_frame.text = "Restore the archive to the spare server within four hours."
    deck.save(tmp_path / "drill.pptx")
    book = Workbook()
    book.active.append(["host", "port"])
    book.active.append(["kb.intranet", 8000])
    book.save(tmp_path / "hosts.xlsx")
    slides = load(tmp_path / "drill.pptx", (tmp_path / "drill.pptx").read_bytes())
    sheet = load(tmp_path / "hosts.xlsx", (tmp_path / "hosts.xlsx").read_bytes())
    assert "four hours" in " ".join(s.text for s in slides.sections) and slides.kind == "pptx"
    assert "kb.intranet" in " ".join(s.text for s in sheet.sections) and sheet.kind == "xlsx"
