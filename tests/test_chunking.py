"""Chunking: budgets in embedding tokens, CJK sentence boundaries, offsets, headings."""

import re

from knowledge.index.chunking import chunk_document, document_text, split_sentences
from knowledge.loaders.base import Document, Section


def count_chars(texts):
    """A stand-in tokenizer for pure-logic tests: one token per non-space character."""
    return [len(re.sub(r"\s", "", t)) for t in texts]


def test_chinese_splits_at_sentence_marks():
    text = "第一句话讲安装步骤。第二句话讲启动服务！第三句话问问题吗？第四句；最后一句。"
    spans = split_sentences(text)
    sentences = [text[s:e] for s, e, _ in spans]
    assert sentences[0] == "第一句话讲安装步骤。" and sentences[1] == "第二句话讲启动服务！"
    assert all(s.endswith(("。", "！", "？", "；")) for s in sentences)


def test_chinese_chunks_end_at_sentence_boundaries():
    text = "".join(f"这是第{i}个句子，用来测试中文分块是否在句号处断开。" for i in range(60))
    doc = Document([Section(text, ["测试"])], title="中文")
    chunks = chunk_document(doc, "zh.txt", count_chars, max_tokens=100, overlap=20)
    assert len(chunks) > 5
    for c in chunks:
        assert count_chars([c.text])[0] <= 100
        assert c.text.endswith("。"), c.text[-10:]


def test_offsets_point_at_the_text_and_keep_metadata():
    doc = Document([Section("Intro paragraph.\n\nSecond one here.", ["A"], page=1),
                    Section("Page two text. More.", ["A", "B"], page=2)], title="T")
    full = document_text(doc)
    chunks = chunk_document(doc, "x.pdf", count_chars, max_tokens=20, overlap=0)
    for c in chunks:
        assert full[c.start:c.end] == c.text
    assert {c.page for c in chunks} == {1, 2}
    assert chunks[-1].heading == "A > B" and chunks[-1].source == "x.pdf"
    assert chunks[0].embed_text.startswith("T / A\n")


def test_single_line_megabyte_is_chunked_within_budget():
    text = "word " * 400_000  # 2 MB, no sentence or paragraph boundary at all
    doc = Document([Section(text)])
    chunks = chunk_document(doc, "big.txt", count_chars, max_tokens=200, overlap=0)
    assert len(chunks) > 1000
    assert max(count_chars([c.text])[0] for c in chunks) <= 200


def test_overlap_carries_last_sentences():
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    chunks = chunk_document(Document([Section(text)]), "o.txt", count_chars, max_tokens=80, overlap=25)
    assert len(chunks) > 2
    first_tail = chunks[0].text.split(". ")[-1]
    assert first_tail.rstrip(".") in chunks[1].text


def test_paragraph_boundary_preferred():
    paras = ["Alpha " * 30 + ".", "Beta " * 30 + ".", "Gamma " * 30 + "."]
    chunks = chunk_document(Document([Section("\n\n".join(paras))]), "p.md", count_chars,
                            max_tokens=400, overlap=0)
    assert all(c.text.count("Alpha") in (0, 30) for c in chunks)


def test_two_megabyte_line_with_the_real_tokenizer(embedder):
    text = "report " * 300_000  # 2.1 MB, one line
    chunks = chunk_document(Document([Section(text)]), "big.txt", embedder.count_tokens_batch,
                            max_tokens=200, overlap=20)
    assert max(embedder.count_tokens_batch([c.text for c in chunks])) <= 200
    assert "".join(c.text.replace(" ", "") for c in chunks).count("report") >= 300_000


def test_a_section_just_over_budget_splits_evenly_not_into_a_stub():
    # 22 sentences of 12 tokens (264) under a 200-token budget: filling greedily would give 192 + 72;
    # the section's last sentences must keep the company of the ones before them.
    text = " ".join(f"Fact {i:02d} holds." for i in range(22))
    chunks = chunk_document(Document([Section(text)]), "s.txt", count_chars, max_tokens=200, overlap=0)
    sizes = [count_chars([c.text])[0] for c in chunks]
    assert len(chunks) == 2 and max(sizes) <= 200
    assert min(sizes) >= 100, sizes


def test_a_section_that_fits_stays_one_chunk():
    text = " ".join(f"Fact {i:02d} holds." for i in range(15))
    chunks = chunk_document(Document([Section(text)]), "s.txt", count_chars, max_tokens=200, overlap=20)
    assert len(chunks) == 1
