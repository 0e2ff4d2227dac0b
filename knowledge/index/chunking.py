"""Split documents into chunks measured in the embedding model's tokens.

Order of preference for a boundary: a heading (sections), then a paragraph, then a sentence
(including the CJK marks 。！？；, which need no following space), then, for a run with no
boundary at all (a 2 MB single line), a hard cut at a word or character boundary. Each chunk
keeps its source, page, heading path and character offsets into the document text.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from knowledge.loaders.base import Document

CountTokens = Callable[[list[str]], list[int]]

_PARAGRAPH = re.compile(r"\n\s*\n")
# End of a sentence: Latin punctuation followed by space, or a CJK mark (no space needed),
# or a single newline (lists, tables, poems).
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|(?<=[。！？；!?])[”’」』）)]*|\n")
SECTION_SEP = "\n\n"


@dataclass
class Chunk:
    """One retrievable piece of a document."""

    text: str
    source: str
    index: int
    start: int           # character offsets into the document text (sections joined by SECTION_SEP)
    end: int
    page: int | None = None
    heading: str = ""
    title: str = ""

    @property
    def embed_text(self) -> str:
        """What gets embedded and lexically indexed: the text with its title and headings."""
        return embed_text(self.title, self.heading, self.text)

    @cached_property
    def digest(self) -> str:
        """Which stored passage this chunk is (see `passage_digest`); computed once per chunk."""
        return passage_digest(self.heading, self.text)


def embed_text(title: str, heading: str, text: str) -> str:
    """A chunk's text prefixed by its title and heading path (also used to rebuild the lexical index)."""
    context = " / ".join(p for p in (title, heading) if p)
    return f"{context}\n{text}" if context else text


def passage_digest(heading: str, text: str) -> str:
    """What makes two chunks the same stored passage: heading path and text, white space folded, case
    ignored. The heading counts because it is embedded and indexed with the text: measured on the dev
    corpus, sharing by text alone stored the DOCX conversion's heading-less rows in place of the HTML
    manual's and cut English MRR from 0.742 to 0.713 (the same text under other headings stays a
    separate row, and search folds it as a near-copy)."""
    norm = " ".join(unicodedata.normalize("NFKC", f"{heading}\n{text}").casefold().split())
    return hashlib.sha1(norm.encode(), usedforsecurity=False).hexdigest()  # an identity, not a secret


@dataclass
class _Piece:
    start: int
    end: int
    paragraph: int
    tokens: int = 0


