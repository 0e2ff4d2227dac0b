"""The sources panel's HTML: every file holding a cited passage is named and linked, escaped."""

from __future__ import annotations

from ui.render import render_sources


def test_a_passage_held_by_several_files_links_each_of_them():
    citation = {"n": 1, "source": "en/a.html", "page": None, "heading": "Backups", "text": "Nightly at 02:00.",
                "also_in": ["copy/a <old>.html", "pdf/a.pdf"]}
    html = render_sources([citation], covered=True)
    assert "The same passage is also in:" in html
    assert "href='/documents/copy/a%20%3Cold%3E.html'" in html and "copy/a &lt;old&gt;.html" in html
    assert "href='/documents/pdf/a.pdf'" in html
    assert "also-in" not in render_sources([{**citation, "also_in": []}], covered=True)
