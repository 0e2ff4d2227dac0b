"""Retrieval over a suite of corpora: a small cut of the outside install-guide corpus, run as a
team would (`appliance eval retrieval --suite`), plus the suite's pure logic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from appliance.cli import app
from knowledge.errors import KnowledgeError
from knowledge.eval.suite import Corpus, check_labels, load_suite, summarise

from .conftest import ROOT

CUT = ROOT / "tests" / "data" / "outside-cut"
runner = CliRunner()


def _suite(work: Path, *extra: str) -> dict:
    result = runner.invoke(app, ["eval", "retrieval", "--suite", str(CUT / "suite.toml"), "--work", str(work),
                                 "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("suite")
    with pytest.MonkeyPatch.context() as mp:  # a data directory of its own, as `data_dir` gives a test
        mp.setenv("APPLIANCE_DATA_DIR", str(work / "data"))
        mp.delenv("APPLIANCE_CONFIG", raising=False)
        mp.chdir(work)
        yield work, _suite(work, "--out", str(work / "figures.json"))


def test_the_suite_scores_ours_the_peer_and_the_gate_per_corpus_and_language(first_run):
    work, report = first_run
    res = report["corpora"]["install-guide-cut"]
    assert res["ingest"]["skipped"] == 3  # empty, NUL bytes, a fake DOCX: reported, not fatal
    for side in ("ours", "ours_dense", "peer"):
        assert set(res[side]["by_lang"]) == {"en", "zh"}
        assert res[side]["by_lang"]["en"]["n"] == 8 and res[side]["by_lang"]["zh"]["n"] == 8
    # Seven pages per language: the right page is easy to find; a broken pipeline scores far lower.
    assert res["ours"]["by_lang"]["en"]["recall@5"] >= 0.75, res["ours"]
    assert res["ours"]["by_lang"]["zh"]["recall@5"] >= 0.7, res["ours"]
    assert set(res["gate"]) == {"en", "zh"}
    assert sum(g["n_unanswerable"] for g in res["gate"].values()) == 9
    # One corpus: its figures are the minimum and the mean.
    assert report["ours"]["en"]["recall@5"]["min"] == res["ours"]["by_lang"]["en"]["recall@5"]
    assert report["ours"]["en"]["recall@5"]["min_corpus"] == "install-guide-cut"
    assert json.loads((work / "figures.json").read_text())["corpora"].keys() == report["corpora"].keys()


def test_a_second_run_reuses_each_corpus_index(first_run, data_dir):
    work, report = first_run
    again = _suite(work, "--no-peer")
    res = again["corpora"]["install-guide-cut"]
    assert res["ingest"]["new_chunks"] == 0 and "peer" not in res
    assert res["ours"] == report["corpora"]["install-guide-cut"]["ours"]


def test_a_label_no_source_can_meet_is_refused():
    corpus = Corpus("cut", CUT / "install-guide", CUT / "install-guide.jsonl")
    good = {"question": "q", "answer_contains": ["780MB"], "source": ["en/ch02s05.html"]}
    wrong_page = {"question": "q2", "answer_contains": ["780MB"], "source": ["en/ch08s05.html"]}
    missing = {"question": "q3", "answer_contains": ["780MB"], "source": ["en/nowhere.html"]}
    problems = check_labels(corpus, [good, wrong_page, missing, {"question": "x", "answerable": False}])
    assert len(problems) == 2 and "'q2'" in problems[0] and "'q3'" in problems[1]


def test_the_minimum_names_the_weakest_corpus():
    def res(r5: float) -> dict:
        m = {"recall@1": r5 / 2, "recall@5": r5, "recall@10": r5, "mrr": r5 / 2}
        return {"ours": {"by_lang": {"en": m}}}

    out = summarise({"a": res(0.9), "b": res(0.6), "c": res(0.75)})["en"]["recall@5"]
    assert out == {"min": 0.6, "min_corpus": "b", "mean": 0.75, "corpora": 3}


def test_a_suite_whose_corpora_are_missing_says_how_to_build_them(tmp_path):
    (tmp_path / "s.toml").write_text('[[corpus]]\nname = "x"\nfolder = "nowhere"\nqa = "q.jsonl"\n')
    with pytest.raises(KnowledgeError, match="make_outside_corpora.sh"):
        load_suite(tmp_path / "s.toml", tmp_path)
    (tmp_path / "bad.toml").write_text("[[corpus]]\nname = 1\n")
    with pytest.raises(KnowledgeError, match="not a suite file"):
        load_suite(tmp_path / "bad.toml", tmp_path)


def test_a_suite_with_the_wrong_folder_lists_its_unmeetable_labels(tmp_path, data_dir):
    """Every label unmet means the folder is not the one the sources start from: the error says so
    and lists the questions, not only its first line."""
    suite = tmp_path / "s.toml"
    suite.write_text(f'[[corpus]]\nname = "cut"\nfolder = "{CUT / "install-guide" / "en"}"\n'
                     f'qa = "{CUT / "install-guide.jsonl"}"\n')
    result = runner.invoke(app, ["eval", "retrieval", "--suite", str(suite), "--work", str(tmp_path / "w"),
                                 "--no-peer"])
    assert result.exit_code == 1
    first = json.loads((CUT / "install-guide.jsonl").read_text().splitlines()[0])["question"]
    assert "labels cannot be met" in result.output and "the folder the `source` paths start from" in result.output
    assert first in result.output and "Traceback" not in result.output
