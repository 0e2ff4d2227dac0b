"""Named benchmark workloads with realistic token counts (counted in SmolLM2/Llama-style tokens)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

SYSTEM = (
    "You are the internal knowledge assistant of a mid-sized engineering company. Answer "
    "employees' questions using only the excerpts you are given from the company's documents: "
    "policies, runbooks, onboarding guides, product manuals and meeting notes. Cite the excerpt "
    "numbers you used in square brackets. If the excerpts do not contain the answer, say that "
    "the documents do not cover it and suggest which team to ask. Keep answers short, factual "
    "and polite. Never invent procedures, phone numbers, prices or dates. When a question is in "
    "Chinese, answer in Chinese; otherwise answer in English. Format steps as a numbered list. "
) * 3  # about 350 tokens
WORDS = ("vpn certificate laptop printer expense travel booking oncall rota deploy server "
         "badge office parking leave benefits payroll invoice backup restore password reset "
         "wifi guest account access review quarterly budget hiring interview onboarding").split()
QA_FILE = Path(__file__).resolve().parents[2] / "knowledge" / "data" / "sample" / "qa.jsonl"


def user_text(rng: random.Random, words: int = 95) -> str:
    """About 130 tokens of distinct question text (for 95 words)."""
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"Ticket {rng.randrange(10**6)}: my question concerns {body}. What should I do?"


@dataclass
class Workload:
    """A profile: how one simulated user builds each request."""

    name: str
    model_override: str | None = None  # the rag profile asks the RAG model

    def request(self, rng: random.Random) -> tuple[list[dict], int]:
        """(messages, max_tokens) of the next request."""
        if self.name == "chat":
            return _chat(rng, rng.randint(64, 128))
        if self.name == "long-output":
            return [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": "Summarise in detail, section by section: " + user_text(rng, 200)}], 512
        if self.name == "short":
            return [{"role": "system", "content": "Classify the ticket as IT, Finance or HR. One word."},
                    {"role": "user", "content": user_text(rng, 40)}], rng.randint(8, 16)
        if self.name == "long-context":
            return [{"role": "user", "content": "Read the log and say what failed:\n" + user_text(rng, 2900)}], 64
        if self.name == "rag":
            q = rng.choice(_questions())
            return [{"role": "user", "content": q}], 128
        if self.name == "rag-quote":
            return rag_quote(rng), 128
        raise ValueError(f"unknown workload {self.name!r}; one of {', '.join(PROFILES)}")


def _chat(rng: random.Random, max_tokens: int) -> tuple[list[dict], int]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_text(rng)}], max_tokens


def rag_quote(rng: random.Random) -> list[dict]:
    """A RAG turn whose answer quotes its excerpts: four passages of the sample documents (one of
    them holds the answer) and a question that asks for the exact sentence. Prompt lookup pays
    here: most of the answer's tokens are already in the prompt."""
    item = rng.choice([q for q in _qa() if q.get("lang") == "en" and q.get("answerable", True) is not False])
    wanted = item["answer_contains"][0].lower()
    paragraphs = _paragraphs()
    hit = next((p for p in paragraphs if wanted in p.lower()), rng.choice(paragraphs))
    excerpts = rng.sample([p for p in paragraphs if p is not hit], 3) + [hit]
    rng.shuffle(excerpts)
    body = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(excerpts, start=1))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Excerpts:\n{body}\n\nQuestion: {item['question']}\n"
                                        "Give the exact sentences from the excerpts that answer it, word for word."}]


_QUESTIONS: list[str] = []
_QA: list[dict] = []
_PARAGRAPHS: list[str] = []


def _qa() -> list[dict]:
    if not _QA:
        _QA.extend(json.loads(line) for line in QA_FILE.read_text(encoding="utf-8").splitlines() if line.strip())
    return _QA


def _paragraphs() -> list[str]:
    """Paragraphs of the sample guide's plain-text files (markdown and text), 200-1200 characters."""
    if not _PARAGRAPHS:
        for path in sorted((QA_FILE.parent / "docs" / "en").glob("*")):
            if path.suffix in (".md", ".txt"):
                blocks = path.read_text(encoding="utf-8").split("\n\n")
                _PARAGRAPHS.extend(" ".join(b.split()) for b in blocks if 200 <= len(b) <= 1200)
    return _PARAGRAPHS


def _questions() -> list[str]:
    if not _QUESTIONS:
        _QUESTIONS.extend(item["question"] for item in _qa())
    return _QUESTIONS


PROFILES = ("chat", "rag", "rag-quote", "long-output", "short", "long-context")


def get(name: str) -> Workload:
    if name not in PROFILES:
        raise ValueError(f"unknown workload {name!r}; one of {', '.join(PROFILES)}")
    return Workload(name, "appliance-rag" if name == "rag" else None)
