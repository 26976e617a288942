"""The kinds of field value: how dates, amounts, IBANs, VAT ids and the rest are found
in a line of OCR text, read into their normal form and checked."""

from __future__ import annotations

from decimal import Decimal

import pytest

from appliance.fields.capitals import chinese_capital_amount
from appliance.fields.checksums import iban_valid, uscc_valid
from appliance.fields.kinds import (KINDS, Money, Parsed, find_amounts, find_dates, find_ibans,
                                    find_vat_ids, misread_amount, parse)


def raws(found: list[tuple[tuple[int, int], Parsed]]) -> list[str]:
    return [parsed.raw for _, parsed in found]


def one_digit_changed(code: str, checked: int | None = None) -> list[str]:
    """``code`` with each of its digits (of the first ``checked`` characters) in turn
    replaced by the next one."""
    return [code[:i] + str((int(ch) + 1) % 10) + code[i + 1:]
            for i, ch in enumerate(code[:checked]) if ch.isdigit()]


# --- dates -------------------------------------------------------------------------


@pytest.mark.parametrize("raw, iso", [
    ("25/12/2018", "2018-12-25"),
    ("25-12-2018", "2018-12-25"),
    ("25.12.2018", "2018-12-25"),
    ("25.12.18", "2018-12-25"),
    ("01.02.69", "2069-02-01"),  # two-digit years: 00-69 are 20xx
    ("01.02.70", "1970-02-01"),  # and 70-99 19xx
    ("2024-03-15", "2024-03-15"),
    ("2024/03/15", "2024-03-15"),
    ("12 Jan 2024", "2024-01-12"),
    ("12 January 2024", "2024-01-12"),
    ("Jan 12, 2024", "2024-01-12"),
    ("January 12 2024", "2024-01-12"),
    ("Jan. 12, 2024", "2024-01-12"),
    ("12-Jan-2024", "2024-01-12"),
    ("12-JAN-24", "2024-01-12"),
    ("12Jan2024", "2024-01-12"),
    ("1st March 2024", "2024-03-01"),
    ("12. März 2024", "2024-03-12"),
    ("12. Marz 2024", "2024-03-12"),  # the umlaut lost
    ("3. Dezember 2023", "2023-12-03"),
    ("3 mars 2024", "2024-03-03"),
    ("1er février 2024", "2024-02-01"),
    ("5 août 2024", "2024-08-05"),
    ("12 janv. 2024", "2024-01-12"),
    ("2024年3月15日", "2024-03-15"),
    ("2024 年 3 月 15 日", "2024-03-15"),
    ("25/12/2018 10:15", "2018-12-25"),  # the time is not part of it
    ("Invoice date: 15.03.2024", "2024-03-15"),
    ("Mon, 12 Jan 2024", "2024-01-12"),
    ("29.02.2024", "2024-02-29"),
])
def test_a_date_is_read_to_iso(raw, iso):
    assert parse("date", raw) == Parsed(raw, iso)


@pytest.mark.parametrize("raw, day_first, iso", [
    ("03/04/2024", True, "2024-04-03"),
    ("03/04/2024", False, "2024-03-04"),  # as in the US
    ("13/04/2024", True, "2024-04-13"),  # 13 can only be the day...
    ("13/04/2024", False, "2024-04-13"),
    ("04/13/2024", True, "2024-04-13"),  # ...whichever way is asked for
    ("04/13/2024", False, "2024-04-13"),
    ("3/4/24", False, "2024-03-04"),
    ("2024-03-04", False, "2024-03-04"),  # year first is always year-month-day
])
def test_day_first_decides_only_what_the_numbers_leave_open(raw, day_first, iso):
    assert parse("date", raw, day_first=day_first).value == iso


@pytest.mark.parametrize("raw, problem", [
    ("31.02.2024", "the date 31.02.2024 does not exist"),
    ("2023-02-29", "the date 2023-02-29 does not exist"),
    ("31 April 2024", "the date 31 April 2024 does not exist"),
    ("30/02/24", "the date 30/02/24 does not exist"),
])
def test_a_date_that_does_not_exist_is_read_with_its_problem(raw, problem):
    assert parse("date", raw).problem == problem


