"""The kinds of value a document field holds: how each is found in a line of OCR text,
read into its normal form and checked.

=======  ======================================  ==========================================
kind     what it reads                           normal form (``Parsed.value``)
=======  ======================================  ==========================================
text     any text                                the text, its whitespace collapsed
date     a numeric, month-name or Chinese date   ``"YYYY-MM-DD"``
money    an amount, with its currency if shown   ``Money`` (ISO 4217 code, or None)
number   an amount's number                      ``Decimal`` as written (a currency dropped)
iban     an IBAN, in groups of four or not       compact, upper case
vat_id   an EU VAT number or China's USCC        compact, upper case
enum     one of the field's choices              the choice as the schema spells it
regex    text the field's pattern matches whole  the text (any text without a pattern)
=======  ======================================  ==========================================

A value that looks like its kind but fails its check (a date that does not exist, an
IBAN or VAT number whose check digits disagree, a word that is not one of the choices)
is still read, with ``problem`` saying why: the validator reports it.

Dates: day.month.year unless ``day_first=False`` (month/day/year, as in the US); a
first number over 12 is a day and a second over 12 a day whichever way is asked for.
Two-digit years 00-69 are 20xx, 70-99 19xx; years outside 1900-2099 are no dates. A
time after a date is not part of it, even where OCR ran the two together
("10-05-201816:01:18", "01/05/2016-13:19"). A date that does not exist keeps its numbers:
"31.02.2024" reads "2024-02-31", with its problem.

Amounts: with both "." and "," the last one is the decimal mark. With one of them
once, it groups thousands when exactly three digits follow it and one to three digits,
not starting with 0, precede it (1.234 and 1,234 are 1234; 0,125 and 12,50 are
decimals), whatever the currency; a mark repeated (1.234.567) always groups thousands.
An apostrophe, NBSP or thin space groups thousands; so does a plain space when the
amount ends in decimals after a comma (1 234,56), as a space between a quantity and a
price is no thousands mark; a value read whole (``parse``) may group with plain spaces
whatever its decimals. A leading minus, brackets around an amount with decimals and a
minus after one make it negative. Percentages, and the digits of dates, times, phone
numbers, IBANs, VAT ids and runs of more than 12 digits, are no amounts. A currency is
named by its code or sign: RM is MYR, € EUR, $ USD, £ GBP, ¥ and 元 CNY, Fr. CHF.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from appliance.fields import checksums
from appliance.fields.capitals import CAPITAL, chinese_capital_amount

KINDS = ("text", "date", "money", "number", "iban", "vat_id", "enum", "regex")


@dataclass(frozen=True)
class Money:
    amount: Decimal  # quantised to 0.01 unless more decimals were written
    currency: str | None  # ISO 4217 code where the text says it, else None


# each problem's words by its code ({name}s are its values): the English of a failed
# format check (fields.validate's ``format_<code>``), which ui/i18n.py translates
PROBLEMS = {
    "not_kind": "not a {kind}",
    "not_a_choice": "{value} is not one of {choices}",
    "no_match": "{value} does not match the pattern {pattern}",
    "no_such_date": "the date {raw} does not exist",
    "iban_country": "{country} is not a country with IBANs",
    "iban_length": "{country} IBANs have {length} characters, this one {count}",
    "iban_digits": "IBAN check digits do not match (mod 97)",
    "uscc_digit": "USCC check character does not match (GB 32100-2015)",
    "vat_format": "not in the format of {country} VAT numbers",
    "vat_digits": "{country} VAT number check digits do not match",
}


class Problem(str):
    """Why a value fails its kind's check: its English words (it is that string), with
    the code of PROBLEMS and the values they were made of, to be said in other words."""

    code: str
    values: dict[str, str]

    def __new__(cls, code: str, **values: object) -> Problem:
        said = {name: str(value) for name, value in values.items()}
        problem = super().__new__(cls, PROBLEMS[code].format(**said))
        problem.code, problem.values = code, said
        return problem


@dataclass(frozen=True)
class Parsed:
    raw: str  # the text as found (stripped)
    value: object  # the normal form of the kind (see the module's table)
    problem: Problem | None = None  # None when the value passes its check, else why not


def parse(kind: str, raw: str, *, choices: tuple[str, ...] = (), pattern: str | None = None,
          day_first: bool = True) -> Parsed | None:
    """``raw`` read as ``kind``; None when it does not look like the kind at all. A date or
    an amount is the first found in ``raw`` unless the whole of it is one."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: not one of {', '.join(KINDS)}")
    text = raw.strip()
    if not text:
        return None
    collapsed = " ".join(text.split())
    if kind == "text":
        return Parsed(text, collapsed)
    if kind == "date":
        dates = find_dates(text, day_first=day_first)
        return Parsed(text, dates[0][1].value, dates[0][1].problem) if dates else None
    if kind in ("money", "number"):
        read = _whole_amount(text)
        if read is None:
            amounts = find_amounts(text)
            read = _whole_amount(amounts[0][1].raw) if amounts else None
        if read is None:
            return None
        number, currency = read
        return Parsed(text, Money(_cents(number), currency) if kind == "money" else number)
    if kind == "iban":
        compact = re.sub(r"[\s-]", "", text).upper()
        looks_like = re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", compact)
        return _iban(text, compact) if looks_like else None
    if kind == "vat_id":
        return _vat_id(text, re.sub(r"[\s.-]", "", text).upper())
    if kind == "enum":
        folded = collapsed.casefold()
        choice = next((c for c in choices if " ".join(c.split()).casefold() == folded), None)
        if choice is None:
            return Parsed(text, collapsed, Problem("not_a_choice", value=repr(collapsed),
                                                   choices=", ".join(choices)))
        return Parsed(text, choice)
    if pattern is None or re.fullmatch(pattern, text):
        return Parsed(text, text)
    return Parsed(text, text, Problem("no_match", value=repr(text), pattern=pattern))


