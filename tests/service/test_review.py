"""The review queue on a real SQLite file: locks, actions, audit, export refresh,
training records, reviewer accounts, and `appliance calibrate`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from sqlmodel import select

from appliance.config import dump_toml
from appliance.errors import InvalidRequest, LockLost, NotFound, PageBusy
from appliance.export import Exporter, document_json
from appliance.intake.spool import Spool
from appliance.page import Line, Recognition
from appliance.quality.confidence import score_page
from appliance.review import ReviewService, export_jsonl
from appliance.store import Database, queries, transitions
from appliance.store.models import Document, Lane, Page, PageStatus, ReviewAction
from appliance.store.reviews import ReviewFilter
from appliance.store.search import DocumentQuery, find_documents
from appliance.users import (
    LOCKOUT_S, MAX_FAILED_LOGINS, Users, hash_password, verify_password,
)
from tests.conftest import make_settings
from tests.fixtures.results import page_done

MACHINE_LINES = [{"text": "Total 1l8.50", "box": [10, 20, 200, 40], "score": 0.55},
                 {"text": "Invoice 7", "box": [10, 60, 200, 80], "score": 0.98}]


def in_review(db, *, pages=1, doc_type="invoice", folder=None, lane=Lane.BATCH,
              reasons=("low_confidence: 0.42 < 0.50",), confidence=0.42, name="inv.png",
              provenance=None, lines=MACHINE_LINES):
    """A document whose pages were read and routed to review."""
    doc = Document(name=name, sha256=os.urandom(32).hex(), kind="png", size_bytes=10,
                   source="api", lane=lane, doc_type=doc_type, watch_folder=folder)
    transitions.submit_document(db, doc, pages)
    for _ in range(pages):
        claim = transitions.claim_next_page(db, "w1", lease_s=60)
        reading = page_done("Invoice 7\nTotal 1l8.50", markdown="Invoice 7\n\nTotal 1l8.50",
                            confidence=confidence, lines=lines, provenance=provenance)
        transitions.complete_page(db, claim, reading, list(reasons), review=True)
    return doc


@pytest.fixture
def setup(tmp_path):
    # these documents are made in the store, without an original to make a PDF from
    settings = make_settings(tmp_path, review={"lock_minutes": 1.0},
                             output={"upload_formats": ["md", "json", "txt", "hocr", "alto"]})
    db = Database(settings.paths.data_dir / "appliance.db")
    spool = Spool(settings.paths.data_dir / "spool")
    exporter = Exporter(db, spool, lambda: settings)
    settled, woken = [], []

    def finish(document_id):
        settled.append(document_id)
        view = queries.get_document(db, document_id)
        if view.is_final and not view.doc.exported_at:
            exporter.export(document_id)

    service = ReviewService(settings, db, spool, on_settled=finish,
                            wake=lambda: woken.append(1))
    return service, db, settings, settled, woken


def test_routed_pages_wait_and_their_document_is_not_final(setup):
    service, db, *_ = setup
    doc = in_review(db)
    view = queries.get_document(db, doc.id)
    assert view.status == "review" and not view.is_final
    [item] = service.queue()
    assert item.reasons == ["low_confidence: 0.42 < 0.50"] and item.confidence == 0.42
    assert service.counts()["by_reason"] == {"low_confidence": 1}


def test_two_reviewers_never_get_the_same_page(setup):
    service, db, *_ = setup
    for i in range(6):
        in_review(db, name=f"d{i}.png")
    got: dict[str, int] = {}

    def claim(name):
        got[name] = service.next_page(name).item.page_id

    threads = [threading.Thread(target=claim, args=(f"r{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(got.values())) == 6
    assert service.next_page("r7") is None  # everything is held
    # a reviewer who opens "next" again gets the page they already hold
    assert service.next_page("r0").item.page_id == got["r0"]


def test_an_expired_lock_frees_its_page(setup):
    service, db, settings, *_ = setup
    in_review(db)
    before = time.time()
    page = service.next_page("anna")
    assert service.next_page("ben") is None
    with db.write() as session:  # the minute of review.lock_minutes passes
        held = session.get(Page, page.item.page_id)
        assert before + 60 <= held.review_lock_expires_at <= time.time() + 60
        held.review_lock_expires_at = time.time() - 0.01
    assert service.next_page("ben").item.page_id == page.item.page_id
    with pytest.raises(LockLost, match="expired or another reviewer"):
        service.approve("anna", page.item.page_id)


def test_a_page_routed_for_low_confidence_shows_the_lines_that_made_it_low(setup):
    """RapidOCR scores lines just under 1: lines at 0.95 make a page of about 0.5, routed
    for low confidence, and none of them was under 0.8 on RapidOCR's own scale, so the
    console said no line was read with low confidence. The lines are measured on the
    page's scale now."""
    service, db, *_ = setup
    lines = [{"text": "Total 118.50", "box": [10, 20, 200, 40], "score": 0.947},
             {"text": "Invoice 7", "box": [10, 60, 200, 80], "score": 0.995}]
    reading = Recognition(text="Invoice 7\nTotal 118.50", markdown="Invoice 7\n\nTotal 118.50",
                          lines=[Line.from_dict(line) for line in lines])
    confidence = score_page(reading, doc_type="invoice").score
    assert confidence < 0.5
    in_review(db, lines=lines, confidence=confidence,
              reasons=(f"low_confidence: {confidence:.3f} < 0.5",))
    page = service.next_page("anna")
    assert page.highlights == [{"text": "Total 118.50", "score": 0.47,
                                "box": [10, 20, 200, 40]}]


