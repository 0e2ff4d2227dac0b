"""Retrieval on the shipped sample corpus: recall@5 >= 0.8 in English and in Chinese."""


from knowledge.eval.evaluate import evaluate, item_lang, load_qa, normalise
from knowledge.index.access import EVERYTHING

from .conftest import ROOT


def test_sample_qa_recall(retriever):
    result = evaluate(retriever, load_qa(ROOT / "knowledge" / "data" / "sample" / "qa.jsonl"))
    assert result["n"] >= 20
    assert result["by_lang"]["en"]["recall@5"] >= 0.8, result
    assert result["by_lang"]["zh"]["recall@5"] >= 0.8, result


def test_hits_carry_citation_fields(retriever):
    hits = retriever.search("How do I back up the appliance?", k=3, scope=EVERYTHING)
    top = hits[0]
    assert top.source == "en/administration.html" and "Backups" in top.heading
    assert top.score > 0 and -1 <= top.similarity <= 1 and top.end > top.start


def test_path_prefix_filter(retriever):
    hits = retriever.search("备份数据", k=5, path_prefix="zh", scope=EVERYTHING)
    assert hits and all(h.source.startswith("zh/") for h in hits)


def test_unrelated_question_has_low_similarity(retriever):
    hits = retriever.search("What is the boiling point of tungsten on Mars?", k=3, scope=EVERYTHING)
    related = retriever.search("How do I back up the appliance?", k=1, scope=EVERYTHING)
    assert max(h.similarity for h in hits) < related[0].similarity


def test_a_qa_item_counts_under_its_label_first():
    """`eval answers` and the peer benchmark group by this: a labelled item keeps its label even
    when its question reads in the other language."""
    assert item_lang({"question": "默认端口是多少？"}) == "zh"
    assert item_lang({"question": "Which port?"}) == "en"
    assert item_lang({"question": "Which port is 默认?", "lang": "zh"}) == "zh"


def test_expected_strings_match_across_typographic_and_pdf_forms():
    """One copy of a manual prints ”server”, another "server"; a PDF writes "ﬁle" with a ligature."""
    answer = normalise("tjener, which is Norwegian and means ”server”. Edit the conﬁguration ﬁle.")
    assert normalise('which is Norwegian and means "server"') in answer
    assert normalise("the configuration file") in answer
    assert normalise("means 'server'") not in answer  # a different quote is still a different string
