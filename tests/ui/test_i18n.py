"""The UI's catalogue (ui/i18n.py): every entry has its Chinese, with the same fields."""

from __future__ import annotations

import re
import string

import pytest
from markdown_it import MarkdownIt

from appliance.engine_choice import resolve_engine
from tests.conftest import make_settings
from ui.app import engine_notice_text
from appliance.quality.routing import ACCEPT_CODES, REVIEW_CODES
from ui.i18n import (EN, TEXTS, ZH, from_accept_language, language_of, plural, reason_text,
                     text)
from ui.review import counts_text, filter_choices

SAME_IN_BOTH = {"source_api", "fact_source"}  # "REST API", "{source} {when}"


def fields(template: str) -> set[str]:
    return {name for _literal, name, _spec, _conv in string.Formatter().parse(template) if name}


@pytest.mark.parametrize("key", sorted(TEXTS))
def test_every_entry_is_translated(key):
    en, zh = TEXTS[key]
    assert en.strip() and zh.strip(), key
    assert fields(en) == fields(zh), key  # the same values fill both
    if key not in SAME_IN_BOTH:
        assert en != zh, f"{key} is not translated"
        words = re.sub(r"\{\w+\}|GiB", "", zh)  # fields and units only: no Chinese needed
        assert (re.search(r"[\u4e00-\u9fff]", zh) or not re.search(r"[A-Za-z]", words)
                or key == "language_switch"), key


def test_every_bold_run_closes():
    """Gradio renders Markdown by CommonMark's rules, under which "**" between a
    punctuation mark and a letter does not close a bold run: "**队列：**0 页" shows its
    asterisks. Whatever fills an entry, a figure, a Chinese or a Latin word, none is left."""
    commonmark = MarkdownIt("commonmark")
    shown = [(key, value) for key, entry in TEXTS.items() for template in entry
             for value in ("0", "文", "a")
             if "**" in commonmark.render(re.sub(r"\{\w+\}", value, template))]
    assert not shown


def test_the_engine_notice_in_each_language(tmp_path):
    _spec, notice = resolve_engine(make_settings(tmp_path, engine={"name": "auto"}))
    assert engine_notice_text(notice, ZH).startswith("尚未配置视觉模型，现由内置的 classic 引擎")
    assert engine_notice_text(notice, EN).startswith("No vision model is configured")

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    _spec, notice = resolve_engine(make_settings(tmp_path, engine={
        "name": "auto", "model": str(broken), "mmproj": str(broken)}))
    chinese = engine_notice_text(notice, ZH)
    # the model's failure in Chinese by its code, its specifics (a file's name) as given
    assert chinese.startswith("配置的视觉模型未通过检查（模型文件缺失、损坏或不是 GGUF"), chinese
    assert "现由内置的 classic 引擎识别页面" in chinese
    english = engine_notice_text(notice, EN)
    assert english.startswith("The configured vision model failed its checks (") and \
        "broken\\.gguf" in english  # the library's message, escaped
    # the log's words: the same English, the message as it is
    assert str(notice).startswith(f"The configured vision model failed its checks "
                                  f"({notice.values['message']}), so the embedded classic")


def test_why_a_page_was_routed_is_said_in_chinese_with_its_code():
    """A Chinese reviewer read "low_confidence: 0.420 < 0.5" and "confident" on every
    page: each routing code has its name, the reason as recorded after it (the code is
    what the filter, the API and the README name); English shows the code alone."""
    for code in (*REVIEW_CODES, *ACCEPT_CODES):
        assert TEXTS[f"reason_{code}"][0] == code
    assert reason_text("low_confidence: 0.420 < 0.5", ZH) == "置信度低（low_confidence: 0.420 < 0.5）"
    assert reason_text("low_confidence: 0.420 < 0.5", EN) == "low_confidence: 0.420 < 0.5"
    assert reason_text("a_later_code: 3", ZH) == "a_later_code: 3"  # another version's
    counts = {"waiting": 4, "by_reason": {"low_confidence": 3, "field_invalid": 1}}
    assert "按原因：字段未通过校验 1, 置信度低 3" in counts_text(counts, lang=ZH)
    assert "by reason: field\\_invalid 1, low\\_confidence 3" in counts_text(counts)
    _types, _folders, reasons = filter_choices(counts, [], [], ["low_confidence"], ZH)
    assert ("置信度低 (3)", "low_confidence") in reasons  # the filter still asks by code


def test_plural_pairs_are_whole():
    for key in TEXTS:
        if key.endswith("_one"):
            assert key[:-4] + "_other" in TEXTS, key
    assert plural("documents", 1) == "1 document" and plural("documents", 3, ZH) == "3 个文档"


def test_a_missing_key_is_an_error_not_english():
    with pytest.raises(KeyError):
        text("no_such_text", ZH)


@pytest.mark.parametrize(("header", "lang"), [
    ("zh-CN,zh;q=0.9,en;q=0.8", ZH), ("zh", ZH), ("zh-Hans-CN", ZH), ("zh-TW", ZH),
    ("en-US,en;q=0.9", EN), ("de-DE,zh;q=0.5", ZH), ("en;q=0.5,zh;q=0.9", ZH),
    ("fr", EN), ("", EN), (None, EN), ("zh;q=0", EN),
])
def test_the_browser_language(header, lang):
    assert from_accept_language(header) == lang


def test_a_chosen_language_wins_over_the_browser():
    class Request:
        def __init__(self, cookies, headers):
            self.cookies, self.headers = cookies, headers

    assert language_of(Request({"appliance-lang": "en"}, {"accept-language": "zh-CN"})) == EN
    assert language_of(Request({"appliance-lang": "zh-CN"}, {"accept-language": "en"})) == ZH
    assert language_of(Request({"appliance-lang": "klingon"}, {"accept-language": "zh"})) == ZH
    assert language_of(None) == EN


def test_every_field_check_has_its_words_in_the_catalogue_with_the_same_values():
    """The UI translates a field check by its code (fields.validate.WORDS)."""
    import string

    from appliance.fields.validate import WORDS
    from ui.i18n import TEXTS

    def names(words: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(words) if name}

    for code, words in WORDS.items():
        en, zh = TEXTS[f"check_{code}"]
        assert en == words and names(zh) == names(words), code
