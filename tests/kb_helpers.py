"""Generate real test documents (PDF, DOCX, HTML, text in odd encodings) and open test KBs."""

from __future__ import annotations

from pathlib import Path

from knowledge.index.kb import KBConfig, KnowledgeBase


def make_pdf(path: Path, pages: list[str]) -> Path:
    """A minimal valid PDF of Helvetica text, a page per item, a line per "\n" (no external tools)."""
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", None,
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        lines = " 0 -14 Td ".join(f"({line}) Tj" for line in safe.split("\n"))
        stream = f"BT /F1 12 Tf 72 720 Td {lines} ET".encode("latin-1")
        objs.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode('latin-1')}\nendstream")
        content = len(objs)
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
                    "/Resources << /Font << /F1 3 0 R >> >> >>")
        kids.append(f"{len(objs)} 0 R")
    objs[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = b"%PDF-1.4\n", []
    for n, body in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(out)
    return path


def make_encrypted_pdf(path: Path, text: str) -> Path:
    from pypdf import PdfReader, PdfWriter

    plain = make_pdf(path.with_suffix(".plain.pdf"), [text])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")
    with path.open("wb") as fh:
        writer.write(fh)
    plain.unlink()
    return path


def make_docx(path: Path, title: str, sections: list[tuple[str, str]]) -> Path:
    import docx

    doc = docx.Document()
    doc.add_heading(title, level=1)
    for heading, body in sections:
        doc.add_heading(heading, level=2)
        doc.add_paragraph(body)
    doc.save(str(path))
    return path


def open_kb(data_dir: Path, embedder, **cfg) -> KnowledgeBase:
    return KnowledgeBase(data_dir, KBConfig(**cfg), embedder=embedder)


def statuses(report):
    return {r.source: (r.status, r.reason) for r in report.results}


def assert_consistent(kb):
    """No duplicates, no orphans, nothing marked done that is not in the store."""
    stored = kb.store.all_ids()
    listed = kb.db.chunk_ids(kb.cfg.name)
    manifest = [i for r in kb.db.files(kb.cfg.name).values() if r.status == "done" for i in r.chunk_ids]
    assert stored == listed == set(manifest)
    assert len(manifest) == len(set(manifest)) == kb.store.count()
    assert all(r.pending_ids is None for r in kb.db.files(kb.cfg.name).values())


class RefusingModel:
    """A chat model for answers that must come without one (quoted, partial, declined): any
    generation is a failure."""

    model_name = "none"

    def tokenize_messages(self, messages):
        return [0] * sum(len(m["content"]) for m in messages)

    def submit(self, messages, params):
        raise AssertionError("the quote style ran the model")
