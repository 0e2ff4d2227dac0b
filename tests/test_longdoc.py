"""Whole-document answers (map-reduce) on the real engine and embedder: a fact only in the second half
of a long document is found, a summary cites pages that exist, notes are merged when they do not fit,
map calls are background work, and Stop cancels them."""

import threading
import time

import pytest

from appliance.engine.errors import Cancelled
from appliance.server.chat import ChatService
from appliance.server.longdoc import DocumentError, LongDocService, LongDocSettings, find_document, sections
from knowledge.index.access import EVERYTHING
from knowledge.index.chunking import Chunk
from knowledge.ingest.folder import ingest

from .engine_helpers import make_engine
from .kb_helpers import open_kb

TOPICS = ["Procurement", "Travel", "Expenses", "Onboarding", "Laptops", "Printing", "Parking", "Canteen",
          "Holidays", "Training", "Meetings", "Email", "Passwords", "Backups", "Visitors", "Shipping", "Invoices",
          "Contracts", "Recycling", "Fire safety", "First aid", "Keys", "Mail room", "Archive", "Reception"]
FACT = "The archive room door code is 4711, and the archive is open on Tuesdays only."


def _handbook() -> str:
    parts = ["# Office handbook\n"]
    for i, topic in enumerate(TOPICS):
        body = [f"{topic} rule {j + 1}: requests about {topic.lower()} go to the {topic.lower()} desk on floor "
                f"{(i + j) % 5 + 1}, and staff keep copies of forms {i * 10 + j} for one year. Questions are "
                f"answered within {j + 2} working days." for j in range(6)]
        if topic == "Archive":
            body.insert(3, FACT)
        parts.append(f"## {topic}\n\n" + "\n\n".join(body) + "\n")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def engine(chat_model_path):
    eng = make_engine(chat_model_path, n_ctx=4096)
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def kb(tmp_path_factory, embedder, sample_docs):
    docs = tmp_path_factory.mktemp("longdoc-docs")
    (docs / "handbook.md").write_text(_handbook())
    kb = open_kb(tmp_path_factory.mktemp("longdoc-kb"), embedder)
    ingest(kb, sample_docs)
    ingest(kb, docs)
    yield kb
    kb.close()


def _service(engine, kb, **cfg) -> LongDocService:
    return LongDocService(engine, LongDocSettings(**cfg), embed=kb.embedder.encode)


def test_sections_keep_the_budget_cut_at_headings_and_read_overlaps_once():
    text = "one two three four. five six seven eight."
    chunks = [Chunk(text, "d.md", 0, 0, len(text), None, "A"),
              Chunk(text[20:] + " nine ten.", "d.md", 1, 20, len(text) + 10, None, "A"),  # overlaps the first
              Chunk("x " * 10, "d.md", 2, 100, 120, None, "B"),
              Chunk("y " * 15, "d.md", 3, 120, 150, 4, "B")]
    words = lambda s: len(s.split())  # noqa: E731 - a pure-logic test: words stand in for tokens
    secs = sections(chunks, words, budget=18)
    assert [s.heading for s in secs] == ["A", "B", "B"]  # a new heading once half full; then the budget
    assert secs[0].text.count("five six seven eight.") == 1 and "nine ten." in secs[0].text
    assert all(words(s.text) <= 18 for s in secs)
    assert secs[2].pages == [4] and secs[2].page_label == "page 4"


def test_a_fact_in_the_second_half_is_found_by_reading_every_section(engine, kb):
    service = _service(engine, kb, max_notes=2)  # what services.longdoc_service gives a small model
    chunks = find_document(kb.db, kb.cfg.name, "handbook.md", scope=EVERYTHING)
    secs = service.split(chunks)
    where = next(i for i, s in enumerate(secs) if "4711" in s.text)
    assert len(secs) >= 8 and where >= len(secs) // 2
    seen = []
    prepared = service.prepare(secs, "What is the archive room door code?", lambda *p: seen.append(p), scope=EVERYTHING)
    assert seen[-1][0] == "map" and seen[-1][1] == seen[-1][2] == len(secs)  # every section was read
    assert any("4711" in note["text"] for note in prepared.citations)
    chat = ChatService(engine, None)
    answer = "".join(chat.stream(prepared, chat.answer_params("t", max_tokens=40, temperature=0.0)))
    assert "4711" in answer, answer
    assert [n["n"] for n in prepared.citations] == list(range(1, len(prepared.citations) + 1))


