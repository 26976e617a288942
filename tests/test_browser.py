"""The web UI in a real headless Chromium against a real daemon.

Chromium is Debian's (``make chromium`` installs it; Playwright's own browser
downloads are not used), driven by Playwright's Python API. Selectors follow
Gradio 6's DOM: components are found by their visible labels, table rows by ARIA
roles, so a restyling does not break them.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser import UI_TIMEOUT_MS, launched_chromium, screenshot_on_failure
from tests.daemon import Daemon
from tests.fixtures.documents import text_similarity, write_pdf, write_png

# Generous: two cores, OCR of a page takes 1-3 s, and the status table refreshes each second.
DONE_TIMEOUT_MS = 180_000

REPORT_PAGES = [["Quarterly report", "Revenue grew by twelve percent"],
                ["Signed by the board", "Next meeting in March"]]
RECEIPT = ["Receipt from the bakery", "Two loaves of bread", "Paid in cash"]
HOSTILE = ["<img src=x onerror=alert(1)>", "<script>window.__xss=1</script>"]


@pytest.fixture(scope="module")
def browser():
    with launched_chromium() as chromium:
        yield chromium


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


def open_ui(page: Page, daemon: Daemon) -> None:
    # domcontentloaded: nothing may wait on fonts or anything else off this host
    page.goto(f"http://127.0.0.1:{daemon.port}/", wait_until="domcontentloaded")
    expect(upload_input(page)).to_be_attached()


def upload_input(page: Page) -> Locator:
    """The drop zone's file input (the tables carry hidden CSV-import inputs of their own)."""
    return page.locator(".block", has=page.get_by_text("Drop documents here")).locator(
        "input[type=file]")


def status_row(page: Page, name: str) -> Locator:
    table = page.get_by_role("grid", name="Recent documents")
    return table.get_by_role("row").filter(has_text=name)


def wait_done(page: Page, name: str) -> Locator:
    row = status_row(page, name)
    expect(row.get_by_role("gridcell").nth(1)).to_have_text("done", timeout=DONE_TIMEOUT_MS)
    return row


def result_body(page: Page) -> Locator:
    """The rendered Markdown of the selected document (the "Rendered" tab)."""
    return page.locator(".tabitem .tabitem [data-testid=markdown]")


def recognised_text(page: Page) -> Locator:
    """The "Text" tab's textbox (its label wraps it, with a Copy button, so no get_by_label)."""
    return page.locator("label", has_text="Recognised text").locator("textarea")


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


def test_upload_two_documents_and_read_their_results(page, daemon, tmp_path):
    pdf = write_pdf(tmp_path / "report.pdf", REPORT_PAGES)
    png = write_png(tmp_path / "receipt.png", RECEIPT)
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        upload_input(page).set_input_files([pdf, png])
        wait_done(page, "report.pdf")
        receipt_row = wait_done(page, "receipt.png")

        # a click on a row of the status table opens that document
        # the upload's own table follows the documents, too
        last_upload = page.get_by_role("grid", name="Last upload")
        for name in ("report.pdf", "receipt.png"):
            expect(last_upload.get_by_role("row").filter(has_text=name)
                   .get_by_role("gridcell").nth(1)).to_have_text("done")

        receipt_row.get_by_role("gridcell").first.click()
        body = result_body(page)
        wait_for_similar_text(body, RECEIPT)
        # a receipt keeps its lines on screen, rather than running them into one paragraph
        shown_lines = [line for line in body.inner_text().splitlines() if line.strip()]
        assert len(shown_lines) >= len(RECEIPT), shown_lines

        # so does picking it in the Document dropdown
        page.get_by_label("Document", exact=True).click()
        page.get_by_role("option").filter(has_text="report.pdf").click()
        text = wait_for_similar_text(body, [line for lines in REPORT_PAGES for line in lines])
        assert "Page 1" in text and "Page 2" in text  # the page markers, shown as notes

        page.get_by_role("tab", name="Text").click()
        recognised = recognised_text(page)
        expect(recognised).to_be_visible()
        assert text_similarity(recognised.input_value(),
                               " ".join(line for lines in REPORT_PAGES for line in lines)) > 0.6


def test_hostile_text_and_names_cannot_run_script(page, daemon, tmp_path):
    """OCR output and document names are untrusted: neither may become markup.

    The page goes through the drop zone. A second copy goes through the REST API under a
    hostile file name, which the API keeps verbatim (Gradio's upload strips "<" and ">"
    from names): that name reaches the status table, the dropdown and the result title.
    """
    hostile = write_png(tmp_path / "hostile.png", HOSTILE)
    named = write_png(tmp_path / "named.png", HOSTILE + ["second copy"])
    hostile_name = "<img src=x onerror=alert(2)><svg onload=window.__xss=2>.png"  # no "/"
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

        wait_done(page, "hostile.png").get_by_role("gridcell").first.click()
        body = result_body(page)
        # the recognised tags arrive, and are shown as text, not as elements
        expect(body).to_contain_text("onerror")
        expect(body).to_contain_text("script")
        shown = body.inner_text()
        assert "<img" in shown or "<script" in shown, shown
        assert body.locator("img, script, iframe, object, embed, svg").count() == 0
        page.get_by_role("tab", name="Text").click()  # the raw text, in a textbox
        expect(recognised_text(page)).to_have_value(re.compile("onerror"))
        page.get_by_role("tab", name="Rendered").click()

        # the hostile name, shown in the table, then opened through the dropdown
        wait_done(page, "onerror=alert(2)")
        page.get_by_label("Document", exact=True).click()
        page.get_by_role("option").filter(has_text="onerror=alert(2)").click()
        expect(body).to_contain_text(re.compile("second", re.IGNORECASE))
        title = page.locator("[data-testid=markdown]").filter(has_text="pages done")
        expect(title).to_contain_text(hostile_name)  # shown as text, not as elements
        assert page.locator("main img[src=x], main svg[onload]").count() == 0

        page.wait_for_timeout(1500)  # time for an onerror or a script to have fired
        assert dialogs == []
        assert page.evaluate("typeof window.__xss") == "undefined"


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
        row = status_row(page, "doubtful.png")
        expect(row.get_by_role("gridcell").nth(1)).to_have_text("review",
                                                                 timeout=DONE_TIMEOUT_MS)
        expect(row).to_contain_text("a person has to check 1 page")
        row.get_by_role("gridcell").first.click()
        title = page.locator("#document-title")
        expect(title).to_contain_text("a person has to check 1 page in the review console")
        expect(title).to_contain_text("appliance users add NAME")
        link = page.locator("#open-review")
        expect(link).to_be_visible()
        assert "/review/" in (link.get_attribute("href") or
                              link.locator("a").first.get_attribute("href"))
    assert "review is on but" in review_daemon.log_path.read_text()  # said at start too
    page.close()


def test_long_errors_are_cut_in_the_table_and_whole_in_the_document(page, daemon, tmp_path):
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n garbage garbage garbage\n%%EOF\n")
    with screenshot_on_failure(page, tmp_path, daemon):
        open_ui(page, daemon)
        upload_input(page).set_input_files([broken])
        row = status_row(page, "broken.pdf")
        expect(row.get_by_role("gridcell").nth(1)).to_have_text("failed")
        cell = row.get_by_role("gridcell").nth(3).inner_text()
        assert cell.endswith("… [corrupt_file]") and len(cell) <= 90, cell
        row.get_by_role("gridcell").first.click()
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
