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
QA_FILE = Path(__file__).resolve().parents[2] / "knowledge" / "sample" / "qa.jsonl"


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
        raise ValueError(f"unknown workload {self.name!r}; one of {', '.join(PROFILES)}")


def _chat(rng: random.Random, max_tokens: int) -> tuple[list[dict], int]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_text(rng)}], max_tokens


_QUESTIONS: list[str] = []


def _questions() -> list[str]:
    if not _QUESTIONS:
        lines = QA_FILE.read_text(encoding="utf-8").splitlines()
        _QUESTIONS.extend(json.loads(line)["question"] for line in lines if line.strip())
    return _QUESTIONS


PROFILES = ("chat", "rag", "long-output", "short", "long-context")


def get(name: str) -> Workload:
    if name not in PROFILES:
        raise ValueError(f"unknown workload {name!r}; one of {', '.join(PROFILES)}")
    return Workload(name, "appliance-rag" if name == "rag" else None)