def test_approve_finishes_and_exports_the_document(setup):
    service, db, settings, settled, _ = setup
    doc = in_review(db)
    page = service.next_page("anna")
    # RapidOCR's 0.55 on the page confidence's scale (0.98 is 0.8 there: not highlighted)
    assert page.highlights == [{"text": "Total 1l8.50", "score": 0.0,
                                "box": [10, 20, 200, 40]}]
    service.approve("anna", page.item.page_id)
    assert settled == [doc.id]
    assert queries.get_document(db, doc.id).status == "done"
    assert (settings.paths.output_dir / "inv.md").read_text().count("Total 1l8.50") == 1
    with db.read() as session:
        [action] = session.exec(select(ReviewAction)).all()
    assert (action.reviewer, action.action) == ("anna", "approve")
    assert action.before_markdown == action.after_markdown == "Invoice 7\n\nTotal 1l8.50"


def test_a_correction_becomes_the_result_and_refreshes_the_export(setup):
    service, db, settings, *_ = setup
    doc = in_review(db, pages=2)
    first = service.next_page("anna")
    service.approve("anna", first.item.page_id)
    second = service.next_page("anna")
    assert [p["number"] for p in second.other_pages] == [1]  # the rest of the document
    service.correct("anna", second.item.page_id, "Invoice 7\n\nTotal 118.50")
    exported = (settings.paths.output_dir / "inv.md").read_text()
    assert "Total 118.50" in exported and "Total 1l8.50" in exported  # page 1 approved as is
    view = queries.get_document(db, doc.id)
    assert view.status == "done"
    results = queries.accepted_results(db, doc.id)
    assert results[1][1].engine == "human"
    assert results[1][1].text.split() == ["Invoice", "7", "Total", "118.50"]
    # a page that left review cannot be changed by a late action
    in_review(db, name="again.png")
    page = service.next_page("anna")
    service.approve("anna", page.item.page_id)
    with pytest.raises(LockLost, match="no longer waiting"):
        service.correct("anna", page.item.page_id, "too late")


def test_a_correction_that_mentions_a_table_keeps_every_word_after_it(setup):
    """"<table" in a sentence, or escaped, is text: the plain text, the export and the
    search keep what follows it (once, everything after it was cut off)."""
    service, db, settings, *_ = setup
    doc = in_review(db)
    page = service.next_page("anna")
    service.correct("anna", page.item.page_id, "Contract 77: see <table of contents\n\n"
                    "\\<table> marks a table\n\nSigned in Utrecht")
    [(_page, result)] = queries.accepted_results(db, doc.id)
    assert "Signed in Utrecht" in result.text and "marks a table" in result.text
    assert "Signed in Utrecht" in (settings.paths.output_dir / "inv.txt").read_text()
    found = find_documents(db, DocumentQuery(q="Utrecht"))
    assert [view.doc.id for view in found.documents] == [doc.id]


def test_reject_fails_the_page_with_the_reviewer_s_reason(setup):
    service, db, *_ = setup
    doc = in_review(db)
    page = service.next_page("anna")
    service.reject("anna", page.item.page_id, "coffee stain over the totals")
    view = queries.get_document(db, doc.id)
    assert view.status == "failed"
    assert view.pages[0].error_code == "rejected_unreadable"
    assert "coffee stain" in view.pages[0].error_message


