"""Everyday English words weigh less in the not-covered gate (knowledge.everyday)."""

from __future__ import annotations

import pytest

from knowledge.everyday import FLOOR, discount, factor
from knowledge.terms import term_words, terms


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
    out = discount(weights, term_words("Get the keytab, getting it twice"))
    assert out["keytab"] == 8.0 and out["get"] == pytest.approx(2.0 * FLOOR)
    # a weight the question does not name is kept
    assert discount({"x": 1.0}, term_words("nothing of it")) == {"x": 1.0}
