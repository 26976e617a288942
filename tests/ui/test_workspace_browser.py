"""The documents workspace (the web UI's Documents and Document tabs) in a real headless
Chromium against a real daemon whose store holds a thousand generated documents
(``search_bench.generate_store``: ``scan-00000.pdf`` the oldest, ``unique_word(i, p)``
on page p of document i only) and a few real uploads.

Accounts are on, so the UI wants a login: "ada" is an administrator, "rita" a
reviewer. Chromium and the DOM conventions are those of test_browser.py.

With ``APPLIANCE_SCREENSHOTS=docs/screenshots`` the tests keep the README's
screenshots there.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import zipfile
from pathlib import Path

import pikepdf
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import text

from appliance.export import FORMATS, SUFFIXES
from appliance.measure.search_bench import generate_store, unique_word
from appliance.security import ApiKeys
from appliance.store import Database, transitions
from appliance.store.models import Document, Lane
from appliance.users import Users
from tests.browser import (
    ask_for_downloads, downloaded, last_upload, list_row, open_document, page_body,
    screenshot_on_failure, search_documents, show_filters, signed_in, upload_input,
)
from tests.daemon import Daemon
from tests.fixtures.documents import text_similarity, write_pdf
from tests.fixtures.results import page_done

PASSWORD = "correct horse battery"
GENERATED = 1000
READ_TIMEOUT_S = 180
REPORT_PAGES = [["Quarterly report", "Revenue grew by twelve percent"],
                ["Signed by the board", "Next meeting in March"]]
PDF_PASSWORD = "open sesame 7"
SCREENSHOTS = os.environ.get("APPLIANCE_SCREENSHOTS")


pytestmark = pytest.mark.usefixtures("patient_expect")


CANNA_TEXT = "美人蕉为多年生草本植物，植株高度一般为1.5米，花期很长"
DOUBTFUL_TEXT = "Quittung Nr. 4711, Betrag dankend erhalten"


def stored_document(db: Database, name: str, page_text: str, review: bool = False) -> str:
    """A one-page document read as ``page_text`` (and waiting for review), stored before
    the daemon starts; its id."""
    doc = Document(name=name, sha256=name.ljust(64, "0")[:64], kind="png", size_bytes=10,
                   source="upload", lane=Lane.INTERACTIVE)
    transitions.submit_document(db, doc, 1)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.complete_page(db, claim, page_done(page_text), review=review)
    return doc.id


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("workspace-daemon")
    users_file = tmp / "users.toml"
    Users(users_file).add("ada", "admin", PASSWORD)
    Users(users_file).add("rita", "reviewer", PASSWORD)
    keys_file = tmp / "api-keys.toml"
    key = ApiKeys(keys_file).add("tests")
    d = Daemon(tmp, review={"enabled": False, "users_file": str(users_file)},
               auth={"api_keys_file": str(keys_file)})
    d.client.headers["X-API-Key"] = key
    db = Database(d.data_dir / "appliance.db")
    try:
        generate_store(db, GENERATED)
        d.canna_id = stored_document(db, "canna.pdf", CANNA_TEXT)
        d.doubtful_id = stored_document(db, "doubtful.pdf", DOUBTFUL_TEXT, review=True)
        with db.write() as session:
            # as if exported long ago, and the queued pages given up on (their originals
            # are not there): the daemon finds nothing to do in them
            session.execute(text("UPDATE document SET exported_at = created_at + 60"))
            session.execute(text("UPDATE page SET status = 'failed', error_code = "
                                 "'engine_error' WHERE status = 'queued'"))
    finally:
        db.close()
    with d.running():
        report = d.upload(write_pdf(tmp / "report.pdf", REPORT_PAGES), doc_type="report",
                          tags="board")
        d.report_id = report["id"]
        d.wait_exported([report["id"]], timeout_s=READ_TIMEOUT_S)
        yield d


def events(daemon: Daemon, document_id: str) -> list[tuple[str, str]]:
    """The audit trail of a document, (kind, actor), read from the daemon's store."""
    with sqlite3.connect(f"file:{daemon.data_dir / 'appliance.db'}?mode=ro", uri=True) as db:
        return db.execute("SELECT kind, actor FROM event WHERE document_id = ? ORDER BY id",
                          (document_id,)).fetchall()


