"""The UI in Chinese, in a real headless Chromium against a real daemon (issue 53 item 2).

A browser whose language is zh-CN walks every screen: the sign-in page, the Documents
tab (upload, filters, the list, a ticked document, a file refused), the Document tab,
the Dashboard and the review console with a page open, then rejects the page and sees
it failed in the Document tab. On each, no English text of the appliance's own (the
catalogue's, ui/i18n.py) is left on screen, in a label, a placeholder or an aria-label;
the library's words (a failure's reason and its specifics, the history's kinds and
details, the latest failures, the memory's state, the field checks) are in Chinese,
only their values (a file's size, a reviewer's name, an engine, a code) as the library
gave them; no Markdown is left unrendered. No model is configured, so the notice that
the embedded engine reads is on every screen, in Chinese. The language link then
switches to English, and back.
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
    # "auto" without a model: the embedded engine reads, and every screen says so
    d = with_accounts(tmp, {"ada": "admin"}, PASSWORD,
                      review={"review_below": 1.0, "accept_from": 1.0},
                      engine={"name": "auto"})
    with d.running():
        d.upload(write_png(tmp / "zebra.png", ["Zebra 42", "Qwv 7"]), doc_type="fapiao")
        cut = tmp / "cut.png"
        cut.write_bytes(b"\x89PN")  # a PNG's signature cut short: refused, truncated_file
        assert d.upload(cut)["status"] == "failed"
        yield d


def english_phrases() -> list[re.Pattern]:
    """Each English text of the catalogue, as the literal pieces around its fields."""
    pieces = set()
    for key, (en, _zh) in TEXTS.items():
        # a routing reason's English is its code, which Chinese shows after its name
        if key in SAME_IN_BOTH or key.startswith("reason_"):
            continue
        for piece in re.split(r"\{\w+\}|\n", en):
            piece = re.sub(r"[*#`]|^[\s·:;,.()\-–—»«‹›]+|[\s·:;,.()\-–—»«‹›]+$", "", piece)
            if re.search(r"[A-Za-z]{2,}", piece) and piece not in ("GiB", "PDF", "OCR"):
                pieces.add(piece)
    # whole words: "/review" (a path) and low_confidence (a code) are not our English
    return [re.compile(r"(?<![A-Za-z_/])" + re.escape(p) + r"(?![A-Za-z_])") for p in pieces]


ENGLISH = english_phrases()
# Gradio's own words that its Chinese leaves in English (not the appliance's)
GRADIO_ENGLISH = ("Copy table data", "Click to upload or drop files")
GRADIO_BUSY = "processing |"  # Gradio's status text over a component while it works
# the configuration's keys, as config.toml spells them (the engine notice names two)
CONFIG_KEYS = ("engine.model", "engine.mmproj")
GRADIO_THUMBNAIL = re.compile(r"Thumbnail \d+ of \d+")  # a gallery's aria-label
MEMORY_STATE = re.compile(r"(正常|已暂停派发|严重不足)：")
# the specifics of the library's messages, in Chinese with their values (issue 53 item 2)
CUT_SPECIFICS = "文件只有 3 字节，在其文件签名处就已结束"
REJECTED_SPECIFICS = "复核员 ada 判定此页无法识别"
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
    name, its OCR text, the library's messages, which are not translated). Read once
    Gradio's own status text ("processing | 1.2s", shown over a component while its
    event runs, longer on a loaded machine) has gone: it is Gradio's, and the
    catalogue's "processing" is a document's status, never followed by a bar."""
    page.wait_for_function(f"() => !document.body.innerText.includes({GRADIO_BUSY!r})")
    shown = GRADIO_THUMBNAIL.sub(" ", page.evaluate(SHOWN_JS))
    # the longest first, each whole: a short one ("api", a source) is no part of another
    for words in sorted({*untrusted, *GRADIO_ENGLISH, *CONFIG_KEYS} - {""}, key=len,
                        reverse=True):
        shown = re.sub(r"(?<![A-Za-z_])" + re.escape(words) + r"(?![A-Za-z_])", " ", shown)
    return sorted({match.group() for pattern in ENGLISH for match in pattern.finditer(shown)})


