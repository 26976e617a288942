"""Finding documents on a real SQLite file: full-text search kept in step with what is
accepted, filters that combine, sorting and paging, and the API over them (retry and
delete included)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from appliance.api import create_app
from appliance.daemon import Appliance
from appliance.store import Database, queries, reviews, transitions
from appliance.store.models import Document, FieldSet, Lane, Outcome, PageStatus
from appliance.store.search import DocumentQuery, find_documents, fts_query
from tests.conftest import make_settings
from tests.fixtures.results import page_done


def submit(db, name: str, pages: int = 1, *, created: float, tags=(), source="api",
           doc_type="generic", folder=None) -> Document:
    doc = Document(name=name, sha256=name.ljust(64, "0")[:64], kind="png", size_bytes=10,
                   source=source, lane=Lane.BATCH, doc_type=doc_type, tags=list(tags),
                   watch_folder=folder, created_at=created)
    return transitions.submit_document(db, doc, pages)


def read_next(db, text: str, *, review: bool = False, engine: str = "classic"):
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.complete_page(db, claim, page_done(text, engine=engine), review=review)
    return claim


@pytest.fixture
def store(tmp_path):
    db = Database(tmp_path / "s.db")
    yield db
    db.close()


def ids(found) -> list[str]:
    return [view.doc.name for view in found.documents]


def test_a_word_on_one_page_finds_its_document_and_page_with_a_marked_snippet(store):
    submit(store, "letters.pdf", 3, created=1)
    for text in ("Dear Sir, thank you", "The quarterly invoice is attached", "Regards"):
        read_next(store, text)
    submit(store, "other.pdf", created=2)
    read_next(store, "Nothing to see")

    found = find_documents(store, DocumentQuery(q="quarterly"))
    assert found.total == 1 and ids(found) == ["letters.pdf"]
    hit = found.hits[found.documents[0].doc.id]
    assert hit.page_index == 1
    snippet, spans = hit.marked()
    assert snippet == "The quarterly invoice is attached"
    assert [snippet[a:b] for a, b in spans] == ["quarterly"]
    # words match by their stem; every word must be there; FTS syntax is only text
    assert ids(find_documents(store, DocumentQuery(q="quarterly invoices"))) == ["letters.pdf"]
    assert find_documents(store, DocumentQuery(q="quarterly nothing")).total == 0
    assert ids(find_documents(store, DocumentQuery(q='"see)'))) == ["other.pdf"]
    assert find_documents(store, DocumentQuery(q='NEAR("see" OR *')).total == 0
    assert fts_query("a\"b OR c*") == '"a" "b" "OR" "c"'
    # a name matches too, and ranks before text
    assert ids(find_documents(store, DocumentQuery(q="other", sort="relevance"))) == ["other.pdf"]


def test_a_page_waiting_for_review_is_found_as_not_reviewed_and_a_correction_replaces_it(
        store):
    doc = submit(store, "doubtful.png", created=1)
    claim = read_next(store, "Totel 1O.00", review=True)
    found = find_documents(store, DocumentQuery(q="Totel"))  # the machine's text, marked
    assert ids(found) == ["doubtful.png"] and not found.hits[doc.id].reviewed
    page_id = reviews.claim_review(store, "ann", lock_s=60)
    assert page_id == claim.page_id
    reviews.skip(store, page_id, "ann")  # still waiting: still found
    assert not find_documents(store, DocumentQuery(q="Totel")).hits[doc.id].reviewed
    page_id = reviews.claim_review(store, "ann", lock_s=60)
    reviews.correct(store, page_id, "ann", "Total 10.00", "Total 10.00")
    found = find_documents(store, DocumentQuery(q="Total"))
    assert found.total == 1 and found.hits[doc.id].reviewed
    assert find_documents(store, DocumentQuery(q="Totel")).total == 0
    # sent back to review, it stays found, as not reviewed again
    transitions.send_to_review(store, doc.id, "ann")
    assert not find_documents(store, DocumentQuery(q="Total")).hits[doc.id].reviewed
    # a rerun takes its text out until it is read again
    page_id = reviews.claim_review(store, "ann", lock_s=60)
    reviews.rerun(store, page_id, "ann", {"resolution_boost": 1})
    assert find_documents(store, DocumentQuery(q="Total")).total == 0


def test_any_cjk_substring_of_two_characters_or_more_is_found_and_latin_keeps_its_stems(
        store):
    submit(store, "canna.pdf", 2, created=1)
    read_next(store, "美人蕉的植株高度为1.5米, invoices attached")
    read_next(store, "植物 高 度")  # the same characters, not side by side
    submit(store, "other.pdf", created=2)
    read_next(store, "高度计")
    text = "美人蕉的植株高度为1.5米"
    for start in range(len("美人蕉的植株高度为")):
        for end in range(start + 2, len("美人蕉的植株高度为") + 1):
            found = find_documents(store, DocumentQuery(q=text[start:end]))
            assert "canna.pdf" in ids(found), text[start:end]
    found = find_documents(store, DocumentQuery(q="植株高度"))
    assert ids(found) == ["canna.pdf"]
    snippet, spans = next(iter(found.hits.values())).marked()
    assert [snippet[a:b] for a, b in spans] == ["植株高度"]
    assert ids(find_documents(store, DocumentQuery(q="高度"))) == ["other.pdf", "canna.pdf"]
    assert find_documents(store, DocumentQuery(q="株度")).total == 0  # not side by side
    assert find_documents(store, DocumentQuery(q="物高")).total == 0  # across a space
    # words and runs together must be on one page; the words by their stems
    assert ids(find_documents(store, DocumentQuery(q="invoice 株高"))) == ["canna.pdf"]
    assert find_documents(store, DocumentQuery(q="invoice 高度计")).total == 0
    assert ids(find_documents(store, DocumentQuery(q="植株高度", sort="relevance"))) == [
        "canna.pdf"]
    # one character finds where it stands, in a pair or at a run's end
    assert ids(find_documents(store, DocumentQuery(q="计"))) == ["other.pdf"]
    assert ids(find_documents(store, DocumentQuery(q="度"))) == ["other.pdf", "canna.pdf"]


def test_a_chinese_word_cut_by_a_line_break_is_found_and_marked(store):
    """A paragraph of Chinese wraps wherever its line is full, inside a word: the text
    keeps the page's lines, and the search still finds the word whole."""
    submit(store, "diary.png", created=1)
    read_next(store, "1970年9月15日\n几周以来我第一次独\n处，又拾起了我真正的生活。")
    found = find_documents(store, DocumentQuery(q="第一次独处"))
    assert ids(found) == ["diary.png"]
    snippet, spans = next(iter(found.hits.values())).marked()
    assert [snippet[a:b] for a, b in spans] == ["第一次独处"]
    # words apart on one line, or a paragraph apart, are not one word
    submit(store, "notes.png", created=2)
    read_next(store, "植物 高\n\n度")
    assert find_documents(store, DocumentQuery(q="高度")).total == 0


