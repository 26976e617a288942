"""The library's own words in the Chinese UI (issue 53 item 2): a failure by its reason
code, with the message's specifics and the code beside it; the history's kinds; the
memory's state; a field's failed format check. The library stays English: each is
translated by its code, state or kind, and said as before in English."""

from __future__ import annotations

import datetime
import re

import pytest

from appliance import errors
from appliance.fields.extract import Found
from appliance.fields.kinds import PROBLEMS, parse
from appliance.fields.schema import FieldSpec
from appliance.fields.validate import validate
from appliance.intake import SubmitOptions
from appliance.gpu import MemorySampler, Watermarks
from appliance.errors import said_as
from appliance.intake.sniff import KIND_WORDS, sniff_kind
from appliance.raster import check_image_data, count_pages
from appliance.library import FailureRow, HistoryEntry, PageStatus, PageView
from appliance.measure.search_bench import generate_store
from appliance.store import transitions
from appliance.store.models import Page
from tests.fixtures.documents import write_png
from tests.fixtures.gpu import FakeDevice
from tests.fixtures.results import page_done
from tests.ui.test_ui_handlers import make_appliance
from ui.dashboard import failures_markdown
from ui.document_status import error_text
from ui.document_view import history_rows, page_facts
from ui.i18n import EN, TEXTS, ZH, check_text, memory_text

GIB = 1 << 30


def error_classes() -> list[type[errors.ApplianceError]]:
    found, stack = [], [errors.ApplianceError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.code)
def test_every_reason_code_has_its_sentence_in_chinese(cls):
    en, zh = TEXTS[f"error_{cls.code}"]  # its Chinese is checked with every entry's
    assert en and zh


def test_a_failure_in_chinese_keeps_its_code_and_its_specifics():
    with pytest.raises(errors.TruncatedFile) as refused:
        sniff_kind(b"\x89PN")  # a PNG's signature, cut short: a real intake refusal
    exc = refused.value
    said = error_text(exc.code, exc.message, ZH)
    assert said == (TEXTS["error_truncated_file"][1] + "（文件只有 3 字节，在其文件签名处就已结束）"
                    " [truncated_file]")
    assert error_text(exc.code, exc.message, EN) == f"{exc.message} [truncated_file]"


@pytest.mark.parametrize("key", sorted(errors.SAID))
def test_every_said_case_has_its_chinese(key):
    en, zh = TEXTS[f"said_{key}"]  # its Chinese is checked with every entry's
    assert en == errors.SAID[key]


