"""Turning a page through the REST API (issue 53 item 1): a real daemon on loopback, its
real HTTP client, a page scanned sideways read again upright, and each refusal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.daemon import Daemon, with_accounts
from tests.fixtures.documents import TURNED_ROWS, text_similarity, write_png, write_turned_pdf

PASSWORD = "correct horse battery"
LINES = ["Delivery note 4711", "Three boxes of printer paper", "Signed at the gate"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("turn-daemon")
    # the orientation vote off: the page is read as it came, sideways, until turned
    d = with_accounts(tmp, {"rita": "reviewer"}, PASSWORD, {"enabled": False},
                      preprocess={"orientation": False})
    with d.running():
        yield d


def sideways_png(path: Path) -> Path:
    """The page turned a quarter left, as a scan fed in sideways: a right turn makes it
    upright again."""
    write_png(path, LINES)
    with Image.open(path) as page:
        page.rotate(90, expand=True).save(path)
    return path


def turn(client: httpx.Client, document_id: str, number: int, degrees) -> httpx.Response:
    return client.post(f"/api/v1/documents/{document_id}/pages/{number}/turn",
                       json={"degrees": degrees})


def reading(daemon: Daemon, document_id: str) -> tuple[str, list[dict]]:
    """(the document's text, the turns its page was given before it was read: degrees
    counter-clockwise, and by whom)."""
    response = daemon.client.get(f"/api/v1/documents/{document_id}/result",
                                 params={"format": "json"})
    assert response.status_code == 200, response.text
    [page] = response.json()["pages"]
    steps = page["provenance"].get("preprocess") or []
    return page["text"], [(step["detail"]["rotated_deg"], step["detail"].get("by"))
                          for step in steps if step["step"] == "orientation"]


def test_a_page_scanned_sideways_is_turned_and_read_upright(daemon, tmp_path):
    doc = daemon.upload(sideways_png(tmp_path / "sideways.png"))
    daemon.wait_exported([doc["id"]])
    assert reading(daemon, doc["id"])[1] == []  # read as it came

    response = turn(daemon.client, doc["id"], 1, 90)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == doc["id"] and body["status"] in ("queued", "processing")
    assert body["exported_at"] is None  # its results are written again once it is read
    # read again, turned: before that, a second turn is refused
    busy = turn(daemon.client, doc["id"], 1, 90)
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "page_busy"
    daemon.wait_exported([doc["id"]])
    text, turns = reading(daemon, doc["id"])
    # a quarter right: recorded as the orientation step records its own (counter-clockwise)
    assert turns == [(270, "reviewer")]
    assert text_similarity(text, " ".join(LINES)) > 0.8
    with sqlite3.connect(f"file:{daemon.data_dir / 'appliance.db'}?mode=ro", uri=True) as db:
        actors = db.execute("SELECT actor FROM event WHERE document_id = ? AND kind = "
                            "'review_rerun'", (doc["id"],)).fetchall()
    assert actors == [("tests",)]  # the API key's name


def test_a_born_digital_page_turned_by_its_own_text_turns_again_at_a_reviewer_s_word(daemon,
                                                                                      tmp_path):
    """A page whose own text runs up it is read from that text, turned level (by
    ``pdf-text``); a reviewer's turn, which a page read from its text ignored before,
    turns it from there, as it does a scan: half a turn reads it upside down, another
    level again."""
    doc = daemon.upload(write_turned_pdf(tmp_path / "turned.pdf", 90))
    daemon.wait_exported([doc["id"]])
    text, turns = reading(daemon, doc["id"])
    assert (text.split("\n"), turns) == (TURNED_ROWS, [(270, "pdf-text")])
    for expected in ([(90, "reviewer")], [(270, "reviewer")]):
        assert turn(daemon.client, doc["id"], 1, 180).status_code == 200
        daemon.wait_exported([doc["id"]])
        text, turns = reading(daemon, doc["id"])
        assert turns == expected
    assert text.split("\n") == TURNED_ROWS


def test_a_turn_is_refused_without_a_key_for_a_bad_angle_and_for_no_such_page(daemon,
                                                                              tmp_path):
    doc = daemon.upload(write_png(tmp_path / "upright.png", LINES))
    daemon.wait_exported([doc["id"]])
    url = f"/api/v1/documents/{doc['id']}/pages/1/turn"
    with httpx.Client(base_url=str(daemon.client.base_url), timeout=30) as anonymous:
        assert anonymous.post(url, json={"degrees": 90}).status_code == 401
        wrong = anonymous.post(url, json={"degrees": 90}, headers={"X-API-Key": "ocr_wrong"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        # a reviewer's sign-in opens the web UI, not the API: that needs a key
        signed_in = anonymous.post("/login", data={"username": "rita", "password": PASSWORD})
        assert signed_in.status_code == 303 and anonymous.cookies.get("appliance-session")
        refused = anonymous.post(url, json={"degrees": 90})
        assert refused.status_code == 401, refused.text
    for degrees in (45, 0, 360, "right", None):
        bad = turn(daemon.client, doc["id"], 1, degrees)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    for document_id, number in ((doc["id"], 2), ("0" * 32, 1)):
        missing = turn(daemon.client, document_id, number, 90)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert turn(daemon.client, doc["id"], 0, 90).status_code == 400
    # nothing of it was read again
    assert daemon.document(doc["id"])["status"] == "done"