def api_documents(daemon: Daemon, **params) -> dict:
    response = daemon.client.get("/api/v1/documents", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def sign_in(browser: Browser, daemon: Daemon, name: str) -> Page:
    """A new browser context signed in at "/" as ``name``, its first list shown."""
    page = signed_in(browser, daemon, name, PASSWORD, {"width": 1400, "height": 1600})
    expect(upload_input(page)).to_be_attached()
    # the first list: a pager click before it has nothing to page (and the list, when it
    # comes, is the first page)
    expect(count_line(page)).to_contain_text(re.compile(r" of [\d,]+ documents?|No document"))
    return page


@pytest.fixture
def ada(browser, daemon, tmp_path):
    page = sign_in(browser, daemon, "ada")
    try:
        with screenshot_on_failure(page, tmp_path, daemon):
            yield page
    finally:
        page.context.close()


def count_line(page: Page):
    return page.locator("#documents-count")


def keep_screenshot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / name))


def choose(page: Page, label: str, option: str) -> None:
    """Pick ``option`` in the filter labelled ``label`` (a multiselect stays open)."""
    show_filters(page)
    page.get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    page.keyboard.press("Escape")


def test_search_finds_a_word_on_one_page_and_opens_the_document_there(ada, daemon):
    page = ada
    total = GENERATED + 3
    expect(count_line(page)).to_contain_text(f"1–50 of {total:,} documents")
    keep_screenshot(page, "documents-browser.png")
    # a page of document 123 that was read (a failed page, or one in review, has no text)
    word = next(unique_word(123, p) for p in (2, 3, 4, 1, 0)
                if api_documents(daemon, q=unique_word(123, p))["total"])
    search_documents(page, word)
    expect(count_line(page)).to_contain_text("1–1 of 1 document")
    row = list_row(page, "scan-00123.pdf")
    # the snippet: the matched word marked, the rest plain text
    number = int(word[-1]) + 1
    expect(row.locator(".doc-hit")).to_contain_text(f"page {number}:")
    expect(row.locator(".doc-hit mark")).to_have_text(word)
    keep_screenshot(page, "documents-search.png")

    open_document(page, "scan-00123.pdf")
    expect(page.locator("#document-page-facts")).to_contain_text(f"Page {number} of 5")
    expect(page_body(page)).to_contain_text(word)
    expect(page.locator("#document-history")).to_contain_text("intake")


def test_paging_reaches_the_oldest_document(ada, daemon):
    page = ada
    total = GENERATED + 3
    page.locator("#documents-next").click()
    expect(count_line(page)).to_contain_text(f"51–100 of {total:,}")
    page.locator("#documents-last").click()
    expect(count_line(page)).to_contain_text(f"1,001–{total:,} of {total:,}")
    expect(list_row(page, "scan-00000.pdf")).to_be_visible()
    page.locator("#documents-first").click()
    expect(count_line(page)).to_contain_text(f"1–50 of {total:,}")
    expect(list_row(page, "report.pdf")).to_be_visible()  # the newest


def test_filters_combine(ada, daemon):
    page = ada
    filters = {"status": "done", "doc_type": "invoice", "tag": "hr", "source": "api"}
    together = api_documents(daemon, **filters)["total"]
    alone = [api_documents(daemon, **{key: value})["total"] for key, value in filters.items()]
    assert 0 < together < min(alone)
    choose(page, "Status", "done")
    expect(count_line(page)).to_contain_text(f"of {alone[0]:,} documents")
    choose(page, "Type", "invoice")
    page.get_by_label("Tag", exact=True).fill("hr")
    page.get_by_label("Tag", exact=True).press("Enter")
    choose(page, "Source", "REST API")
    expect(count_line(page)).to_contain_text(f"of {together:,} documents")
    statuses = page.locator("#documents-list .doc-status").all_inner_texts()
    assert statuses and set(statuses) == {"done"}
    metas = page.locator("#documents-list .doc-meta").all_inner_texts()
    assert all(all(word in meta for word in ("invoice", "hr", "api")) for meta in metas), metas
    # one click clears them all, the tag too (issue 53 item 7)
    fold = page.locator("#documents-filters > button.label-wrap")
    expect(fold).to_contain_text("Filters (4 set)")
    page.locator("#filters-clear").click()
    expect(count_line(page)).to_contain_text(f"1–50 of {GENERATED + 3:,} documents")
    expect(page.get_by_label("Tag", exact=True)).to_have_value("")
    expect(fold).not_to_contain_text("set")
    # the engine filter offers the PDF text reader, a born-digital page's reader
    choose(page, "Engine", "pdf-text")
    expect(fold).to_contain_text("Filters (1 set)")
    page.locator("#filters-clear").click()
    expect(fold).not_to_contain_text("set")