def _refusal(tmp_path, name: str, data: bytes) -> errors.BadInput:
    """The error a file of ``data`` is refused with at intake (``sniff_kind``, then
    ``raster.check_image_data`` as ``Intake`` checks it)."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(errors.BadInput) as refused:
        found = sniff_kind(data[:1024], name)
        count_pages(path, found, 10 ** 8)
        check_image_data(path, found, 10 ** 8)
    return refused.value


CUT_PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08"
           b"\x02\x00\x00\x00\x90\x91h6\x00\x00")


@pytest.mark.parametrize("name, data, key", [
    ("empty.png", b"", "empty"),
    ("cut.png", b"\x89PN", "signature_cut"),
    ("letter.png", b"PK\x03\x04" + b"word/document.xml" + bytes(40), "other_format"),
    ("scan.pdf", bytes(range(7, 200)), "misnamed"),
    ("scan.bin", bytes(range(7, 200)), "no_signature"),
    ("scan.pdf", b"%PDF-1.4\n1 0 obj<<>>\n", "pdf_cut"),
    ("cut.png", CUT_PNG, "image_unread_cut"),
])
def test_an_intake_refusal_s_specifics_in_chinese(tmp_path, name, data, key):
    """Issue 53 item 2: the specifics of an intake refusal were shown in English after
    the Chinese sentence; each is said in Chinese, its values (a size, a decoder's own
    words) as they are, none of its English words left."""
    refused = _refusal(tmp_path, name, data)
    assert said_as(refused.code, refused.message)[0] == key
    said = error_text(refused.code, refused.message, ZH)
    english = TEXTS[f"said_{key}"][0]
    words = [piece for piece in re.split(r"\{\w+\}", english) if re.search("[a-z]{3}", piece)]
    assert words and not any(piece.strip(" .():;") in said for piece in words), said
    assert said.endswith(f"） [{refused.code}]")


@pytest.mark.parametrize("key", sorted(KIND_WORDS))
def test_every_kind_of_file_a_refusal_names_has_its_chinese(key):
    en, _zh = TEXTS[f"kind_{key}"]
    assert en == KIND_WORDS[key]


@pytest.mark.parametrize("name, data, english, chinese", [
    ("notes.pdf", b"Minutes of the meeting, typed, not scanned.\n" * 4,
     "a plain text file", "此文件是纯文本文件"),
    ("letter.png", b"PK\x03\x04" + b"word/document.xml" + bytes(40),
     "a Word document (.docx)", "此文件是Word文档（.docx）"),
    ("scan.pdf", bytes(range(7, 200)), "a PDF", "文件名表明它是PDF文件"),
])
def test_the_kind_of_file_a_refusal_names_is_said_in_chinese(tmp_path, name, data, english,
                                                              chinese):
    """A text file sent in was refused in Chinese as "a plain text file"."""
    refused = _refusal(tmp_path, name, data)
    assert english in refused.message
    said = error_text(refused.code, refused.message, ZH)
    assert chinese in said.replace(" ", "") and english not in said


def test_a_class_s_own_advice_is_said_once_in_chinese():
    crashed = errors.CrashesWorker("it crashed the engine 3 times in a row")
    assert error_text(crashed.code, crashed.message, ZH) == (
        f"{TEXTS['error_crashes_worker'][1]}（it crashed the engine 3 times in a row）"
        " [crashes_worker]")
    bare = errors.Cancelled()  # nothing of its own: the sentence alone
    assert error_text(bare.code, bare.message, ZH) == f"{TEXTS['error_cancelled'][1]} [cancelled]"
    # a code of another version: its message, with its code
    assert error_text("gone_code", "it went", ZH) == "it went [gone_code]"


def test_a_failed_page_s_facts_in_chinese():
    page = Page(document_id="d" * 32, index=0, status=PageStatus.FAILED,
                error_code=errors.RejectedUnreadable.code,
                error_message=errors.RejectedUnreadable("reviewer rita marked this page "
                                                        "unreadable").message)
    facts = page_facts(PageView(page, None, None), 1, ZH)
    assert "复核员判定此页无法识别" in facts and "\\[rejected\\_unreadable\\]" in facts
    assert "复核员 rita 判定此页无法识别）" in facts
    assert "rescan" not in facts  # the class's advice, said in Chinese
    assert "rescan it and submit the document again" in page_facts(PageView(page, None, None),
                                                                    1, EN)


def test_the_history_s_kinds_in_chinese(tmp_path):
    appliance = make_appliance(tmp_path)
    try:
        generate_store(appliance.db, 4, pages_per_document=1)  # the first one read
        document = appliance.library.find().documents[-1].doc.id
        history = appliance.library.history(document)
        english = [(row[1], row[4]) for row in history_rows(history)]
        chinese = [(row[1], row[4]) for row in history_rows(history, ZH)]
    finally:
        appliance.db.close()
    assert english[:2] == [("intake", "scan-00000.pdf (1 pages, generic)"),
                           ("attempt 1: ok", "llama confidence 0.91")]
    assert chinese[:2] == [("接收", "scan-00000.pdf（1 页，通用）"), ("第 1 次识别：成功", "llama 置信度 0.91")]


def test_the_history_s_details_of_a_failure_and_an_event_in_chinese():
    """Issue 53 item 2: the history's Details column was the library's English: an
    attempt's failure is said as the UI says a failure, an event's details by their
    names, their values as they are (codes, numbers)."""
    failed = HistoryEntry(0.0, "error", "w1", 1, "classic truncated_file: ...", attempt=2,
                          values={"engine": "classic", "code": "truncated_file",
                                  "message": errors.TruncatedFile.said("signature_cut",
                                                                       size=3).message})
    routed = HistoryEntry(0.0, "routed_to_review", "system", 1,
                          "attempt 1, reasons low_confidence: 0.427 < 0.5",
                          values={"attempt": "1", "reasons": ["low_confidence: 0.427 < 0.5"]})
    [failure, event] = [row[4] for row in history_rows([failed, routed], ZH)]
    assert failure == "classic " + error_text("truncated_file", failed.values["message"], ZH)
    assert event == "识别轮次 1，原因 置信度低（low_confidence: 0.427 < 0.5）"
    assert [row[4] for row in history_rows([failed, routed])] == [failed.detail, routed.detail]


def test_an_event_s_lists_and_figures_as_a_person_reads_them(tmp_path):
    """An export's files and timings were shown as Python writes them ("files [],
    timings_ms {}" for a document whose files are made when fetched)."""
    appliance = make_appliance(tmp_path)
    try:
        generate_store(appliance.db, 4, pages_per_document=1)
        written, asked = [view.doc.id for view in appliance.library.find().documents[:2]]
        transitions.mark_exported(appliance.db, written, ["a.md", "a.txt"], {"md": 1.234})
        transitions.mark_exported(appliance.db, asked, [], {})
        english = [row[4] for row in history_rows(appliance.library.history(written))
                   if row[1] == "exported"]
        chinese = [row[4] for row in history_rows(appliance.library.history(written), ZH)
                   if row[1] == "已导出"]
        nothing = [row[4] for lang in (EN, ZH)
                   for row in history_rows(appliance.library.history(asked), lang)
                   if row[1] in ("exported", "已导出")]
    finally:
        appliance.db.close()
    assert english == ["files a.md, a.txt, timings_ms md 1.2"]
    assert chinese == ["文件 a.md, a.txt，耗时（毫秒） md 1.2"]
    assert nothing == ["", ""]


