"""The classic path's field extractor: rules over the accepted lines and their boxes.

Each field of the document type's schema (``schema.FieldSpec``) is looked for where
a person looks: after its label on the same line, to the right of the label on the
same line band, or on the line below it. A value must parse as the field's kind
(``kinds``); a label in ``not_labels`` on the line disqualifies that line. Fields
that carry their own proof (an IBAN, a VAT id) and dates are also taken without a
label when none is labelled; names and addresses come from the page's header
(``header``). On a cash receipt, what was paid less the change settles the total
(``payment``).

What it returns per field: the value as found and normalised, a confidence (how the
value was placed, times how sure the recogniser was of its words) and the evidence:
the page, the box on the page as rendered, the line's text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from decimal import Decimal

from appliance.fields import kinds, payment
from appliance.fields.header import address_below, company_name, header_line
from appliance.fields.kinds import Parsed
from appliance.fields.lines import Evidence, ReadLine, overlap, read_lines
from appliance.fields.schema import FieldSpec
from appliance.outputs.tree import PageTree

# how much a value's place says it belongs to its label
AFTER_LABEL, SAME_BAND, BELOW, UNLABELLED, HEADER = 1.0, 0.9, 0.75, 0.6, 0.7
SETTLED = 0.9  # unlabelled, but what was paid less the change

_TAX = r"(?:gst|vat|tax|sst|mwst|ust|iva|tva|btw)"
# a tax the amount includes ("Total incl. GST 6%", "GST inclusive") is no tax line's label
# incl., inclusive, including, inkl.; "Total includes GST 0.40" states the tax
_INCLUDED = r"(?:in[ck]l(?!udes|uded)\w*\.?|inc\.)"
_TAX_INCLUDED = re.compile(
    rf"\b{_INCLUDED}\s*(?:of\s*)?(?:[\d.,]+\s*%\s*)?{_TAX}(?![^\W\d_])"
    rf"|\b{_TAX}\s*{_INCLUDED}", re.IGNORECASE)
SUMMARY_ROWS = 6  # a tax summary's heading, column header, a row per rate and its total
_TAX_SUMMARY = re.compile(rf"\b{_TAX}\s*(?:sum\w{{1,3}}ry|analysis)|\bsummary of {_TAX}",
                          re.IGNORECASE)  # OCR reads "Summary" as "Sumnary", "Sumeary"
# what is to be paid, over totals of parts ("Total 0% supplies") and before credits
_PAYABLE = re.compile(r"\bpayable\b|\bto pay\b|zu zahlen|te betalen|à payer|a pagar", re.IGNORECASE)
# a cash rounding: the amount due stands below it ("Rounding Adj -0.01", then "Nett Total")
# "Rounding Adj", "RoundingRM" (glued to the currency); "Total Rounded" is the total
_ROUNDING = re.compile(r"(?<![^\W\d_])(?i:round(?:ing)?)(?!ed|ED|[a-z])")


@dataclass
class Found:
    spec: FieldSpec
    parsed: Parsed
    confidence: float
    evidence: list[Evidence] = field(default_factory=list)
    by: str = "rules"  # who read it: "rules", "model" (a vision model), "person"


@dataclass
class _Candidate:
    parsed: Parsed
    place: float
    line: ReadLine
    span: tuple[int, int] | None
    label: ReadLine | None = None  # the line of its label, where it has one


def extract(pages: list[PageTree], specs: tuple[FieldSpec, ...]) -> dict[str, Found]:
    """The fields found on the document's pages (trees of its accepted results), by
    name; a field not found is absent."""
    lines = read_lines(pages)
    picked: dict[str, _Candidate] = {}
    candidates_of: dict[str, list[_Candidate]] = {}
    header: ReadLine | None = None
    for spec in specs:
        if spec.locate == "header":
            header = header_line(lines)
            candidates = [] if header is None else [_Candidate(
                kinds.parse("text", company_name(header.text)), HEADER, header, None)]
        elif spec.locate == "below_header":
            header = header or header_line(lines)
            address = None if header is None else address_below(lines, header)
            candidates = [] if address is None else [_Candidate(
                kinds.parse("text", address.text), UNLABELLED, address, None)]
        else:
            candidates = _labelled(lines, spec) or _unlabelled(lines, spec)
        candidates_of[spec.name] = [c for c in candidates if c.parsed is not None]
        chosen = _pick(spec, candidates_of[spec.name], lines)
        if chosen is not None:
            picked[spec.name] = chosen
    if payment.TOTAL in candidates_of and payment.TOTAL not in picked:
        summed = _summed_total(lines)
        if summed is not None:
            picked[payment.TOTAL] = summed
    settled = _settled_total(picked, candidates_of.get(payment.TOTAL, []), lines)
    if settled is not None:
        picked[payment.TOTAL] = settled
    by_name = {spec.name: spec for spec in specs}
    return {name: Found(by_name[name], chosen.parsed,
                        round(chosen.place * chosen.line.confidence, 4),
                        [chosen.line.evidence(chosen.span)])
            for name, chosen in picked.items()}


# --- the total that the payment settles ---------------------------------------------


def _settled_total(picked: dict[str, _Candidate], candidates: list[_Candidate],
                   lines: list[ReadLine]) -> _Candidate | None:
    """Where the total the rules picked is not what was paid less the change, but the
    page prints that amount: the first labelled total of that amount, else the last
    amount of that value above the payment (a "SUBTOTAL" that is the total, a total
    whose label was misread). None where the rules' total stands, or where nothing on
    the page settles it (``validate`` then says that the amounts disagree)."""
    paid, change = picked.get(payment.PAID), picked.get(payment.CHANGE)
    owed = payment.due(paid and paid.parsed, change and change.parsed)
    total = picked.get(payment.TOTAL)
    if owed is None or (total is not None and total.parsed.problem is None and (
            _amount(total.parsed) == owed
            # a cent or a rounding apart: the label is the better evidence (and the
            # payment check says whether the difference is a cash rounding)
            or total.label is not None
            and abs(_amount(total.parsed) - owed) < payment.CASH_ROUNDING)):
        return None
    labelled = [c for c in candidates if c.parsed.problem is None and _amount(c.parsed) == owed]
    if labelled:
        return min(labelled, key=lambda c: c.line.order)
    printed = [_Candidate(parsed, SETTLED, line, span) for line in lines
               if line is not paid.line and line is not change.line
               for span, parsed in kinds.find_amounts(line.text)
               if parsed.problem is None and _amount(parsed) == owed
               and payment.with_cents(parsed)]  # "1" in a ticket number is no 1.00

    def where(line: ReadLine) -> tuple[int, float]:
        return line.page.number, line.box[1]

    printed.sort(key=lambda c: where(c.line))
    above = [c for c in printed if where(c.line) < where(paid.line)]
    return (above or printed)[-1] if printed else None


# --- the total that the subtotal and the tax add up to -------------------------------

_SUBTOTAL = re.compile(r"\bsub\s*-?\s*total\b|\btotal\b.*\bexcl", re.IGNORECASE)
_TAX_LINE = re.compile(rf"(?<![^\W\d_]){_TAX}(?![^\W\d_])", re.IGNORECASE)


def _summed_total(lines: list[ReadLine]) -> _Candidate | None:
    """Where no total was found (its label misread: "TOTL", "Total Sales (hclusive of
    GST)"): the first amount under a subtotal and the tax after it that is their sum."""
    for index, line in enumerate(lines):
        parts = _SUBTOTAL.search(line.text) and _band_amounts(lines, line)
        taxes = [other for other in lines[index + 1:] if _TAX_LINE.search(other.text)
                 and not _TAX_INCLUDED.search(other.text) and not _TAX_SUMMARY.search(other.text)]
        tax = taxes and _band_amounts(lines, taxes[0])
        if not parts or not tax:
            continue
        whole = _amount(parts[-1].parsed) + _amount(tax[-1].parsed)
        summed = next((c for other in lines[lines.index(taxes[0]) + 1:]
                       for c in _band_amounts(lines, other) if _amount(c.parsed) == whole), None)
        if summed is not None:
            return summed
    return None


