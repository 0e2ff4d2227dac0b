"""The CLI through typer's runner, in a temp data dir."""

import shutil

import pytest
from typer.testing import CliRunner

from appliance.cli import app
from appliance.cli.common import NoEngine
from appliance.errors import ApplianceError

runner = CliRunner()


def test_models_list(data_dir):
    result = runner.invoke(app, ["models", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "smollm2-135m" in result.output and "Q4_1" in result.output


def test_models_add_bad_file_is_one_line_error(data_dir, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"hello world, not a model at all")
    result = runner.invoke(app, ["models", "add", str(bad)])
    assert result.exit_code == 1
    assert "not a GGUF" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_models_add_and_verify(data_dir, chat_model_path, tmp_path):
    copy = tmp_path / "copy.gguf"
    shutil.copy(chat_model_path, copy)
    assert runner.invoke(app, ["models", "add", str(copy), "--name", "copy"]).exit_code == 0
    result = runner.invoke(app, ["models", "verify"])
    assert result.exit_code == 0 and "copy: ok" in result.output


def test_doctor(data_dir):
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for line in ("python", "llama.cpp build", "chat model", "embedding model", "offline guard", "ready"):
        assert line in result.output


def test_doctor_fails_on_missing_model(data_dir):
    result = runner.invoke(app, ["doctor", "--skip-embedding"],
                           env={"COLUMNS": "200", "APPLIANCE_CHAT_MODEL": "/nonexistent/x.gguf"})
    assert result.exit_code == 1 and "not ready" in result.output


def test_config_error_is_one_line(data_dir):
    result = runner.invoke(app, ["config", "show"], env={"APPLIANCE_PORT": "abc"})
    assert result.exit_code == 1 and "port" in result.output and "Traceback" not in result.output


def test_config_init_never_overwrites(tmp_path):
    target = tmp_path / "appliance.toml"
    target.write_text("port = 1\n")
    result = runner.invoke(app, ["config", "init", str(target)])
    assert result.exit_code == 0 and target.read_text() == "port = 1\n"


def test_ingest_then_ask_prints_answer_and_citations(data_dir, sample_docs):
    r = runner.invoke(app, ["ingest", str(sample_docs)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "10 new" in r.output, r.output
    r = runner.invoke(app, ["ingest", str(sample_docs)], env={"COLUMNS": "200"})
    assert "0 new, 0 changed, 10 unchanged, 0 removed" in r.output
    r = runner.invoke(app, ["ask", "What colour badge must visitors wear?", "--max-tokens", "16"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "[1] en/security-policy.pdf p.2" in r.output
    r = runner.invoke(app, ["search", "如何备份一体机的数据？", "--json", "-k", "2"])
    import json

    hits = json.loads(r.output)
    assert "zh/管理指南.html" in [h["source"] for h in hits]
    assert {"source", "page", "heading", "score", "text"} <= set(hits[0])


def test_reindex_rebuilds_every_indexed_folder(data_dir, tmp_path):
    """--reindex drops the whole index, so it reads every folder indexed so far, not only the one named."""
    a, b = tmp_path / "team-a", tmp_path / "team-b"
    for folder, text in ((a, "Team A deploys on Tuesdays."), (b, "Team B deploys on Fridays.")):
        folder.mkdir()
        (folder / "notes.md").write_text(f"# Deploys\n\n{text}\n")
        assert runner.invoke(app, ["ingest", str(folder)]).exit_code == 0
    result = runner.invoke(app, ["ingest", str(a), "--reindex"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "2 folder(s)" in result.output
    listed = runner.invoke(app, ["search", "which day does team B deploy", "--json"])
    assert "Fridays" in listed.output  # team B's folder was read again, not only the one named
    stats = runner.invoke(app, ["docs", "stats"])
    assert '"done": 2' in stats.output


def test_as_a_user_who_does_not_exist_says_how_to_add_one(data_dir):
    r = runner.invoke(app, ["search", "which port", "--as", "ghost"])
    assert r.exit_code != 0 and "no user 'ghost'" in r.output and "appliance users add ghost" in r.output


def test_ask_loads_the_chat_model_only_when_it_writes(data_dir, sample_docs):
    """A quoted answer (the embedded model's default style) needs no model; a written one loads it."""
    from appliance.cli.common import load_cli_settings
    from appliance.cli.serve import terminal_backend
    from appliance.server.services import chat_service, open_kb
    from knowledge.index.access import EVERYTHING
    from knowledge.retrieve.retriever import Retriever

    assert runner.invoke(app, ["ingest", str(sample_docs)]).exit_code == 0
    settings = load_cli_settings(None)
    kb = open_kb(settings)
    question = [{"role": "user", "content": "Which port does the server listen on by default?"}]
    try:
        with terminal_backend(settings) as engine:
            chat = chat_service(settings, engine, Retriever(kb))
            quoted = chat.prepare(question, scope=EVERYTHING)
            assert quoted.style == "quote" and "8000" in "".join(chat.stream(quoted, chat.answer_params("t")))
            assert not engine.loaded
            written = chat.prepare(question, scope=EVERYTHING, style="generate")
            assert "".join(chat.stream(written, chat.answer_params("t", max_tokens=8))).strip()
            assert engine.loaded
    finally:
        kb.close()


def test_summarize_and_ask_about_one_document(data_dir, sample_docs):
    import json

    assert runner.invoke(app, ["ingest", str(sample_docs)]).exit_code == 0
    r = runner.invoke(app, ["summarize", "security-policy.pdf", "--json", "--max-tokens", "16"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["document"] == "en/security-policy.pdf" and out["answer"]
    assert {p for c in out["citations"] for p in c["pages"]} <= {1, 2}
    r = runner.invoke(app, ["ask", "--doc", "en/getting-started.md", "Which port?", "--max-tokens", "16"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "[1] en/getting-started.md" in r.output, r.output
    r = runner.invoke(app, ["summarize", "no-such-file.md"])
    assert r.exit_code == 1 and "no indexed document" in r.output and "Traceback" not in r.output


def test_search_names_every_file_holding_a_copied_passage(data_dir, tmp_path):
    docs = tmp_path / "docs"
    (docs / "old [2019]").mkdir(parents=True)
    for name in ("notes.md", "old [2019]/notes.md"):
        (docs / name).write_text("# Deploys\n\nTeam C deploys on Wednesdays after the review.\n")
    ingested = runner.invoke(app, ["ingest", str(docs)], env={"COLUMNS": "200"})
    assert ingested.exit_code == 0 and "1 chunks already held by another file" in ingested.output, ingested.output
    shown = runner.invoke(app, ["search", "which day does team C deploy", "-k", "1"], env={"COLUMNS": "200"})
    assert "also in: old [2019]/notes.md" in shown.output, shown.output
    import json

    hit = json.loads(runner.invoke(app, ["search", "which day does team C deploy", "-k", "1", "--json"]).output)[0]
    assert {hit["source"], *hit["also_in"]} == {"notes.md", "old [2019]/notes.md"}


def test_terminal_sources_list_the_cited_excerpts_first(capsys):
    from appliance.cli.serve import print_sources

    cite = lambda n, source: {"n": n, "source": source, "page": None, "heading": ""}  # noqa: E731
    citations = [cite(1, "a.md"), cite(2, "b.md"), cite(3, "c.txt")]
    print_sources(citations, "The port is 8000. [2]")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["[2] b.md", "searched, not cited:", "[1] a.md", "[3] c.txt"]
    print_sources(citations, "An answer that cites nothing.")
    assert capsys.readouterr().out.splitlines() == ["[1] a.md", "[2] b.md", "[3] c.txt"]
    # two excerpts of one headingless file are told apart by their opening words
    twins = [{**cite(1, "t.txt"), "snippet": "Restart the service after\nthe power went out, then check"},
             {**cite(2, "t.txt"), "snippet": "Logs live in /var/log."}]
    print_sources(twins, "Nothing cited.")
    assert capsys.readouterr().out.splitlines() == [
        '[1] t.txt "Restart the service after the power went out,…"', '[2] t.txt "Logs live in /var/log."']


def test_the_model_less_stand_in_refuses_to_write_with_a_clear_error():
    with pytest.raises(ApplianceError, match="without the chat model"):
        NoEngine(info=None).submit([{"role": "user", "content": "hi"}], None)