def test_a_page_s_routing_reasons_in_the_history_one_by_one(tmp_path):
    """The history said a routed page's reasons joined, English codes in a Chinese
    line; each is named as the page's facts name it, and a sampled reason, which holds
    ", " itself, stays whole."""
    appliance = make_appliance(tmp_path)
    reasons = ["sampled: 0.610 in [0.5, 0.75), rate 10%", "missing_field: total"]
    try:
        document = appliance.submit_path(write_png(tmp_path / "note.png", ["Total 4.00"]),
                                         SubmitOptions(source="api"))
        claim = transitions.claim_next_page(appliance.db, "w0:1", 60)
        transitions.complete_page(appliance.db, claim, page_done("Total 4.00", confidence=0.61),
                                  reasons=reasons, review=True)
        history = appliance.library.history(document.id)
        [english] = [row[4] for row in history_rows(history) if row[1] == "routed_to_review"]
        [chinese] = [row[4] for row in history_rows(history, ZH) if row[1] == "送去复核"]
    finally:
        appliance.db.close()
    assert english == f"attempt 1, reasons {', '.join(reasons)}"
    assert chinese == ("识别轮次 1，原因 抽中复核（sampled: 0.610 in [0.5, 0.75), rate 10%）, "
                       "缺少字段（missing_field: total）")


def test_the_dashboard_s_failures_in_chinese():
    """Issue 53 item 2: the latest failures' messages were the library's English."""
    message = errors.TruncatedFile.said("signature_cut", size=3).message
    row = FailureRow(at=0.0, document_id="d" * 32, document="cut.png", page=None,
                     code="truncated_file", message=message)
    assert "文件只有 3 字节" in failures_markdown([row], ZH)
    assert "The file is only 3 bytes" in failures_markdown([row], EN)


@pytest.mark.parametrize("used, state, words", [
    (0.5, "ok", "正常：显存 50 %"), (0.9, "paused", "已暂停派发：显存 90 %"),
])
def test_the_memory_s_state_in_chinese_and_as_the_library_says_it(used, state, words):
    device = FakeDevice(10 * GIB)
    sampler = MemorySampler(device, Watermarks())
    assert memory_text(sampler.status(), ZH) == "正常：尚无内存采样"
    assert memory_text(sampler.status()) == sampler.status()["message"]
    device.set_used(int(used * 10 * GIB))
    sampler.sample_once()
    status = sampler.status()
    assert status["state"] == state
    assert memory_text(status, ZH) == words
    assert memory_text(status, EN) == status["message"]  # English: the library's words


def test_a_failed_format_check_in_chinese_by_its_problem():
    spec = FieldSpec(name="date", kind="date")
    found = {"date": Found(spec, parse("date", "31.02.2024"), confidence=0.9)}
    checks = validate((spec,), found, text="31.02.2024", history=[],
                      today=datetime.date(2024, 6, 1))["date"]
    [failed] = [check for check in checks if check.layer == "format"]
    assert failed.code == "format_no_such_date" and not failed.ok
    assert check_text(failed.as_dict(), ZH) == "格式无效：日期 31.02.2024 不存在"
    assert check_text(failed.as_dict(), EN) == failed.message == \
        "the date 31.02.2024 does not exist"


@pytest.mark.parametrize("code", sorted(PROBLEMS))
def test_every_format_problem_is_said_after_format_invalid(code):
    assert TEXTS[f"check_format_{code}"][1].startswith("格式无效：")