def chunk_document(doc: Document, source: str, count: CountTokens, max_tokens: int = 250,
                   overlap: int = 40) -> list[Chunk]:
    """Chunks of at most `max_tokens` tokens with about `overlap` tokens carried over."""
    if max_tokens < 16:
        raise ValueError("max_tokens must be at least 16")
    overlap = max(0, min(overlap, max_tokens // 2))
    chunks: list[Chunk] = []
    offset = 0
    for section in doc.sections:
        text = section.text
        heading = " > ".join(h for h in section.heading if h)
        for start, end in _pack(text, count, max_tokens, overlap):
            body = text[start:end].strip()
            if body:
                lead = len(text[start:end]) - len(text[start:end].lstrip())
                chunks.append(Chunk(body, source, len(chunks), offset + start + lead,
                                    offset + start + lead + len(body), section.page, heading, doc.title))
        offset += len(text) + len(SECTION_SEP)
    return chunks


def document_text(doc: Document) -> str:
    """The text chunk offsets refer to."""
    return SECTION_SEP.join(s.text for s in doc.sections)


def split_sentences(text: str) -> list[tuple[int, int, int]]:
    """(start, end, paragraph number) of every sentence, in order, covering the text."""
    out: list[tuple[int, int, int]] = []
    para_start = 0
    paragraphs = [(m.start(), m.end()) for m in _PARAGRAPH.finditer(text)] + [(len(text), len(text))]
    for number, (p_end, next_start) in enumerate(paragraphs):
        pos = para_start
        for m in _SENTENCE_END.finditer(text, para_start, p_end):
            if m.end() > pos:
                out.append((pos, m.end(), number))
                pos = m.end()
        if pos < p_end:
            out.append((pos, p_end, number))
        para_start = next_start
    return [(s, e, n) for s, e, n in out if text[s:e].strip()]


def _pack(text: str, count: CountTokens, max_tokens: int, overlap: int) -> list[tuple[int, int]]:
    pieces = [_Piece(s, e, n) for s, e, n in split_sentences(text)]
    pieces = _fit(text, pieces, count, max_tokens)
    return _spans(pieces, _budget(sum(p.tokens for p in pieces), max_tokens, overlap), overlap)


def _budget(total: int, max_tokens: int, overlap: int) -> int:
    """Tokens per chunk for a section of `total` tokens: as many chunks as filling each to
    `max_tokens` would make, but equally full. Filling greedily leaves a short tail chunk that
    holds a section's conclusion without the sentences it concludes (measured on the dev corpus: a
    FAQ answer's last sentence alone in a 60-token tail, out of the top 5 for its question)."""
    if total <= max_tokens:
        return max_tokens
    n = -(-(total - overlap) // (max_tokens - overlap))
    even = -(-(total + (n - 1) * overlap) // n)
    # Sentences do not split evenly: a little slack keeps the count from growing by one.
    return min(max_tokens, even + even // 8)


def _spans(pieces: list[_Piece], max_tokens: int, overlap: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(pieces):
        j, total = i, 0
        while j < len(pieces) and total + pieces[j].tokens <= max_tokens:
            total += pieces[j].tokens
            j += 1
        j = max(j, i + 1)
        # Prefer to end at a paragraph boundary when that keeps the chunk at least half full.
        for k in range(j, i + 1, -1):
            if k < len(pieces) and pieces[k].paragraph != pieces[k - 1].paragraph:
                if sum(p.tokens for p in pieces[i:k]) >= max_tokens // 2:
                    j = k
                break
        spans.append((pieces[i].start, pieces[j - 1].end))
        if j >= len(pieces):
            break
        # Overlap: start the next chunk with the last sentences (up to `overlap` tokens).
        back, carried = j, 0
        while back - 1 > i and carried + pieces[back - 1].tokens <= overlap:
            back -= 1
            carried += pieces[back].tokens
        i = back
    return spans


def _fit(text: str, pieces: list[_Piece], count: CountTokens, max_tokens: int) -> list[_Piece]:
    """Count tokens; split any sentence over the budget until every piece fits."""
    for _ in range(12):
        todo = [p for p in pieces if p.tokens == 0]
        if not todo:
            break
        for piece, n in zip(todo, count([text[p.start:p.end] for p in todo]), strict=True):
            piece.tokens = max(1, n)
        if all(p.tokens <= max_tokens for p in pieces):
            break
        pieces = [q for p in pieces for q in (_hard_split(text, p, max_tokens) if p.tokens > max_tokens else [p])]
    return pieces


def _hard_split(text: str, piece: _Piece, max_tokens: int) -> list[_Piece]:
    # Cut into parts sized by the chars-per-token ratio (with margin), at whitespace if near.
    length = piece.end - piece.start
    parts = max(2, -(-piece.tokens * 5 // (max_tokens * 4)))
    step = max(1, length // parts)
    out, pos = [], piece.start
    while pos < piece.end:
        cut = min(piece.end, pos + step)
        if cut < piece.end:
            space = text.rfind(" ", pos + step // 2, cut)
            cut = space + 1 if space > pos else cut
        out.append(_Piece(pos, cut, piece.paragraph))
        pos = cut
    return out


def dedupe_chunks(chunks: list[Chunk], low_diversity: float = 0.2) -> tuple[list[Chunk], int]:
    """Chunks of one file without repeats; returns (kept, how many were dropped).

    Dropped: a chunk whose text (white space folded, case ignored) already occurred in the file,
    and a repetitive chunk (distinct words / words below `low_diversity`) whose set of words already
    occurred: keyword stuffing and repeated boilerplate would otherwise fill the lexical index with
    thousands of near-identical chunks that match everything.
    """
    seen_text: set[str] = set()
    seen_words: set[frozenset[str]] = set()
    kept: list[Chunk] = []
    for c in chunks:
        words = c.text.lower().split()
        norm = " ".join(words)
        bag = frozenset(words)
        repetitive = len(words) >= 20 and len(bag) / len(words) < low_diversity
        if norm in seen_text or (repetitive and bag in seen_words):
            continue
        seen_text.add(norm)
        if repetitive:
            seen_words.add(bag)
        kept.append(c)
    return kept, len(chunks) - len(kept)

