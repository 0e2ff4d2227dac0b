"""The RAG chat service, shared by the API, the UI and `appliance ask`.

Prompt layout, chosen so the KV prefix cache hits: the fixed system prompt first, then the
conversation history, then the numbered excerpts, then the question. Only the last turn differs
between two questions of the same conversation, so everything before it is served from cache.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace

from appliance.engine.backend import ChatBackend
from appliance.engine.request import Request
from appliance.engine.sequence import SamplingParams
from knowledge.answer import grounding, quote
from knowledge.answer.sentences import units, unmark
from knowledge.index.access import Scope
from knowledge.retrieve.retriever import Hit, Retriever, coverage
from knowledge.text.terms import is_cjk_text, terms

SYSTEM_PROMPT = (
    "You are the company's document assistant. Answer only from the numbered excerpts in the "
    "user's message, and cite the excerpts you use as [1], [2] and so on. If the excerpts do not "
    "answer the question, say that the documents do not cover it. Answer in the language of the "
    "question, briefly and precisely."
)
NOT_COVERED = {"en": "The documents do not cover this question. The nearest sources are listed below.",
               "zh": "文档中没有涉及这个问题。下面列出了最接近的来源。"}
EMPTY = {"en": "The knowledge base is empty: there is nothing to answer from yet. Add documents with "
             "`appliance ingest ./docs` or on the Documents tab.",
         "zh": "知识库是空的，目前没有可以依据回答的文档。请用 `appliance ingest ./docs` 或在“文档”页添加文档。"}
NO_ACCESS = {"en": "You have access to no documents yet: your account is in no group with a collection. "
                   "Ask an administrator to add you to one (`appliance users group add GROUP USER`).",
             "zh": "你目前无权访问任何文档：你的账户不属于任何有文档集合的用户组。请联系管理员把你加入一个用户组"
                   "（`appliance users group add GROUP USER`）。"}

QUOTE_LEAD = {"en": "The documents say:", "zh": "文档中的原文："}
# A partial answer's lead: the passages are shown, and so is the doubt (issue 42: a Chinese question
# declined while its answer sat in the top 5 hid what was found).
PARTIAL_LEAD = {"en": "These passages may not answer your question. The closest the documents come:",
                "zh": "以下段落可能没有回答你的问题。文档中最接近的原文："}
LEAD_PROMPT = {"en": "Answer the question in one short sentence from these excerpts, citing them as [1], [2].",
               "zh": "请根据这些摘录用一句简短的中文回答问题，并注明引用编号。"}
ANSWER_STYLES = ("generate", "quote", "hybrid")
LEAD_TOKENS = 64  # the hybrid style's generated lead-in: one sentence before the quotes


# Small models answering from excerpts tend to loop on one sentence. DRY penalises extending a
# span that already occurred in the answer; the loop guard ends an answer that loops anyway.
RAG_DRY_MULTIPLIER = 0.8


def rag_sampling(params: SamplingParams) -> SamplingParams:
    """`params` with the RAG answers' anti-repetition defaults (DRY on, loop guard on)."""
    return replace(params, dry_multiplier=params.dry_multiplier or RAG_DRY_MULTIPLIER, loop_guard=True)


@dataclass
class RagSettings:
    """Retrieval and prompt budget of the chat service."""

    top_k: int = 4
    min_relevance_en: float = 0.165  # the gate's threshold for English questions (see `relevance`)
    min_relevance_zh: float = 0.155  # and for Chinese ones
    partial_floor_en: float = 0.10   # below this an English question is declined; from it up to the
    partial_floor_zh: float = 0.07   # threshold the best passages are quoted under PARTIAL_LEAD
    context_tokens: int = 1536       # excerpts + history + question, in chat-model tokens
    excerpt_chars: int = 1200
    quote_excerpts: int = 4          # quotes are picked from this many (at least top_k): no model reads them
    answer_style: str = "generate"   # generate | quote | hybrid (config "auto" is resolved by the caller)


