"""The languages of a result's content (``docintel.languages``): a language for each line,
the lines of one language together one span within a page, the spans recounted as the
client asks."""

from __future__ import annotations

import regex

from appliance.docintel.languages import languages
from appliance.locales import DEFAULT
from appliance.docintel.offsets import counted_as

# a page of a Simplified paragraph, an English one with a label too short to tell and
# an amount, a French sentence and a Traditional paragraph whose second line holds only
# characters both forms write; a second page of a Markdown table, a check box and an
# HTML table's row
PAGES = ["本年度报告显示各地区的销售额均有增长。\n人民大会\n"
         "Sales grew in every region this year while costs stayed close to the plan.\n"
         "Total\n12.00\nThe board thanks every member of staff for the work.\n"
         "Le montant total de la facture est payable sous trente jours.\n"
         "本年度報告顯示各地區的銷售額均有增長。\n上半年工作\n",
         "| 名称 | 数量 |\n:selected: Yes, delivered to the warehouse\n"
         "<tr><td>Stapler</td><td>40</td></tr>"]
CONTENT = "\n".join(PAGES)
# the default and two more Latin languages, whose models tell them apart
EUROPEAN = (*DEFAULT, "fr", "de")


def _found(body: dict, content: str = CONTENT, units=None) -> dict[str, list[str]]:
    units = units if units is not None else list(content)
    return {language["locale"]: ["".join(units[span["offset"]:span["offset"] + span["length"]])
                                 for span in language["spans"]] for language in body}


def _pages(pages: list[str]) -> list[tuple[int, int]]:
    starts = [sum(len(page) + 1 for page in pages[:i]) for i in range(len(pages))]
    return list(zip(starts, map(len, pages)))


def test_each_line_s_language_and_lines_of_one_language_one_span():
    found = _found(languages(CONTENT, _pages(PAGES), EUROPEAN))
    assert found == {
        # a line of characters both forms write takes its neighbour's form
        "zh-Hans": ["本年度报告显示各地区的销售额均有增长。\n人民大会", "| 名称 | 数量 |"],
        # "Total" is English, as its document is; the amount has no language and breaks
        # no run; the check box's token and the table's tags are not read, and a run
        # ends at its page's end
        "en": ["Sales grew in every region this year while costs stayed close to the plan.\n"
               "Total\n12.00\nThe board thanks every member of staff for the work.",
               ":selected: Yes, delivered to the warehouse\n"
               "<tr><td>Stapler</td><td>40</td></tr>"],
        "fr": ["Le montant total de la facture est payable sous trente jours."],
        "zh-Hant": ["本年度報告顯示各地區的銷售額均有增長。\n上半年工作"]}


def test_a_line_of_characters_both_forms_write_takes_its_neighbour_s_form():
    """The last line before it that tells, else the first after it."""
    content = "上半年工作\n這是繁體中文的報告\n人民大会\n上半年工作"
    assert _found(languages(content, [(0, len(content))], DEFAULT), content) == {
        "zh-Hant": ["上半年工作\n這是繁體中文的報告"], "zh-Hans": ["人民大会\n上半年工作"]}


def test_confidences_say_how_sure_each_language_is():
    confidence = {language["locale"]: language["confidence"]
                  for language in languages(CONTENT, _pages(PAGES), EUROPEAN)}
    assert all(0.5 < value <= 1.0 for value in confidence.values()), confidence
    # Chinese of characters both forms write only is as likely either form
    (shared,) = languages("上半年工作", [(0, 5)], DEFAULT)
    assert (shared["locale"], shared["confidence"]) == ("zh-Hans", 0.5)


def test_with_one_language_a_script_each_line_is_its_script_s():
    """The default lists one Latin language: French is English there, at once, and
    Cyrillic Russian."""
    content = "Le montant total de la facture.\nСъешь же ещё этих мягких булок"
    assert [(language["locale"], language["confidence"])
            for language in languages(content, [(0, len(content))], DEFAULT)] == [
        ("en", 1.0), ("ru", 1.0)]


def test_text_in_no_configured_language_s_script_has_no_language():
    content = "Съешь же ещё этих мягких французских булок\nThe board thanks the staff."
    assert _found(languages(content, [(0, len(content))], ("en", "zh-Hans")), content) == {
        "en": ["The board thanks the staff."]}
    assert languages("12.00\n2026-03-05", [(0, 16)], DEFAULT) == []


def test_spans_are_recounted_as_the_client_asks():
    """A character past U+FFFF ("𠮷") is two UTF-16 code units: the span of the English
    line after it still finds it in a UTF-16 string."""
    content = "𠮷野家的发票已经开出。\nThe invoice was issued today."
    body = counted_as({"languages": languages(content, [(0, len(content))], DEFAULT)},
                      content, "utf16CodeUnit")
    units = [piece for ch in content for piece in ((ch, "") if ord(ch) > 0xFFFF else (ch,))]
    assert _found(body["languages"], content, units) == {
        "zh-Hans": ["𠮷野家的发票已经开出。"], "en": ["The invoice was issued today."]}
    body = counted_as({"languages": languages(content, [(0, len(content))], DEFAULT)},
                      content, "textElements")
    assert _found(body["languages"], content, regex.findall(r"\X", content))["en"] == [
        "The invoice was issued today."]
