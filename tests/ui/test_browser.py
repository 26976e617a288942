"""The web UI in a real headless Chromium against a real daemon.

Chromium is Debian's (``make chromium`` installs it; Playwright's own browser
downloads are not used), driven by Playwright's Python API. Selectors follow
Gradio 6's DOM: components are found by their visible labels or ids, table rows by
ARIA roles, the documents list (our own HTML) by its buttons, so a restyling does not
break them. The workspace on a large store: test_workspace_browser.py.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser import (
    UI_TIMEOUT_MS, last_upload, list_row, open_document, open_ui, page_body,
    screenshot_on_failure, search_documents, upload_input,
)
from tests.daemon import Daemon
from tests.fixtures.documents import (
    GROUPS, text_similarity, write_grouped_table_png, write_pdf, write_png,
)

# Generous: two cores, OCR of a page takes 1-3 s, and the list refreshes every two seconds.
DONE_TIMEOUT_MS = 180_000

REPORT_PAGES = [["Quarterly report", "Revenue grew by twelve percent"],
                ["Signed by the board", "Next meeting in March"]]
RECEIPT = ["Receipt from the bakery", "Two loaves of bread", "Paid in cash"]
HOSTILE = ["<img src=x onerror=alert(1)>", "<script>window.__xss=1</script>"]


@pytest.fixture
def page(browser, daemon):
    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("browser-daemon")).start()
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()


def wait_status(page: Page, name: str, status: str) -> Locator:
    """The document's row in the list, once it shows ``status``."""
    row = list_row(page, name)
    expect(row.locator(".doc-status")).to_have_text(status, timeout=DONE_TIMEOUT_MS)
    return row


def wait_for_similar_text(locator: Locator, expected: list[str], timeout_s: float = 60) -> str:
    want = " ".join(expected)
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = locator.inner_text()
        if text_similarity(text, want) > 0.6:
            return text
        time.sleep(0.25)
    raise AssertionError(f"expected text like {want!r}, the page shows {text!r}")


def show_page_number(page: Page, number: int) -> None:
    page.get_by_label("Page", exact=True).click()
    page.get_by_role("option").filter(has_text=f"page {number} of").click()
    expect(page.locator("#document-page-facts")).to_contain_text(f"Page {number} of")


def test_upload_two_documents_and_read_their_results(page, daemon, tmp_path):
    pdf = write_pdf(tmp_path / "report.pdf", REPORT_PAGES)
    png = write_png(tmp_path / "receipt.png", RECEIPT)
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        upload_input(page).set_input_files([pdf, png])
        # what became of each file, as it was submitted
        # the list in view, a line on the files, and in the folded panel each file
        expect(page.locator("#upload-summary")).to_contain_text("Just dropped (2 documents)")
        uploaded = last_upload(page)
        for name in ("report.pdf", "receipt.png"):
            expect(uploaded.get_by_role("row").filter(has_text=name)
                   .get_by_role("cell").nth(1)).to_have_text("accepted")
        wait_status(page, "report.pdf", "done")
        wait_status(page, "receipt.png", "done")
        expect(list_row(page, "report.pdf").locator("progress")).to_have_attribute("value", "2")

        # a click on a name opens the document at its first page
        open_document(page, "receipt.png")
        body = page_body(page)
        wait_for_similar_text(body, RECEIPT)
        # no login here: turning a page is the review console's, which wants a sign-in
        expect(page.locator("#document-turn-right")).to_be_hidden()
        # a receipt keeps its lines on screen, rather than running them into one paragraph
        shown_lines = [line for line in body.inner_text().splitlines() if line.strip()]
        assert len(shown_lines) >= len(RECEIPT), shown_lines

        page.get_by_role("tab", name="Documents", exact=True).click()
        open_document(page, "report.pdf")
        wait_for_similar_text(body, REPORT_PAGES[0])
        show_page_number(page, 2)
        wait_for_similar_text(body, REPORT_PAGES[1])
        page.get_by_role("tab", name="Text", exact=True).click()
        recognised = page.locator("#document-text textarea")
        expect(recognised).to_be_visible()
        assert text_similarity(recognised.input_value(), " ".join(REPORT_PAGES[1])) > 0.6


def test_hostile_text_and_names_cannot_run_script(page, daemon, tmp_path):
    """OCR output and document names are untrusted: neither may become markup.

    The page goes through the drop zone. A second copy goes through the REST API under a
    hostile file name, which the API keeps verbatim (Gradio's upload strips "<" and ">"
    from names): that name reaches the list, its search snippet and the document view.
    """
    hostile = write_png(tmp_path / "hostile.png", HOSTILE)
    named = write_png(tmp_path / "named.png", HOSTILE + ["second copy"])
    # no "/"; braces and "${": the list's component has a template engine of its own
    hostile_name = "<img src=x onerror=alert(2)><svg onload=window.__xss=2>{{value}}${1+1}.png"
    dialogs: list[str] = []

    def on_dialog(dialog) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        assert page.evaluate("typeof window.__xss") == "undefined"
        upload_input(page).set_input_files([hostile])
        with named.open("rb") as fh:
            response = daemon.client.post("/api/v1/documents", files={"file": (hostile_name, fh)})
        assert response.status_code == 201 and response.json()["name"] == hostile_name

        wait_status(page, "hostile.png", "done")
        open_document(page, "hostile.png")
        body = page_body(page)
        # the recognised tags arrive, and are shown as text, not as elements
        expect(body).to_contain_text("onerror")
        expect(body).to_contain_text("script")
        shown = body.inner_text()
        assert "<img" in shown or "<script" in shown, shown
        assert body.locator("img, script, iframe, object, embed, svg").count() == 0
        page.get_by_role("tab", name="Text", exact=True).click()  # the raw text, in a textbox
        expect(page.locator("#document-text textarea")).to_have_value(re.compile("onerror"))
        page.get_by_role("tab", name="Rendered", exact=True).click()

        # the hostile name in the list and in a search's snippet, then opened
        search_documents(page, "onerror second")
        row = wait_status(page, hostile_name, "done")
        expect(row.locator(".doc-hit mark").first).to_be_visible()
        expect(row.locator(".doc-hit")).to_contain_text("onerror")
        open_document(page, hostile_name)  # its title shows the name as text
        expect(body).to_contain_text(re.compile("second", re.IGNORECASE))
        assert page.locator("main img[src=x], main svg[onload], #documents-list img").count() == 0

        page.wait_for_timeout(1500)  # time for an onerror or a script to have fired
        assert dialogs == []
        assert page.evaluate("typeof window.__xss") == "undefined"