def _band_amounts(lines: list[ReadLine], line: ReadLine) -> list[_Candidate]:
    """The amounts written with cents on the line and to its right on its band."""
    return [_Candidate(parsed, SETTLED, other, span) for other in _same_band(lines, line)
            for span, parsed in kinds.find_amounts(other.text)
            if parsed.problem is None and payment.with_cents(parsed)]


# --- labelled values ---------------------------------------------------------------


def _label_end(text: str, labels: tuple[str, ...]) -> int | None:
    """Where the first of the labels found in the line ends, or None."""
    span = _label_span(text, labels)
    return None if span is None else span[1]


def _label_span(text: str, labels: tuple[str, ...]) -> tuple[int, int] | None:
    """Where the first of the labels found in the line stands (the longest label wins
    at a place), or None. A label is a whole word, its spaces optional (OCR drops
    some), and it may run straight into a capital (OCR joins "Total" and "EUR")."""
    best = None
    for label in sorted(labels, key=len, reverse=True):
        for match in _label_pattern(label).finditer(text):
            after = text[match.end():match.end() + 1]
            if after.isalpha() and not (after.isupper() and text[match.end() - 1].islower()):
                continue
            if best is None or match.start() < best[0]:
                best = (match.start(), match.end())
            break
    return best


# letters OCR reads as look-alikes ("Tota1", "TOTAI", "T0TAL", "5UBTOTAL")
_LOOK_ALIKES = {"l": "[l1|i]", "i": "[i1l|]", "o": "[o0]", "s": "[s5]"}


