"""Everyday English words weigh less in the not-covered gate (knowledge.everyday)."""

from __future__ import annotations

import pytest

from appliance.server.chat import ChatService, RagSettings
from knowledge.access import EVERYTHING
from knowledge.everyday import FLOOR, discount, factor
from knowledge.ingest import ingest
from knowledge.retrieve import Retriever, coverage
from knowledge.terms import term_words, terms

from .kb_helpers import open_kb
from .test_answers import _NoModel


def test_term_words_pair_each_term_with_its_word():
    text = "Installing the packages during 安装"
    assert term_words(text) == [("instal", "installing"), ("packag", "packages"), ("dure", "during"), ("安装", "安装")]
    assert terms(text) == [t for t, _ in term_words(text)]


@pytest.mark.parametrize("word", ["during", "another", "anything", "get"])
def test_everyday_words_keep_little_of_their_weight(word):
    assert factor(word) < 0.5


@pytest.mark.parametrize("word", ["debconf", "tungsten", "keytab", "colleagues", "sourdough", "安装"])
def test_rare_and_unknown_words_keep_all_of_it(word):
    assert factor(word) == 1.0


def test_discount_scales_each_term_by_its_most_common_word():
    weights = {"get": 2.0, "keytab": 8.0}
    out = discount(weights, "Get the keytab, getting it twice")
    assert out["keytab"] == 8.0 and out["get"] == pytest.approx(2.0 * FLOOR)
    assert discount({"x": 1.0}, "nothing of it") == {"x": 1.0}  # a weight the question does not name is kept


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedder, sample_docs):
    kb = open_kb(tmp_path_factory.mktemp("data"), embedder)
    ingest(kb, sample_docs)
    return Retriever(kb)


def test_a_paraphrase_in_everyday_words_passes_the_gate(retriever):
    """'went', 'during', 'out' and 'after' appear nowhere in the 39-chunk guide, so the index gives
    them the highest weight there is and the share of the question found in the answer was too low."""
    question = "What should I do after the power went out during indexing?"
    chat = ChatService(_NoModel(), retriever, RagSettings(top_k=2))
    hits = retriever.search(question, k=2, scope=EVERYTHING)
    texts = [h.text for h in hits]
    assert coverage(retriever, question, texts, everyday=True) > coverage(retriever, question, texts) + 0.1
    assert chat.relevance(question, hits, "en") >= chat.cfg.min_relevance_en
    prepared = chat.prepare([{"role": "user", "content": question}], scope=EVERYTHING)
    assert prepared.covered and any("interrupt" in c["text"].lower() or "power" in c["text"].lower()
                                    for c in prepared.citations)