@pytest.mark.parametrize("raw", [
    "13/13/2024", "35/12/2024", "2024-13-01", "01.01.1899", "01.01.2101", "12.50",
    "1.234,56", "43000 KAJANG", "INV-2024-0042", "192.168.1.1", "Tel 03-1234 5678", "Jan 2024",
    "no date here", "", "12 APRİL 2024",  # a dotted İ only matches "april" ignoring case
])
def test_what_is_no_date(raw):
    assert parse("date", raw) is None


@pytest.mark.parametrize("text, expected", [
    ("Date: 25/12/2018 10:15", [((6, 16), "2018-12-25")]),
    ("from 01.03.2024 to 31.03.2024", [((5, 15), "2024-03-01"), ((19, 29), "2024-03-31")]),
    ("开票日期 2024年3月15日", [((5, 15), "2024-03-15")]),
    ("Due 14 Apr 2024, paid Jan 2, 2024", [((4, 15), "2024-04-14"), ((22, 33), "2024-01-02")]),
    ("TOTAL RM 15.70", []),
    # OCR reads a month's O as a zero
    ("Date: 29-0ct-2022 16:29:33", [((6, 17), "2022-10-29")]),
    ("N0v 3, 2021", [((0, 11), "2021-11-03")]),
    # OCR runs the time into the date: the date ends where the time starts
    ("10-05-201816:01:18", [((0, 10), "2018-05-10")]),
    ("Date: 02/01/1611:41:47AM", [((6, 14), "2016-01-02")]),
    ("01/05/2016-13:19:16-29-CASHIER", [((0, 10), "2016-05-01")]),
    ("2018-05-0116:01", [((0, 10), "2018-05-01")]),
    ("02 Jun 201818:23", [((0, 11), "2018-06-02")]),
    ("REG #13-27/04/2018", [((8, 18), "2018-04-27")]),  # a dash before a slashed date
    ("INV-2024-03-04", []),  # ...but not inside a dashed reference
])
def test_find_dates_gives_every_date_and_its_span(text, expected):
    assert [(span, parsed.value) for span, parsed in find_dates(text)] == expected


# --- amounts -----------------------------------------------------------------------


@pytest.mark.parametrize("raw, amount, currency", [
    ("1.234,56", "1234.56", None),
    ("1,234.56", "1234.56", None),
    ("1234.56", "1234.56", None),
    ("1234,56", "1234.56", None),
    ("1 234,56", "1234.56", None),
    ("1\u00a0234,56", "1234.56", None),  # NBSP
    ("1\u2009234,56", "1234.56", None),  # thin space
    ("1\u202f234,56", "1234.56", None),  # narrow NBSP
    ("1 234.56", "1234.56", None),  # read whole, a plain space groups thousands
    ("1.234.567,89", "1234567.89", None),
    ("12,00", "12.00", None),
    ("12", "12.00", None),
    ("0.5", "0.50", None),
    ("RM 12.00", "12.00", "MYR"),
    ("RM12.00", "12.00", "MYR"),
    ("€ 12,00", "12.00", "EUR"),
    ("€\u00a012,00", "12.00", "EUR"),
    ("12,00 €", "12.00", "EUR"),
    ("12,00€", "12.00", "EUR"),
    ("12.00 EUR", "12.00", "EUR"),
    ("EUR 12.00", "12.00", "EUR"),
    ("$1,000", "1000.00", "USD"),
    ("USD 1,000.00", "1000.00", "USD"),
    ("US$ 5.00", "5.00", "USD"),
    ("£3.50", "3.50", "GBP"),
    ("¥1,234.00", "1234.00", "CNY"),
    ("￥88.00", "88.00", "CNY"),
    ("320元", "320.00", "CNY"),
    ("RMB 12.50", "12.50", "CNY"),
    ("CHF 1'234.50", "1234.50", "CHF"),
    ("Fr. 12.50", "12.50", "CHF"),
    ("JPY 1,200", "1200.00", "JPY"),
    ("S$ 4.20", "4.20", "SGD"),
    ("-12.00", "-12.00", None),
    ("−12.00", "-12.00", None),  # the minus sign
    ("(12.00)", "-12.00", None),
    ("12.00-", "-12.00", None),
    ("-€ 5,00", "-5.00", "EUR"),
    ("€ -5,00", "-5.00", "EUR"),
    ("(EUR 12.00)", "-12.00", "EUR"),
    ("壹万肆仟肆佰陆拾肆元整", "14464.00", "CNY"),
    ("Total: RM 15.70", "15.70", "MYR"),  # the first amount in the text
])
def test_an_amount_is_read_with_its_currency(raw, amount, currency):
    assert parse("money", raw) == Parsed(raw, Money(Decimal(amount), currency))


