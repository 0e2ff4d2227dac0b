"""No hidden answers (issue 42): a question whose relevance falls between the floor and the
threshold gets the best passages quoted under a plain warning, in both languages and in every
style; only below the floor is it declined. Over the real sample index (retrieval and the
embedder are real; no model runs for a partial answer, which the refusing stand-in proves)."""

from __future__ import annotations

import pytest

from appliance.server.chat import NOT_COVERED, PARTIAL_LEAD, ChatService, RagSettings
from knowledge.index.access import EVERYTHING

from .kb_helpers import RefusingModel

QUESTIONS = [("Which port does the server listen on by default?", "8000"), ("默认情况下服务监听哪个端口？", "8000")]


def _chat(retriever, style: str, threshold: float, floor: float) -> ChatService:
    return ChatService(RefusingModel(), retriever, RagSettings(
        top_k=2, answer_style=style, min_relevance_en=threshold, min_relevance_zh=threshold,
        partial_floor_en=floor, partial_floor_zh=floor))


@pytest.mark.parametrize("style", ["quote", "generate", "hybrid"])
@pytest.mark.parametrize("question, fact", QUESTIONS)
def test_under_the_threshold_the_passages_come_under_a_warning(retriever, style, question, fact):
    chat = _chat(retriever, style, threshold=1.0, floor=0.0)  # every score is under 1.0
    prepared = chat.prepare([{"role": "user", "content": question}], scope=EVERYTHING)
    answer = prepared.fixed_answer
    assert prepared.coverage == "partial" and prepared.covered and prepared.citations
    assert chat.submit(prepared, chat.answer_params("t")) is None  # no model writes from doubtful excerpts
    assert answer.startswith(PARTIAL_LEAD[prepared.lang]) and fact in answer and "[1]" in answer
    checked = chat.ground(prepared, answer)
    assert checked and all(c.supported is not False for c in checked)  # the warning claims nothing


@pytest.mark.parametrize("question, fact", QUESTIONS)
def test_below_the_floor_the_question_is_declined(retriever, question, fact):
    prepared = _chat(retriever, "quote", threshold=1.0, floor=1.0).prepare(
        [{"role": "user", "content": question}], scope=EVERYTHING)
    assert prepared.coverage == "none" and prepared.fixed_answer == NOT_COVERED[prepared.lang]
    assert fact not in prepared.fixed_answer


@pytest.mark.parametrize("question, fact", QUESTIONS)
def test_above_the_threshold_the_answer_has_no_warning(retriever, question, fact):
    prepared = _chat(retriever, "quote", threshold=0.0, floor=0.0).prepare(
        [{"role": "user", "content": question}], scope=EVERYTHING)
    assert prepared.coverage == "full" and not prepared.fixed_answer.startswith(PARTIAL_LEAD[prepared.lang])


def test_the_configured_floor_never_rises_above_its_threshold(tmp_path, monkeypatch):
    """A floor set above the threshold would make partial answers of full ones: the threshold wins."""
    from appliance.config import load_settings
    from appliance.server.services import chat_service

    monkeypatch.setenv("APPLIANCE_CHAT__MIN_RELEVANCE_EN", "0.1")
    monkeypatch.setenv("APPLIANCE_CHAT__PARTIAL_FLOOR_EN", "0.3")
    chat = chat_service(load_settings(None), RefusingModel(), None)
    assert chat.cfg.partial_floor_en == chat.cfg.min_relevance_en == 0.1