def test_filters_combine_and_sorting_and_paging_reach_every_document(store):
    for i in range(12):
        submit(store, f"doc{i:02}.png", created=100 + i, tags=["even"] if i % 2 == 0 else [],
               source="watch" if i < 4 else "api", folder="scans" if i < 4 else None,
               doc_type="invoice" if i % 3 == 0 else "generic")
    for i in range(10):  # two stay queued
        read_next(store, f"page of document {i}", engine="classic" if i < 6 else "llama")
    with store.write() as session:
        session.add(FieldSet(document_id=queries.list_documents(store, 1)[0].doc.id,
                             doc_type="invoice", fields=[], reasons=["missing_field: gross"]))

    everything = find_documents(store, DocumentQuery(limit=5))
    assert everything.total == 12 and ids(everything) == [f"doc{i:02}.png" for i in (11, 10, 9, 8, 7)]
    oldest = find_documents(store, DocumentQuery(limit=5, offset=10))
    assert ids(oldest) == ["doc01.png", "doc00.png"]
    assert ids(find_documents(store, DocumentQuery(sort="name", descending=False, limit=2))) \
        == ["doc00.png", "doc01.png"]

    queued = find_documents(store, DocumentQuery(status=("queued",)))
    assert sorted(ids(queued)) == ["doc10.png", "doc11.png"]
    assert all(view.status == "queued" for view in queued.documents)
    combined = find_documents(store, DocumentQuery(status=("done",), tag="even", source="watch",
                                                   folder="scans", doc_type="invoice"))
    assert ids(combined) == ["doc00.png"]
    assert sorted(ids(find_documents(store, DocumentQuery(engine="llama")))) == \
        ["doc06.png", "doc07.png", "doc08.png", "doc09.png"]
    assert find_documents(store, DocumentQuery(since=104, until=106)).total == 2
    assert ids(find_documents(store, DocumentQuery(fields_invalid=True))) == ["doc11.png"]
    by_status = find_documents(store, DocumentQuery(sort="status", descending=False))
    assert [v.status for v in by_status.documents][:10] == ["done"] * 10
    # the counts the triggers keep are the pages' own
    for view in everything.documents + oldest.documents:
        counted = queries.get_document(store, view.doc.id)
        assert {s: getattr(view.doc, f"pages_{s}") for s in PageStatus} == \
            {s: counted.page_counts[s] for s in PageStatus}
        assert view.status == counted.status