def test_bulk_retry_and_delete_are_done_and_audited(ada, daemon):
    page = ada
    partial = api_documents(daemon, status="partial", limit=3)  # newest first
    failed = partial["documents"]
    assert len(failed) == 3
    names = [doc["name"] for doc in failed]
    choose(page, "Status", "partial")
    # the filtered list is there: a box is ticked in it, not in the list it replaces
    expect(count_line(page)).to_contain_text(f"of {partial['total']:,} documents")
    for name in names[:2]:
        list_row(page, name).get_by_role("checkbox").check()
    expect(page.locator("#documents-picked")).to_contain_text("2 documents ticked")
    rows = page.locator("#documents-list tbody tr")
    listed = [row.get_attribute("data-document") for row in rows.all()]
    page.locator("#bulk-retry").click()
    expect(page.locator("#documents-message")).to_contain_text(
        re.compile(r"Retry failed pages: 2 documents queued their failed pages again \(\d+ pages"))
    for doc in failed[:2]:
        assert ("retried", "ada") in events(daemon, doc["id"])
    # the retried documents leave the filter (for as long as their pages are read again),
    # but the rows stay where they were: the next click lands on the row seen there
    assert [row.get_attribute("data-document") for row in rows.all()] == listed

    list_row(page, names[2]).get_by_role("checkbox").check()
    expect(page.locator("#documents-picked")).to_contain_text(f"3 documents ticked: {names[0]}")
    for name in names[:2]:
        list_row(page, name).get_by_role("checkbox").uncheck()
    expect(page.locator("#documents-picked")).to_contain_text(f"1 document ticked: {names[2]}")
    # Delete asks first, naming the document; "No" keeps it
    page.locator("#bulk-delete").click()
    expect(page.locator("#bulk-confirm-question")).to_contain_text(
        f"Delete 1 document for good? {names[2]}. Its pages, outputs and key fields go; "
        "the audit trail keeps who deleted it.")
    page.locator("#bulk-confirm-no").click()
    expect(page.locator("#bulk-confirm")).to_be_hidden()
    assert daemon.client.get(f"/api/v1/documents/{failed[2]['id']}").status_code == 200
    page.locator("#bulk-delete").click()
    page.locator("#bulk-confirm-yes").click()
    expect(page.locator("#documents-message")).to_contain_text("Delete: 1 document deleted")
    # its row stays, struck through, with nothing to tick or open
    expect(list_row(page, names[2])).to_have_count(0)
    expect(page.locator("#documents-list tr.doc-deleted")).to_contain_text(names[2])
    assert daemon.client.get(f"/api/v1/documents/{failed[2]['id']}").status_code == 404
    assert ("deleted", "ada") in events(daemon, failed[2]["id"])
    assert [row.get_attribute("data-document") for row in rows.all()] == listed
    page.locator("#documents-refresh").click()
    expect(page.locator("#documents-list tr.doc-deleted")).to_have_count(0)


def test_a_new_query_starts_a_new_choice(ada, daemon):
    """A filter or a search lists other documents: nothing stays ticked, the box over
    the list neither, and its first click ticks every row again."""
    page = ada
    pick_all = page.locator("#documents-list input[data-pick-all]")
    ticked_rows = page.locator("#documents-list input[data-pick]:checked")
    picked = page.locator("#documents-picked")
    pick_all.click()
    expect(picked).to_contain_text("50 documents ticked")
    done = api_documents(daemon, status="done")["total"]
    choose(page, "Status", "done")
    expect(count_line(page)).to_contain_text(f"of {done:,} documents")
    expect(picked).to_have_text("No document ticked.")
    expect(ticked_rows).to_have_count(0)
    expect(pick_all).not_to_be_checked()
    pick_all.click()
    expect(pick_all).to_be_checked()
    expect(picked).to_contain_text("50 documents ticked")
    search_documents(page, "twelve percent")
    expect(count_line(page)).to_contain_text("1–1 of 1 document")
    expect(picked).to_have_text("No document ticked.")
    expect(ticked_rows).to_have_count(0)
    expect(pick_all).not_to_be_checked()


