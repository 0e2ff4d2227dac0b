"""HTML/Markdown rendering of citations and ingest reports (escaped: document text is untrusted)."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

import gradio as gr

from knowledge.ingest.report import IngestReport
from ui.i18n import say


def source_url(source: str, page: int | None = None) -> str:
    """The route that serves an indexed file to logged-in users (PDFs open at the cited page)."""
    return f"/documents/{quote(source)}" + (f"#page={page}" if page else "")


def render_sources(citations: list[dict], covered: bool, request: gr.Request | None = None,
                   cited: set[int] | None = None) -> str:
    """The sources panel: each citation with its passage highlighted and a link to the file. Once
    the answer is known, `cited` holds the numbers it cites: the other excerpts are marked as
    searched but not cited (a quote cites only what it quotes; an answer citing nothing marks none)."""
    if not citations:
        return f"<p>{escape(say(request, 'no_sources'))}</p>"
    head = "" if covered else f"<p><b>{escape(say(request, 'not_covered_head'))}</b></p>"
    items = []
    for c in citations:
        where = escape(c["source"]) + (", " + escape(say(request, "page_n", n=c["page"])) if c.get("page") else "")
        if covered and cited and c["n"] not in cited:
            where += f" <span class='not-cited'>({escape(say(request, 'not_cited'))})</span>"
        heading = f"<br><i>{escape(c['heading'])}</i>" if c.get("heading") else ""
        link = _link(source_url(c["source"], c.get("page")), say(request, "open_source"), "open-source")
        passage = escape(c.get("text") or c.get("snippet", ""))
        items.append(f"<details class='citation'><summary>[{c['n']}] {where}</summary>{heading}"
                     f"<blockquote><mark>{passage}</mark></blockquote>{link}{_also_in(c, request)}</details>")
    return head + "".join(items)


def _also_in(citation: dict, request: gr.Request | None) -> str:
    """The other files holding the same passage (a copy, another format), each a link."""
    others = citation.get("also_in") or []
    if not others:
        return ""
    links = ", ".join(_link(source_url(s), s) for s in others)
    return f"<p class='also-in'>{escape(say(request, 'also_in'))} {links}</p>"


def _link(href: str, label: str, css_class: str = "") -> str:
    """A link to a served document, opened in a new tab; `href` and `label` escaped."""
    cls = f"class='{css_class}' " if css_class else ""
    return f"<a {cls}href='{escape(href)}' target='_blank' rel='noopener'>{escape(label)}</a>"


def render_report(report: IngestReport) -> str:
    lines = [f"**{report.count('new')} new, {report.count('changed')} changed, {report.count('unchanged')} unchanged, "
             f"{report.count('removed')} removed, {report.count('failed')} failed** — {report.chunks} chunks in "
             f"{report.timings['total']:.1f}s" + (f" ({report.deduplicated} repeated chunks left out)"
                                                  if report.deduplicated else "")
             + (f" ({report.shared} chunks shared with other files, stored once)" if report.shared else "")]
    if report.problems:
        lines += ["", "| file | status | reason |", "|---|---|---|"]
        lines += [f"| {r.source} | {r.status} | {r.reason} |" for r in report.problems]
    return "\n".join(lines)
