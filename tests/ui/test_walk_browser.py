"""The web UI as a new user meets it, in a real headless Chromium against a real daemon:
the review console's page of an invoice whose key fields fail their checks, and one
walk through every button and download of the documents workspace, the document view
and the review console that fails on any error toast or server traceback.

Routing is as a default install's, with no sample: a page read with confidence from
0.5 is "not sampled" and passes, unless its type is always reviewed (invoices and
receipts here). Accounts are on: "ada" is an administrator. Chromium and the DOM
conventions are those of test_browser.py.
"""

from __future__ import annotations

import re
import time
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import UI_TIMEOUT_MS, open_document, screenshot_on_failure, upload_input
from tests.daemon import Daemon, with_accounts
from tests.fixtures.documents import write_pdf, write_png

PASSWORD = "correct horse battery"
READ_TIMEOUT_S = 180
INVOICE = ["ACME GmbH", "Invoice number 4713", "Date 12.03.2024", "Net 100.00 EUR",
           "VAT 19.00 EUR", "Total 191.00 EUR"]  # 191 is no 100 + 19
RECEIPT_PAGES = [["Corner Bakery", "Date 14.03.2024", f"Total {n}.90 EUR"] for n in (3, 4, 5)]
REPORT_PAGES = [["Quarterly report", "Revenue grew by twelve percent"],
                ["Signed by the board", "Next meeting in March"]]

pytestmark = pytest.mark.usefixtures("patient_expect")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("walk-daemon")
    d = with_accounts(tmp, {"ada": "admin"}, PASSWORD,
                      review={"review_below": 0.5, "accept_from": 1.0, "sample_rate": 0.0,
                              "always_review": ["invoice", "receipt"]})
    with d.running():
        d.ids = {
            "report": d.upload(write_pdf(tmp / "report.pdf", REPORT_PAGES))["id"],
            "invoice": d.upload(write_png(tmp / "invoice-4713.png", INVOICE),
                                doc_type="invoice")["id"],
            "receipts": d.upload(write_pdf(tmp / "receipts.pdf", RECEIPT_PAGES),
                                 doc_type="receipt")["id"],
        }
        d.wait_exported([d.ids["report"]], timeout_s=READ_TIMEOUT_S)
        for name in ("invoice", "receipts"):
            wait_pages(d, d.ids[name], "review")
        yield d


def wait_pages(daemon: Daemon, doc_id: str, status: str, any_page: bool = False) -> None:
    """Until every page of the document (or ``any_page``: one) has ``status``."""
    deadline = time.monotonic() + READ_TIMEOUT_S

    def reached() -> bool:
        statuses = [p["status"] for p in daemon.document(doc_id).get("pages", [])]
        return status in statuses if any_page else set(statuses) == {status}

    while not reached():
        assert time.monotonic() < deadline, f"{daemon.document(doc_id)}\n{daemon.log()}"
        time.sleep(0.3)


def new_page(browser: Browser) -> Page:
    context = browser.new_context(viewport={"width": 1400, "height": 1600},
                                  accept_downloads=True)
    context.set_default_timeout(UI_TIMEOUT_MS)
    return context.new_page()


def sign_in(page: Page, daemon: Daemon, path: str = "/") -> Page:
    """``page`` signed in as ada, at ``path``."""
    page.goto(f"http://127.0.0.1:{daemon.port}{path}", wait_until="domcontentloaded")
    page.get_by_label("username").fill("ada")
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()
    return page


def choose_type(page: Page, doc_type: str) -> None:
    """The review console's Type filter (its entries say how many pages wait)."""
    page.get_by_label("Type", exact=True).click()
    page.get_by_role("option").filter(has_text=f"{doc_type} (").click()
    expect(page.get_by_label("Type", exact=True)).to_have_value(re.compile(doc_type))


def every_button(page: Page) -> dict[str, list[str]]:
    """The buttons and downloads the page's app has (Gradio's own config: hidden ones
    too), by the tab they are in (its ui.i18n key; "" outside any tab): their elem_id,
    or their label."""
    return page.evaluate("""() => {
        const config = window.gradio_config;
        const components = new Map(config.components.map((c) => [c.id, c]));
        const found = {};
        const visit = (node, tab) => {
            const component = components.get(node.id);
            if (component?.type === "tabitem") {  // a label of ui.i18n: by its key
                const label = component.props.label;
                tab = typeof label === "string" && label.startsWith("__i18n__")
                    ? JSON.parse(label.slice(8)).key : label?.key ?? label;
            }
            if (["button", "downloadbutton", "uploadbutton"].includes(component?.type))
                (found[tab] ??= []).push(component.props.elem_id || component.props.value);
            for (const child of node.children || []) visit(child, tab);
        };
        visit(config.layout, "");
        return found;
    }""")


