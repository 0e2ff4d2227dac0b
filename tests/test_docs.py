"""Docs that match the code: every setting is in the README, and CI runs the README's command."""

import re

from appliance.config import ChatSettings, EngineSettings, KnowledgeSettings, QuantizeSettings, ServerSettings, Settings

from .conftest import ROOT


def test_every_setting_documented():
    readme = (ROOT / "README.md").read_text()
    sections = ("engine", "knowledge", "chat", "quantize", "server")
    names = [n for n, f in Settings.model_fields.items() if not f.exclude and n not in sections]
    names += [f"engine.{n}" for n in EngineSettings.model_fields if n not in ("type_k", "type_v")]
    names += ["engine.type_k"]
    names += [f"knowledge.{n}" for n in KnowledgeSettings.model_fields]
    names += [f"chat.{n}" for n in ChatSettings.model_fields]
    names += [f"quantize.{n}" for n in QuantizeSettings.model_fields]
    names += [f"server.{n}" for n in ServerSettings.model_fields]
    missing = [n for n in names if f"`{n}`" not in readme]
    assert not missing, missing


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"## Tests\n\n```\n(.+?)\n```", readme).group(1).strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci.splitlines()