@functools.cache  # labels come from the schemas: a few hundred, each built once
def _label_pattern(label: str) -> re.Pattern:
    """The label as a whole word, its spaces optional, its letters' look-alikes too."""
    words = r"\s*".join(_misreadable(part) for part in label.split())
    return re.compile(rf"(?<![^\W\d_]){words}", re.IGNORECASE)


def _misreadable(word: str) -> str:
    """A pattern of the word that its letters' look-alikes match too."""
    return "".join(_LOOK_ALIKES.get(ch, re.escape(ch)) for ch in word.lower())


def _labelled(lines: list[ReadLine], spec: FieldSpec) -> list[_Candidate]:
    candidates = []
    for line in lines:
        span = _label_span(line.text, spec.labels)
        if span is None or _disqualified(lines, line, span, spec):
            continue
        end = span[1]
        rest = line.text[end:]
        same_line = _values(spec, rest, offset=end)
        if same_line:
            candidates += [_Candidate(p, AFTER_LABEL, line, span, line) for span, p in same_line[:1]]
            continue
        for other, place in _neighbours(lines, line, spec.kind, line.page.slope):
            values = _values(spec, other.text, offset=0)
            if values and place == BELOW and spec.kind == "money" and (
                    spec.not_labels and any(_label_end(o.text, spec.not_labels) is not None
                                            for o in _on_band(lines, other))
                    or _column_goes_on(lines, line, other)):
                # under a column's header, on a row that is not the field's ("CASH 50.00"),
                # or the first of a column of amounts ("Amount" over the items)
                break
            if values:
                candidates += [_Candidate(p, place, other, span, line) for span, p in values[:1]]
                break
    return candidates


def _disqualified(lines: list[ReadLine], line: ReadLine, label: tuple[int, int],
                  spec: FieldSpec) -> bool:
    """A label line that is not the field's: one with a label in ``not_labels`` beside
    the field's own label at ``label`` (a tax the amount includes does not count; "Total
    After Rounding" is a label of its own), or a line of a tax summary table: its column
    header's "Amount" holds the amounts before tax, its "Total:" row their sum."""
    masked = _TAX_INCLUDED.sub(lambda m: " " * len(m[0]), line.text)  # keeps the places
    masked = f"{masked[:label[0]]} {masked[label[1]:]}"
    if spec.not_labels and _label_end(masked, spec.not_labels) is not None:
        return True
    return any(_TAX_SUMMARY.search(other.text) and other.page is line.page
               and -0.5 * line.height < line.box[1] - other.box[1] < SUMMARY_ROWS * line.height
               for other in lines)


