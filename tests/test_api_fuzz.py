"""Schemathesis, the OpenAPI fuzzer, against a real daemon with auth on: every check,
every phase, bounded in examples and time. It must find nothing: no server error, no
undeclared status or content type, no schema-valid request refused, no invalid one
accepted, no method answered that a route does not take, no route open without a key."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.security import ApiKeys
from tests.daemon import Daemon

MAX_EXAMPLES = 25
MAX_TIME_S = 75
SEED = 20261201  # the same cases every run


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    key = ApiKeys(tmp / "api-keys.toml").add("fuzzer", rate_per_minute=1_000_000)
    d = Daemon(tmp, auth={"api_keys_file": str(tmp / "api-keys.toml")},
               limits={"max_bytes": 2_000_000})
    d.client.headers["X-API-Key"] = key
    d.key = key
    with d.running():
        yield d


def test_schemathesis_finds_nothing(daemon, tmp_path):
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli, "schemathesis is installed with the test extras (pip install -e '.[test]')"
    run = subprocess.run(
        [cli, "run", f"http://127.0.0.1:{daemon.port}/openapi.json", "--checks", "all",
         "-H", f"X-API-Key: {daemon.key}", "--max-examples", str(MAX_EXAMPLES),
         "--max-time", str(MAX_TIME_S), "--seed", str(SEED), "--workers", "1",
         "--no-color"],
        capture_output=True, text=True, timeout=MAX_TIME_S + 120, cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
             "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert "No issues found" in run.stdout, run.stdout[-3000:]