def test_the_document_view_shows_a_real_page_and_its_downloads(ada, daemon):
    page = ada
    search_documents(page, "twelve percent")
    expect(list_row(page, "report.pdf").locator(".doc-hit mark").first).to_have_text(
        re.compile("twelve", re.IGNORECASE))
    open_document(page, "report.pdf")
    expect(page.locator("#document-page-facts")).to_contain_text("Page 1 of 2")
    expect(page.locator("#document-page-facts")).to_contain_text("read by classic")
    expect(page.locator("#document-image img")).to_be_visible()
    thumbnails = page.locator("#document-thumbnails .thumbnail-item")
    expect(thumbnails).to_have_count(2)
    thumbnails.nth(1).click()
    expect(page.locator("#document-page-facts")).to_contain_text("Page 2 of 2")
    assert text_similarity(page_body(page).inner_text(), " ".join(REPORT_PAGES[1])) > 0.6
    ask_for_downloads(page)
    with page.expect_download() as download:
        page.get_by_role("button", name="Download text (.txt)").click()
    assert "twelve" in Path(download.value.path()).read_text().lower()
    keep_screenshot(page, "document-view.png")


def encrypted_pdf(path: Path, lines: list[str]) -> Path:
    plain = write_pdf(path.with_suffix(".plain.pdf"), [lines])
    with pikepdf.open(plain) as pdf:
        pdf.save(path, encryption=pikepdf.Encryption(owner="owner " + PDF_PASSWORD,
                                                     user=PDF_PASSWORD, R=6))
    return path


def test_an_encrypted_pdf_is_read_with_its_password_and_fails_without(ada, daemon, tmp_path):
    page = ada
    with_password = encrypted_pdf(tmp_path / "locked-with-password.pdf",
                                  ["Confidential salary list", "Handle with care"])
    without = encrypted_pdf(tmp_path / "locked-without-password.pdf",
                            ["Another locked file", "Nobody knows its password"])
    page.get_by_label("Password of an encrypted PDF", exact=False).fill(PDF_PASSWORD)
    upload_input(page).set_input_files([with_password])
    expect(last_upload(page).get_by_role("row").filter(has_text="locked-with-password.pdf")
           ).to_contain_text("accepted")
    expect(page.get_by_label("Password of an encrypted PDF", exact=False)).to_have_value("")
    upload_input(page).set_input_files([without])
    expect(last_upload(page).get_by_role("row").filter(has_text="locked-without-password.pdf")
           ).to_be_visible()

    found = {doc["name"]: doc for doc in api_documents(daemon, q="locked")["documents"]}
    read, refused = daemon.wait_final([found["locked-with-password.pdf"]["id"],
                                       found["locked-without-password.pdf"]["id"]],
                                      timeout_s=READ_TIMEOUT_S)
    assert read["status"] == "done", read
    assert refused["status"] == "failed" and refused["error"]["code"] == "encrypted_pdf"
    result = daemon.client.get(f"/api/v1/documents/{read['id']}/result", params={"format": "txt"})
    assert text_similarity(result.text, "Confidential salary list Handle with care") > 0.6
    assert PDF_PASSWORD not in daemon.log_path.read_text()  # never logged

    # the one that could not be read is deleted from its view, which asks first
    open_document(page, "locked-without-password.pdf")
    page.locator("#document-delete").click()
    expect(page.locator("#document-confirm-question")).to_contain_text(
        "Delete 1 document for good? locked-without-password.pdf")
    page.locator("#document-confirm-yes").click()
    expect(page.locator("#document-message")).to_contain_text("Delete: 1 document deleted")
    assert daemon.client.get(f"/api/v1/documents/{refused['id']}").status_code == 404


def test_send_to_review_from_the_list(ada, daemon):
    page = ada
    search_documents(page, "scan-00042.pdf")
    list_row(page, "scan-00042.pdf").get_by_role("checkbox").check()
    expect(page.locator("#documents-picked")).to_contain_text("1 document ticked")
    page.locator("#bulk-review").click()
    expect(page.locator("#documents-message")).to_contain_text(
        "Send to review: 1 document sent to review")
    doc = api_documents(daemon, q="scan-00042.pdf")["documents"][0]
    assert doc["status"] == "review"