@pytest.mark.parametrize("raw, amount", [
    ("1.234", "1234.00"),  # three digits after one mark: thousands
    ("1,234", "1234.00"),
    ("EUR 1.234", "1234.00"),  # whatever the currency
    ("12.345", "12345.00"),
    ("123,456", "123456.00"),
    ("0,125", "0.125"),  # no thousands group starts with 0: decimals, all kept
    ("1234.567", "1234.567"),  # four digits before the mark: decimals
    ("12.3456", "12.3456"),
    ("1.5", "1.50"),
    ("1.234.567", "1234567.00"),  # a mark repeated groups thousands
    ("1,234,567", "1234567.00"),
    ("1,234.5", "1234.50"),
])
def test_one_mark_followed_by_three_digits_groups_thousands(raw, amount):
    value = parse("money", raw).value
    assert value.amount == Decimal(amount) and str(value.amount) == amount


@pytest.mark.parametrize("raw", [
    "19%", "7 %", "19,5 %", "25.12.2018", "+49 30 1234567", "Tel 03-1234 5678",
    "DE89 3704 0044 0532 0130 00", "DE136695976", "1234567890123", "1.234.56", "1,234,56",
    "10:15", "abc", "",
])
def test_what_is_no_amount(raw):
    assert parse("money", raw) is None


@pytest.mark.parametrize("raw, number", [
    ("1.234,56", "1234.56"),
    ("1,234.56", "1234.56"),
    ("12,00", "12.00"),  # as written: no quantising
    ("7", "7"),
    ("1.234", "1234"),
    ("-3,5", "-3.5"),
    ("RM 12.00", "12.00"),  # a currency written with it is dropped
    ("壹拾万零伍元整", "100005.00"),
])
def test_a_number_is_an_amount_without_its_currency(raw, number):
    value = parse("number", raw).value
    assert isinstance(value, Decimal) and str(value) == number


@pytest.mark.parametrize("text, found", [
    ("TOTAL RM 15.70", ["RM 15.70"]),
    ("MILO TIN 2 x 12.50 25.00", ["2", "12.50", "25.00"]),
    ("Subtotal 1.000,00 EUR", ["1.000,00 EUR"]),
    ("VAT 19% 190,00 EUR", ["190,00 EUR"]),
    ("MwSt 7 % 0,49 €", ["0,49 €"]),
    ("Date: 25/12/2018 10:15 RM 9.90", ["RM 9.90"]),  # the date's and the time's digits are not
    ("2018-05-0116:01 RM 9.90", ["RM 9.90"]),  # nor those of a time run into the date
    ("Invoice date: 15.03.2024 Due date: 14.04.2024", []),
    ("TEL 03-8736 5678", []),
    ("Tel: +49 30 1234567 Fax +49 30 1234568", []),
    ("Telefon (030) 1234 5678 Betrag 4,20", ["4,20"]),
    ("Call 012-345 6789 now, 12.00 due", ["12.00"]),
    ("IBAN: DE89 3704 0044 0532 0130 00", []),
    ("VAT ID: DE136695976 ATU13585627", []),
    ("税号 91350100M000100Y43", []),
    ("Invoice No.: INV-2024-0042", []),
    ("Order 1234567890123 paid 12.50", ["12.50"]),  # more than 12 digits: a reference
    ("#123 ref A123 B12 12kg", []),
    ("Rabatt -5,00 Pfand (0.25) Storno 3.00-", ["-5,00", "(0.25)", "3.00-"]),
    ("Item (2) 3.50", ["2", "3.50"]),  # brackets without decimals are no sign
    ("2 100.00", ["2", "100.00"]),  # a plain space before point decimals is a column gap
    ("Betrag 1 234,56 €", ["1 234,56 €"]),
    ("价税合计（大写）⊗壹万肆仟肆佰陆拾肆元整 （小写）¥14464.00",
     ["⊗壹万肆仟肆佰陆拾肆元整", "¥14464.00"]),
    ("Hauptstraße 5, 10115 Berlin", ["5", "10115"]),
])
def test_find_amounts_skips_dates_phones_ids_and_percentages(text, found):
    assert raws(find_amounts(text)) == found


