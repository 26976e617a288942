from __future__ import annotations

import pytest

from appliance.measure.metrics import (
    bag_of_words_f1,
    cer,
    field_accuracy,
    normalize_field,
    normalize_text,
    order_free_cer,
    reading_order_distance,
    table_similarity,
    teds,
    wer,
)


def test_normalize_text():
    assert normalize_text("  ﬁle\u00a0 one\n\ttwo ") == "file one two"


def test_cer():
    assert cer("abcd", "abxd") == 0.25
    assert cer("abcd", "abcd") == 0.0
    assert cer("ab", "abcdef") == 2.0  # reported raw, not capped
    assert cer("a  b\nc", "a b c") == 0.0
    assert cer("614 -466", "614-466") == pytest.approx(1 / 8)
    assert cer("614 -466", "614-466", ignore_whitespace=True) == 0.0
    assert cer("", "") == 0.0
    assert cer("", "x") == 1.0


def test_order_free_cer_does_not_count_the_order_of_units():
    units = ["RECEIPT #:", "CS00093091", "DATE: 04/12/2017", "TOTAL 99.00"]
    # one row read where the truth has three units, and the rows in another order
    assert order_free_cer(units, "TOTAL 99.00\nRECEIPT #: CS00093091 DATE: 04/12/2017") == 0.0
    assert cer("\n".join(units), "TOTAL 99.00\nRECEIPT #: CS00093091 DATE: 04/12/2017",
               ignore_whitespace=True) > 0.4  # what the ordered CER makes of it
    # a unit over two lines (a form's multi-line entity)
    assert order_free_cer(["one entity over two lines"], "over two lines\none entity") == 0.0
    # a misread character counts once, whitespace never
    assert order_free_cer(units, "TOTAL 99.00\nRECEIPT #: CS00O93091 DATE: 04/12/2017") == \
        pytest.approx(1 / 44)
    # what is read nowhere, and what the truth does not have, count in full
    assert order_free_cer(["abc", "defghij"], "defghij") == pytest.approx(3 / 10)
    assert order_free_cer(["abc"], "abc\nxyz") == pytest.approx(3 / 3)
    assert order_free_cer([], "") == 0.0 and order_free_cer([], "x") == 1.0
    assert order_free_cer(["abc"], "") == 1.0


def test_wer():
    assert wer("the cat sat", "the bat sat on") == pytest.approx(2 / 3)
    assert wer("the cat", "The cat") == 0.5  # case-sensitive
    assert wer("", "") == 0.0
    assert wer("", "word") == 1.0


def test_bag_of_words_f1():
    assert bag_of_words_f1("a b c", "C B A") == 1.0
    # shared {a, b}: precision 2/3, recall 2/3
    assert bag_of_words_f1("a a b", "a b d") == pytest.approx(2 / 3)
    assert bag_of_words_f1("", "") == 1.0
    assert bag_of_words_f1("a", "") == 0.0


UNITS = ["Header of the page", "First paragraph text", "Second paragraph text", "Footer line here"]


def test_reading_order_distance():
    assert reading_order_distance(UNITS, "\n".join(UNITS)) == 0.0
    swapped_halves = "\n".join(UNITS[2:] + UNITS[:2])
    assert reading_order_distance(UNITS, swapped_halves) == 1.0
    one_pair_swapped = "\n".join([UNITS[1], UNITS[0], UNITS[2], UNITS[3]])
    assert reading_order_distance(UNITS, one_pair_swapped) == 0.5


def test_reading_order_skips_short_repeated_and_missing_units():
    units = ["abc", "Alpha block", "Page 1", "Page 1", "Beta block", "Zzzz qqqq wwww"]
    hypothesis = "Beta block Page 1 abc Alpha block Page 1"
    # only the two blocks count; they are swapped: [4, 1] vs [1, 4], 2 edits over 2
    assert reading_order_distance(units, hypothesis) == 1.0
    assert reading_order_distance(units, "Alpha block only") is None


TABLE = [["a", "b"], ["c", "d"]]  # 1 table + 2 tr + 4 td = 7 nodes


def test_teds():
    assert teds(TABLE, TABLE) == 1.0
    assert teds(TABLE, [["a", "b"], ["c", "x"]]) == pytest.approx(1 - 1 / 7)
    # "cat" -> "cut": one substitution over three characters
    assert teds([["a", "b"], ["c", "cat"]], [["a", "b"], ["c", "cut"]]) == pytest.approx(1 - (1 / 3) / 7)
    assert teds(TABLE, [["a", "b"], ["c"]]) == pytest.approx(1 - 1 / 7)  # one td deleted
    assert teds(TABLE, []) == pytest.approx(1 / 7)  # only the table node survives


def test_table_similarity():
    assert table_similarity([], [TABLE]) is None
    assert table_similarity([TABLE], [TABLE]) == 1.0
    assert table_similarity([TABLE, TABLE], [TABLE]) == 0.5  # missing table scores 0
    assert table_similarity([TABLE], [TABLE, TABLE]) == 0.5  # so does an extra one
    assert table_similarity([TABLE], []) == 0.0


def test_normalize_field():
    assert normalize_field("RM 12.50") == "rm1250"
    assert normalize_field(" rm12,50 ") == "rm1250"
    assert normalize_field("(No: 01/02-A)") == "no0102a"
    assert normalize_field("Ｒｍ１２") == "rm12"  # full-width forms fold under NFKC


def test_field_accuracy():
    fields = {"total": "RM 12.50", "date": "01/02/2024", "invoice": "INV-0099", "empty": "", "dash": "-"}
    hypothesis = "| Total | rm12.50 |\n\nDate: 01-02-2024\nInvoice INV-0098"
    assert field_accuracy(fields, hypothesis) == {"total": True, "date": True, "invoice": False}
