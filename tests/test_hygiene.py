"""Chunk hygiene: repeats within a file are left out at ingest, one file cannot fill a result list,
and an exact copy of a document under another name is one hit citing both files."""

from __future__ import annotations

import random
import shutil

from knowledge.index.access import EVERYTHING
from knowledge.index.chunking import Chunk, dedupe_chunks
from knowledge.ingest.folder import ingest
from knowledge.loaders.html import load_html
from knowledge.retrieve.retriever import Retriever
from knowledge.text.nearcopy import same_passage

from .kb_helpers import open_kb


def _chunk(text: str, i: int) -> Chunk:
    return Chunk(text, "a.txt", i, 0, len(text))


def test_dedupe_drops_repeats_and_keyword_stuffing():
    words = "backup server restore archive network firewall kernel package".split()
    rng = random.Random(3)
    stuffed = [" ".join(rng.choice(words) for _ in range(120)) for _ in range(30)]
    normal = ["The visitor car park is on level minus two.", "Badges are red for visitors."]
    kept, dropped = dedupe_chunks([_chunk(t, i) for i, t in enumerate(normal + stuffed + normal)])
    assert [c.text for c in kept] == normal + stuffed[:1]
    assert dropped == 31


def test_docbook_div_para_paragraphs_are_kept(tmp_path):
    html = (b'<html><head><title>Guide</title></head><body><div class="navheader">Prev | Next</div>'
            b'<div class="section"><h2 class="title">Backups</h2>'
            b'<div class="para">Snapshots run <code>nightly</code> at 02:00.</div>'
            b'<div class="para">They are kept for <em>thirty</em> days.</div>'
            b'<div class="itemizedlist"><ul><li><div class="para">Restores need an admin.</div></li></ul></div>'
            b'</div></body></html>')
    doc = load_html(tmp_path / "g.html", html)
    text = "\n".join(s.text for s in doc.sections)
    for sentence in ("Snapshots run nightly at 02:00.", "They are kept for thirty days.", "Restores need an admin."):
        assert sentence in text
    assert "Prev" not in text and doc.sections[0].heading == ["Backups"]


def test_stuffed_file_cannot_fill_the_results_and_copies_cite_both(tmp_path, embedder, sample_docs):
    docs = tmp_path / "docs"
    shutil.copytree(sample_docs, docs)
    shutil.copy(docs / "en" / "administration.html", docs / "en" / "administration-copy.html")
    words = "backup server restore archive network firewall kernel package security badge".split()
    rng = random.Random(5)
    (docs / "stuffed.txt").write_text("\n\n".join(" ".join(rng.choice(words) for _ in range(150))
                                                  for _ in range(200)))
    kb = open_kb(tmp_path / "data", embedder)
    report = ingest(kb, docs)
    assert report.deduplicated >= 150  # the stuffed file collapsed at ingest
    retriever = Retriever(kb)
    for question in ("How do I back up the appliance?", "What colour badge must visitors wear?",
                     "Which firewall ports does the server need?"):
        hits = retriever.search(question, k=10, scope=EVERYTHING)
        assert sum(h.source == "stuffed.txt" for h in hits) <= kb.cfg.max_per_file
        assert len({h.text for h in hits}) == len(hits)  # no passage twice
    backup = retriever.search("How do I back up the appliance?", k=5, scope=EVERYTHING)
    top = next(h for h in backup if "administration" in h.source)
    assert {top.source, *top.also_in} == {"en/administration.html", "en/administration-copy.html"}


PASSAGE = ("Unstable is always called Sid. So if you change the third field of /etc/apt/sources.list to "
           "'sid', then you will be tracking unstable. Currently Debian unstable is kept in the archive "
           "for developers, and packages enter it before they migrate to testing after ten days.")


def test_format_noise_and_chunk_boundaries_make_one_passage():
    pdf = ("CHAPTER 3. CHOOSING A DEBIAN DISTRIBUTION\n" + PASSAGE.replace("'sid'", "\u2019sid\u2019")
           .replace("sources.list to", "sources.list\nto").replace(" for developers", " for devel-\nopers"))
    assert same_passage(PASSAGE, pdf)
    assert same_passage(PASSAGE, "The previous section ended here. " + PASSAGE[:160])
    zh = "Unstable 永远被称作 Sid。所以如果您将 /etc/apt/sources.list 的第三个字段改成“sid”，您就会跟踪不稳定版。"
    assert same_passage(zh, zh.replace("，", "，\n    "))


def test_a_differing_number_or_negation_keeps_two_passages():
    assert not same_passage(PASSAGE, PASSAGE.replace("ten days", "five days"))
    assert not same_passage(PASSAGE, PASSAGE.replace("ten days", "10 days"))
    assert not same_passage(PASSAGE, PASSAGE.replace("you will be tracking", "you will not be tracking"))
    assert not same_passage(PASSAGE, "Testing is the next stable release; it changes every day while "
                                     "packages migrate from unstable after their delay.")


def test_near_copies_in_two_formats_are_one_hit_and_versions_stay_apart(tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    policy = ("Laptops must be returned to IT within {n} days of leaving the company. The manager signs "
              "the return form, and IT wipes the disk before the laptop is issued again.")
    (docs / "manual.html").write_text(f"<html><body><h1>Sid</h1><p>{PASSAGE}</p></body></html>")
    (docs / "manual.txt").write_text("Sid\n\n" + PASSAGE.replace(". ", ".\n"))
    (docs / "policy-2023.txt").write_text(policy.format(n=30))
    (docs / "policy-2024.txt").write_text(policy.format(n=14))
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, docs)
    retriever = Retriever(kb)
    hits = retriever.search("Which codename is the unstable branch always called?", k=4, scope=EVERYTHING)
    sid = [h for h in hits if "manual" in h.source]
    assert len(sid) == 1 and {sid[0].source, *sid[0].also_in} == {"manual.html", "manual.txt"}
    hits = retriever.search("How many days do I have to return my laptop?", k=4, scope=EVERYTHING)
    assert {"policy-2023.txt", "policy-2024.txt"} <= {h.source for h in hits}


def test_a_replaced_word_keeps_two_passages():
    assert not same_passage(PASSAGE, PASSAGE.replace("for developers", "for maintainers"))