def test_find_amounts_gives_spans_and_values():
    [(span, parsed)] = find_amounts("TOTAL RM 15.70 (incl. 6% SST)")
    assert span == (6, 14) and parsed == Parsed("RM 15.70", Money(Decimal("15.70"), "MYR"))
    [(span, parsed)] = find_amounts("Storno (12.00) x")
    assert span == (7, 14) and parsed.value.amount == Decimal("-12.00")
    [(span, parsed)] = find_amounts("Item (2)")
    assert span == (6, 7) and parsed.value.amount == Decimal("2.00")


@pytest.mark.parametrize("text, amount, currency", [
    ("28-90", "28.90", None), (" 52:00 ", "52.00", None), ("96..90", "96.90", None),
    ("RM 7=40", "7.40", "MYR"), ("12-50 €", "12.50", "EUR"),
])
def test_a_cell_whose_decimal_point_was_misread_is_an_amount_kept_as_read(text, amount, currency):
    span, parsed = misread_amount(text)
    assert parsed.raw == text.strip() and text[span[0]:span[1]] == parsed.raw
    assert parsed.value == Money(Decimal(amount), currency)


@pytest.mark.parametrize("text", ["28.90", "28-9", "2024-12-01", "12:30:15", "TOTAL 28-90",
                                  "28-90 x", "1-2-30"])
def test_what_is_no_misread_amount(text):
    assert misread_amount(text) is None


@pytest.mark.parametrize("text, amount", [
    ("壹万肆仟肆佰陆拾肆元整", "14464.00"),
    ("叁佰贰拾元伍角陆分", "320.56"),
    ("壹拾万零伍元整", "100005.00"),
    ("零元整", "0.00"),
    ("贰亿叁仟万元整", "230000000.00"),
    ("⊗壹佰元整", "100.00"),
    ("Ⓧ壹佰元整", "100.00"),
    ("人民币壹佰圆整", "100.00"),
    ("人民币⊗伍拾元正", "50.00"),
    ("拾元整", "10.00"),
    ("叁元零伍分", "3.05"),
    ("伍角", "0.50"),
    ("壹仟零壹拾元", "1010.00"),
    ("玖仟玖佰玖拾玖万玖仟玖佰玖拾玖元玖角玖分", "99999999.99"),
    ("壹萬貳仟圓整", "12000.00"),  # traditional forms
])
def test_chinese_capital_numerals(text, amount):
    value = chinese_capital_amount(text)
    assert value == Decimal(amount) and str(value) == amount


@pytest.mark.parametrize("text", [
    "壹万", "元整", "佰元", "壹贰元", "14464.00", "价税合计", "", "abc", "壹万元元",
])
def test_what_is_no_amount_in_capitals(text):
    assert chinese_capital_amount(text) is None


# --- IBANs -------------------------------------------------------------------------

VALID_IBANS = ["DE89370400440532013000", "GB82WEST12345698765432", "FR1420041010050500013M02606",
               "NL91ABNA0417164300", "CH9300762011623852957", "BE68539007547034",
               "NO9386011117947", "AT611904300234573201"]