def _overlaps(span: tuple[int, int], others: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in others)


# --- dates -------------------------------------------------------------------------

_MONTH_NAMES = (  # English, German, French, Dutch, Malay, Spanish, Italian
    "jan january januar jänner janv janvier januari enero gennaio",
    "feb february februar févr février februari febrero febbraio",
    "mar march märz maerz mär mrz mars maart mac marzo",
    "apr april avr avril abril aprile",
    "may mai mei mayo maggio",
    "jun june juni juin junio giugno",
    "jul july juli juil juillet julai julio luglio",
    "aug august août augustus ogos agosto",
    "sep sept september septembre septiembre settembre",
    "oct october oktober okt octobre octubre ottobre",
    "nov november novembre noviembre",
    "dec december dezember dez déc décembre disember diciembre dicembre",
)


def _unaccented(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


# OCR and keyboards often drop the accents: "fevrier", "marz", "aout" are months too
_MONTHS = {name: number for number, names in enumerate(_MONTH_NAMES, 1)
           for word in names.split() for name in (word, _unaccented(word))}
_MONTH = "|".join(sorted(map(re.escape, _MONTHS), key=len, reverse=True))
_NOT_LETTER = r"(?![^\W\d_])"


def _month(name: str) -> int:
    """The number of a month's name; 0 (no month) for what case-insensitive matching
    took for one by its wider folding ("APRİL" with a dotted İ)."""
    return _MONTHS.get(name.casefold(), 0)


# a time that OCR ran into the date's last digits ("10-05-201816:01:18", "01/05/16-13:19")
# ends the date; so a four-digit year is 19xx or 20xx ("02/01/1611:41" is 2016)
_TIME_GLUED = r"(?=-?\d{1,2}:\d{2})"
_NUMERIC_DATE = re.compile(
    r"(?<![\d.,/])(?:(?<!-)|(?=\d{1,2}[./]))"  # "#13-27/04/2018": a dash before no dash-date
    r"(?:(?P<year>\d{4})(?P<sep>[./-])(?P<month>\d{1,2})(?P=sep)(?P<day>\d{1,2})"
    r"|(?P<first>\d{1,2})(?P<sep2>[./-])(?P<second>\d{1,2})(?P=sep2)(?P<short>(?:19|20)\d{2}|\d{2}))"
    rf"(?:(?!\d|[./-]\d)|{_TIME_GLUED})")
_CHINESE_DATE = re.compile(r"(?<!\d)(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})(?:\s*[日号])?")
_DAY_MONTH_YEAR = re.compile(
    rf"(?<![\d.,])(\d{{1,2}})(?:st|nd|rd|th|er|\.)?[\s/-]*({_MONTH}){_NOT_LETTER}\.?[\s/,-]*"
    rf"((?:19|20)\d{{2}}|\d{{2}})(?:(?!\d)|{_TIME_GLUED})", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(
    rf"(?<![^\W\d_])({_MONTH}){_NOT_LETTER}\.?\s*(\d{{1,2}})(?:st|nd|rd|th)?(?:,\s*|\s+)"
    r"(\d{4})(?!\d)", re.IGNORECASE)


_OCR_ZERO_IN_WORD = re.compile(r"(?<=[A-Za-z])0(?=[A-Za-z])|(?<![0-9])0(?=[a-z]{2})")


def find_dates(text: str, *, day_first: bool = True) -> list[tuple[tuple[int, int], Parsed]]:
    """Every date in a line of text with its span, left to right (where two readings
    overlap, the one that starts first and then the longer)."""
    candidates = []
    named = _OCR_ZERO_IN_WORD.sub("o", text)  # "29-0ct-2022": OCR reads an O as 0
    for m in _NUMERIC_DATE.finditer(text):
        if m["year"]:
            year, month, day = m["year"], int(m["month"]), int(m["day"])
        else:
            first, second = int(m["first"]), int(m["second"])
            day, month = (first, second) if day_first else (second, first)
            if month > 12 >= day:  # only one way round is a date
                day, month = month, day
            year = m["short"]
        candidates.append((m.span(), _date(m[0], year, month, day)))
    for m in _CHINESE_DATE.finditer(text):
        candidates.append((m.span(), _date(m[0], m[1], int(m[2]), int(m[3]))))
    for m in _DAY_MONTH_YEAR.finditer(named):  # same length as text: the spans hold
        candidates.append((m.span(), _date(text[m.start():m.end()], m[3], _month(m[2]),
                                           int(m[1]))))
    for m in _MONTH_DAY_YEAR.finditer(named):
        candidates.append((m.span(), _date(text[m.start():m.end()], m[3], _month(m[1]),
                                           int(m[2]))))
    found = []
    for span, parsed in sorted(((s, p) for s, p in candidates if p is not None),
                               key=lambda item: (item[0][0], -item[0][1])):
        if not _overlaps(span, [s for s, _ in found]):
            found.append((span, parsed))
    return found


def _date(raw: str, year_text: str, month: int, day: int) -> Parsed | None:
    """None when the numbers cannot be a date; a problem when the day is not in its month."""
    year = int(year_text)
    if len(year_text) == 2:
        year += 2000 if year < 70 else 1900
    if not (1900 <= year <= 2099 and 1 <= month <= 12 and 1 <= day <= 31):
        return None
    iso = f"{year:04d}-{month:02d}-{day:02d}"
    try:
        date(year, month, day)
    except ValueError:
        return Parsed(raw, iso, Problem("no_such_date", raw=raw))
    return Parsed(raw, iso)


# --- amounts -----------------------------------------------------------------------

_CURRENCIES = {code: code for code in (
    "EUR USD GBP CNY CHF JPY MYR SGD HKD AUD CAD NZD INR IDR THB PHP VND KRW TWD SEK NOK DKK "
    "PLN CZK HUF RON BGN TRY ZAR AED SAR BRL MXN RUB").split()} | {
    "RM": "MYR", "€": "EUR", "Euro": "EUR", "EURO": "EUR", "$": "USD", "US$": "USD", "£": "GBP",
    "¥": "CNY", "￥": "CNY", "元": "CNY", "RMB": "CNY", "人民币": "CNY", "Fr.": "CHF",
    "SFr.": "CHF", "S$": "SGD", "HK$": "HKD", "A$": "AUD", "C$": "CAD", "NT$": "TWD",
    "R$": "BRL", "₹": "INR", "Rp": "IDR", "₩": "KRW", "zł": "PLN", "Kč": "CZK", "₺": "TRY",
    "₽": "RUB"}
_CURRENCY = "|".join(sorted(map(re.escape, _CURRENCIES), key=len, reverse=True))
_NAMED_CURRENCY = re.compile(rf"(?<![^\W\d_])(?:{_CURRENCY})(?![^\W\d_])")  # not in a word


def _amount_pattern(any_space_groups: bool) -> re.Pattern:
    space_grouped = r"\d{1,3}(?:\ \d{3})+" + (r"(?:[.,]\d+)?" if any_space_groups else r",\d{1,2}")
    return re.compile(rf"""
        (?<![\w.,'’#/-])                     # not inside a word, a number or a reference
        (?P<open>\()? (?P<minus>[-−])?
        (?:(?P<pre>{_CURRENCY})\s?)?
        (?P<minus_after>[-−])?
        (?P<number>\d{{1,3}}(?P<mark>[.,'’\u00a0\u202f\u2009])\d{{3}}(?:(?P=mark)\d{{3}})*
                   (?:[.,]\d+)?
                 |{space_grouped}
                 |\d+(?:[.,]\d+)?)
        (?!\d|[.,'’/:-]\d)                   # not the head of a date, a time or a range
        (?:\s?(?P<post>{_CURRENCY}|[%％]))?
        (?P<close>\))? (?P<trail>-)?
        {_NOT_LETTER}(?!\d)
    """, re.VERBOSE)


_AMOUNT, _WHOLE_AMOUNT = _amount_pattern(False), _amount_pattern(True)
CENTS = re.compile(r"\d[.,]\d\d(?!\d)")  # a figure written with its cents: "20.00", "9,90"


def with_cents(raw: str) -> bool:
    """Whether an amount as read was written with its cents ("20.00", or "28-90" with
    its point misread), as money changing hands is."""
    return bool(CENTS.search(raw) or _MISREAD_POINT.fullmatch(raw.strip()))
_TIME = re.compile(r"(?<!\d)\d{1,2}:\d{2}(?::\d{2})?(?!\d)")
_PHONE_GROUP = r"\(?\d+\)?(?!\d|[.,]\d)"
_PHONE_LABEL = r"(?<![^\W\d_])(?:telefon|tel|phone|ph|fax|hp|mobile|mob|tél|tlf)\.?(?:\s*no\.?)?"
_PHONE = re.compile(
    rf"(?:\+|{_PHONE_LABEL}\s*[:.]?\s*\+?)\s?{_PHONE_GROUP}(?:[ /-]{{1,2}}{_PHONE_GROUP}){{0,5}}"
    r"|(?<![\d.,])\(?0\d{1,4}\)?[ /-]\d{3,4}[ -]?\d{3,4}(?!\d|[.,]\d)",  # a national number
    re.IGNORECASE)


def find_amounts(text: str) -> list[tuple[tuple[int, int], Parsed]]:
    """Every amount in a line of text with its span (sign and currency included), left
    to right; the digits of dates, times, phone numbers, IBANs and VAT ids are none."""
    dates = [span for span, _ in find_dates(text)]
    taken = dates + [span for span, _ in find_ibans(text) + find_vat_ids(text)]
    # a time may run straight on from a date: it starts where the date ends
    undated = "".join(" " if _overlaps((i, i + 1), dates) else ch for i, ch in enumerate(text))
    taken += [m.span() for m in _TIME.finditer(undated)]
    taken += [m.span() for m in _PHONE.finditer(text)]
    found = []
    pos = 0
    while (m := _AMOUNT.search(text, pos)) is not None:
        read = _read_amount(m)
        if read is None or _overlaps(read[0], taken):
            pos = m.end("number")  # a currency after it may lead the next: "10:15 RM 9.90"
            continue
        (start, end), number, currency = read
        found.append(((start, end), Parsed(text[start:end], Money(_cents(number), currency))))
        pos = m.end()
    for m in CAPITAL.finditer(text):
        amount = chinese_capital_amount(m[0])
        if amount is not None:
            found.append((m.span(), Parsed(m[0], Money(amount, "CNY"))))
    return sorted(found, key=lambda item: item[0])


def written_currency(text: str) -> str | None:
    """The currency ``text`` names most often, by code or sign, beside an amount or on
    its own ("TOTAL RM" over a column of amounts); None where it names none."""
    named = Counter(_CURRENCIES[match.group()] for match in _NAMED_CURRENCY.finditer(text))
    return named.most_common(1)[0][0] if named else None


# an amount alone in its cell whose decimal point OCR read as another mark: "28-90",
# "52:00", "96..90"; only where a label says an amount stands (see ``misread_amount``)
_MISREAD_POINT = re.compile(
    rf"(?:(?P<pre>{_CURRENCY})\s?)?(?P<units>\d{{1,7}})(?:[-:=]|\.\.)(?P<cents>\d\d)"
    rf"(?:\s?(?P<post>{_CURRENCY}))?")


def misread_amount(text: str) -> tuple[tuple[int, int], Parsed] | None:
    """The amount that ``text``, stripped, is the whole of when its decimal point was
    misread, with its span; None for anything else. Kept as read, so that it shows."""
    stripped = text.strip()
    m = _MISREAD_POINT.fullmatch(stripped)
    if m is None:
        return None
    start = text.index(stripped)
    amount = Money(Decimal(f"{m['units']}.{m['cents']}"), _CURRENCIES.get(m["pre"] or m["post"]))
    return (start, start + len(stripped)), Parsed(stripped, amount)


def _read_amount(m: re.Match) -> tuple[tuple[int, int], Decimal, str | None] | None:
    """The span, the signed number as written and the currency of an amount match."""
    number = _plain_number(m["number"])
    if m["post"] in ("%", "％") or number is None or sum(map(str.isdigit, m["number"])) > 12:
        return None
    # brackets and a minus after are signs only around decimals: "(2)" is a list's item
    decimals = number.as_tuple().exponent < 0
    bracketed = decimals and m["open"] and m["close"]
    trailing = decimals and m["trail"]
    start = m.start() + 1 if m["open"] and not bracketed else m.start()
    end = m.end() if bracketed or trailing else m.end("post") if m["post"] else m.end("number")
    if m["minus"] or m["minus_after"] or bracketed or trailing:
        number = -number
    return (start, end), number, _CURRENCIES.get(m["pre"] or m["post"])


def _plain_number(written: str) -> Decimal | None:
    """1.234,56 / 1,234.56 / 1'234.56 / 1 234,56 -> 1234.56 (see the module's rules)."""
    digits = re.sub(r"[ '’\u00a0\u202f\u2009]", "", written)
    marks = [ch for ch in digits if ch in ".,"]
    if not marks:
        return Decimal(digits)
    last = marks[-1]
    head, _, tail = digits.rpartition(last)
    if set(marks) == {last}:
        groups = digits.split(last)
        if (len(groups[0]) <= 3 and not groups[0].startswith("0")
                and all(len(group) == 3 for group in groups[1:])):
            return Decimal("".join(groups))
        return Decimal(f"{head}.{tail}") if len(groups) == 2 else None
    other = "," if last == "." else "."
    if not re.fullmatch(rf"\d{{1,3}}(?:{re.escape(other)}\d{{3}})+", head):
        return None
    return Decimal(f"{head.replace(other, '')}.{tail}")


def _whole_amount(text: str) -> tuple[Decimal, str | None] | None:
    """The number and currency of an amount that is the whole of ``text``."""
    capital = chinese_capital_amount(text)
    if capital is not None:
        return capital, "CNY"
    m = _WHOLE_AMOUNT.fullmatch(text)
    read = _read_amount(m) if m else None
    return None if read is None else (read[1], read[2])


def _cents(number: Decimal) -> Decimal:
    return number if number.as_tuple().exponent < -2 else number.quantize(Decimal("0.01"))


# --- IBANs and VAT ids -------------------------------------------------------------

_IBAN_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}")
_VAT_HEAD = re.compile(
    rf"(?<![A-Za-z0-9])(?:{'|'.join(checksums.VAT_FORMATS)})(?=[ .\u00a0-]?[0-9A-Z])")
# its second character (the category) is a digit, so no IBAN looks like one
_USCC = re.compile(r"[0-9A-Z]\d{7}[0-9A-Z]{10}")
_USCC_IN_TEXT = re.compile(rf"(?<![0-9A-Za-z]){_USCC.pattern}(?![0-9A-Za-z])")


def _grouped(text: str, start: int, separators: str, limit: int) -> list[tuple[int, str]]:
    """An identifier printed in groups from ``start``, one separator between groups:
    the end and the compact upper-case text after each group."""
    group = re.compile(rf"[{separators}]?([A-Za-z0-9]+)")
    prefixes, pos, compact = [], start, ""
    while len(compact) < limit and (m := group.match(text, pos)) is not None:
        pos, compact = m.end(), compact + m[1].upper()
        prefixes.append((pos, compact))
    return prefixes


def find_ibans(text: str) -> list[tuple[tuple[int, int], Parsed]]:
    """Every IBAN of a known country in a line of text, printed in groups or not, with
    its span; one of the wrong length or with wrong check digits has its problem."""
    found = []
    for head in _IBAN_HEAD.finditer(text):
        length = checksums.IBAN_LENGTHS.get(head[0][:2])
        if length is None or _overlaps(head.span(), [span for span, _ in found]):
            continue
        prefixes = _grouped(text, head.start(), " \u00a0", 34)
        exact = [prefix for prefix in prefixes if len(prefix[1]) == length]
        if exact:
            end, compact = exact[0]
        else:  # as printed, in fours up to a shorter last group; its length is the problem
            sizes = [len(b) - len(a) for (_, a), (_, b) in zip([(0, "")] + prefixes, prefixes)]
            count = next((i + 1 for i, size in enumerate(sizes) if size != 4), len(sizes))
            end, compact = prefixes[count - 1]
        if len(compact) >= 15:  # Norway's, the shortest
            found.append(((head.start(), end), _iban(text[head.start():end], compact)))
    return found


def _iban(raw: str, compact: str) -> Parsed:
    country, length = compact[:2], checksums.IBAN_LENGTHS.get(compact[:2])
    problem: Problem | None = None
    if length is None:
        problem = Problem("iban_country", country=country)
    elif len(compact) != length:
        problem = Problem("iban_length", country=country, length=length,
                          count=len(compact))
    elif not checksums.iban_valid(compact):
        problem = Problem("iban_digits")
    return Parsed(raw, compact, problem)


def find_vat_ids(text: str) -> list[tuple[tuple[int, int], Parsed]]:
    """Every EU VAT number in its country's format (spaces, dots or dashes between its
    groups) and every USCC in a line of text, with its span, left to right."""
    ibans = [span for span, _ in find_ibans(text)]  # a Polish IBAN starts like a PL VAT number
    found = []
    for head in _VAT_HEAD.finditer(text):
        if _overlaps(head.span(), [span for span, _ in found]):
            continue
        for end, compact in reversed(_grouped(text, head.start(), r" .\u00a0-", 16)):
            if checksums.VAT_FORMATS[compact[:2]].fullmatch(compact[2:]):
                found.append(((head.start(), end), _vat_id(text[head.start():end], compact)))
                break
    found += [(m.span(), _vat_id(m[0], m[0])) for m in _USCC_IN_TEXT.finditer(text)]
    return sorted(((span, parsed) for span, parsed in found if not _overlaps(span, ibans)),
                  key=lambda item: item[0])


def _vat_id(raw: str, compact: str) -> Parsed | None:
    if _USCC.fullmatch(compact):
        valid = checksums.uscc_valid(compact)
        return Parsed(raw, compact, None if valid else Problem("uscc_digit"))
    country, body = compact[:2], compact[2:]
    if country not in checksums.VAT_FORMATS or not any(ch.isdigit() for ch in body):
        return None
    if not checksums.VAT_FORMATS[country].fullmatch(body):
        return Parsed(raw, compact, Problem("vat_format", country=country))
    if checksums.vat_checksum(country, body) is False:
        return Parsed(raw, compact, Problem("vat_digits", country=country))
    return Parsed(raw, compact)
