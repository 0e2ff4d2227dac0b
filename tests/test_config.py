from pathlib import Path

import pytest

from appliance.config import Settings, default_config_text, load_settings, write_default_config
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
    assert Path(path).exists()
