"""Shared fixtures: real SQLite files and real settings in temp directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from appliance.config import Settings, settings_from_dict
from appliance.store import Database


def make_settings(tmp: Path, **sections) -> Settings:
    raw = {"paths": {"data_dir": str(tmp / "data"), "output_dir": str(tmp / "output")},
           "engine": {"name": "classic", "threads": 1},
           "review": {"enabled": False}}  # tests not about review want pages read to the end
    for section, values in sections.items():
        if isinstance(values, list):  # [[watch]] tables
            raw[section] = values
        else:
            raw.setdefault(section, {}).update(values)
    return settings_from_dict(raw, base_dir=tmp)


# Hypothesis profiles, for the stateful invariants test (tests/service/test_invariants.py),
# the only Hypothesis test: it runs its own bounded, fixed-seed settings unless
# `--hypothesis-profile=soak` selects this longer, randomly seeded run for release
# checks. Each example is a real appliance on real files: too_slow is expected.
hypothesis_settings.register_profile(
    "soak", max_examples=150, stateful_step_count=40, deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.too_slow], print_blob=True)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def db(tmp_path) -> Database:
    database = Database(tmp_path / "store.db")
    yield database
    database.close()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> tuple[Path, Path]:
    """The deterministic random-weight Gemma-3 vision pair (text GGUF, mmproj GGUF)."""
    from appliance.gguf.testmodel import write_test_model

    return write_test_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def aborting_model(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny pair that passes the pair's checks and aborts llama.cpp at its first decode."""
    from tests.fixtures.gguf_files import write_aborting_model

    return write_aborting_model(tmp_path_factory.mktemp("aborting-model"))


@pytest.fixture(scope="session")
def llama_cpp_server(tiny_model, tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server with the tiny model, shared by the
    tests that only read through it (a test that kills a server starts its own)."""
    from tests.openai_servers import tiny_server

    with tiny_server(*tiny_model, tmp_path_factory.mktemp("llama-cpp-server")) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for a module's browser tests (``tests/browser.py``)."""
    from tests.browser import launched_chromium  # Playwright, only where a test drives it

    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def patient_expect():
    """Two cores run the daemon, its OCR worker and Chromium: Playwright's ``expect``
    waits longer than its 5 s in the modules that ask (``usefixtures``)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    yield
    expect.set_options(timeout=5_000)  # Playwright's default, for the other modules