def _column_goes_on(lines: list[ReadLine], label: ReadLine, below: ReadLine) -> bool:
    """Whether another amount stands under ``below`` in the label's column: the label
    heads a column of amounts (items, a tax summary), and the first is none of its."""
    return any(kinds.find_amounts(o.text) for o in _under(lines, below, label))


def _under(lines: list[ReadLine], line: ReadLine, across: ReadLine) -> list[ReadLine]:
    """The lines just below ``line`` that overlap ``across`` sideways, top first."""
    return sorted((o for o in lines if o.page is line.page and o is not line
                   and line.box[3] - 0.3 * line.height <= o.box[1] <= line.box[3] + 1.6 * line.height
                   and overlap(o.box[0], o.box[2], across.box[0], across.box[2]) > 0),
                  key=lambda o: o.box[1])


def _on_band(lines: list[ReadLine], line: ReadLine) -> list[ReadLine]:
    """The lines on the line's band, itself among them."""
    return [other for other in lines if other.page is line.page
            and overlap(other.box[1], other.box[3], line.box[1], line.box[3])
            > 0.5 * min(other.height, line.height)]


def _neighbours(lines: list[ReadLine], line: ReadLine, kind: str, slope: float):
    """Lines where a label's value may stand: to its right on the same band (the line
    the label's own line would run into, skew allowed for), and the line just below
    it that overlaps it across. A name or an address is looked for below first ("Bill
    to:" heads a block; what stands to its right is another column), and to the right
    only close by."""
    same_page = [o for o in lines if o.page is line.page and o is not line]
    centre = (line.box[1] + line.box[3]) / 2

    def drift(other: ReadLine) -> float:  # off the label's line where the other one stands
        expected = centre + slope * ((other.box[0] + other.box[2]) / 2 - line.box[2])
        return abs((other.box[1] + other.box[3]) / 2 - expected)

    band = sorted((o for o in same_page if o.box[0] >= line.box[2] - line.height
                   and drift(o) < 0.5 * max(o.height, line.height)),
                  key=lambda o: (drift(o) > 0.25 * line.height, o.box[0]))
    below = _under(lines, line, line)[:1]
    if kind == "text":
        band = [o for o in band if o.box[0] - line.box[2] < 3 * line.height]
        yield from ((other, BELOW) for other in below)
        yield from ((other, SAME_BAND) for other in band)
    else:
        yield from ((other, SAME_BAND) for other in band)
        yield from ((other, BELOW) for other in below)


_FINDERS = {"money": kinds.find_amounts, "number": kinds.find_amounts,
            "iban": kinds.find_ibans, "vat_id": kinds.find_vat_ids}


def _values(spec: FieldSpec, text: str, offset: int) -> list[tuple[tuple[int, int], Parsed]]:
    """The values of the field's kind in ``text`` (spans shifted by ``offset``)."""
    if spec.kind == "date" or spec.kind in _FINDERS:
        found = (kinds.find_dates(text, day_first=spec.day_first) if spec.kind == "date"
                 else _FINDERS[spec.kind](text))
        if spec.kind == "number":  # an amount's number, without its currency
            found = [(span, kinds.parse("number", p.raw)) for span, p in found]
        elif spec.kind == "money" and (misread := kinds.misread_amount(text)):
            found = [misread]  # the whole cell, not the pieces around its misread point
        return [((offset + s, offset + e), p) for (s, e), p in found if p is not None]
    if spec.kind == "text":
        # the label's own punctuation goes; a name's final "." (S.A., Inc.) stays
        stripped = text.strip().lstrip(":：.-#").rstrip(":：").strip()
        if not stripped:
            return []
        start = offset + text.index(stripped)
        return [((start, start + len(stripped)), kinds.parse("text", stripped))]
    values = []  # regex and enum: a token of the line
    for match in re.finditer(r"\S+", text):
        token = match.group().strip(":;,.()[]：；，。（）【】")  # full-width: CJK print
        parsed = spec.parse(token)
        if parsed is not None and parsed.problem is None:
            values.append(((offset + match.start(), offset + match.end()), parsed))
    return values