@pytest.mark.parametrize("iban", VALID_IBANS)
def test_a_valid_iban_passes_and_every_one_digit_change_fails(iban):
    assert iban_valid(iban)
    assert not any(iban_valid(changed) for changed in one_digit_changed(iban))


@pytest.mark.parametrize("iban, valid", [
    ("DE89 3704 0044 0532 0130 00", True),  # printed in groups
    ("de89370400440532013000", True),
    ("DE8937040044053201300", False),  # a digit short
    ("DE893704004405320130000", False),
    ("XX89370400440532013000", False),  # no such country
])
def test_iban_valid(iban, valid):
    assert iban_valid(iban) is valid


@pytest.mark.parametrize("raw, value, problem", [
    ("DE89 3704 0044 0532 0130 00", "DE89370400440532013000", None),
    ("gb82 west 1234 5698 7654 32", "GB82WEST12345698765432", None),
    ("DE88 3704 0044 0532 0130 00", "DE88370400440532013000",
     "IBAN check digits do not match (mod 97)"),
    ("DE89 3704 0044 0532 0130 0", "DE8937040044053201300",
     "DE IBANs have 22 characters, this one 21"),
    ("XX89 3704 0044 0532 0130 00", "XX89370400440532013000", "XX is not a country with IBANs"),
])
def test_parse_iban(raw, value, problem):
    assert parse("iban", raw) == Parsed(raw, value, problem)


@pytest.mark.parametrize("raw", ["DE89", "hello world", "12345678901234567890", ""])
def test_what_is_no_iban(raw):
    assert parse("iban", raw) is None


@pytest.mark.parametrize("text, found", [
    ("IBAN: DE89 3704 0044 0532 0130 00", [((6, 33), "DE89370400440532013000", None)]),
    ("IBAN DE89370400440532013000 BIC COBADEFFXXX", [((5, 27), "DE89370400440532013000", None)]),
    ("BE68 5390 0754 7034 BIC GEBABEBB", [((0, 19), "BE68539007547034", None)]),
    ("IBAN: DE89 3704 0044 0532 0130 0 BIC x",
     [((6, 32), "DE8937040044053201300", "DE IBANs have 22 characters, this one 21")]),
    ("IBAN: DE88 3704 0044 0532 0130 00",
     [((6, 33), "DE88370400440532013000", "IBAN check digits do not match (mod 97)")]),
    ("VAT DE136695976, ISO 9001, AT20 Stück", []),
])
def test_find_ibans(text, found):
    assert [(span, p.value, p.problem) for span, p in find_ibans(text)] == found


# --- VAT ids and the USCC ----------------------------------------------------------

# with how many of their characters the check covers (a Dutch company's check digit
# covers its 9-digit number, not the branch after the B)
VALID_VAT_IDS = [("DE136695976", None), ("ATU13585627", None), ("NL004495445B01", 11),
                 ("BE0428759497", None), ("IT00743110157", None), ("FR40303265045", None),
                 ("PL5260250995", None), ("GB980780684", None), ("ESB58378431", None),
                 ("ES12345678Z", None), ("ESX1234567L", None), ("91350100M000100Y43", None),
                 ("91110108551385082Q", None)]


@pytest.mark.parametrize("vat_id, checked", VALID_VAT_IDS)
def test_a_valid_vat_id_passes_and_every_checked_one_digit_change_is_refused(vat_id, checked):
    assert parse("vat_id", vat_id) == Parsed(vat_id, vat_id)
    for changed in one_digit_changed(vat_id, checked):
        assert parse("vat_id", changed).problem is not None, changed


