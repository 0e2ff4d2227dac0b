"""The evaluation's own text extraction: the peer reads files without our loaders (issue 41)."""

from __future__ import annotations

import ast

import pytest

from knowledge.eval.plaintext import html_text, plain_text

from .conftest import ROOT
from .kb_helpers import make_pdf


def test_html_is_the_whole_visible_body_a_line_per_block():
    raw = (b"<html><head><title>x</title><style>p{}</style></head><body><nav><a>Home</a></nav>"
           b"<div class='sidebar'><p class='title'>SECURITY</p><p>Keep keys  secret.</p></div>"
           b"<p>Body <b>bold</b> text.</p><!-- c --><script>var s</script></body></html>")
    assert html_text(raw).splitlines() == ["Home", "SECURITY", "Keep keys secret.", "Body bold text."]


def test_deep_html_does_not_exhaust_the_stack():
    raw = b"<html><body>" + b"<div>" * 1500 + b"<p>deep</p>" + b"</div>" * 1500 + b"</body></html>"
    assert "deep" in html_text(raw)


def test_pdf_docx_and_text_are_read_by_other_libraries(tmp_path):
    import docx

    pdf = make_pdf(tmp_path / "a.pdf", ["Encrypt every laptop."])
    d = docx.Document()
    d.add_paragraph("Travel above 180 euros needs approval.")
    d.save(tmp_path / "b.docx")
    (tmp_path / "c.txt").write_bytes("默认端口是 8000。".encode("gb18030"))
    assert "Encrypt every laptop." in plain_text(pdf)
    assert "Travel above 180 euros needs approval." in plain_text(tmp_path / "b.docx")
    assert plain_text(tmp_path / "c.txt") == "默认端口是 8000。"
    assert plain_text(tmp_path / "missing.pdf") is None and plain_text(tmp_path / "c.png") is None


def test_the_peer_does_not_read_through_the_loaders():
    for name in ("peer.py", "plaintext.py"):
        tree = ast.parse((ROOT / "knowledge" / "eval" / name).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(m and m.startswith("knowledge.loaders") for m in imported), (name, imported)


def test_a_pdf_pypdf_cannot_open_is_read_by_pdfminer(tmp_path):
    """A PDF that ends without its "%%EOF" marker, which PDFium and most viewers open: pypdf refuses
    it ("EOF marker not found"), so the file went unmeasured. pdfminer.six reads past it."""
    pdf = make_pdf(tmp_path / "a.pdf", ["Encrypt every laptop."])
    raw = pdf.read_bytes()
    pdf.write_bytes(raw[:raw.rindex(b"%%EOF")])
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    with pytest.raises(PdfReadError):
        PdfReader(pdf)
    assert "Encrypt every laptop." in plain_text(pdf)
    (tmp_path / "cut.pdf").write_bytes(raw[:len(raw) // 3])  # truncated past repair: nothing, not an error
    assert plain_text(tmp_path / "cut.pdf") is None
