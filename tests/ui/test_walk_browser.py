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

import pytest
from playwright.sync_api import Browser, Page, expect

from appliance.security import ApiKeys
from appliance.users import Users
from tests.browser import UI_TIMEOUT_MS, screenshot_on_failure, upload_input
from tests.daemon import Daemon
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
    users_file = tmp / "users.toml"
    Users(users_file).add("ada", "admin", PASSWORD)
    keys_file = tmp / "api-keys.toml"
    key = ApiKeys(keys_file).add("tests")
    d = Daemon(tmp, review={"enabled": True, "users_file": str(users_file),
                            "review_below": 0.5, "accept_from": 1.0, "sample_rate": 0.0,
                            "always_review": ["invoice", "receipt"]},
               auth={"api_keys_file": str(keys_file)})
    d.client.headers["X-API-Key"] = key
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


def wait_pages(daemon: Daemon, doc_id: str, status: str) -> None:
    """Until every page of the document has ``status``."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while {p["status"] for p in daemon.document(doc_id).get("pages", [])} != {status}:
        assert time.monotonic() < deadline, f"{daemon.document(doc_id)}\n{daemon.log()}"
        time.sleep(0.3)


def sign_in(browser: Browser, daemon: Daemon, path: str = "/") -> Page:
    """A new browser context signed in as ada, at ``path``."""
    context = browser.new_context(viewport={"width": 1400, "height": 1600},
                                  accept_downloads=True)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
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
    page = sign_in(browser, daemon, "/review/")
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