def history_data(page: Page) -> list[str]:
    """The history's cells of when, who and which page, as the library gives them (a
    time, a worker, a number). Its kinds are checked to be Chinese, and its details are
    walked with the rest of the screen."""
    cells = page.locator("#document-history [role=gridcell]")  # the rows drawn
    expect(cells.filter(has_text="接收")).to_be_visible()
    kinds = page.locator("#document-history [role=gridcell][data-col='1']").all_inner_texts()
    assert kinds and all(re.search(r"[\u4e00-\u9fff]", kind) for kind in kinds), kinds
    columns = ("0", "2", "3")
    data = page.locator(", ".join(f"#document-history [role=gridcell][data-col='{column}']"
                                  for column in columns))
    # and the copy of a row Gradio keeps hidden to size the columns
    sizing = page.locator(", ".join(f"#document-history tbody[aria-hidden] "
                                    f"td:nth-child({int(column) + 1})" for column in columns))
    return [cell.strip() for cell in data.all_inner_texts() + sizing.all_inner_texts()
            if cell.strip()]


def field_names(page: Page) -> list[str]:
    """The key fields' names in the Document tab (the field configuration's, as given)."""
    return page.locator("#document-fields [role=gridcell][data-col='0'], "
                        "#document-fields tbody[aria-hidden] td:first-child").all_inner_texts()