def test_retry_and_delete_through_the_api_are_audited(tmp_path):
    settings = make_settings(tmp_path)
    appliance = Appliance(settings)
    client = TestClient(create_app(appliance))
    db = appliance.db
    try:
        doc = submit(db, "scan.png", 2, created=1)
        claim = transitions.claim_next_page(db, "w1", lease_s=60)
        busy = client.delete(f"/api/v1/documents/{doc.id}")  # a page is being read
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "document_busy"
        transitions.complete_page(db, claim, page_done("first page"))
        claim = transitions.claim_next_page(db, "w1", lease_s=60)
        transitions.fail_attempt(db, claim, Outcome.ERROR, "engine_error", "boom",
                                 retryable=False, max_attempts=1)
        assert client.get(f"/api/v1/documents/{doc.id}").json()["status"] == "partial"

        retried = client.post(f"/api/v1/documents/{doc.id}/retry")
        assert retried.status_code == 200 and retried.json()["retried"] == 1
        assert retried.json()["status"] == "processing"
        assert client.post("/api/v1/documents/nope/retry").status_code == 404

        sent = client.post(f"/api/v1/documents/{doc.id}/review")  # page 1 back to review
        assert sent.status_code == 200 and sent.json()["sent"] == 1
        hit = client.get("/api/v1/documents", params={"q": "first"}).json()["documents"][0]["hit"]
        assert hit["reviewed"] is False  # found by the machine's text, as not reviewed
        page_id = reviews.claim_review(db, "ann", lock_s=60)
        assert queries.page_result(db, queries.get_document(db, doc.id).pages[0].result_id
                                   ).reasons[-1] == "sent_to_review: by api"
        reviews.approve(db, page_id, "ann")

        listed = client.get("/api/v1/documents", params={"q": "first"}).json()
        assert listed["total"] == 1 and listed["documents"][0]["hit"] == {
            "page": 1, "snippet": "first page", "spans": [[0, 5]], "reviewed": True}
        assert client.get("/api/v1/documents", params={"status": ["done", "failed"]}
                          ).json()["total"] == 0

        assert client.delete(f"/api/v1/documents/{doc.id}").status_code == 204
        assert client.get(f"/api/v1/documents/{doc.id}").status_code == 404
        assert client.get("/api/v1/documents", params={"q": "first"}).json()["total"] == 0
        assert client.delete(f"/api/v1/documents/{doc.id}").status_code == 404
        kinds = [e.kind for e in queries.document_events(db, doc.id)]
        assert {"retried", "sent_to_review", "review_approve"} <= set(kinds)
        assert kinds[-1] == "deleted"
    finally:
        appliance.db.close()


def test_the_search_bench_finds_what_its_generated_store_holds(tmp_path, capsys):
    from appliance.cli import main

    assert main(["bench", "--search", "120", "--report", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())["search"]
    assert (report["documents"], report["pages"]) == (120, 600)
    requests = report["requests"]
    assert requests["newest 50"]["total"] == 120 and requests["newest 50"]["shown"] == 50
    assert requests["oldest 50 (last page)"]["shown"] == 50
    assert requests["search a word on one page"]["total"] == 1
    assert requests["search by name prefix"]["total"] == 1
    assert 0 < requests["status review"]["total"] < 120
    assert "| search a word on one page |" in capsys.readouterr().out


def test_the_cjk_search_bench_finds_every_substring_by_its_pairs(tmp_path, capsys):
    from appliance.cli import main

    assert main(["bench", "--search-cjk", "200", "--report", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())["search_cjk"]
    assert report["pages"] == 200
    rows = report["by_length"]
    assert all(row["pairs_precision"] == row["pairs_recall"] == 1.0 for row in rows.values())
    assert rows["2"]["words_recall"] < 0.5 and rows["2"]["trigrams_recall"] == 0.0
    assert rows["3"]["trigrams_recall"] == 1.0
    assert all(report["index_mb"][index] > 0 for index in ("pagetext", "pagegrams"))
    assert "| 2 |" in capsys.readouterr().out
