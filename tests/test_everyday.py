"""Everyday English words and Chinese function words weigh less in the not-covered gate (knowledge.text.everyday)."""

from __future__ import annotations

import pytest

from knowledge.text.everyday import FLOOR, discount, factor
from knowledge.text.terms import term_words, terms


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


def test_chinese_function_words_keep_little_of_their_weight_and_subjects_all_of_it():
    # "怎样为学生搭建 Minecraft 服务器？" passed the gate on the Edu manual: 为 ("for") weighed as much
    # as a subject word, and covered a share of the question in every passage.
    out = discount({"为": 3.0, "学生": 4.0, "minecraft": 8.0}, term_words("怎样为学生搭建 Minecraft 服务器？"))
    assert out["为"] == pytest.approx(3.0 * FLOOR) and out["学生"] == 4.0 and out["minecraft"] == 8.0
    assert factor("给") == FLOOR and factor("服务器") == 1.0