def test_a_rejected_page_is_exported_like_a_failed_one_without_machine_text(setup):
    service, db, settings, *_ = setup
    doc = in_review(db, pages=2, name="two.pdf")
    first = service.next_page("anna")
    service.reject("anna", first.item.page_id, "coffee stain over the totals")
    second = service.next_page("anna")
    service.approve("anna", second.item.page_id)
    output = settings.paths.output_dir
    md, txt = (output / "two.md").read_text(), (output / "two.txt").read_text()
    rejected_md, approved_md = md.split("<!-- page 2 -->")
    assert "Invoice 7" not in rejected_md and "Invoice 7" in approved_md
    assert "rejected_unreadable" in rejected_md and "anna" in rejected_md
    assert "coffee stain" in rejected_md
    rejected_txt, approved_txt = txt.split("\f")
    assert "Invoice 7" not in rejected_txt and "coffee stain" in rejected_txt
    assert "Invoice 7" in approved_txt
    exported = json.loads((output / "two.json").read_text())
    assert exported["pages"][0]["text"] is None and exported["pages"][0]["markdown"] is None
    assert exported["pages"][1]["text"].startswith("Invoice 7")
    # the document says what failed, not only its pages
    error = exported["document"]["error"]
    assert error["code"] == "rejected_unreadable"
    assert "page 1 of 2 failed" in error["message"] and "coffee stain" in error["message"]
    assert document_json(queries.get_document(db, doc.id))["error"] == error


def test_rerun_queues_the_page_with_its_options(setup):
    service, db, _settings, _settled, woken = setup
    in_review(db)
    page = service.next_page("anna")
    with pytest.raises(InvalidRequest):
        service.rerun("anna", page.item.page_id)
    service.rerun("anna", page.item.page_id, engine="llama", higher_resolution=True)
    assert woken == [1]
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    assert claim.page_id == page.item.page_id and claim.attempt == 1
    assert claim.engine == "llama" and claim.options == {"engine": "llama",
                                                         "resolution_boost": 1}


def test_a_turn_is_counted_from_the_page_as_the_reviewer_sees_it(setup):
    """Issue 53: a page the orientation step turned 180 degrees on a guess comes back as
    it came when the reviewer turns it 180 again; turning once more adds to the
    reviewer's own turn. The option replaces the orientation the machine chose."""
    service, db, *_ = setup
    turned = {"preprocess": [{"step": "orientation", "ms": 1.0,
                              "detail": {"rotated_deg": 180}}]}
    in_review(db, provenance=turned)
    page = service.next_page("anna")
    with pytest.raises(InvalidRequest):
        service.rerun("anna", page.item.page_id, turn_deg=45)
    service.rerun("anna", page.item.page_id, turn_deg=180)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    assert claim.options == {"turn_deg": 0}
    transitions.complete_page(db, claim, page_done("Invoice 7"), ["low_confidence"],
                              review=True)
    page = service.next_page("anna")
    service.rerun("anna", page.item.page_id, turn_deg=90)
    assert transitions.claim_next_page(db, "w1", lease_s=60).options == {"turn_deg": 90}


def test_a_page_is_turned_from_outside_the_console(setup):
    """Issue 53: the document view and the REST API turn a page nobody holds: one
    waiting for review, one done (its document is exported and notified again once it
    is read) or one failed; never one queued or being read, nor one another reviewer
    has open. Each turn is audited under the person's name."""
    service, db, settings, _settled, woken = setup
    doc = in_review(db, pages=2)
    with pytest.raises(NotFound, match="has no page 3"):
        service.turn("ada", doc.id, 3, 90)
    with pytest.raises(InvalidRequest):
        service.turn("ada", doc.id, 1, 45)
    held = service.next_page("rita")
    assert held.item.page_number == 1
    with pytest.raises(LockLost, match="reviewer rita has page 1 open"):
        service.turn("ada", doc.id, 1, 90)
    service.turn("ada", doc.id, 2, 90)  # free, waiting for review
    assert woken == [1]
    with pytest.raises(PageBusy, match="page 2 is queued"):
        service.turn("ada", doc.id, 2, 90)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    assert claim.options == {"turn_deg": 90}
    transitions.complete_page(db, claim, page_done("Invoice 7"))
    service.approve("rita", held.item.page_id)
    view = queries.get_document(db, doc.id)
    assert view.status == "done" and view.doc.exported_at
    service.turn("ada", doc.id, 2, 180)  # done: read again, from the reviewer's 90
    view = queries.get_document(db, doc.id)
    assert view.status == "processing" and view.doc.exported_at is None
    assert view.doc.webhook_done_at is None
    assert transitions.claim_next_page(db, "w1", lease_s=60).options == {"turn_deg": 270}
    with db.read() as session:
        turns = session.exec(select(ReviewAction).where(ReviewAction.action == "rerun")).all()
    assert [(t.reviewer, t.note) for t in turns] == [("ada", "turn_deg=90"),
                                                     ("ada", "turn_deg=270")]


