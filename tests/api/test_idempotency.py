"""A retried upload never makes a second document: Idempotency-Key and on_duplicate=skip,
through the real API app on a real SQLite file (the kill -9 run is in test_crash.py)."""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

from appliance.api import create_app
from appliance.daemon import Appliance
from appliance.retention import purge
from appliance.store import queries, transitions
from appliance.store.models import Document
from tests.conftest import make_settings
from tests.fixtures.documents import write_png


@pytest.fixture
def api(tmp_path):
    """The API of an appliance whose workers never start: documents stay queued."""
    appliances = []

    def open_api():
        appliance = Appliance(make_settings(tmp_path))
        appliances.append(appliance)
        return TestClient(create_app(appliance)), appliance

    yield open_api
    for appliance in appliances:
        appliance.db.close()


def post(client, path, key=None, **form):
    headers = {"Idempotency-Key": key} if key else {}
    with path.open("rb") as fh:
        return client.post("/api/v1/documents", files={"file": (path.name, fh)}, data=form,
                           headers=headers)


def test_a_retry_with_the_same_key_answers_the_first_document(api, tmp_path):
    client, appliance = api()
    scan = write_png(tmp_path / "scan.png", ["Invoice 4711"])
    first = post(client, scan, key="upload-0030")
    assert first.status_code == 201
    again = post(client, scan, key="upload-0030")
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert len(queries.list_documents(appliance.db)) == 1
    # another key is another document, even for the same content
    assert post(client, scan, key="upload-0031").status_code == 201
    assert len(queries.list_documents(appliance.db)) == 2


def test_the_key_survives_a_restart(api, tmp_path):
    client, appliance = api()
    scan = write_png(tmp_path / "scan.png", ["Invoice 4711"])
    first = post(client, scan, key="k-restart").json()
    appliance.db.close()
    client, appliance = api()  # the daemon came back on the same data directory
    again = post(client, scan, key="k-restart")
    assert again.status_code == 200 and again.json()["id"] == first["id"]


def test_the_same_key_with_other_content_is_refused(api, tmp_path):
    client, appliance = api()
    post(client, write_png(tmp_path / "a.png", ["Invoice 4711"]), key="k1")
    other = post(client, write_png(tmp_path / "b.png", ["Invoice 4712"]), key="k1")
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert len(queries.list_documents(appliance.db)) == 1


def test_a_rejected_file_is_replayed_too(api, tmp_path):
    client, appliance = api()
    junk = tmp_path / "notes.pdf"
    junk.write_bytes(b"hello, I am not a PDF")
    first = post(client, junk, key="k-junk")
    assert first.status_code == 201 and first.json()["status"] == "failed"
    again = post(client, junk, key="k-junk")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]


def test_keys_are_checked_and_belong_to_one_client(api, tmp_path):
    client, appliance = api()
    scan = write_png(tmp_path / "scan.png", ["Invoice 4711"])
    bad = post(client, scan, key="a key with spaces")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    assert post(client, scan, key="x" * 256).status_code == 400
    first = transitions.submit_document(appliance.db, _doc(), 1, key=("scanner-1", "k"))
    # the same key from another API key is that client's own, new document
    second = transitions.submit_document(appliance.db, _doc(), 1, key=("scanner-2", "k"))
    assert first.id != second.id


def test_two_requests_racing_with_one_key_store_one_document(api):
    _client, appliance = api()
    first = transitions.submit_document(appliance.db, _doc(), 1, key=("", "race"))
    loser = _doc()
    assert transitions.submit_document(appliance.db, loser, 1, key=("", "race")).id == first.id
    assert queries.get_document(appliance.db, loser.id) is None  # nothing of it was stored


def test_keys_are_forgotten_after_the_retention_window(api, tmp_path):
    client, appliance = api()
    scan = write_png(tmp_path / "scan.png", ["Invoice 4711"])
    first = post(client, scan, key="k-old").json()
    settings = appliance.settings
    later = first["created_at"] + settings.retention.idempotency_hours * 3600 + 1
    assert purge(settings, appliance.db, appliance.spool, now=later)["idempotency_keys"] == 1
    assert post(client, scan, key="k-old").status_code == 201  # a new document now


def test_on_duplicate_skip_answers_the_document_already_read(api, tmp_path):
    client, appliance = api()
    scan = write_png(tmp_path / "scan.png", ["Invoice 4711"])
    first = post(client, scan).json()
    skipped = post(client, scan, on_duplicate="skip")
    assert skipped.status_code == 200 and skipped.json()["id"] == first["id"]
    assert skipped.headers["Duplicate-Of"] == first["id"]
    assert post(client, scan).status_code == 201  # without it, content may come again
    assert len(queries.list_documents(appliance.db)) == 2


def _doc() -> Document:
    return Document(name="d.png", sha256=os.urandom(32).hex(), kind="png", size_bytes=1,
                    source="api")
