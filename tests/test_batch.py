"""Batch extraction on the real engine: every line follows the JSON schema (grammar-constrained),
an interrupted run resumes without redoing finished items, and requests run as background work."""

import json
import threading

import jsonschema
import pytest

from appliance.batch import BatchError, Template, done_ids, run_batch, select_items
from appliance.engine.sequence import SamplingParams
from knowledge.index.access import EVERYTHING
from knowledge.ingest.folder import ingest

from .engine_helpers import make_engine
from .kb_helpers import open_kb

SCHEMA = {"type": "object", "properties": {"topic": {"type": "string", "maxLength": 40},
                                           "mentions_a_number": {"type": "boolean"}},
          "required": ["topic", "mentions_a_number"]}
TEMPLATE = Template(instruction="You extract facts from company documents. Reply with JSON only.",
                    item="Section {heading} of {source}:\n\n{text}\n\nWhat is it about, and does it give a number?",
                    max_tokens=80)  # room for the longest string the schema allows


@pytest.fixture(scope="module")
def engine(chat_model_path):
    eng = make_engine(chat_model_path)
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def items(tmp_path_factory, embedder, sample_docs):
    kb = open_kb(tmp_path_factory.mktemp("batch-kb"), embedder)
    ingest(kb, sample_docs)
    chosen = select_items(kb.db, kb.cfg.name, TEMPLATE, ["en/getting-started.md", "en/security-policy.pdf"],
                          scope=EVERYTHING)
    kb.close()
    return chosen


def test_items_follow_the_schema_and_an_interrupted_run_resumes(engine, items, tmp_path):
    assert len(items) >= 4 and {i.source for i in items} == {"en/getting-started.md", "en/security-policy.pdf"}
    out, stop = tmp_path / "out.jsonl", threading.Event()

    def interrupt_after_two(summary):
        if summary.ok + summary.failed >= 2:
            stop.set()  # what Ctrl-C does: nothing new starts, what is in flight is written
    first = run_batch(engine, TEMPLATE, items, out, SCHEMA, window=1, progress=interrupt_after_two, stop=stop)
    assert first.ok + first.failed == 2 and len(done_ids(out)) == 2
    second = run_batch(engine, TEMPLATE, items, out, SCHEMA, window=3)
    assert second.skipped == 2 and second.ok + second.failed == len(items) - 2
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == sorted(i.id for i in items)  # each item once
    for line in lines:  # the grammar makes every answer valid JSON for the schema
        assert line["ok"], line
        jsonschema.validate(line["output"], SCHEMA)
    assert second.prefix_hit_rate > 0  # the fixed instruction is served from the prefix cache


def test_background_requests_are_marked_and_a_bad_schema_or_template_is_refused(engine, tmp_path):
    with pytest.raises(BatchError, match="invalid JSON schema"):
        run_batch(engine, TEMPLATE, [], tmp_path / "x.jsonl", {"type": "no-such-type"})
    bad = tmp_path / "t.toml"
    bad.write_text('instructions = "typo"\n')
    with pytest.raises(BatchError, match="needs `instruction`"):
        Template.load(bad)
    with pytest.raises(ValueError, match="priority"):
        SamplingParams(priority=5)
    with pytest.raises(ValueError, match="grammar"):
        engine.submit([{"role": "user", "content": "hi"}], SamplingParams(grammar="root ::= ( unclosed"))
