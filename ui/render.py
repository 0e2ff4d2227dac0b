"""HTML/Markdown rendering of citations and ingest reports (escaped: document text is untrusted)."""

from __future__ import annotations

from html import escape

from knowledge.report import IngestReport


def render_sources(citations: list[dict], covered: bool) -> str:
    if not citations:
        return "<p>No sources.</p>"
    head = "" if covered else "<p><b>Not covered by the documents.</b> Nearest sources:</p>"
    items = []
    for c in citations:
        where = escape(c["source"]) + (f", page {c['page']}" if c.get("page") else "")
        heading = f"<br><i>{escape(c['heading'])}</i>" if c.get("heading") else ""
        items.append(f"<details class='citation'><summary>[{c['n']}] {where}</summary>{heading}"
                     f"<blockquote>{escape(c.get('text') or c.get('snippet', ''))}</blockquote></details>")
    return head + "".join(items)


def render_report(report: IngestReport) -> str:
    lines = [f"**{report.count('new')} new, {report.count('changed')} changed, {report.count('unchanged')} unchanged, "
             f"{report.count('removed')} removed, {report.count('failed')} failed** — {report.chunks} chunks in "
             f"{report.timings['total']:.1f}s"]
    if report.problems:
        lines += ["", "| file | status | reason |", "|---|---|---|"]
        lines += [f"| {r.source} | {r.status} | {r.reason} |" for r in report.problems]
    return "\n".join(lines)
