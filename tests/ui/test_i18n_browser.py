"""The UI in Chinese, in a real headless Chromium against a real daemon (issue 53 item 2).

A browser whose language is zh-CN walks every screen: the sign-in page, the Documents
tab (upload, filters, the list, a ticked document), the Document tab, the Dashboard and
the review console with a page open. On each, no English text of the appliance's own
(the catalogue's, ui/i18n.py) is left on screen, in a label, a placeholder or an
aria-label. The language link then switches to English, and back.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser import UI_TIMEOUT_MS, screenshot_on_failure
from tests.daemon import with_accounts
from tests.fixtures.documents import write_png
from ui.i18n import TEXTS

PASSWORD = "correct horse battery"
DONE_TIMEOUT_MS = 180_000
# our own words in English that are the same in Chinese, or that the walk's own data holds
SAME_IN_BOTH = {"source_api", "fact_source", "language_switch"}
pytestmark = pytest.mark.usefixtures("patient_expect")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("i18n-daemon")
    d = with_accounts(tmp, {"ada": "admin"}, PASSWORD,
                      review={"review_below": 1.0, "accept_from": 1.0})
    with d.running():
        d.upload(write_png(tmp / "zebra.png", ["Zebra 42", "Qwv 7"]), doc_type="fapiao")
        yield d


def english_phrases() -> list[re.Pattern]:
    """Each English text of the catalogue, as the literal pieces around its fields."""
    pieces = set()
    for key, (en, _zh) in TEXTS.items():
        if key in SAME_IN_BOTH:
            continue
        for piece in re.split(r"\{\w+\}|\n", en):
            piece = re.sub(r"[*#`]|^[\s·:;,.()\-–—»«‹›]+|[\s·:;,.()\-–—»«‹›]+$", "", piece)
            if re.search(r"[A-Za-z]{2,}", piece) and piece not in ("GiB", "PDF", "OCR"):
                pieces.add(piece)
    # whole words: "/review" (a path) and low_confidence (a code) are not our English
    return [re.compile(r"(?<![A-Za-z_/])" + re.escape(p) + r"(?![A-Za-z_])") for p in pieces]


ENGLISH = english_phrases()
# Gradio's own words that its Chinese leaves in English (not the appliance's)
GRADIO_ENGLISH = ("Copy table data",)
SHOWN_JS = """() => {
  const said = [document.body.innerText, document.title];
  for (const el of document.querySelectorAll("[placeholder], [aria-label], [title]")) {
    if (el.closest("[hidden]") || !el.getClientRects().length) continue;
    for (const name of ["placeholder", "aria-label", "title"]) {
      if (el.getAttribute(name)) said.push(el.getAttribute(name));
    }
  }
  return said.join("\\n");
}"""


def english_left(page: Page, *untrusted: str) -> list[str]:
    """The catalogue's English found on screen, less ``untrusted`` text (a document's
    name, its OCR text, the library's messages, which are not translated)."""
    shown = page.evaluate(SHOWN_JS)
    for words in (*untrusted, *GRADIO_ENGLISH):
        shown = shown.replace(words, " ")
    return sorted({match.group() for pattern in ENGLISH for match in pattern.finditer(shown)})


def assert_chinese(page: Page, where: str, *untrusted: str) -> None:
    left = english_left(page, *untrusted)
    assert not left, f"English left on {where}: {left}"
    assert re.search(r"[\u4e00-\u9fff]", page.evaluate(SHOWN_JS)), where


