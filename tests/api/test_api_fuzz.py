"""Schemathesis, the OpenAPI fuzzer, against a real daemon with auth on: every check,
every phase, bounded in examples, not time, so that a loaded machine runs the same
cases. It must find nothing: no server error, no undeclared status or content type, no
schema-valid request refused, no invalid one accepted, no method answered that a route
does not take, no route open without a key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.measure.driver import LIST_PAGE
from appliance.security import ApiKeys
from tests.daemon import Daemon

MAX_EXAMPLES = 50
SEED = 20261201  # the same cases every run
TIMEOUT_S = 600  # a hung run, not a slow one


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


def _schemathesis(daemon, cwd, *options):
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli, "schemathesis is installed with the test extras (pip install -e '.[test]')"
    run = subprocess.run(
        [cli, "run", f"http://127.0.0.1:{daemon.port}/openapi.json", "--checks", "all",
         "-H", f"X-API-Key: {daemon.key}", "--seed", str(SEED), "--workers", "1",
         "--no-color", *options],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
             "PYTHONPATH": str(Path(__file__).parents[2])})
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert "Failures:" not in run.stdout, run.stdout[-3000:]
    warnings = re.findall(r"^\s*⚠️ (.+)$", run.stdout, re.MULTILINE)
    assert all(w.startswith("Missing test data") for w in warnings), warnings


def test_schemathesis_finds_nothing(daemon, tmp_path):
    # bounded by examples, not by the clock: a busy machine runs the same cases, slower
    _schemathesis(daemon, tmp_path, "--phases", "examples,coverage,fuzzing",
                  "--max-examples", str(MAX_EXAMPLES))
    # the stateful phase follows the schema's links from a new document to the routes
    # that take its id, and no links of its own inference: one to DELETE would have the
    # deleted documents answer 404 everywhere
    (tmp_path / "schemathesis.toml").write_text(
        '[phases.stateful.inference]\nalgorithms = ["location-headers"]\n')
    _schemathesis(daemon, tmp_path, "--phases", "stateful",
                  "--max-examples", str(MAX_EXAMPLES))
    # every route a link leads to was reached with the id of a document the daemon holds
    # and answered past the door (the random phases only ever guess ids that do not
    # exist: their "missing test data" warning is about those guesses)
    assert _linked_routes(daemon) <= _routes_reached(daemon.log_path.read_text(),
                                                     _document_ids(daemon))


def _linked_routes(daemon) -> set[tuple[str, str]]:
    """(method, path pattern) of each route a link of the schema leads to."""
    schema = daemon.client.get("/openapi.json").json()
    routes = {op["operationId"]: (method.upper(), path)
              for path, ops in schema["paths"].items() for method, op in ops.items()}
    linked = {routes[link["operationId"]] for ops in schema["paths"].values()
              for op in ops.values() for response in op.get("responses", {}).values()
              for link in response.get("links", {}).values()}
    assert linked, "the schema declares links"
    return linked


def _document_ids(daemon) -> set[str]:
    ids, offset = set(), 0
    while True:
        page = daemon.client.get("/api/v1/documents",
                                 params={"limit": LIST_PAGE, "offset": offset}).json()
        ids |= {doc["id"] for doc in page["documents"]}
        offset += LIST_PAGE
        if offset >= page["total"]:
            return ids


def _routes_reached(log: str, document_ids: set[str]) -> set[tuple[str, str]]:
    """(method, path pattern) of each request in the access log on one of
    ``document_ids`` that got past the key and rate checks (401, 403, 429)."""
    reached = set()
    for method, path, status in re.findall(r'"([A-Z]+) (/api/v1/documents/\S+) HTTP/1\.1" (\d+)',
                                           log):
        doc_id, _, rest = path.split("?")[0].removeprefix("/api/v1/documents/").partition("/")
        if doc_id in document_ids and status not in {"401", "403", "429"}:
            reached.add((method, "/api/v1/documents/{document_id}" + (f"/{rest}" if rest else "")))
    return reached