# --- values without a label ----------------------------------------------------------


def _unlabelled(lines: list[ReadLine], spec: FieldSpec) -> list[_Candidate]:
    """For a field that may stand ``anywhere``: the first value of its kind that passes
    its check."""
    if not spec.anywhere:
        return []
    for line in lines:
        for span, parsed in _values(spec, line.text, offset=0):
            if parsed.problem is None:
                return [_Candidate(parsed, UNLABELLED, line, span)]
    return []


def _pick(spec: FieldSpec, candidates: list[_Candidate],
          lines: list[ReadLine]) -> _Candidate | None:
    if not candidates:
        return None
    valid = [c for c in candidates if c.parsed.problem is None] or candidates
    if spec.pick == "largest" and spec.kind == "money":
        # a figure without its cents beside totals written with them lost its point
        # ("8817") or is a number of another kind ("1009" of an invoice number)
        valid = [c for c in valid if payment.with_cents(c.parsed)] or valid
        totals = _after_rounding(spec, valid, lines)
        payable = [c for c in totals if c.label is not None and _PAYABLE.search(c.label.text)]
        return max(payable or totals, key=lambda c: (_amount(c.parsed), -c.line.order))
    ordered = sorted(valid, key=lambda c: c.line.order)
    return ordered[-1] if spec.pick == "last" else ordered[0]


def _amount(parsed: Parsed) -> Decimal:
    return parsed.value.amount


def _after_rounding(spec: FieldSpec, candidates: list[_Candidate],
                    lines: list[ReadLine]) -> list[_Candidate]:
    """The totals below the page's first cash rounding line, where there are any: the
    total before rounding differs by the adjustment but is not what is due. A later
    rounding line ("Rounding RM 98.90") holds the rounded total. A rounding moves the
    total by less than a currency unit: an amount further from it (a service charge
    below) is no rounded total."""
    roundings = [line for line in lines if _ROUNDING.search(line.text)]
    if not roundings:
        return candidates
    first = roundings[0]

    def below(line: ReadLine) -> bool:
        return ((line.page.number, (line.box[1] + line.box[3]) / 2)
                > (first.page.number, first.box[3]))

    largest = max(_amount(c.parsed) for c in candidates)

    def near(parsed: Parsed) -> bool:
        return abs(_amount(parsed) - largest) < 1

    rounded = [_Candidate(p, SAME_BAND, other, span, line) for line in roundings if below(line)
               for other in _same_band(lines, line)
               for span, p in _values(spec, other.text, offset=0)[:1]
               if p.problem is None and near(p)]
    # the row right under the adjustment, its label misread or none ("RM 60.30"), holds
    # the rounded total when it is a cash rounding away from the total before it
    row = _row_under(lines, first)
    under = [c for c in _band_amounts(lines, row)
             if abs(_amount(c.parsed) - largest) < payment.CASH_ROUNDING] if row else []
    return [c for c in candidates if below(c.line) and near(c.parsed)] + rounded + under \
        or candidates


def _row_under(lines: list[ReadLine], line: ReadLine) -> ReadLine | None:
    """The first line of the row under the line's, at its left."""
    under = [o for o in lines if o.page is line.page and o.box[1] > line.box[1] + 0.5 * line.height
             and o.box[1] < line.box[3] + 1.6 * line.height]
    return min(under, key=lambda o: (o.box[1], o.box[0]), default=None)


def _same_band(lines: list[ReadLine], line: ReadLine) -> list[ReadLine]:
    """The line and those to its right on its band."""
    return [line] + [other for other, place in _neighbours(lines, line, "money", line.page.slope)
                     if place == SAME_BAND]