def test_every_screen_in_chinese_then_english(browser, daemon, tmp_path):
    context = browser.new_context(locale="zh-CN", viewport={"width": 1280, "height": 1600})
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    base = f"http://127.0.0.1:{daemon.port}"
    with screenshot_on_failure(page, tmp_path, daemon):
        page.goto(f"{base}/", wait_until="domcontentloaded")  # to the sign-in page
        expect(page.get_by_role("button", name="登录")).to_be_visible()
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        assert_chinese(page, "the sign-in page")
        page.get_by_label("用户名").fill("ada")
        page.get_by_label("密码").fill("wrong")
        page.get_by_role("button", name="登录").click()
        expect(page.get_by_role("alert")).to_contain_text("用户名或密码错误")
        page.get_by_label("密码").fill(PASSWORD)
        page.get_by_role("button", name="登录").click()

        # the Documents tab: the page in review, ticked
        row = page.locator("#documents-list tbody tr").filter(has_text="zebra.png")
        expect(row.locator(".doc-status")).to_have_text("待复核", timeout=DONE_TIMEOUT_MS)
        expect(page.locator("#status-line")).to_contain_text("页等待识别")
        expect(page.locator("#workspace-user")).to_contain_text("当前用户")
        expect(page.get_by_role("tab", name="文档", exact=True)).to_be_visible()
        row.locator("input[type=checkbox]").check()
        expect(page.locator("#documents-picked")).to_contain_text("已勾选")
        # the memory's line is the library's (English): the status line's last part
        memory = page.locator("#status-line").inner_text().split("·")[-1].strip()
        assert_chinese(page, "the Documents tab", "zebra.png", memory)

        # a search shows where the words are
        page.get_by_label("搜索", exact=True).fill("Zebra")
        page.get_by_label("搜索", exact=True).press("Enter")
        expect(page.locator("#documents-list th").filter(has_text="匹配位置")).to_be_visible()
        ocr = page.locator("#documents-list .doc-hit").inner_text()
        assert_chinese(page, "the search", "zebra.png", memory, ocr)

        # the Document tab
        row.get_by_role("button", name="zebra.png").click()
        expect(page.locator("#document-title")).to_contain_text("需要有人在复核台")
        expect(page.locator("#document-page-facts")).to_contain_text("置信度")
        expect(page.locator("#document-history")).to_contain_text("操作人")
        facts = page.locator("#document-page-facts").inner_text()
        reasons = re.findall(r"[a-z_]+: [^·]*", facts)  # the routing's codes and details
        body = page.locator("#document-body").inner_text()
        history = page.locator("#document-history tbody").inner_text()
        assert_chinese(page, "the Document tab", "zebra.png", memory, body, history,
                       page.locator("#document-page-doubts").inner_text(), *reasons)

        # the Dashboard
        page.get_by_role("tab", name="监控面板").click()
        expect(page.locator("#dashboard-summary")).to_contain_text("吞吐量")
        assert_chinese(page, "the Dashboard", memory,
                       page.locator("#dashboard-summary").inner_text().split("内存：")[-1]
                       .split("·")[0])

        # the review console, with the page open
        page.goto(f"{base}/review/", wait_until="domcontentloaded")
        expect(page.locator("#review-counts")).to_contain_text("页等待复核")
        page.locator("#review-next").click()
        expect(page.locator("#review-why")).to_contain_text("复核原因")
        expect(page.locator("#review-queue")).to_contain_text("置信度")
        why = page.locator("#review-why").inner_text()
        codes = re.findall(r"[a-z_]+: [^\n*]*", why)
        # a key field's label: its name, then the failed checks' messages (the library's
        # words, as the API gives them); "（必填）" between them is ours
        for label in page.locator("#review-fields [data-testid=block-info]").all_inner_texts():
            name, _, rest = label.partition("（")
            codes += [name.strip(), rest.partition("✗")[2].strip()]
        assert_chinese(page, "the review console", "zebra.png", page.locator(
            "#review-editor textarea").input_value(), page.locator("#review-preview")
            .inner_text(), page.locator("#review-highlights").inner_text(),
            page.locator("#review-counts").inner_text().split("按原因：")[-1].split("·")[0],
            *codes)

        # back to English with the language link, and to Chinese again
        page.locator("#review-language").click()
        expect(page.locator("#review-counts")).to_contain_text("waiting")
        expect(page.locator("#review-next")).to_contain_text("Next page")
        assert page.evaluate("document.documentElement.lang") == "en"
        page.goto(f"{base}/", wait_until="domcontentloaded")
        expect(page.get_by_role("tab", name="Documents", exact=True)).to_be_visible()
        expect(page.locator("#status-line")).to_contain_text("pages waiting")
        expect(page.locator("#documents-list .doc-status").first).to_have_text("review")
        page.locator("#workspace-language").click()
        expect(page.get_by_role("tab", name="文档", exact=True)).to_be_visible()
        expect(page.locator("#status-line")).to_contain_text("页等待识别")
    context.close()


def test_no_developer_settings_in_the_footer(browser, daemon, tmp_path):
    """Gradio's footer (its API page, "Built with Gradio", the settings with PWA and
    screen recording) is not shown."""
    page = browser.new_page(locale="zh-CN")
    page.set_default_timeout(UI_TIMEOUT_MS)
    with screenshot_on_failure(page, tmp_path, daemon):
        page.goto(f"http://127.0.0.1:{daemon.port}/login", wait_until="domcontentloaded")
        page.get_by_label("用户名").fill("ada")
        page.get_by_label("密码").fill(PASSWORD)
        page.get_by_role("button", name="登录").click()
        expect(page.locator("#status-line")).to_contain_text("引擎")
        for path in ("/", "/review/"):
            page.goto(f"http://127.0.0.1:{daemon.port}{path}", wait_until="domcontentloaded")
            expect(page.locator("#status-line, #review-counts").first).to_be_visible()
            assert page.locator("footer").count() == 0 or not page.locator("footer").is_visible()
            for words in ("Settings", "设置", "Use via API", "通过 API 使用", "Built with Gradio",
                          "pwa=True"):
                assert page.get_by_text(words, exact=False).count() == 0, words
    page.close()