def test_a_reviewer_is_not_offered_delete(browser, daemon, tmp_path):
    page = sign_in(browser, daemon, "rita")
    with screenshot_on_failure(page, tmp_path, daemon):
        expect(page.locator("#workspace-user")).to_contain_text("deleting is for administrators")
        expect(list_row(page, "report.pdf")).to_be_visible()
        expect(page.locator("#bulk-retry")).to_be_visible()
        expect(page.locator("#bulk-delete")).to_be_hidden()
        open_document(page, "report.pdf")
        expect(page.locator("#document-retry")).to_be_visible()
        expect(page.locator("#document-delete")).to_be_hidden()
    page.context.close()


def no_error_toast(page: Page) -> None:
    """(The daemon's log is not checked here: the generated documents' originals are not
    there, so the pages retried above fail with a traceback.)"""
    expect(page.locator(".toast-body.error")).to_have_count(0)


def test_the_ticked_documents_download_as_one_zip_of_their_outputs(ada, daemon):
    page = ada
    done = api_documents(daemon, status="done", limit=2)["documents"]  # newest first
    choose(page, "Status", "done")
    total = api_documents(daemon, status="done")["total"]
    expect(count_line(page)).to_contain_text(f"1–50 of {total:,}")
    for ticked, doc in enumerate(done, 1):
        list_row(page, doc["name"]).get_by_role("checkbox").check()
        expect(page.locator("#documents-picked")).to_contain_text(f"{ticked} document")
    expect(page.locator("#documents-picked")).to_contain_text("2 documents ticked")
    page.locator("#bulk-zip").click()
    expect(page.locator("#documents-message")).to_contain_text(
        "the outputs of 2 documents in one zip")
    with page.expect_download() as download:
        page.locator("#bulk-zip-file a").first.click()
    with zipfile.ZipFile(download.value.path()) as archive:
        names = archive.namelist()
        for doc in done:  # each document's folder holds its result, as the API has it
            stem = Path(doc["name"]).stem
            markdown = archive.read(f"{stem}-{doc['id'][:8]}/{stem}.md").decode()
            assert markdown == daemon.client.get(f"/api/v1/documents/{doc['id']}/result",
                                                 params={"format": "md"}).text
    assert {name.split("/")[0] for name in names} == {
        f"{Path(doc['name']).stem}-{doc['id'][:8]}" for doc in done}, names
    no_error_toast(page)


def test_sign_out_is_in_the_same_tab_and_every_other_tab_goes_to_the_sign_in_page(
        browser, daemon, tmp_path):
    page = sign_in(browser, daemon, "ada")
    other = page.context.new_page()
    with screenshot_on_failure(page, tmp_path, daemon):
        other.goto(f"http://127.0.0.1:{daemon.port}/", wait_until="domcontentloaded")
        expect(other.locator("#workspace-user")).to_contain_text("Signed in as ada")
        page.locator("#workspace-sign-out").click()
        expect(page).to_have_url(re.compile(r"/login"))
        expect(page.get_by_label("username")).to_be_visible()
        assert len(page.context.pages) == 2  # no tab was opened
        # the other tab's next call (its list refreshes every two seconds) answers 401
        expect(other).to_have_url(re.compile(r"/login\?next=%2F$"))
        expect(other.get_by_label("username")).to_be_visible()
        # and signing in there goes back to the documents
        other.get_by_label("username").fill("ada")
        other.get_by_label("password").fill(PASSWORD)
        other.get_by_role("button", name="Login").click()
        expect(other.locator("#workspace-user")).to_contain_text("Signed in as ada")
    page.context.close()


def test_a_signed_in_user_reads_the_api_docs(browser, daemon, tmp_path):
    page = sign_in(browser, daemon, "rita")  # a reviewer: no API key, no admin
    with screenshot_on_failure(page, tmp_path, daemon):
        expect(page.get_by_text("Use via API")).to_have_count(0)  # Gradio's empty page
        with page.context.expect_page() as opened:
            page.locator("#workspace-api-docs").click()
        docs = opened.value
        expect(docs).to_have_url(re.compile(r"/docs$"))
        expect(docs.locator(".swagger-ui")).to_contain_text("OCR Appliance")
        expect(docs.locator(".swagger-ui")).to_contain_text("/api/v1/documents")
        expect(docs.locator(".swagger-ui .info")).to_contain_text("press Authorize and give a key")
        # the docs' own calls carry the session, not a key: refused, saying what to do
        answer = docs.evaluate("""async () => {
            const response = await fetch("/api/v1/documents?limit=1");
            return [response.status, (await response.json()).error.message]; }""")
        assert answer[0] == 401 and "on /docs press Authorize" in answer[1], answer
    page.context.close()
    # without a session the docs still need a key
    assert daemon.client.get("/docs", headers={"X-API-Key": ""}).status_code == 401


