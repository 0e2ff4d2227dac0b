from pathlib import Path

import pytest

from appliance.config import NOT_SETTINGS, Settings, default_config_text, load_settings, write_default_config
from appliance.errors import ConfigError


def test_defaults_without_file(data_dir):
    s = load_settings(environ={})
    assert s.host == "127.0.0.1" and s.port == 8000 and s.offline is True
    assert s.engine.n_ctx == 4096 and s.engine.type_k == "f16"


def test_file_then_env_override(tmp_path):
    cfg = tmp_path / "a.toml"
    cfg.write_text('port = 9000\ndata_dir = "d"\n[engine]\nn_ctx = 2048\nn_seq_max = 4\n')
    s = load_settings(cfg, environ={"APPLIANCE_ENGINE__N_CTX": "1024", "APPLIANCE_PORT": "9001"})
    assert s.port == 9001
    assert s.engine.n_ctx == 1024 and s.engine.n_seq_max == 4
    # relative paths resolve against the config file's folder
    assert s.data_path == (tmp_path / "d").resolve()


def test_appliance_config_env_points_at_file(tmp_path):
    cfg = tmp_path / "other.toml"
    cfg.write_text("port = 8123\n")
    s = load_settings(environ={"APPLIANCE_CONFIG": str(cfg)})
    assert s.port == 8123 and s.config_path == cfg.resolve()


def test_env_list_values(tmp_path):
    s = load_settings(environ={"APPLIANCE_OFFLINE_ALLOW_HOSTS": '["10.0.0.5", "proxy"]',
                               "APPLIANCE_OFFLINE": "false"})
    assert s.offline_allow_hosts == ["10.0.0.5", "proxy"] and s.offline is False


@pytest.mark.parametrize("env,field", [
    ({"APPLIANCE_PORT": "seventy"}, "port"),
    ({"APPLIANCE_ENGINE__N_CTX": "12"}, "engine.n_ctx"),
    ({"APPLIANCE_ENGINE__TYPE_K": "q3"}, "engine.type_k"),
    ({"APPLIANCE_ENGINE__NO_SUCH": "1"}, "engine.no_such"),
])
def test_invalid_values_name_the_field(env, field):
    with pytest.raises(ConfigError) as e:
        load_settings(environ=env)
    assert field in str(e.value)


@pytest.mark.parametrize("old,new", [("min_similarity", "min_relevance_en"), ("min_overlap", "min_relevance_zh")])
def test_the_gates_old_keys_say_what_replaced_them(tmp_path, old, new):
    path = tmp_path / "appliance.toml"
    path.write_text(f"[chat]\n{old} = 0.3\n")
    with pytest.raises(ConfigError, match=f"chat.{old} was replaced by chat.{new}"):
        load_settings(path, environ={})


def test_bad_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("port = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml", environ={})


def test_default_config_roundtrips_and_never_overwrites(tmp_path):
    path = tmp_path / "appliance.toml"
    assert write_default_config(path) is True
    text = path.read_text()
    assert "[engine]" in text and "# " in text
    assert load_settings(path, environ={}).model_dump() == Settings().model_dump()
    path.write_text("port = 1234\n")
    assert write_default_config(path) is False
    assert path.read_text() == "port = 1234\n"
    assert default_config_text().count("=") > 10
    # Every value is commented out: defaults changed by an upgrade reach existing installs.
    assert not [line for line in default_config_text().splitlines() if line.strip() and not line.startswith(("#", "["))]
    uncommented = default_config_text().replace("# port = 8000", "port = 8100")
    path.write_text(uncommented)
    assert load_settings(path, environ={}).port == 8100
    assert Path(path).exists()


def test_documented_non_setting_variables_are_ignored():
    """APPLIANCE_LLAMA_LOG=1 and friends must not break every command as unknown settings."""
    environ = dict.fromkeys(NOT_SETTINGS, "1")
    s = load_settings(environ={**environ, "APPLIANCE_CONFIG": "", "APPLIANCE_PORT": "8100"})
    assert s.port == 8100


def test_every_appliance_variable_in_the_tree_is_a_setting_or_listed():
    """A new APPLIANCE_* variable read anywhere (code, scripts, docs) is either a setting or is
    added to NOT_SETTINGS; otherwise setting it would fail as an unknown field."""
    import re

    root = Path(__file__).resolve().parent.parent
    fields = {f"APPLIANCE_{n.upper()}" for n in Settings.model_fields}
    found: set[str] = set()
    for pattern in ("**/*.py", "**/*.sh", "**/*.md", ".ci/run"):
        for path in root.glob(pattern):
            if ".venv" in path.parts or not path.is_file():
                continue
            found.update(re.findall(r"\bAPPLIANCE_[A-Z0-9]+(?:_[A-Z0-9]+)*\b", path.read_text(errors="ignore")))
    unknown = sorted(v for v in found if "__" not in v and v not in fields and v not in NOT_SETTINGS)
    assert not unknown, f"add these to config.NOT_SETTINGS or make them settings: {unknown}"