def test_a_summary_cites_pages_that_exist(engine, kb):
    service = _service(engine, kb)
    secs = service.split(find_document(kb.db, kb.cfg.name, "en/security-policy.pdf", scope=EVERYTHING))
    prepared = service.prepare(secs, scope=EVERYTHING)
    pages = {p for note in prepared.citations for p in note["pages"]}
    assert prepared.covered and pages and pages <= {1, 2}
    assert "Security policy" in prepared.messages[-1]["content"]  # the document's own text is the excerpt


def test_notes_that_do_not_fit_are_merged_in_rounds(engine, kb):
    service = _service(engine, kb, context_tokens=700, note_tokens=48)
    secs = service.split(find_document(kb.db, kb.cfg.name, "handbook.md", scope=EVERYTHING))
    stages = []
    prepared = service.prepare(secs, None, lambda stage, done, total: stages.append(stage), scope=EVERYTHING)
    assert "map" in stages and "reduce" in stages
    assert 1 <= len(prepared.citations) < len(secs)
    assert service._fits(prepared.citations, "summary")
    assert all(n["source"] == "handbook.md" for n in prepared.citations)


def test_map_calls_are_background_work_and_stop_cancels_them(engine, kb):
    priorities = []

    class Recording:  # the real engine, with each request's priority written down
        def __getattr__(self, name):
            return getattr(engine, name)

        def submit(self, prompt, params=None):
            priorities.append(params.priority)
            return engine.submit(prompt, params)

    service = LongDocService(Recording(), LongDocSettings(context_tokens=400), embed=kb.embedder.encode)
    secs = service.split(find_document(kb.db, kb.cfg.name, "handbook.md", scope=EVERYTHING))
    stop = threading.Event()
    stopper = threading.Timer(1.0, stop.set)
    stopper.start()
    with pytest.raises(Cancelled):
        service.prepare(secs, None, None, stop, scope=EVERYTHING)
    assert priorities and set(priorities) == {1}
    assert len(priorities) < len(secs)  # it stopped before reading everything
    deadline = time.monotonic() + 30
    while engine.snapshot()["running"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine.snapshot()["running"] == 0  # the cancelled calls left the engine


def test_an_unknown_document_or_a_path_from_the_api_is_refused(kb, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not indexed")
    with pytest.raises(DocumentError, match="no indexed document"):
        find_document(kb.db, kb.cfg.name, "nope.md", scope=EVERYTHING)
    with pytest.raises(DocumentError, match="no indexed document"):
        find_document(kb.db, kb.cfg.name, str(outside), files_on_disk=False, scope=EVERYTHING)
    # the command line may read a file on disk
    assert find_document(kb.db, kb.cfg.name, str(outside), scope=EVERYTHING)[0].text == "not indexed"


def test_a_questions_evidence_adds_the_documents_own_best_passages(engine, kb):
    from knowledge.retrieve.retriever import Retriever

    service = LongDocService(engine, LongDocSettings(max_notes=2), embed=kb.embedder.encode, retriever=Retriever(kb))
    passages = service._passages("What is the archive room door code?", "handbook.md", EVERYTHING)
    assert passages and {p["source"] for p in passages} == {"handbook.md"}  # no other document's text
    assert any("4711" in p["text"] for p in passages)
    notes = [{**p, "text": f"note {i}"} for i, p in enumerate(passages * 3)]
    assert len(service._select(notes + passages, "What is the archive room door code?")) == 2  # max_notes