def test_a_table_whose_cells_span_columns_is_drawn_as_one(page, daemon, tmp_path):
    """The one HTML a page's Markdown may hold, rebuilt from its cells on the server,
    passes the browser's sanitiser too: the names of the column groups each span two
    columns of the table on screen."""
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        upload_input(page).set_input_files([write_grouped_table_png(tmp_path / "grouped.png")])
        wait_status(page, "grouped.png", "done")
        open_document(page, "grouped.png")
        spanning = page_body(page).locator('table th[colspan="2"]')
        expect(spanning).to_have_text(GROUPS)
        # a cell in a narrow column keeps its words whole; the table scrolls instead
        style = spanning.first.evaluate(
            "cell => [getComputedStyle(cell).overflowWrap, getComputedStyle(cell).wordBreak,"
            " getComputedStyle(cell.closest('table')).overflowX]")
        assert style == ["normal", "normal", "auto"], style


@pytest.fixture(scope="module")
def review_daemon(tmp_path_factory):
    """Every page goes to review, and no reviewer account exists."""
    tmp = tmp_path_factory.mktemp("review-ui-daemon")
    d = Daemon(tmp, review={"enabled": True, "review_below": 1.0, "accept_from": 1.0,
                            "users_file": str(tmp / "users.toml")})
    with d.running():
        yield d


def test_a_document_in_review_says_a_person_must_check_it(browser, review_daemon, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 1600})
    page.set_default_timeout(UI_TIMEOUT_MS)
    png = write_png(tmp_path / "doubtful.png", RECEIPT)
    with screenshot_on_failure(page, tmp_path, review_daemon):
        open_ui(page, review_daemon)
        # loud, at once: nobody could ever take a page out of review
        expect(page.locator("#status-line")).to_contain_text("no reviewer account exists")
        upload_input(page).set_input_files([png])
        row = wait_status(page, "doubtful.png", "review")
        expect(row).to_contain_text("a person has to check 1 page")
        open_document(page, "doubtful.png")
        title = page.locator("#document-title")
        expect(title).to_contain_text("a person has to check 1 page in the review console")
        expect(title).to_contain_text("appliance users add NAME")
        link = page.locator("#open-review")
        expect(link).to_be_visible()
        assert "/review/" in (link.get_attribute("href") or
                              link.locator("a").first.get_attribute("href"))
    assert "review is on but" in review_daemon.log_path.read_text()  # said at start too
    page.close()


def test_long_errors_are_whole_in_the_list_and_the_document(page, daemon, tmp_path):
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n garbage garbage garbage\n%%EOF\n")
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        upload_input(page).set_input_files([broken])
        row = wait_status(page, "broken.pdf", "failed")
        # the remedy ends the message: it is there, on two lines and whole on hover
        details = row.locator(".doc-details")
        assert details.inner_text().endswith("submit it again. [corrupt_file]"), details.inner_text()
        assert details.get_attribute("title") == details.inner_text()
        open_document(page, "broken.pdf")
        title = page.locator("#document-title")
        expect(title).to_contain_text("rescan or re-export it and submit it again")
        assert ").)" not in title.inner_text()


def test_api_docs_work_without_internet(page, daemon, tmp_path):
    """/docs is Swagger UI with its scripts served by the appliance (this host has no
    way out: a CDN script would leave the page blank)."""
    html = daemon.client.get("/docs").text
    assert "cdn." not in html and "https://" not in html
    with screenshot_on_failure(page, tmp_path, daemon):
        page.goto(f"http://127.0.0.1:{daemon.port}/docs", wait_until="domcontentloaded")
        expect(page.locator(".opblock-summary-path").filter(
            has_text="/api/v1/documents").first).to_be_visible()
        page.goto(f"http://127.0.0.1:{daemon.port}/redoc", wait_until="domcontentloaded")
        expect(page.get_by_text("Upload one document").first).to_be_visible()


def test_an_open_tab_does_not_fill_the_log(page, daemon, tmp_path):
    """The UI polls every second or two; at the default level (INFO) that is no log line."""
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        page.wait_for_timeout(3000)  # loading is done
        before = len(daemon.log_path.read_text().splitlines())
        page.wait_for_timeout(15_000)
        added = daemon.log_path.read_text().splitlines()[before:]
    assert len(added) <= 2, added