@dataclass
class Prepared:
    """A chat turn ready to run: the engine messages and the citations behind them."""

    messages: list[dict]
    citations: list[dict] = field(default_factory=list)
    covered: bool = True
    lang: str = "en"
    fixed: str | None = None  # the not-covered text, when not the knowledge base's
    style: str = "generate"   # which style answers: generate, quote or hybrid
    quoted: str = ""          # the excerpts' own sentences (quote: the answer; hybrid: after the lead-in)
    partial: bool = False     # relevance between the floor and the threshold: quoted under a warning

    @property
    def fixed_answer(self) -> str | None:
        """The whole answer when no model runs: not covered, or quoted."""
        if not self.covered:
            return self.fixed or NOT_COVERED[self.lang]
        return f"{self.lead}\n\n{self.quoted}" if self.style == "quote" else None

    @property
    def lead(self) -> str:
        """The product's own words before a quoted answer (they claim nothing, so are not checked)."""
        if self.style != "quote":
            return ""
        return (PARTIAL_LEAD if self.partial else QUOTE_LEAD)[self.lang]

    @property
    def coverage(self) -> str:
        """"full", "partial" (passages under a warning) or "none" (declined), as the API reports it."""
        return "none" if not self.covered else "partial" if self.partial else "full"

    @property
    def suffix(self) -> str:
        """Text that follows the generated part (the hybrid style's quotes)."""
        return f"\n\n{self.quoted}" if self.style == "hybrid" else ""

    @property
    def answered_by(self) -> str:
        """The style reported for this answer (API, metrics, eval): "declined" when not covered."""
        return self.style if self.covered else "declined"

    def answer(self, generated: str | None) -> str:
        """The whole answer: the model's text and what follows it, or the fixed text when none ran."""
        return generated + self.suffix if generated is not None else (self.fixed_answer or "")