def test_an_administrator_makes_a_key_that_opens_the_api_docs(ada, browser, daemon, tmp_path):
    page = ada
    panel = page.locator("#api-keys")
    panel.locator("> button.label-wrap").click()
    page.get_by_label("New key's name", exact=True).fill("swagger")
    page.locator("#api-key-make").click()
    expect(page.locator("#api-keys-message")).to_contain_text("Key swagger made")
    expect(page.locator("#api-keys-list")).to_contain_text("swagger")
    secret = page.locator("#api-key-secret textarea, #api-key-secret input")
    expect(secret).to_have_value(re.compile(r".{20,}"))
    key = secret.input_value()
    assert "swagger" in ApiKeys(Path(daemon.config["auth"]["api_keys_file"])).names()

    # Try it out in /docs: Authorize with the key, and the call answers 200
    with page.context.expect_page() as opened:
        page.locator("#workspace-api-docs").click()
    docs = opened.value
    docs.locator(".swagger-ui .auth-wrapper button.authorize").click()
    # Swagger UI's own classes: its buttons' accessible names differ from their words
    with_key = docs.locator(".auth-container").filter(has_text="X-API-Key")
    with_key.locator("input").fill(key)
    with_key.locator("button.authorize").click()
    docs.locator(".modal-ux button.btn-done").first.click()
    operation = docs.locator("#operations-documents-list_documents")
    operation.locator(".opblock-summary").click()
    operation.locator("button.try-out__btn").click()
    operation.locator("button.execute").click()
    expect(operation.locator(".live-responses-table tr.response .response-col_status")
           ).to_have_text("200")
    docs.close()

    # revoked: the key opens nothing any more
    page.get_by_label("Key to revoke", exact=True).click()
    page.get_by_role("option", name="swagger", exact=True).click()
    page.locator("#api-key-revoke").click()
    expect(page.locator("#api-keys-message")).to_contain_text("Key swagger revoked")
    expect(page.locator("#api-key-secret")).to_be_hidden()
    assert daemon.client.get("/api/v1/documents", headers={"X-API-Key": key}).status_code == 401


def test_a_reviewer_is_not_shown_the_api_keys(browser, daemon, tmp_path):
    page = sign_in(browser, daemon, "rita")
    with screenshot_on_failure(page, tmp_path, daemon):
        expect(page.locator("#workspace-user")).to_contain_text("reviewer")
        expect(page.locator("#api-keys")).to_be_hidden()
        expect(page.get_by_text("Make key")).to_have_count(0)
    page.context.close()


def test_chinese_words_are_found_by_any_two_characters_or_more(ada, daemon):
    page = ada
    for words in ("植株高度", "株高", "多年生草本"):
        search_documents(page, words)
        expect(count_line(page)).to_contain_text("1–1 of 1 document")
        expect(list_row(page, "canna.pdf").locator(".doc-hit mark")).to_have_text(words)
    open_document(page, "canna.pdf")
    expect(page_body(page)).to_contain_text("植株高度")
    search_documents(page, "株度")  # the characters, not side by side
    expect(count_line(page)).to_contain_text("No document matches.")
    no_error_toast(page)


def test_a_document_waiting_for_review_is_found_and_marked_not_reviewed(ada, daemon):
    page = ada
    search_documents(page, "Quittung")
    row = list_row(page, "doubtful.pdf")
    expect(row.locator(".doc-hit")).to_contain_text("page 1 (not reviewed yet):")
    expect(row.locator(".doc-hit mark")).to_have_text("Quittung")
    expect(row.locator(".doc-status")).to_have_text("review")
    no_error_toast(page)


