"""Whole-document work (`appliance summarize`, `appliance ask --doc`, the API's `document` option, the
UI's document buttons): map-reduce over one document's sections instead of the top few chunks.

Map: each section (consecutive chunks, cut at headings/pages, at most `section_tokens` chat-model
tokens, so one call's KV stays bounded) becomes a short note: a summary, or the facts that bear on
the question ("NOTHING RELEVANT" allowed). Map calls run at background priority, `window` at a time,
so a huge document never takes the slots of interactive users; their shared instruction comes first,
so after the first call the engine serves it from the prefix cache.
Reduce: for a question, the notes and the document's own best passages (retrieval restricted to
it) nearest to the question (the knowledge base's embedder) fill the answer's context budget; for
a summary, consecutive groups of notes are merged into shorter notes until they fit. A document
that fits the budget whole skips both: its sections are the excerpts. The final answer is an
ordinary RAG turn over the notes, numbered like excerpts, so it streams and cites [n] → source,
pages and heading as chat answers do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from appliance.engine.backend import ChatBackend, complete_background
from appliance.engine.sequence import SamplingParams
from appliance.errors import ApplianceError
from appliance.server.chat import SYSTEM_PROMPT, Prepared, page_label, question_turn
from knowledge.index.access import Scope
from knowledge.index.chunking import Chunk
from knowledge.retrieve.retriever import Retriever
from knowledge.text.terms import is_cjk_text

NOTHING = "NOTHING RELEVANT"
SUMMARY_TASK = {"en": "Summarise this document: its purpose and its main points, rules, numbers and deadlines.",
                "zh": "请总结这份文档：它的目的以及主要内容、规定、数字和期限。"}
_MAP_SUMMARY = ("You write notes on one section of a longer document. Summarise the section in at most "
                "three short sentences. Keep names, numbers, dates and deadlines exactly as written.")
_MAP_QUESTION = ("You take notes from one section of a longer document for this question: {question}\n"
                 "Copy, word for word, the sentences of the section that answer it or help to answer it. If "
                 f"no sentence does, write only: {NOTHING}")
_REDUCE = ("Combine these notes on parts of one document into one shorter note. Keep every name, number, "
           "date and deadline, and keep the facts that answer: {task}")
Progress = Callable[[str, int, int], None]  # (stage, done, total): stage is "map" or "reduce"


class DocumentError(ApplianceError):
    """No such document, or nothing readable in it (the message says which)."""


@dataclass
class LongDocSettings:
    section_tokens: int = 768    # one map call's section, in chat-model tokens (bounds its KV)
    note_tokens: int = 160       # longest note a map or reduce call writes
    context_tokens: int = 1536   # notes + question of the final answer (the chat's budget)
    window: int = 4              # map calls in flight at once
    max_notes: int = 0           # a question's answer reads at most this many notes (0: as many as fit)


@dataclass
class Section:
    """Consecutive chunks of one document: what one map call reads."""

    source: str
    text: str
    pages: list[int] = field(default_factory=list)
    heading: str = ""

    @property
    def page_label(self) -> str:
        return page_label({"pages": self.pages})


def sections(chunks: list[Chunk], count: Callable[[str], int], budget: int) -> list[Section]:
    """Group a document's chunks (in reading order) into sections of at most `budget` tokens; a new
    heading or page starts a new section once the current one is half full."""
    out: list[Section] = []
    parts: list[Chunk] = []
    used, prev_end = 0, -1
    for c in chunks:
        text = _without_overlap(c, prev_end)
        prev_end = max(prev_end, c.end)
        n = count(text)
        moved = parts and (c.heading != parts[-1].heading or c.page != parts[-1].page)
        if parts and (used + n > budget or (moved and used >= budget // 2)):
            out.append(_section(parts))
            parts, used = [], 0
        parts.append(Chunk(text, c.source, c.index, c.start, c.end, c.page, c.heading, c.title))
        used += n
    if parts:
        out.append(_section(parts))
    return out


def _without_overlap(c: Chunk, prev_end: int) -> str:
    # Chunks overlap by a few sentences; a section reads each sentence once. Offsets are trusted only
    # when they match the text (hygiene may have changed a chunk's length).
    if 0 <= c.start < prev_end and c.end - c.start == len(c.text):
        return c.text[prev_end - c.start:].lstrip()
    return c.text


def _section(parts: list[Chunk]) -> Section:
    pages = sorted({p.page for p in parts if p.page is not None})
    headings = list(dict.fromkeys(p.heading for p in parts if p.heading))
    heading = "" if not headings else headings[0] if len(headings) == 1 else \
        f"{headings[0]} … {headings[-1].split(' > ')[-1]}"
    return Section(parts[0].source, "\n\n".join(p.text for p in parts if p.text), pages, heading)


def find_document(db, kb: str, ref: str, files_on_disk: bool = True, *, scope: Scope) -> list[Chunk]:
    """The chunks of one document that `scope` may read: an indexed source (as listed, by absolute
    path, or by a unique file name), else (`files_on_disk`, the command line only) a readable file,
    loaded and chunked here. A document of another collection is "no indexed document", as if absent."""
    ref = ref.strip()
    files = [r for r in db.files(kb, scope=scope).values() if r.status == "done"]
    absolute = str(Path(ref).expanduser().resolve()) if ref else ""
    matches = [r for r in files if r.path == absolute or r.source == ref.strip("/")]
    if not matches and ref:
        matches = [r for r in files if r.source.endswith("/" + ref.strip("/"))]
    if len(matches) > 1:
        raise DocumentError(f"{ref!r} names {len(matches)} documents: "
                            + ", ".join(sorted(r.source for r in matches)[:5]) + "; give the full source path")
    if matches:
        return db.chunks_of_file(kb, matches[0].path)
    path = Path(ref).expanduser()
    if files_on_disk and ref and path.is_file():
        return _read(path)
    raise DocumentError(f"no indexed document {ref!r}" + (" and no such file" if files_on_disk else "")
                        + " (see `appliance docs list`)")


def _read(path: Path) -> list[Chunk]:
    from knowledge.errors import LoaderError
    from knowledge.index.chunking import chunk_document, dedupe_chunks
    from knowledge.loaders import load

    try:
        doc = load(path, path.read_bytes())
    except (OSError, LoaderError) as e:
        raise DocumentError(f"cannot read {path}: {e}") from None
    # Sections are measured again in chat-model tokens: a rough count is enough to cut chunks.
    # Its source is the full path: never mistaken for an indexed document of the same name.
    chunks, _ = dedupe_chunks(chunk_document(doc, str(path.resolve()), lambda ts: [len(t) // 4 + 1 for t in ts],
                                             200, 0))
    return chunks


class LongDocService:
    """Map-reduce answers over one document, through any ChatBackend."""

    def __init__(self, backend: ChatBackend, cfg: LongDocSettings | None = None,
                 embed: Callable[[list[str]], np.ndarray] | None = None, retriever: Retriever | None = None) -> None:
        self.backend = backend
        self.cfg = cfg or LongDocSettings()
        self.embed = embed  # the knowledge base's embedder: ranks a question's notes
        self.retriever = retriever  # the document's own best passages join the notes

    def count(self, text: str) -> int:
        """Chat-model tokens of `text` as a user message (what a section costs one map call)."""
        return len(self.backend.tokenize_messages([{"role": "user", "content": text}]))

    def split(self, chunks: list[Chunk]) -> list[Section]:
        """The document's sections, sized for one map call each."""
        if not chunks:
            raise DocumentError("the document has no text")
        return sections(chunks, self.count, self.cfg.section_tokens)

    def prepare(self, secs: list[Section], question: str | None = None, progress: Progress | None = None,
                stop: threading.Event | None = None, *, scope: Scope) -> Prepared:
        """Map and reduce; returns the final turn, ready for ChatService.stream/astream (citations = notes).
        `scope`: who asks (the passages retrieved beside the notes come from what they may read)."""
        stop = stop or threading.Event()
        lang = "zh" if is_cjk_text(question or secs[0].text) else "en"
        task = question or SUMMARY_TASK[lang]
        whole = [_note(s.source, s.pages, s.heading, s.text) for s in secs]
        if self._fits(whole, task):  # a short document is answered from its own text, no map-reduce
            return self._final(whole, task, lang)
        system = _MAP_QUESTION.format(question=question) if question else _MAP_SUMMARY
        notes = self._map(system, secs, progress, stop)
        if question:
            notes = [n for n in notes if NOTHING not in n["text"].upper()]
            notes += self._passages(question, secs[0].source, scope)
            if not notes:
                fixed = {"en": f"The document {secs[0].source} does not cover this question.",
                         "zh": f"文档 {secs[0].source} 中没有涉及这个问题。"}[lang]
                return Prepared([], [], covered=False, lang=lang, fixed=fixed)
            if self.embed is not None:
                return self._final(self._select(notes, question), task, lang)
        return self._final(self._reduce(notes, task, progress, stop), task, lang)

    def _passages(self, question: str, source: str, scope: Scope) -> list[dict]:
        """The indexed document's own chunks that retrieval ranks best for the question: exact text
        beside the notes, which a small model paraphrases (measured on the dev corpus)."""
        if self.retriever is None:
            return []
        hits = self.retriever.search(question, k=max(2, self.cfg.max_notes), path_prefix=source, scope=scope)
        return [_note(h.source, [h.page] if h.page else [], h.heading, h.text) for h in hits if h.source == source]

    def _select(self, notes: list[dict], question: str) -> list[dict]:
        """A question's reduce: the notes most similar to it fill the budget, best first (as [1], which
        the prompt puts next to the question, like chat excerpts). Merging them instead lost the one
        relevant fact of a 30-section handbook (135M model)."""
        vectors = self.embed([question] + [n["text"] for n in notes])
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        order = np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")
        kept: list[int] = []
        for i in order:
            if kept and (len(kept) == self.cfg.max_notes
                         or not self._fits([notes[j] for j in [*kept, int(i)]], question)):
                break
            kept.append(int(i))
        return [notes[j] for j in kept]

    @staticmethod
    def _final(notes: list[dict], task: str, lang: str) -> Prepared:
        for n, note in enumerate(notes, start=1):
            note["n"] = n
        return Prepared([{"role": "system", "content": SYSTEM_PROMPT}, question_turn(task, notes, lang)], notes,
                        lang=lang)

    def _map(self, system: str, secs: list[Section], progress: Progress | None,
             stop: threading.Event) -> list[dict]:
        done = [0]
        lock = threading.Lock()

        def one(sec: Section) -> dict:
            where = ", ".join(p for p in (sec.page_label, sec.heading) if p)
            text = self._call(system, f"Section ({where or sec.source}):\n{sec.text}", stop)
            with lock:
                done[0] += 1
                if progress:
                    progress("map", done[0], len(secs))
            return _note(sec.source, sec.pages, sec.heading, text)

        if progress:
            progress("map", 0, len(secs))
        with ThreadPoolExecutor(max(1, self.cfg.window), thread_name_prefix="map") as pool:
            return list(pool.map(one, secs))

    def _reduce(self, notes: list[dict], task: str, progress: Progress | None, stop: threading.Event) -> list[dict]:
        rounds = 0
        while not self._fits(notes, task) and len(notes) > 1 and rounds < 4:
            groups = self._groups(notes)
            if progress:
                progress("reduce", 0, len(groups))
            merged = []
            for i, group in enumerate(groups, start=1):
                body = "\n\n".join(f"({_where(n)}) {n['text']}" for n in group)
                text = self._call(_REDUCE.format(task=task), body, stop) if len(group) > 1 else group[0]["text"]
                pages = sorted({p for n in group for p in n["pages"]})
                heading = group[0]["heading"] if len({n["heading"] for n in group}) == 1 else ""
                merged.append(_note(group[0]["source"], pages, heading, text))
                if progress:
                    progress("reduce", i, len(groups))
            notes, rounds = merged, rounds + 1
        while len(notes) > 1 and not self._fits(notes, task):  # still too long: the weakest evidence goes last
            notes = notes[:-1]
        return notes

    def _fits(self, notes: list[dict], task: str) -> bool:
        turn = question_turn(task, notes, "en")
        return self.count(SYSTEM_PROMPT + turn["content"]) <= self.cfg.context_tokens

    def _groups(self, notes: list[dict]) -> list[list[dict]]:
        """Consecutive notes, each group at most one section's budget (at least two notes a group)."""
        groups: list[list[dict]] = [[]]
        used = 0
        for note in notes:
            n = self.count(note["text"])
            if len(groups[-1]) >= 2 and used + n > self.cfg.section_tokens:
                groups.append([])
                used = 0
            groups[-1].append(note)
            used += n
        return groups

    def _call(self, system: str, user: str, stop: threading.Event) -> str:
        """One background completion; waits for queue room, returns early (Cancelled) when stopped."""
        params = SamplingParams(max_tokens=self.cfg.note_tokens, temperature=0.0, priority=1, user="longdoc",
                                dry_multiplier=0.8, loop_guard=True)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        result = complete_background(self.backend, messages, params, stop)
        return result.text.strip()


def _note(source: str, pages: list[int], heading: str, text: str) -> dict:
    # The citation shape of chat answers (n is set after the reduce), plus the pages a note spans.
    page = pages[0] if len(pages) == 1 else None
    return {"n": 0, "source": source, "page": page, "pages": pages, "heading": heading, "score": 0.0,
            "similarity": 0.0, "snippet": text[:240], "text": text, "start": 0, "end": 0, "also_in": []}


def _where(note: dict) -> str:
    return ", ".join(p for p in (page_label(note), note["heading"]) if p) or "section"

