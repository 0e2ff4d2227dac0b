"""`appliance eval loaders`: what the loaders keep against an independent reading (issue 41)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from appliance.cli import app
from knowledge.eval.fidelity import fold, folder_fidelity

PAGE = ("<html><body><nav><ul><li><a href='a'>Installing the appliance server</a></li></ul></nav>"
        "<p>The server listens on port eight thousand by default.</p>"
        "<div aria-hidden='true'><p>This paragraph is shown but marked hidden from screen readers.</p></div>"
        "<div class='note'><h3 class='title'>Note</h3><p>Back up the data directory before every upgrade.</p></div>"
        "</body></html>")


def test_a_lost_block_is_named_and_navigation_is_counted_apart(tmp_path):
    (tmp_path / "page.html").write_text(PAGE)
    (tmp_path / "notes.md").write_text("# Notes\n\nThe **guest** wifi password changes every Monday morning.\n")
    result = folder_fidelity(tmp_path)
    page = next(r for r in result["rows"] if r["source"] == "page.html")
    assert (page["content"], page["lost"], page["navigation"], page["navigation_dropped"]) == (3, 1, 1, 1)
    assert page["lost_blocks"] == [{"element": "p", "sentences": 1,
                                    "first_words": "This paragraph is shown but marked hidden from screen readers."}]
    md = next(r for r in result["rows"] if r["source"] == "notes.md")
    assert md["lost"] == 0 and md["content"] == 1  # rendered Markdown (no ** markers) against our Markdown loader
    assert result["lost"] == 1 and result["lost_share"] == round(1 / 4, 4)


def test_a_file_our_loader_skips_loses_everything(tmp_path):
    (tmp_path / "empty-shell.html").write_text("<html><body><nav><a href='x'>Home</a></nav></body></html>")
    (tmp_path / "ok.txt").write_text("Every laptop must use full disk encryption at all times.\n")
    rows = {r["source"]: r for r in folder_fidelity(tmp_path)["rows"]}
    assert rows["empty-shell.html"]["status"].startswith("skipped by our loader: only navigation")
    assert rows["ok.txt"]["lost"] == 0 and rows["ok.txt"]["content"] == 1


def test_fold_ignores_case_spacing_punctuation_and_compatibility_forms():
    assert fold("The ﬁle  “x-y”,\nok") == fold("the file x y ok") == "thefilexyok"


def test_cli_table_and_json(tmp_path):
    (tmp_path / "page.html").write_text(PAGE)
    runner = CliRunner()
    shown = runner.invoke(app, ["eval", "loaders", str(tmp_path)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "1 of 3 content sentences lost" in shown.output
    assert "navigation dropped" in shown.output
    as_json = runner.invoke(app, ["eval", "loaders", str(tmp_path), "--json"])
    assert json.loads(as_json.output.strip().splitlines()[-1])["rows"][0]["lost"] == 1
    missing = runner.invoke(app, ["eval", "loaders", str(tmp_path / "nosuch")])
    assert missing.exit_code == 1 and "no such folder" in missing.output