def test_a_refused_document_says_why_in_full_and_is_not_retried(ada, daemon, tmp_path):
    page = ada
    name = "a-scanned-contract-from-the-legal-department-" + "x" * 120 + ".pdf"
    upload_input(page).set_input_files([encrypted_pdf(tmp_path / name, ["Locked away"])])
    row = last_upload(page).get_by_role("row").filter(has_text="a-scanned-contract")
    # the whole message, its remedy and its reason code, in the upload's table
    expect(row).to_contain_text("[encrypted_pdf]")
    refused = next(doc for doc in api_documents(daemon, q="a-scanned-contract")["documents"])
    message = refused["error"]["message"]
    expect(row).to_contain_text(message)
    search_documents(page, "a-scanned-contract")
    listed = list_row(page, name)
    expect(listed.locator(".doc-details")).to_have_attribute("title", re.compile(
        re.escape(message)))
    # the long name is cut inside the list: the table is no wider than its place
    widths = page.locator("#documents-list").evaluate(
        "(el) => [el.querySelector('table').scrollWidth, el.clientWidth]")
    assert widths[0] <= widths[1], widths

    open_document(page, name)
    page.locator("#document-retry").click()
    expect(page.locator("#document-message")).to_contain_text(
        "refused when submitted (encrypted_pdf), so there are no pages to read again")
    expect(page.locator("#document-message")).to_contain_text("upload it again")
    assert ("retried", "ada") not in events(daemon, refused["id"])
    # another document opened: the message about this one goes
    search_documents(page, "report.pdf")
    open_document(page, "report.pdf")
    expect(page.locator("#document-message")).to_have_text("")
    no_error_toast(page)


def filled(bar) -> float:
    """The share of a progress bar's inside that is drawn in a colour (not the white
    of the page), from a screenshot of it."""
    with Image.open(io.BytesIO(bar.screenshot())) as shot:
        inside = shot.convert("RGB").crop((3, 3, shot.width - 3, shot.height - 3))
        pixels = list(inside.getdata())
    return sum(1 for r, g, b in pixels if min(r, g, b) < 200) / len(pixels)


def test_a_document_with_no_page_done_shows_an_empty_bar(ada, daemon):
    page = ada
    none_done = next(doc for doc in api_documents(daemon, status="failed", limit=50)["documents"]
                     if doc["page_count"] > 1)
    search_documents(page, none_done["name"])
    expect(count_line(page)).to_contain_text("1–1 of 1 document")
    row = list_row(page, none_done["name"])
    expect(row.locator(".doc-pages")).to_contain_text(f"0/{none_done['page_count']} pages")
    assert filled(row.locator("progress")) < 0.05
    search_documents(page, "twelve percent")  # report.pdf, 2 of 2 pages done: a full bar
    expect(count_line(page)).to_contain_text("1–1 of 1 document")
    assert filled(list_row(page, "report.pdf").locator("progress")) > 0.9


def test_a_search_lists_the_best_match_first_and_an_empty_one_the_newest(ada, daemon):
    page = ada
    sort = page.locator("#documents-sort input")
    expect(sort).to_have_value("newest first")
    search_documents(page, "twelve percent")
    expect(sort).to_have_value("best match (when searching)")
    expect(list_row(page, "report.pdf")).to_be_visible()
    search_documents(page, "")
    expect(sort).to_have_value("newest first")
    expect(count_line(page)).to_contain_text("1–50 of")


def test_a_generic_document_offers_no_key_fields(ada, daemon):
    page = ada
    search_documents(page, "report.pdf")
    open_document(page, "report.pdf")
    ask_for_downloads(page)
    expect(page.get_by_role("button", name="Download text (.txt)")).to_be_enabled()
    expect(page.get_by_role("button", name=re.compile("Download key fields"))).to_have_count(0)


def test_the_api_names_its_pdf_after_the_document_and_says_what_it_waits_for(daemon):
    pdf = daemon.client.get(f"/api/v1/documents/{daemon.report_id}/result",
                            params={"format": "pdf"})
    assert pdf.status_code == 200
    assert pdf.headers["content-disposition"] == 'attachment; filename="report.pdf"'
    waiting = daemon.client.get(f"/api/v1/documents/{daemon.doubtful_id}/result")
    assert waiting.status_code == 409
    assert "is waiting for a person to review some of its pages" in \
        waiting.json()["error"]["message"]
    assert api_documents(daemon, tag="BOARD")["documents"][0]["id"] == daemon.report_id