@pytest.mark.parametrize("raw, value, problem", [
    ("DE 136 695 976", "DE136695976", None),
    ("de136.695.976", "DE136695976", None),
    ("BE 0428.759.497", "BE0428759497", None),
    ("DE136695977", "DE136695977", "DE VAT number check digits do not match"),
    ("NL004495446B01", "NL004495446B01", "NL VAT number check digits do not match"),
    ("NL004495445B02", "NL004495445B02", None),  # a company's branch number is not checked
    ("DE12345", "DE12345", "not in the format of DE VAT numbers"),
    ("ATU1358562", "ATU1358562", "not in the format of AT VAT numbers"),
    ("DK13585628", "DK13585628", None),  # format only
    ("SE556000016701", "SE556000016701", None),
    ("FRK7399859412", "FRK7399859412", None),  # a key with letters: format only
    ("GBGD001", "GBGD001", None),  # a government department: no check digits
    ("91350100M000100Y44", "91350100M000100Y44",
     "USCC check character does not match (GB 32100-2015)"),
])
def test_parse_vat_id(raw, value, problem):
    assert parse("vat_id", raw) == Parsed(raw, value, problem)


@pytest.mark.parametrize("raw", ["hello", "DEUTSCHE", "XY123456789", "12345", ""])
def test_what_is_no_vat_id(raw):
    assert parse("vat_id", raw) is None


@pytest.mark.parametrize("text, found", [
    ("VAT ID: DE136695976", [((8, 19), "DE136695976", None)]),
    ("USt-IdNr.: DE 136 695 976.", [((11, 25), "DE136695976", None)]),
    ("UID ATU13585627 / BTW NL004495445B01",
     [((4, 15), "ATU13585627", None), ((22, 36), "NL004495445B01", None)]),
    ("VAT DE136695977 EUR", [((4, 15), "DE136695977", "DE VAT number check digits do not match")]),
    ("统一社会信用代码：91350100M000100Y43", [((9, 27), "91350100M000100Y43", None)]),
    ("IBAN PL61 1090 1014 0000 0712 1981 2874", []),  # no PL VAT number in a Polish IBAN
    ("Deutsche Bank DE89 3704 0044 0532 0130 00", []),
])
def test_find_vat_ids(text, found):
    assert [(span, p.value, p.problem) for span, p in find_vat_ids(text)] == found


@pytest.mark.parametrize("code, valid", [
    ("91350100M000100Y43", True),
    ("91110108551385082Q", True),
    ("91350100M000100Y44", False),
    ("91350100M000100Y4", False),  # 17 characters
    ("91350100M000100YI3", False),  # I is not in the code's charset
    ("91350100m000100y43", False),  # the code is upper case
])
def test_uscc_valid(code, valid):
    assert uscc_valid(code) is valid


# --- enum, regex, text -------------------------------------------------------------

CURRENCIES = ("EUR", "USD", "Swiss Franc")


@pytest.mark.parametrize("raw, value, problem", [
    ("EUR", "EUR", None),
    ("eur", "EUR", None),
    (" usd ", "USD", None),
    ("swiss  FRANC", "Swiss Franc", None),
    ("GBP", "GBP", "'GBP' is not one of EUR, USD, Swiss Franc"),
])
def test_enum_is_one_of_its_choices_in_their_spelling(raw, value, problem):
    assert parse("enum", raw, choices=CURRENCIES) == Parsed(raw.strip(), value, problem)


@pytest.mark.parametrize("raw, pattern, problem", [
    ("INV-2024-0042", r"[A-Z]+-\d{4}-\d+", None),
    (" K7 ", r"K\d+", None),
    ("K7x", r"K\d+", r"'K7x' does not match the pattern K\d+"),
    ("xK7", r"K\d+", r"'xK7' does not match the pattern K\d+"),
    ("anything", None, None),
])
def test_regex_must_match_the_whole_value(raw, pattern, problem):
    assert parse("regex", raw, pattern=pattern) == Parsed(raw.strip(), raw.strip(), problem)


@pytest.mark.parametrize("raw, value", [
    ("KEDAI MAJU JAYA SDN BHD", "KEDAI MAJU JAYA SDN BHD"),
    ("  NO 12   JALAN\tBESAR \n", "NO 12 JALAN BESAR"),
])
def test_text_has_its_whitespace_collapsed(raw, value):
    assert parse("text", raw).value == value


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_is_no_value_of_any_kind(kind):
    assert parse(kind, " \t\n", choices=("a",), pattern=".*") is None


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="colour"):
        parse("colour", "red")