def test_skip_sends_the_page_to_the_back_of_the_queue(setup):
    service, db, *_ = setup
    in_review(db, name="a.png")
    in_review(db, name="b.png")
    first = service.next_page("anna")
    service.skip("anna", first.item.page_id)
    assert service.next_page("anna").item.document_name == "b.png"


def test_filters(setup):
    service, db, *_ = setup
    in_review(db, doc_type="receipt", folder="scans", name="r.png",
              reasons=("sampled: 0.61 in [0.50, 0.75) at 10 %",), confidence=0.61)
    in_review(db, doc_type="invoice", name="i.png")
    assert [i.document_name for i in service.queue(ReviewFilter(doc_type="receipt"))] == ["r.png"]
    assert [i.document_name for i in service.queue(ReviewFilter(folder="scans"))] == ["r.png"]
    assert [i.document_name for i in service.queue(ReviewFilter(reason="low_confidence"))] == [
        "i.png"]
    assert service.queue(ReviewFilter(min_age_s=3600)) == []
    assert service.next_page("anna", ReviewFilter(reason="sampled")).item.document_name == "r.png"


def test_moving_on_to_another_filter_frees_the_page_left(setup):
    service, db, *_ = setup
    in_review(db, doc_type="receipt", name="r.png")
    in_review(db, doc_type="invoice", name="i.png")
    receipt = service.next_page("anna", ReviewFilter(doc_type="receipt")).item.page_id
    # the same filter again: the page held comes back, and stays held
    assert service.next_page("anna", ReviewFilter(doc_type="receipt"),
                             leaving=receipt).item.page_id == receipt
    invoice = service.next_page("anna", ReviewFilter(doc_type="invoice"), leaving=receipt)
    assert invoice.item.document_name == "i.png"
    assert {i.document_name: i.locked_by for i in service.queue()} == {
        "r.png": None, "i.png": "anna"}
    assert service.counts()["locked"] == 1
    # a filter nothing matches: no page opens, and the one left is free too
    assert service.next_page("anna", ReviewFilter(doc_type="contract"),
                             leaving=invoice.item.page_id) is None
    assert service.counts()["locked"] == 0


def test_interactive_pages_come_first(setup):
    service, db, *_ = setup
    in_review(db, name="batch.png", lane=Lane.BATCH)
    in_review(db, name="desk.png", lane=Lane.INTERACTIVE)
    assert service.next_page("anna").item.document_name == "desk.png"


def test_jsonl_export_holds_machine_and_corrected_text(setup, tmp_path):
    service, db, settings, *_ = setup
    in_review(db, name="a.png")
    in_review(db, name="b.png")
    service.correct("anna", service.next_page("anna").item.page_id, "Invoice 7\n\nTotal 118.50")
    service.approve("anna", service.next_page("anna").item.page_id)
    out = tmp_path / "reviewed.jsonl"
    with out.open("w") as fh:
        assert export_jsonl(db, service.spool, settings, fh) == 2
    records = [json.loads(line) for line in out.read_text().splitlines()]
    corrected, approved = records
    assert corrected["machine_text"] == "Invoice 7\nTotal 1l8.50"
    assert corrected["corrected_text"].split() == ["Invoice", "7", "Total", "118.50"]
    assert corrected["action"] == "correct" and corrected["reviewer"] == "anna"
    assert corrected["reasons"] == ["low_confidence: 0.42 < 0.50"]
    assert approved["corrected_text"] == approved["machine_text"]
    assert {"page_image", "confidence", "doc_type", "document_id"} <= set(corrected)