def test_every_download_of_the_document_view_arrives_named_after_the_document(ada, daemon):
    page = ada
    search_documents(page, "report.pdf")
    open_document(page, "report.pdf")
    ask_for_downloads(page)
    offered = [fmt for fmt in FORMATS if fmt != "fields.json"]  # a report has no fields
    for fmt in offered:
        with page.expect_download() as download:
            page.locator(f"#download-{fmt.replace('.', '-')}").click()
        assert download.value.suggested_filename == f"report{SUFFIXES[fmt]}"
        content = Path(download.value.path()).read_bytes()
        expected = daemon.client.get(f"/api/v1/documents/{daemon.report_id}/result",
                                     params={"format": fmt}).content
        assert content == expected if fmt != "pdf" else content.startswith(b"%PDF"), fmt
    no_error_toast(page)


INVOICE_PAGES = [["ACME GmbH", "Invoice number 4713", "Date 12.03.2024", "Net 100.00 EUR",
                  "VAT 19.00 EUR", "Total 119.00 EUR"], ["Terms of payment", "Thirty days net"]]


def ui_downloads(daemon: Daemon, document_id: str) -> dict[str, int]:
    """The files the web UI has made for the document's downloads (in its folder of the
    daemon's temporary files), by name, with the time each was last written."""
    return {path.name: path.stat().st_mtime_ns
            for path in daemon.data_dir.rglob(f"appliance-ui-*/{document_id}/*")}


def test_downloads_are_made_when_asked_and_never_offered_out_of_date(ada, daemon, tmp_path):
    """Opening a document and turning its pages make no download (a long scan's
    searchable PDF takes seconds); "Prepare downloads" makes them as the document is then,
    and a correction after takes them back until they are prepared again."""
    page = ada
    invoice = daemon.upload(write_pdf(tmp_path / "invoice-4713.pdf", INVOICE_PAGES),
                            doc_type="invoice")["id"]
    daemon.wait_exported([invoice], timeout_s=READ_TIMEOUT_S)
    search_documents(page, "invoice-4713.pdf")
    open_document(page, "invoice-4713.pdf")
    facts, thumbnails = (page.locator("#document-page-facts"),
                         page.locator("#document-thumbnails .thumbnail-item"))
    for number in (2, 1):
        thumbnails.nth(number - 1).click()
        expect(facts).to_contain_text(f"Page {number} of 2")
    page.get_by_label("Page", exact=True).click()
    page.get_by_role("option", name="page 2 of 2").click()
    expect(facts).to_contain_text("Page 2 of 2")
    assert ui_downloads(daemon, invoice) == {}
    expect(page.locator("#download-txt")).to_be_hidden()
    prepare = page.locator("#document-prepare-downloads")
    expect(prepare).to_be_visible()

    ask_for_downloads(page)
    expect(prepare).to_be_hidden()
    made = ui_downloads(daemon, invoice)
    assert set(made) == {f"invoice-4713{suffix}" for suffix in SUFFIXES.values()}
    read = json.loads(downloaded(page, "fields.json"))["fields"]
    assert next(f for f in read if f["name"] == "number")["value"] == "4713", read
    thumbnails.nth(0).click()
    expect(facts).to_contain_text("Page 1 of 2")
    assert ui_downloads(daemon, invoice) == made  # a page turned makes none again

    # the number corrected (through the API, as an accounting system would): the
    # document is exported again, and the files made before are no longer offered
    corrected = daemon.client.put(f"/api/v1/documents/{invoice}/fields",
                                  json={"fields": {"number": "INV-4714"}})
    assert corrected.status_code == 200, corrected.text
    expect(prepare).to_be_visible()
    expect(page.locator("#download-fields-json")).to_be_hidden()
    ask_for_downloads(page)
    for fmt in ("fields.json", "json"):
        fields = json.loads(downloaded(page, fmt))
        fields = fields["document"]["fields"] if fmt == "json" else fields["fields"]
        assert next(f for f in fields if f["name"] == "number")["value"] == "INV-4714", fmt
    no_error_toast(page)


def test_a_document_whose_original_is_gone_offers_every_download_but_the_pdf(ada, daemon):
    page = ada
    search_documents(page, "canna.pdf")  # stored without its original
    open_document(page, "canna.pdf")
    ask_for_downloads(page)
    expect(page.locator("#document-note")).to_contain_text("no searchable PDF:")
    expect(page.locator("#document-note")).to_contain_text("no longer kept")
    expect(page.locator("#download-pdf")).to_be_hidden()
    assert CANNA_TEXT in downloaded(page, "txt").decode()
