"""config.toml loading: the shipped default, typos, bad values, file selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import DEFAULT_CONFIG, load_settings, settings_from_dict
from appliance.errors import ConfigError


def test_shipped_default_loads_and_matches_the_code_defaults(tmp_path):
    shipped = load_settings(DEFAULT_CONFIG)
    code = settings_from_dict({}, base_dir=DEFAULT_CONFIG.parent)
    code.source = shipped.source
    assert shipped == code
    assert shipped.server.host == "127.0.0.1"


@pytest.mark.parametrize("raw, message", [
    ({"workers": {"cout": 2}}, "unknown key 'workers.cout'; did you mean 'workers.count'"),
    ({"sever": {"port": 1}}, "unknown key 'sever'; did you mean 'server'"),
    ({"workers": {"count": "two"}}, "'workers.count' = 'two' must be of type int"),
    ({"workers": {"count": 0}}, "'workers.count' = 0 is out of range"),
    ({"engine": {"name": "gpu"}}, "'engine.name' = 'gpu' is not allowed; use one of"),
    ({"watch": [{"path": "/in", "engine": "gpu"}]},
     "'watch[0].engine' = 'gpu' is not allowed; use one of '', 'llama', 'openai', 'classic'"),
    ({"watch": [{"path": "/in", "disposition": "keep", "password": "pass\0word"}]},
     "watch[0].password holds a NUL character, which no PDF's password can; remove it"),
    ({"engine": {"parallel": 0}}, "'engine.parallel' = 0 is not allowed; use 'auto' or a "
                                  "whole number between 1 and 64"),
    ({"engine": {"parallel": 65}}, "'engine.parallel' = 65 is not allowed"),
    ({"engine": {"parallel": "many"}}, "'engine.parallel' = 'many' is not allowed; use 'auto'"),
    ({"engine": {"parallel": True}}, "'engine.parallel' = True is not allowed"),
    ({"server": "x"}, "'server' must be a [server] table"),
    ({"auth": {"allow_from": ["10.0.0.0/33"]}},
     "auth.allow_from[0] = '10.0.0.0/33' is not an address or network"),
    ({"server": {"trusted_proxies": ["127.0.0.1", "nginx"]}},
     "server.trusted_proxies[1] = 'nginx' is not an address or network; write e.g."),
    ({"paths": {"data_dir": ""}}, "'paths.data_dir' must be a non-empty path"),
    ({"review": {"second_opinion_languages": "eng --tessdata-dir /tmp"}},
     "review.second_opinion_languages = 'eng --tessdata-dir /tmp' is not a list of Tesseract "
     "languages; write e.g. \"eng\""),
    ({"di": {"languages": ["zh-Hans", "zh-Hant"]}},
     "di.languages = ['zh-Hans', 'zh-Hant'] names one language, and zh-Hans and zh-Hant are "
     "one, Chinese; list at least two"),
    ({"di": {"languages": ["zh", "en"]}}, "'di.languages' = ['zh', 'en'] must be a non-empty "
                                          "list of 'zh-Hans', 'zh-Hant'"),
])
def test_bad_keys_and_values_name_the_key_and_the_fix(raw, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        settings_from_dict(raw, base_dir=Path("/tmp"))


def test_relative_paths_resolve_against_the_config_file(tmp_path):
    (tmp_path / "c.toml").write_text('[paths]\ndata_dir = "d"\noutput_dir = "/abs/out"\n')
    settings = load_settings(tmp_path / "c.toml")
    assert settings.paths.data_dir == tmp_path / "d"
    assert settings.paths.output_dir == Path("/abs/out")


def test_env_variable_selects_the_file(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text("[server]\nport = 9999\n")
    monkeypatch.setenv("APPLIANCE_CONFIG", str(tmp_path / "c.toml"))
    assert load_settings().server.port == 9999
    assert load_settings(DEFAULT_CONFIG).server.port == 8480  # --config wins


def test_missing_file_and_broken_toml_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[server\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(tmp_path / "bad.toml")


def test_engine_names_and_parallel_that_load():
    def engine(**values):
        return settings_from_dict({"engine": values}, base_dir=Path("/tmp")).engine

    assert (engine().name, engine().parallel) == ("auto", "auto")
    for name in ("auto", "llama", "classic"):
        assert engine(name=name).name == name
    for parallel in (1, 8, 64, "auto"):
        assert engine(parallel=parallel).parallel == parallel


def test_the_engine_names_the_configuration_allows_are_the_registrys():
    """The configuration checks engine names from a module that imports nothing (so
    that it imports nothing above it); that list is the registry's, in its order."""
    from appliance.engines import registry
    from appliance.engines.names import ENGINE_NAMES

    assert tuple(registry.ENGINES) == ENGINE_NAMES == registry.names()