class ChatService:
    """Retrieval + prompt assembly + generation."""

    def __init__(self, backend: ChatBackend, retriever: Retriever | None, cfg: RagSettings | None = None) -> None:
        self.backend = backend
        self.retriever = retriever
        self.cfg = cfg or RagSettings()
        if self.cfg.answer_style not in ANSWER_STYLES:
            raise ValueError(f"answer style must be one of {', '.join(ANSWER_STYLES)}, not {self.cfg.answer_style!r}")
        self.counts: Counter[str] = Counter()  # answers by style, sentences by grounding (Prometheus)
        self._lock = threading.Lock()

    def prepare(self, messages: list[dict], rag: bool = True, *, scope: Scope, style: str | None = None) -> Prepared:
        """Retrieve for the last user message among the collections `scope` may read, and build the
        prompt (or the not-covered or quoted answer) in `style` (default: the configured one).
        `scope` has no default: every caller says who asks."""
        if not messages or messages[-1].get("role") != "user":
            raise ValueError("the last message must come from the user")
        question = str(messages[-1]["content"])
        lang = "zh" if is_cjk_text(question) else "en"
        if not rag or self.retriever is None:
            return Prepared(list(messages), lang=lang)
        if scope.is_empty:
            return Prepared([], [], covered=False, lang=lang, fixed=NO_ACCESS[lang])
        style = style or self.cfg.answer_style
        # Quotes are picked from more excerpts than a small model can read; the gate judges the
        # top_k it was calibrated on.
        wide = self.cfg.quote_excerpts if style != "generate" else 0
        hits = self.retriever.search(question, k=max(self.cfg.top_k, wide), scope=scope)
        if not hits and not self.retriever.kb.db.chunk_count(self.retriever.kb.cfg.name):
            return Prepared([], [], covered=False, lang=lang, fixed=EMPTY[lang])
        citations = [_citation(n, h, self.cfg.excerpt_chars) for n, h in enumerate(hits, start=1)]
        relevance = self.relevance(question, hits[:self.cfg.top_k], lang)
        if relevance < self._threshold(lang):
            return self._partial(question, citations, lang, relevance)
        history = [m for m in messages[:-1] if m.get("role") in ("user", "assistant")]
        system = {"role": "system", "content": SYSTEM_PROMPT}
        quotes = self.quotes(question, citations, lang) if style != "generate" else []
        if not quotes:  # the model writes from the top_k it can read
            read = citations[:self.cfg.top_k]
            return Prepared(self._fit(system, history, question_turn(question, read, lang)), read, lang=lang)
        quoted = quote.render(quotes)
        if style == "quote":
            return Prepared([], citations, lang=lang, style="quote", quoted=quoted)
        turn = {"role": "user", "content": f"{quoted}\n\nQuestion: {question}\n{LEAD_PROMPT[lang]}"}
        return Prepared(self._fit(system, history, turn), citations, lang=lang, style="hybrid", quoted=quoted)

    def _partial(self, question: str, citations: list[dict], lang: str, relevance: float) -> Prepared:
        """Under the threshold: from the floor up, the best passages quoted under a plain warning, in
        every style (no model writes an answer from excerpts that may not hold one); below the floor,
        or with no sentence to quote, declined with the nearest sources."""
        floor = self.cfg.partial_floor_zh if lang == "zh" else self.cfg.partial_floor_en
        quotes = self.quotes(question, citations, lang) if relevance >= floor else []
        if not quotes:
            return Prepared([], citations[:3], covered=False, lang=lang)
        return Prepared([], citations, lang=lang, style="quote", quoted=quote.render(quotes), partial=True)

    def quotes(self, question: str, citations: list[dict], lang: str) -> list[quote.Quote]:
        """The excerpts' sentences that answer `question` (empty without a knowledge base). Each
        citation's text is first completed to the end of its last sentence from the document, so
        that the sources panel and the grounding check see what is quoted."""
        if self.retriever is None:
            return []
        kb = self.retriever.kb
        for c in citations:
            c["text"] = quote.sentence_end(c["text"], kb.db.text_after(kb.cfg.name, c["source"],
                                                                       c["start"] + len(c["text"])))
        return quote.pick(question, [(c["n"], c["text"]) for c in citations], lang, kb.db.idf(terms(question)),
                          kb.embedder.encode)

    def ground(self, prepared: Prepared, answer: str) -> list[grounding.Checked]:
        """Each sentence of `answer` checked against the excerpts it was given (and counted for
        Prometheus). Nothing to check when no excerpt was given (declined, or no retrieval)."""
        answer = answer.removeprefix(prepared.lead)  # the product's own words claim nothing
        checked = []
        if prepared.covered and prepared.citations and self.retriever is not None:
            checked = grounding.check(answer, [c.get("text") or c.get("snippet", "") for c in prepared.citations],
                                      self.retriever.kb.db.idf)
        with self._lock:
            self.counts[f"style:{prepared.answered_by}"] += 1
            for c in checked:
                if c.supported is not None:
                    self.counts["supported" if c.supported else "unsupported"] += 1
        return checked

    def relevance(self, question: str, hits: list[Hit], lang: str) -> float:
        """How well the excerpts cover the question, 0..1: the gate compares this to a threshold.

        The best dense similarity (English: of one sentence of the excerpts; Chinese: of one
        excerpt) times the best share of the question's term weight (IDF over the index) found in
        one excerpt. Similarity alone told answerable from unanswerable
        questions on one corpus and not on the next (a subject's own vocabulary lifts every question
        about it: balanced accuracy 0.50-0.70 on three outside corpora); a word the documents never
        use ("Minecraft", "Active Directory") keeps the share low however close the topic is. Chosen
        on four corpora by the minimum, confirmed on a fifth (BENCHMARKS.md, "The not-covered gate").
        English everyday words ("another", "during") and Chinese function words (为, 给) weigh less in
        the share (knowledge.text.everyday).
        """
        if not hits:
            return -1.0
        if self.retriever is None:
            return max(0.0, max(h.similarity for h in hits))
        similarity, share = self.relevance_parts(question, hits, lang)
        return similarity * share

    def relevance_parts(self, question: str, hits: list[Hit], lang: str) -> tuple[float, float]:
        """The two factors of `relevance` for non-empty `hits` with a retriever: the dense similarity
        (clipped at 0) and the share of the question's term weight (`scripts/bench_gate_signals.py`
        scores each alone)."""
        share = coverage(self.retriever, question, [h.text for h in hits], everyday=True)
        return max(0.0, self._similarity(question, hits, lang)), share

    def _similarity(self, question: str, hits: list[Hit], lang: str) -> float:
        """English: the best *sentence's* dense similarity to the question. A chunk's vector averages
        its sentences, so a paraphrased question that matches one sentence well scores low against
        the whole chunk (6 of the sample's 22 answerable English questions were declined that way).
        Chinese: the chunks' similarity, since the English-only embedder's sentence scores are
        noise there (BENCHMARKS.md, "The gate at sentence level")."""
        if lang == "zh":
            return max(h.similarity for h in hits)
        texts = [u.text for h in hits for u in units(h.text) if not u.is_contents]
        if not texts:
            return max(h.similarity for h in hits)
        vectors = self.retriever.kb.embedder.encode([question, *texts])
        return float(max(vectors[1:] @ vectors[0]))

    def _threshold(self, lang: str) -> float:
        return self.cfg.min_relevance_zh if lang == "zh" else self.cfg.min_relevance_en

    def _fit(self, system: dict, history: list[dict], turn: dict) -> list[dict]:
        """Drop the oldest history turns until the prompt fits the context budget."""
        while True:
            messages = [system, *history, turn]
            if not history or len(self.backend.tokenize_messages(messages)) <= self.cfg.context_tokens:
                return messages
            history = history[2:] if len(history) > 1 else []

    def answer_params(self, user: str, max_tokens: int = 512, temperature: float = 0.3,
                      seed: int | None = None) -> SamplingParams:
        """Sampling for answers in the UI, the terminal and the answer eval (which fixes the seed)."""
        return rag_sampling(SamplingParams(max_tokens=max_tokens, temperature=temperature, user=user, seed=seed))

    def submit(self, prepared: Prepared, params: SamplingParams) -> Request | None:
        """Start generation; None when the answer is the fixed not-covered text."""
        if prepared.fixed_answer is not None:
            return None
        if prepared.style == "hybrid":
            # One short paragraph: the quotes follow it, and a small model goes on to echo the prompt.
            params = replace(params, max_tokens=min(params.max_tokens or LEAD_TOKENS, LEAD_TOKENS),
                             stop=[*params.stop, "\n\n"])
        return self.backend.submit(prepared.messages, params)

    def stream(self, prepared: Prepared, params: SamplingParams) -> Iterator[str]:
        """Blocking stream of answer text (CLI, UI)."""
        req = self.submit(prepared, params)
        if req is None:
            yield prepared.answer(None)
            return
        try:
            yield from req
        finally:
            req.cancel()  # no-op when finished; frees the KV when the consumer stopped early
        if prepared.suffix:
            yield prepared.suffix

    async def astream(self, prepared: Prepared, params: SamplingParams) -> AsyncIterator[str]:
        req = self.submit(prepared, params)
        if req is None:
            yield prepared.answer(None)
            return
        async for delta in req:
            yield delta
        if prepared.suffix:
            yield prepared.suffix