def test_review_export_and_calibrate_commands(setup, tmp_path):
    service, db, settings, *_ = setup
    for i, (confidence, corrected) in enumerate([(0.9, False), (0.85, False), (0.3, True),
                                                 (0.2, True), (0.7, False)]):
        in_review(db, name=f"p{i}.png", confidence=confidence)
        page = service.next_page("anna")
        if corrected:
            service.correct("anna", page.item.page_id, "Invoice 7\n\nTotal 118.50 EUR paid")
        else:
            service.approve("anna", page.item.page_id)
    config = tmp_path / "c.toml"
    config.write_text(dump_toml({"paths": {"data_dir": str(settings.paths.data_dir),
                                           "output_dir": str(settings.paths.output_dir)}}))
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "calibrate", "--config",
                          str(config), "--report", str(tmp_path / "cal.json")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "cal.json").read_text())
    assert report["pages"] == 5 and report["bad_pages"] == 2 and report["auroc"] == 1.0
    assert "AUROC" in run.stdout and "suggested" in run.stdout
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "review", "export", "--config",
                          str(config), "--jsonl", "-"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 5


def test_reviewer_accounts(tmp_path):
    encoded = hash_password("correct horse battery")
    assert encoded.startswith("scrypt$") and "correct" not in encoded
    assert verify_password("correct horse battery", encoded)
    assert not verify_password("wrong", encoded) and not verify_password("x", "garbage")
    users = Users(tmp_path / "users.toml")
    assert users.authenticate("anna", "whatever") is None  # no file yet
    users.add("anna", "reviewer", "correct horse battery")
    assert (tmp_path / "users.toml").stat().st_mode & 0o777 == 0o600
    assert "correct horse" not in (tmp_path / "users.toml").read_text()
    other = Users(tmp_path / "users.toml")  # another process sees the new account
    assert other.authenticate("anna", "correct horse battery").role == "reviewer"
    assert other.authenticate("anna", "correct horse batterY") is None
    users.add("boss", "admin", "another long secret")
    assert other.authenticate("boss", "another long secret").role == "admin"
    for bad in (("Anna!", "reviewer", "long enough pw"), ("carl", "king", "long enough pw"),
                ("carl", "reviewer", "short")):
        with pytest.raises(InvalidRequest):
            users.add(*bad)


def test_failed_logins_lock_out_the_guessing_address_only(tmp_path, monkeypatch):
    users = Users(tmp_path / "users.toml")
    users.add("anna", "reviewer", "correct horse battery")
    for _ in range(MAX_FAILED_LOGINS):
        assert users.authenticate("anna", "guess", "10.0.0.66") is None
    # locked out from the guessing address, right password or not
    assert users.authenticate("anna", "correct horse battery", "10.0.0.66") is None
    # anna herself, from her own desk, still gets in
    assert users.authenticate("anna", "correct horse battery", "10.0.0.5").name == "anna"
    later = time.monotonic() + LOCKOUT_S + 1
    monkeypatch.setattr("appliance.users.time.monotonic", lambda: later)
    assert users.authenticate("anna", "correct horse battery", "10.0.0.66").name == "anna"


def test_users_command_adds_an_account(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(dump_toml({"review": {"users_file": "people.toml"}}))
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "users", "add", "dora",
                          "--role", "admin", "--password-stdin", "--config", str(config)],
                         input="a very good passphrase\n", capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert Users(tmp_path / "people.toml").authenticate("dora", "a very good passphrase")


def test_pages_in_review_have_status_review(setup):
    _service, db, *_ = setup
    doc = in_review(db)
    assert queries.get_document(db, doc.id).pages[0].status == PageStatus.REVIEW


def test_a_page_keeps_its_image_when_the_dpi_setting_changes(setup, tmp_path):
    service, db, settings, *_ = setup
    # read at 200 dpi, kept where the worker put it then
    doc = in_review(db, provenance={"page_image_dpi": 200})
    kept = service.spool.page_image_path(doc.sha256, 0, 200)
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"png")
    # the operator lowers raster.pdf_dpi and restarts
    lowered = make_settings(tmp_path, raster={"pdf_dpi": 150})
    after = ReviewService(lowered, db, service.spool, on_settled=lambda _id: None,
                          wake=lambda: None)
    assert after.open_page(after.next_page("anna").item.page_id).image_path == kept
    with (tmp_path / "reviewed.jsonl").open("w") as fh:
        after.approve("anna", after.next_page("anna").item.page_id)
        assert export_jsonl(db, service.spool, lowered, fh) == 1
    assert json.loads((tmp_path / "reviewed.jsonl").read_text())["page_image"] == str(kept)
