"""Schemathesis, the OpenAPI fuzzer, against a real daemon with auth on: every check,
every phase, bounded in examples and time. It must find nothing: no server error, no
undeclared status or content type, no schema-valid request refused, no invalid one
accepted, no method answered that a route does not take, no route open without a key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.security import ApiKeys
from tests.daemon import Daemon

MAX_EXAMPLES = 25
STATEFUL_EXAMPLES = 50  # scenarios enough to follow each link from a new document
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
    # the stateful phase follows the schema's links from a new document to the routes
    # that take its id (enough scenarios to follow each), and no links of its own
    # inference: one to DELETE would have the deleted documents answer 404 everywhere
    (tmp_path / "schemathesis.toml").write_text(
        '[phases.stateful.inference]\nalgorithms = ["location-headers"]\n'
        f'[phases.stateful.generation]\nmax-examples = {STATEFUL_EXAMPLES}\n')
    run = subprocess.run(
        [cli, "run", f"http://127.0.0.1:{daemon.port}/openapi.json", "--checks", "all",
         "-H", f"X-API-Key: {daemon.key}", "--max-examples", str(MAX_EXAMPLES),
         "--max-time", str(MAX_TIME_S), "--seed", str(SEED), "--workers", "1",
         "--no-color"],
        capture_output=True, text=True, timeout=MAX_TIME_S + 120, cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
             "PYTHONPATH": str(Path(__file__).parents[2])})
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert "Failures:" not in run.stdout, run.stdout[-3000:]
    # every route that takes a document's id was reached with a real one (the random
    # phases only ever guess ids that do not exist: their "missing test data" warning
    # is about those guesses)
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected / (\d+) total", run.stdout)
    assert links and links[1] == links[3] != "0", run.stdout[-3000:]
    warnings = re.findall(r"^\s*⚠️ (.+)$", run.stdout, re.MULTILINE)
    assert all(w.startswith("Missing test data") for w in warnings), warnings
