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


def test_excerpts_the_answer_does_not_cite_are_marked_once_it_is_known():
    citations = [{"n": n, "source": f"en/{n}.md", "page": None, "heading": "", "text": "x"} for n in (1, 2, 3)]
    marked = render_sources(citations, covered=True, cited={2})
    assert marked.count("searched, not cited") == 2
    assert "[2] en/2.md</summary>" in marked and "[1] en/1.md <span class='not-cited'>" in marked
    for unknown in (None, set()):  # while the answer streams, or when it cites nothing: no marks
        assert "not-cited" not in render_sources(citations, covered=True, cited=unknown)
    assert "not-cited" not in render_sources(citations, covered=False, cited={2})  # a decline cites nothing