def assert_chinese(page: Page, where: str, *untrusted: str) -> None:
    left = english_left(page, *untrusted)
    assert not left, f"English left on {where}: {left}"
    shown = page.evaluate(SHOWN_JS)
    assert re.search(r"[\u4e00-\u9fff]", shown), where
    # Markdown's bold drawn as bold: "**队列：**0" keeps its asterisks (test_i18n.py)
    assert "**" not in shown, f"asterisks left on {where}"


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
        expect(page.locator("#engine-notice")).to_contain_text("尚未配置视觉模型")
        expect(page.locator("#workspace-user")).to_contain_text("当前用户")
        expect(page.get_by_role("tab", name="文档", exact=True)).to_be_visible()
        row.locator("input[type=checkbox]").check()
        expect(page.locator("#documents-picked")).to_contain_text("已勾选")
        expect(page.locator("#status-line")).to_contain_text(MEMORY_STATE)
        # the refused file: its reason in Chinese, its code, the library's specifics
        cut = page.locator("#documents-list tbody tr").filter(has_text="cut.png")
        expect(cut.locator(".doc-details")).to_contain_text("文件不完整")
        expect(cut.locator(".doc-details")).to_contain_text("[truncated_file]")
        expect(cut.locator(".doc-details")).to_contain_text(CUT_SPECIFICS)
        assert_chinese(page, "the Documents tab", "zebra.png", "cut.png")

        # a search shows where the words are
        page.get_by_label("搜索", exact=True).fill("Zebra")
        page.get_by_label("搜索", exact=True).press("Enter")
        expect(page.locator("#documents-list th").filter(has_text="匹配位置")).to_be_visible()
        ocr = page.locator("#documents-list .doc-hit").inner_text()
        assert_chinese(page, "the search", "zebra.png", ocr)

        # the Document tab
        row.get_by_role("button", name="zebra.png").click()
        expect(page.locator("#document-title")).to_contain_text("需要有人在复核台")
        expect(page.locator("#document-page-facts")).to_contain_text("置信度")
        # why it was routed: named, then as recorded
        expect(page.locator("#document-page-facts")).to_contain_text("置信度低（low_confidence: ")
        expect(page.locator("#document-history")).to_contain_text("操作人")
        expect(page.locator("#document-history")).to_contain_text("zebra.png（1 页，发票）")
        facts = page.locator("#document-page-facts").inner_text()
        reasons = re.findall(r"[a-z_]+: [^·]*", facts)  # the routing's codes and details
        body = page.locator("#document-body").inner_text()
        assert_chinese(page, "the Document tab", "zebra.png", body, *history_data(page),
                       *field_names(page),
                       page.locator("#document-page-doubts").inner_text(), *reasons)

        # the Dashboard
        page.get_by_role("tab", name="监控面板").click()
        expect(page.locator("#dashboard-summary")).to_contain_text("吞吐量")
        expect(page.locator("#dashboard-summary")).to_contain_text(MEMORY_STATE)
        # the plots are drawn after the summary: each in Chinese before the walk reads them
        for plot, words in (("queue", "队列通道"), ("latency", "百分位"), ("ram", "数据")):
            expect(page.locator(f"#dashboard-{plot}")).to_contain_text(words)
        # Vega's own description of each plot (its aria-label) names the data's columns
        described = page.locator("[id^=dashboard-] [aria-label]").evaluate_all(
            "els => els.map(e => e.getAttribute('aria-label'))")
        # the latest failures: the refused file's, in Chinese
        expect(page.locator("#dashboard-failures")).to_contain_text(CUT_SPECIFICS)
        assert_chinese(page, "the Dashboard", *described, "cut.png")

        # the review console, with the page open
        page.goto(f"{base}/review/", wait_until="domcontentloaded")
        expect(page.locator("#review-counts")).to_contain_text("页等待复核")
        page.locator("#review-next").click()
        expect(page.locator("#review-why")).to_contain_text("复核原因：置信度低（low_confidence")
        expect(page.locator("#review-counts")).to_contain_text("按原因：置信度低 1, 缺少字段 1")
        expect(page.locator("#review-queue")).to_contain_text("置信度")
        why = page.locator("#review-why").inner_text()
        codes = re.findall(r"[a-z_]+: [^\n*]*", why)
        # a key field's label: its name (the field configuration's), then ours: "（必填）"
        # and its checks' words, translated by their codes
        for label in page.locator("#review-fields [data-testid=block-info]").all_inner_texts():
            codes.append(label.partition("（")[0].strip())
        assert_chinese(page, "the review console", "zebra.png", page.locator(
            "#review-editor textarea").input_value(), page.locator("#review-preview")
            .inner_text(), page.locator("#review-highlights").inner_text(),
            page.locator("#review-counts").inner_text().split("按原因：")[-1].split("·")[0],
            *codes)

        # rejected: in the Document tab the page failed, its reason in Chinese with its
        # code and the reviewer's name, and the history says so in Chinese
        page.locator("#review-reject").click()
        expect(page.locator("#review-message")).to_contain_text("已作为无法识别退回")
        page.goto(f"{base}/", wait_until="domcontentloaded")
        zebra = page.locator("#documents-list tbody tr").filter(has_text="zebra.png")
        expect(zebra.locator(".doc-status")).to_have_text("失败")
        zebra.get_by_role("button", name="zebra.png").click()
        facts = page.locator("#document-page-facts")
        expect(facts).to_contain_text("复核员判定此页无法识别")
        expect(facts).to_contain_text("[rejected_unreadable]")
        expect(facts).to_contain_text(REJECTED_SPECIFICS)
        expect(page.locator("#document-history")).to_contain_text("复核退回")
        assert_chinese(page, "the Document tab of a failed page", "zebra.png",
                       *history_data(page), *field_names(page))

        # back to English with the language link, and to Chinese again
        page.goto(f"{base}/review/", wait_until="domcontentloaded")
        page.locator("#review-language").click()
        expect(page.locator("#review-counts")).to_contain_text("waiting")
        expect(page.locator("#review-next")).to_contain_text("Next page")
        assert page.evaluate("document.documentElement.lang") == "en"
        page.goto(f"{base}/", wait_until="domcontentloaded")
        expect(page.get_by_role("tab", name="Documents", exact=True)).to_be_visible()
        expect(page.locator("#status-line")).to_contain_text("pages waiting")
        expect(page.locator("#documents-list tbody tr").filter(has_text="zebra.png")
               .locator(".doc-status")).to_have_text("failed")
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