def wait_read(daemon: Daemon, doc_id: str) -> None:
    """Until none of the document's pages is queued or being read."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while {p["status"] for p in daemon.document(doc_id)["pages"]} & {"queued", "running"}:
        assert time.monotonic() < deadline, f"{daemon.document(doc_id)}\n{daemon.log()}"
        time.sleep(0.3)


def watch_for_errors(page: Page) -> list[str]:
    """Every error toast the page shows from now on, however briefly, and every script
    error: the list fills as they come. Once a click has begun to leave the page (a
    sign-out, the way to the review console), Gradio says "Connection to the server was
    lost" for an event its timer had in flight: that toast is the page going, not an
    error, and is the one left out."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"script error: {exc}"))
    page.expose_function("reportToast", lambda text: errors.append(f"error toast: {text}"))
    page.add_init_script("""let leaving = false;
    addEventListener("beforeunload", () => { leaving = true; });
    new MutationObserver(() => {
        for (const toast of document.querySelectorAll(".toast-body.error:not([data-seen])")) {
            toast.dataset.seen = "1";
            if (leaving && toast.innerText.includes("Connection to the server was lost"))
                continue;
            window.reportToast(toast.innerText);
        }
    }).observe(document, {subtree: true, childList: true});""")
    return errors


def text_lines(page: Page, selector: str) -> dict[str, int]:
    """The lines each element's text takes on screen, by its text."""
    return page.locator(selector).evaluate_all("""(elements) => Object.fromEntries(
        elements.map((element) => {
            const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
            let lines = 0;
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                if (!node.textContent.trim()) continue;
                const range = document.createRange();
                range.selectNodeContents(node);
                lines += new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
            }
            return [element.innerText.trim(), lines];
        }))""")


def test_the_review_console_says_why_a_page_is_here_as_it_stands(browser, daemon, tmp_path):
    page = sign_in(new_page(browser), daemon, "/review/")
    with screenshot_on_failure(page, tmp_path, daemon):
        choose_type(page, "invoice")
        page.locator("#review-next").click()
        why = page.locator("#review-why")
        expect(why).to_contain_text("invoice-4713.png")
        # why it is here: the type, and the sums; that it was not sampled is no reason
        expect(why).to_contain_text("always_review: doc_type invoice")
        expect(why).to_contain_text("field_invalid: gross: gross 191.00 != net 100.00 + tax")
        expect(page.locator("#review-counts")).to_contain_text("field_invalid 1")
        for shown in (why, page.locator("#review-counts"), page.locator("#review-queue")):
            expect(shown).not_to_contain_text("not_sampled")
        page.get_by_label("Reason", exact=True).click()
        expect(page.get_by_role("option").filter(has_text="always_review (")).to_be_visible()
        expect(page.get_by_role("option").filter(has_text="not_sampled")).to_have_count(0)
        page.keyboard.press("Escape")

        # the queue: each header on one line, and its columns within the table
        queue = page.locator("#review-queue")
        expect(queue).to_contain_text("invoice-4713.png")
        headers = text_lines(page, "#review-queue thead th")
        assert headers == {name: 1 for name in headers} and "Folder" in headers, headers
        right = queue.evaluate("(el) => el.getBoundingClientRect().right")
        edges = queue.locator("thead th").evaluate_all(
            "(cells) => cells.map((c) => c.getBoundingClientRect().right)")
        assert max(edges) <= right + 1, (edges, right)

        # the gross corrected: its checks pass, and why the page is here says so at once
        gross = page.locator("#review-fields input").nth(8)
        expect(gross).to_have_value("191.00 EUR")
        gross.fill("119.00")  # the amount only: the currency it was read in stays
        gross.press("Enter")
        expect(page.locator("#review-fields-status")).to_contain_text(
            "saved: gross; every check passes")
        expect(why).not_to_contain_text("field_invalid")
        expect(why).to_contain_text("Why here: always_review: doc_type invoice")
        expect(gross).to_have_value("119.00 EUR")

        page.locator("#review-approve").click()
        expect(page.locator("#review-message")).to_contain_text("Approved")
    page.context.close()
    daemon.wait_exported([daemon.ids["invoice"]])
    fields = daemon.client.get(f"/api/v1/documents/{daemon.ids['invoice']}/result",
                               params={"format": "json"}).json()["document"]["fields"]
    gross = next(f for f in fields if f["name"] == "gross")
    assert (gross["value"], gross["currency"], gross["valid"]) == ("119.00", "EUR", True)


