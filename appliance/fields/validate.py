"""Three layers of checks on a document's fields, every result kept per field:

1. **format**: the value parses as its kind and passes its check (a date that exists,
   an IBAN's mod 97, a VAT id's or a Chinese credit code's check character, an enum's
   choices, a regex), and every required field is there;
2. **logic**: the values agree with each other: net + tax = gross within a cent, the
   capital-numeral total of a Chinese invoice equals its numeric total, a cash
   receipt's total is what was paid less the change, item rows that prove themselves
   add up to a sum printed under them (``items``), the due date is not before the
   issue date, no date lies in the future;
3. **business**: against what the appliance has seen and read: the same seller and
   invoice number seen before with another amount or date, the same document seen
   before, a value that is not in the page's accepted text (no evidence), and a
   fapiao's code, number, date or amount that differs from its QR code (``fields.qr``).

A failed check routes the document's last page to review with a reason a reviewer
can act on: ``missing_field: total`` or ``field_invalid: gross 191.00 != net 100.00 +
tax 19.00``.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from decimal import Decimal

from appliance.fields import payment
from appliance.fields.extract import Found
from appliance.fields.items import ItemSum
from appliance.fields.kinds import PROBLEMS, Money
from appliance.fields.qr import FapiaoQr
from appliance.fields.schema import FieldSpec

CENT = Decimal("0.01")
FUTURE_GRACE_DAYS = 1  # a date "tomorrow" is a time zone, not an error


# each check's words by its code ({name}s are its values): the English of the stored
# and API ``message``, and what ui/i18n.py translates as ``check_<code>``
WORDS = {
    "required": "required, not found",
    "format_ok": "valid {kind}",
    "no_check": "no check applies to this field",
    "date_real": "{day} is a real date",
    "date_past": "{day} is not in the future",
    "date_future": "{day} lies in the future",
    "sum_ok": "{whole} {total} = {first} {a} + {second} {b}",
    "sum_bad": "{whole} {total} != {first} {a} + {second} {b}",
    "capital_ok": "the total in capitals ({capital}) equals the total ({total})",
    "capital_bad": "the total in capitals ({capital}) differs from the total ({total})",
    "paid_ok": "total {total} = paid {paid} - change {change}",
    "paid_bad": "total {total} != paid {paid} - change {change}",
    "paid_rounded": "total {total}, rounded for cash to {owed} = paid {paid} - change {change}",
    "items_ok": "the {rows} item rows add up to {amount}, as printed under them",
    "items_bad": "the {rows} item rows add up to {amount}, which no sum under them shows "
                 "({shown}) and the {name} is not",
    "dates_ok": "due {due} on or after issue {issued}",
    "dates_bad": "due {due} before issue {issued}",
    "not_in_text": "not in the page's text",
    "seen_other": "document {document} has the same number with {name} {value}",
    "seen_before": "the same document was read before ({document})",
    "qr_ok": "as its QR code says",
    "qr_bad": "{value} != {expected} in its QR code",
    "name_ok": "read from a line of words, confidence {confidence}",
    "name_weak": "read from a line that is no name ({letters} letters, confidence "
                 "{confidence}): a scribble or a stamp?",
    # a value that fails its kind's check, by its problem (fields.kinds.PROBLEMS)
    **{f"format_{code}": words for code, words in PROBLEMS.items()},
}


@dataclass(frozen=True)
class Check:
    layer: str  # format | logic | business
    ok: bool
    code: str  # a key of WORDS
    values: tuple[tuple[str, str], ...] = ()  # WORDS[code]'s fields, in order

    @property
    def message(self) -> str:
        return WORDS[self.code].format(**dict(self.values))

    def as_dict(self) -> dict:
        return {"layer": self.layer, "ok": self.ok, "message": self.message,
                "code": self.code, "values": dict(self.values)}


def check(layer: str, ok: bool, code: str, **values) -> Check:
    return Check(layer, ok, code, tuple((name, str(value)) for name, value in values.items()))


@dataclass(frozen=True)
class Seen:
    """A document read before, by the values that identify it."""
    document_id: str
    values: dict[str, str]  # field name -> normalised value


def validate(specs: tuple[FieldSpec, ...], found: dict[str, Found], *, text: str,
             history: list[Seen], today: datetime.date | None = None,
             attested: frozenset[str] = frozenset(),
             items: ItemSum | None = None, qr: FapiaoQr | None = None
             ) -> dict[str, list[Check]]:
    """The checks of each field (by name; a missing field has its own entry).
    ``attested``: fields a person set, who is their evidence (the page's text may hold
    the engine's misreading of them). ``items``: the document's item rows, where they
    prove themselves. ``qr``: the document's fapiao QR code, where it has one."""
    today = today or datetime.date.today()
    checks: dict[str, list[Check]] = {spec.name: [] for spec in specs}
    for spec in specs:
        item = found.get(spec.name)
        if item is None:
            if spec.required:
                checks[spec.name].append(check("format", False, "required"))
            continue
        checks[spec.name] += _format(spec, item, today)
    _sums(found, checks)
    _payment(found, checks)
    _items(found, items, checks)
    _order_of_dates(found, checks)
    _names(specs, found, checks, attested)
    _business(found, checks, text, history, attested)
    _against_qr(found, checks, qr)
    return checks


MISSING, INVALID = "missing_field", "field_invalid"  # the codes of ``reasons``


def reasons(checks: dict[str, list[Check]]) -> list[str]:
    """Routing reasons for the failed checks (see ``quality.routing``): ``<code>: <field>``
    or ``<code>: <field>: <message>``."""
    out = []
    for name, results in checks.items():
        for result in results:
            if not result.ok:
                out.append(f"{MISSING}: {name}" if result.code == "required"
                           else f"{INVALID}: {name}: {result.message}")
    return out


def values(found: dict[str, Found]) -> dict[str, str]:
    """Each field's normalised value as a string (an amount without its currency)."""
    return {name: value_text(item.parsed.value) for name, item in found.items()}


def value_text(value) -> str:
    """A normalised value as a string: an amount as its decimal, without its currency."""
    if isinstance(value, Money):
        return str(value.amount)
    return str(value)


def _format(spec: FieldSpec, item: Found, today: datetime.date) -> list[Check]:
    """The value parses as its kind; a date is a real day, not in the future; a text
    is anything read (no check of its own)."""
    if item.parsed.problem is not None:
        problem = item.parsed.problem
        return [check("format", False, f"format_{problem.code}", **problem.values)]
    if spec.kind == "text":
        return [check("format", True, "no_check")]
    if spec.kind != "date":
        return [check("format", True, "format_ok", kind=spec.kind)]
    day = datetime.date.fromisoformat(item.parsed.value)
    future = (day - today).days > FUTURE_GRACE_DAYS
    return [check("format", True, "date_real", day=day),
            check("logic", not future, "date_future" if future else "date_past", day=day)]


def _money(found: dict[str, Found], name: str) -> Decimal | None:
    item = found.get(name)
    if item is None or item.parsed.problem is not None or not isinstance(item.parsed.value, Money):
        return None
    return item.parsed.value.amount


# --- logic -------------------------------------------------------------------------------

# (part, part, whole): the whole is the sum of the parts
_SUMS = (("net", "tax", "gross"), ("amount", "tax", "total"))


def _sums(found: dict[str, Found], checks: dict[str, list[Check]]) -> None:
    for first, second, whole in _SUMS:
        a, b, total = _money(found, first), _money(found, second), _money(found, whole)
        if None in (a, b, total):
            continue
        ok = abs(a + b - total) <= CENT
        result = check("logic", ok, "sum_ok" if ok else "sum_bad", whole=whole, total=total,
                       first=first, a=a, second=second, b=b)
        for name in (first, second, whole):
            checks[name].append(result)
    capital, total = _money(found, "total_capital"), _money(found, "total")
    if capital is not None and total is not None:
        ok = capital == total
        result = check("logic", ok, "capital_ok" if ok else "capital_bad", capital=capital,
                       total=total)
        checks["total_capital"].append(result)
        checks["total"].append(result)


def _payment(found: dict[str, Found], checks: dict[str, list[Check]]) -> None:
    """A cash receipt's total is what was paid less the change. Checked wherever all
    three were read as amounts: more change than was paid (a change of 100.00 read
    for 1.00) fails it, as any other difference does."""
    paid, change = found.get(payment.PAID), found.get(payment.CHANGE)
    settlement = payment.settled(paid and paid.parsed, change and change.parsed)
    total = _money(found, payment.TOTAL)
    if settlement is None or total is None:
        return
    given, back = settlement
    owed = given - back
    ok = total == owed
    code = "paid_ok" if ok else "paid_bad"
    if not ok and abs(total - owed) < payment.CASH_ROUNDING and owed % payment.CASH_STEP == 0:
        ok, code = True, "paid_rounded"
    result = check("logic", ok, code, total=total, owed=owed, paid=given, change=back)
    for name in (payment.TOTAL, payment.PAID, payment.CHANGE):
        checks[name].append(result)


# the field the items add up to, by document type: a receipt's total, an invoice's gross
_ITEMS_ADD_UP_TO = ("total", "gross")


def _items(found: dict[str, Found], items: ItemSum | None,
           checks: dict[str, list[Check]]) -> None:
    """The item rows add up to a subtotal or total printed under them, or to the total."""
    name = next((name for name in _ITEMS_ADD_UP_TO if name in checks), None)
    if items is None or name is None:
        return
    ok = items.agrees(_money(found, name))
    shown = ", ".join(map(str, items.sums)) or "none"
    checks[name].append(check("logic", ok, "items_ok" if ok else "items_bad",
                              rows=len(items.rows), amount=items.amount, shown=shown,
                              name=name))


def _order_of_dates(found: dict[str, Found], checks: dict[str, list[Check]]) -> None:
    issued, due = found.get("issue_date"), found.get("due_date")
    if issued is None or due is None or issued.parsed.problem or due.parsed.problem:
        return
    ok = due.parsed.value >= issued.parsed.value  # ISO dates order as strings
    checks["due_date"].append(check("logic", ok, "dates_ok" if ok else "dates_bad",
                                    due=due.parsed.value, issued=issued.parsed.value))


# --- business ---------------------------------------------------------------------------

# A name found by its place (the first line at the head of the page) has no label to
# prove it: its line must read as a name. A scribble ("RSK") or a stamp's ring is read
# with few letters, or none in a word, at a low confidence; a shop's printed name has
# a word of letters and enough of them, or is read sure enough to be short (measured
# on make-eval-set's receipts and invoices: README, "Key fields").
NAME_MIN_LETTERS = 4
NAME_SURE = 0.6  # a name this sure (the field's confidence) may be short ("BHP")
_WORD = re.compile(r"[^\W\d_]{2,}")  # two letters or more together (CJK characters too)


def _names(specs: tuple[FieldSpec, ...], found: dict[str, Found],
           checks: dict[str, list[Check]], attested: frozenset[str]) -> None:
    for spec in specs:
        item = found.get(spec.name)
        if spec.locate != "header" or item is None or spec.name in attested:
            continue
        letters = sum(ch.isalpha() for ch in item.parsed.raw)
        named = _WORD.search(item.parsed.raw) is not None and (
            letters >= NAME_MIN_LETTERS or item.confidence >= NAME_SURE)
        checks[spec.name].append(check("business", named, "name_ok" if named else "name_weak",
                                       letters=letters, confidence=f"{item.confidence:.2f}"))

# a document is known by these fields, where its type has them
IDENTITY = (("seller", "number"), ("company", "date", "total"), ("seller_name", "code", "number"))


def identity(found_values: dict[str, str]) -> tuple[str, ...] | None:
    for names in IDENTITY:
        if all(found_values.get(name) for name in names):
            return tuple(squash(found_values[name]) for name in names)
    return None


def squash(value: str) -> str:
    return re.sub(r"\W+", "", value).casefold()


def _business(found: dict[str, Found], checks: dict[str, list[Check]], text: str,
              history: list[Seen], attested: frozenset[str]) -> None:
    squashed_text = squash(text)
    for name, item in found.items():
        if name not in attested and item.parsed.raw \
                and squash(item.parsed.raw) not in squashed_text:
            checks[name].append(check("business", False, "not_in_text"))
    mine = values(found)
    key = identity(mine)
    if key is None:
        return
    for seen in history:
        if identity(seen.values) != key:
            continue
        differ = [name for name in ("gross", "total", "issue_date", "date")
                  if name in mine and seen.values.get(name) not in (None, mine[name])]
        for name in differ:
            checks[name].append(check("business", False, "seen_other",
                                      document=seen.document_id, name=name,
                                      value=seen.values[name]))
        if not differ:
            first = next(iter(n for n in mine if n in checks))
            checks[first].append(check("business", False, "seen_before",
                                       document=seen.document_id))
        return


def _against_qr(found: dict[str, Found], checks: dict[str, list[Check]],
                qr: FapiaoQr | None) -> None:
    """Each field a fapiao's QR code also holds, read from the print, against it."""
    if qr is None:
        return
    coded = {"code": qr.code, "number": qr.number, "issue_date": qr.issue_date.isoformat(),
             qr.amount_field: qr.amount}
    for name, expected in coded.items():
        item = found.get(name)
        if expected is None or item is None or name not in checks or item.parsed.problem:
            continue
        value = item.parsed.value
        agrees = (value.amount if isinstance(value, Money) else value) == expected
        checks[name].append(check("business", True, "qr_ok") if agrees else
                            check("business", False, "qr_bad", value=value_text(value),
                                  expected=expected))