def question_turn(question: str, citations: list[dict], lang: str) -> dict:
    """The user turn of a RAG answer: numbered excerpts (best last), then the question."""
    # Best excerpt last, right before the question: small models attend most to what is nearest.
    blocks = []
    for c in reversed(citations):
        where = ", ".join(p for p in (c["source"], page_label(c)) if p)
        where += f", {c['heading']}" if c["heading"] else ""
        blocks.append(f"[{c['n']}] ({where})\n{unmark(c['text'])}")  # "memory[2]" is no citation
    lead = "以下是文档摘录：" if lang == "zh" else "Excerpts from the documents:"
    ask = "请用中文回答，并注明引用编号。" if lang == "zh" else "Answer in English and cite the excerpt numbers."
    return {"role": "user", "content": f"{lead}\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}\n{ask}"}


def page_label(citation: dict) -> str:
    """"page 3", "pages 3-5" or "" for a citation (a whole-document note may span pages)."""
    pages = citation.get("pages") or ([citation["page"]] if citation.get("page") else [])
    if not pages:
        return ""
    return f"page {pages[0]}" if len(pages) == 1 else f"pages {pages[0]}-{pages[-1]}"


def _citation(n: int, hit: Hit, max_chars: int) -> dict:
    return {"n": n, "source": hit.source, "page": hit.page, "heading": hit.heading, "score": hit.score,
            "similarity": hit.similarity, "snippet": hit.text[:240], "text": hit.text[:max_chars],
            "start": hit.start, "end": hit.end, "also_in": hit.also_in}