def test_one_walk_through_every_button_and_download_shows_no_error(browser, daemon, tmp_path):
    """Each button and download of the documents workspace, the document view and the
    review console, clicked once as a user would, each doing what it says; Gradio's
    config lists them, so that one added later and not walked fails here."""
    page = new_page(browser)
    errors = watch_for_errors(page)
    walked: set[str] = set()
    documents_message, document_message = (page.locator("#documents-message"),
                                            page.locator("#document-message"))

    def click(elem_id: str) -> None:
        page.locator(f"#{elem_id}").click()
        walked.add(elem_id)

    def search(words: str) -> None:
        page.get_by_role("tab", name="Documents", exact=True).click()
        page.get_by_label("Search", exact=True).fill(words)
        click("documents-search-button")

    with screenshot_on_failure(page, tmp_path, daemon):
        sign_in(page, daemon)
        expect(page.locator("#workspace-user")).to_contain_text("Signed in as ada")
        buttons = every_button(page)

        # --- the documents workspace
        upload_input(page).set_input_files(write_png(tmp_path / "walk.png", REPORT_PAGES[0]))
        expect(page.locator("#upload-summary")).to_contain_text("Just dropped (1 document)")
        search("walk.png")
        row = page.locator("#documents-list tbody tr").filter(has_text="walk.png")
        expect(row).to_contain_text("done")
        for move in ("first", "previous", "next", "last"):
            click(f"documents-{move}")
            expect(page.locator("#documents-count")).to_contain_text("1–1 of 1")
        click("documents-refresh")
        expect(row).to_contain_text("done")
        row.get_by_role("checkbox").check()
        expect(page.locator("#documents-picked")).to_contain_text("1 document")
        click("bulk-retry")
        expect(documents_message).to_contain_text("walk.png: none of its pages failed")
        click("bulk-cancel")
        expect(documents_message).to_contain_text("Cancel")
        click("bulk-zip")
        expect(documents_message).to_contain_text("in one zip")
        with page.expect_download() as download:
            page.locator("#bulk-zip-file a").first.click()
        with zipfile.ZipFile(download.value.path()) as archive:
            assert any(name.endswith("/walk.md") for name in archive.namelist())
        click("bulk-review")
        expect(documents_message).to_contain_text("1 document sent to review")
        click("bulk-delete")
        expect(page.locator("#bulk-confirm-question")).to_contain_text("Delete 1 document")
        click("bulk-confirm-no")
        expect(page.locator("#bulk-confirm")).to_be_hidden()
        with page.context.expect_page() as docs:
            click("workspace-api-docs")
        expect(docs.value.locator(".swagger-ui")).to_contain_text("/api/v1/documents")
        docs.value.close()
        page.locator("#documents-filters > button.label-wrap").click()
        click("filters-clear")
        expect(page.locator("#documents-count")).to_contain_text("1–1 of 1")
        # an administrator's API keys: one made, shown once, and revoked
        page.locator("#api-keys > button.label-wrap").click()
        page.get_by_label("New key's name", exact=True).fill("walk")
        click("api-key-make")
        expect(page.locator("#api-keys-message")).to_contain_text("Key walk made")
        page.get_by_label("Key to revoke", exact=True).click()
        page.get_by_role("option", name="walk", exact=True).click()
        click("api-key-revoke")
        expect(page.locator("#api-keys-message")).to_contain_text("Key walk revoked")

        # --- the document view: a finished document's downloads ...
        search("report.pdf")
        open_document(page, "report.pdf")
        click("document-prepare-downloads")
        for fmt in ("md", "json", "txt", "hocr", "alto", "pdf"):
            with page.expect_download() as download:
                click(f"download-{fmt}")
            assert download.value.suggested_filename.startswith("report."), fmt
            assert Path(download.value.path()).stat().st_size > 0, fmt
        expect(page.locator("#download-fields-json")).to_be_hidden()  # a report has none
        walked.add("download-fields-json")
        click("document-retry")
        expect(document_message).to_contain_text("none of its pages failed")
        # its first page turned and read again; asked again while it is read, refused
        click("document-turn-right")
        expect(document_message).to_contain_text("Page 1 is read again, turned as you asked")
        for action in ("document-turn-around", "document-turn-left"):
            click(action)
            expect(document_message).to_contain_text(re.compile(
                r"Page 1 was not turned: .*\[page_busy\]|Page 1 is read again"))
        click("document-delete")
        expect(page.locator("#document-confirm-question")).to_contain_text("report.pdf")
        click("document-confirm-no")
        expect(page.locator("#document-confirm")).to_be_hidden()
        # ... and a waiting one's actions, and the way to the review console
        search("walk.png")
        open_document(page, "walk.png")
        click("document-review")
        expect(document_message).to_contain_text("Send to review")
        click("document-cancel")
        expect(document_message).to_contain_text("Cancel")
        click("open-review")

        # --- the review console: a receipt's page, with its key fields
        expect(page).to_have_url(re.compile(r"/review/$"))
        review_buttons = every_button(page)[""]
        why, message = page.locator("#review-why"), page.locator("#review-message")
        choose_type(page, "receipt")
        click("review-next")
        expect(why).to_contain_text("receipts.pdf")
        for zoom in ("review-zoom-in", "review-zoom-out", "review-zoom-fit"):
            click(zoom)
        click("review-fields-save")
        expect(page.locator("#review-fields-status")).to_contain_text("No field was changed")
        page.locator("#review-order input").fill("1")
        click("review-apply-order")
        expect(message).to_contain_text("The editor holds the page in the new order")
        page.locator("#review-editor textarea").fill("edited by the walk")
        click("review-revert")
        expect(message).to_contain_text("Reverted to the machine's reading.")
        # only the classic engine is installed: there is no other engine to rerun with
        expect(page.locator("#review-rerun-engine")).to_be_disabled()
        walked.add("review-rerun-engine")
        for action, said in (("review-rerun-resolution", "read again at a higher resolution"),
                             ("review-skip", "Skipped"), ("review-approve", "Approved.")):
            click(action)
            expect(message).to_contain_text(said)
            expect(why).to_contain_text("receipts.pdf")
        page.locator("#review-editor textarea").fill("Corner Bakery\n\nTotal 4.90 EUR")
        click("review-save")
        expect(message).to_contain_text("Correction saved.")
        # a receipt's page left in review, turned each way and read again: a receipt
        # is always reviewed, so it comes back each time
        for action in ("review-turn-right", "review-turn-around", "review-turn-left"):
            wait_pages(daemon, daemon.ids["receipts"], "review", any_page=True)
            click("review-next")
            expect(why).to_contain_text("receipts.pdf")
            click(action)
            expect(message).to_contain_text("turned as you asked")
        choose_type(page, "generic")
        click("review-next")
        expect(why).to_contain_text("walk.png")
        click("review-reject")
        expect(message).to_contain_text("Rejected as unreadable.")
        # the language link: to Chinese and back (the rest of the walk reads English)
        click("review-language")
        expect(page.locator("#review-counts")).to_contain_text("页等待复核")
        click("review-language")
        expect(page.locator("#review-counts")).to_contain_text("waiting")
        click("review-log-out")
        expect(page).to_have_url(re.compile(r"/login"))

        # --- back in the workspace: delete for good, then sign out
        sign_in(page, daemon)
        search("walk.png")
        # the search's list, not the whole one still shown: a tick in the list the
        # search then replaces is let go (a new query starts a new choice)
        expect(page.locator("#documents-count")).to_contain_text("1–1 of 1")
        row.get_by_role("checkbox").check()
        click("bulk-delete")
        click("bulk-confirm-yes")
        expect(documents_message).to_contain_text("1 document deleted")
        search("report.pdf")
        open_document(page, "report.pdf")
        wait_read(daemon, daemon.ids["report"])  # its turned page read again
        click("document-delete")
        click("document-confirm-yes")
        expect(document_message).to_contain_text("1 document deleted")
        page.get_by_role("tab", name="Documents", exact=True).click()
        click("workspace-language")  # the page again, in Chinese; signing out still works
        expect(page.get_by_role("tab", name="文档", exact=True)).to_be_visible()
        click("workspace-sign-out")
        expect(page).to_have_url(re.compile(r"/login"))
    page.context.close()

    assert not errors, errors
    assert "Traceback" not in daemon.log(), daemon.log()
    # every button the three have, and no other, was walked
    offered = {*buttons["tab_documents"], *buttons["tab_document"], *review_buttons}
    assert offered == walked, (offered - walked, walked - offered)
