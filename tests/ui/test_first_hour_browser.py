"""What a back-office user meets in the first hour (issue 53), in a real headless Chromium
on a laptop's screen (1280x800) against a real daemon with sign-in accounts ("ada" an
administrator, "rita" a reviewer): after a drop the documents list is in view with a
line on what became of the files and of the queue, its names whole; and a page scanned
sideways is turned from the document view and read again upright.

The daemon's orientation vote is off, so that a page is read as it came until a person
turns it.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from tests.browser import (
    last_upload, list_row, open_document, page_body, screenshot_on_failure, search_documents,
    signed_in, upload_input,
)
from tests.daemon import Daemon, with_accounts
from tests.fixtures.documents import write_png

PASSWORD = "correct horse battery"
LAPTOP = {"width": 1280, "height": 800}
RECEIPT = ["Corner Bakery", "Two loaves of bread", "Total 4.90 EUR"]
LINES = ["Delivery note 4711", "Three boxes of printer paper", "Signed at the gate"]
LONG_NAME = ("scan-of-the-quarterly-supplier-statement-from-the-north-warehouse-"
             "accounts-payable-department-2026-12-05-final-version-signed.png")

pytestmark = pytest.mark.usefixtures("patient_expect")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("first-hour-daemon")
    d = with_accounts(tmp, {"ada": "admin", "rita": "reviewer"}, PASSWORD,
                      {"always_review": ["receipt"]}, preprocess={"orientation": False})
    with d.running():
        yield d


def sign_in(browser: Browser, daemon: Daemon, name: str) -> Page:
    return signed_in(browser, daemon, name, PASSWORD, LAPTOP)


def in_view(page: Page, locator) -> bool:
    """Whether the element is whole inside the window, the page not scrolled."""
    box = locator.bounding_box()
    return (page.evaluate("window.scrollY") == 0 and box is not None
            and box["y"] >= 0 and box["y"] + box["height"] <= LAPTOP["height"])


def test_after_a_drop_the_list_and_what_became_of_the_files_are_in_view(browser, daemon,
                                                                         tmp_path):
    page = sign_in(browser, daemon, "ada")
    receipts = [write_png(tmp_path / name, RECEIPT) for name in ("bakery.png", LONG_NAME)]
    notes = tmp_path / "notes.txt"
    notes.write_text("a text file is not a scan")
    with screenshot_on_failure(page, tmp_path, daemon):
        page.get_by_label("Document type", exact=True).click()
        page.get_by_role("option", name="receipt", exact=True).click()
        upload_input(page).set_input_files([*receipts, notes])
        summary = page.locator("#upload-summary")
        expect(summary).to_contain_text("Just dropped (3 documents)")
        # receipts are always reviewed: both wait for a person once read, and the text
        # file failed at intake; the queue's line counts the pages waiting
        expect(summary).to_contain_text("2 need review")
        expect(summary).to_contain_text("1 failed")
        expect(summary).to_contain_text(re.compile(r"All pages: .*2 need review"))
        # the list, its newest row first, in view without scrolling
        row = list_row(page, LONG_NAME)
        expect(row).to_contain_text("review")
        assert in_view(page, page.locator("#documents-list tbody tr").first)
        assert in_view(page, summary)
        # the long name on one line, cut with an ellipsis, all of it on hover
        name = row.get_by_role("button", name=LONG_NAME, exact=True)
        expect(name).to_have_attribute("title", LONG_NAME)
        lines, cut = name.evaluate("""(el) => [
            el.clientHeight / parseFloat(getComputedStyle(el).lineHeight),
            el.scrollWidth > el.clientWidth && getComputedStyle(el).textOverflow]""")
        assert lines < 1.5 and cut == "ellipsis", (lines, cut)

        # each file in the folded upload panel: the failed one's reason whole
        failed = last_upload(page).get_by_role("row").filter(has_text="notes.txt")
        details = failed.get_by_role("cell").nth(2)
        expect(details).to_contain_text("[unsupported_type]")
        shown = details.evaluate("""(el) => [el.scrollWidth <= el.clientWidth,
            el.getBoundingClientRect().right <= el.closest("table").parentElement
                .getBoundingClientRect().right + 1]""")
        assert shown == [True, True], shown

        # "need review" leads to the review console
        summary.get_by_role("link", name="2 need review").first.click()
        expect(page).to_have_url(re.compile(r"/review/$"))
    page.context.close()


def sideways_png(path: Path) -> Path:
    """A page fed in a quarter turned left: a right turn makes it upright."""
    write_png(path, LINES)
    with Image.open(path) as scan:
        scan.rotate(90, expand=True).save(path)
    return path


def turns_read(daemon: Daemon, document_id: str) -> list[tuple[int, str]]:
    """The turns the document's page was read with: (degrees counter-clockwise, by)."""
    result = daemon.client.get(f"/api/v1/documents/{document_id}/result",
                               params={"format": "json"}).json()
    steps = result["pages"][0]["provenance"].get("preprocess") or []
    return [(step["detail"]["rotated_deg"], step["detail"].get("by")) for step in steps
            if step["step"] == "orientation"]


def test_a_reviewer_turns_a_page_from_the_document_view(browser, daemon, tmp_path):
    doc = daemon.upload(sideways_png(tmp_path / "sideways-note.png"))
    daemon.wait_exported([doc["id"]])
    assert turns_read(daemon, doc["id"]) == []
    page = sign_in(browser, daemon, "rita")
    with screenshot_on_failure(page, tmp_path, daemon):
        search_documents(page, "sideways-note.png")
        open_document(page, "sideways-note.png")
        message = page.locator("#document-message")
        page.locator("#document-turn-right").click()
        expect(message).to_contain_text("Page 1 is read again, turned as you asked")
        daemon.wait_exported([doc["id"]])
        # the view follows the new reading, upright
        expect(page_body(page)).to_contain_text("Delivery note 4711")
        expect(page.locator("#document-page-facts")).to_contain_text("done")
        assert turns_read(daemon, doc["id"]) == [(270, "reviewer")]
        with sqlite3.connect(f"file:{daemon.data_dir / 'appliance.db'}?mode=ro",
                             uri=True) as db:
            actors = db.execute("SELECT actor FROM event WHERE document_id = ? AND kind = "
                                "'review_rerun'", (doc["id"],)).fetchall()
        assert actors == [("rita",)]
        expect(page.locator("#document-turn-around")).to_be_visible()
        expect(page.locator("#document-turn-left")).to_be_visible()
    page.context.close()
