"""The classic path's field extractor: rules over the accepted lines and their boxes.

Each field of the document type's schema (``schema.FieldSpec``) is looked for where
a person looks: after its label on the same line, to the right of the label on the
same line band, or on the line below it. A value must parse as the field's kind
(``kinds``); a label in ``not_labels`` on the line disqualifies that line. Fields
that carry their own proof (an IBAN, a VAT id) and dates are also taken without a
label when none is labelled; names and addresses come from the page's header.

What it returns per field: the value as found and normalised, a confidence (how the
value was placed, times how sure the recogniser was of its words) and the evidence:
the page, the box on the page as rendered, the line's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from appliance.fields import kinds
from appliance.fields.kinds import Parsed
from appliance.fields.schema import FieldSpec
from appliance.outputs.tree import PageTree

# how much a value's place says it belongs to its label
AFTER_LABEL, SAME_BAND, BELOW, UNLABELLED, HEADER = 1.0, 0.9, 0.75, 0.6, 0.7

_TITLE = (r"(?:tax |simplified |official |cash |credit |debit |adjustment )?(?:invoice|receipt|"
          r"bill|rechnung|facture|quittung|kassenbon|sale|cash sale|welcome|copy|original|"
          r"duplicate|statement|quotation|note)s?")
# a document's title, or titles ("TAX INVOICE / ADJUSTMENT NOTE")
_TITLES = re.compile(rf"^{_TITLE}(?:\s*[/&-]\s*{_TITLE})*\W*$", re.IGNORECASE)
_COMPANY = re.compile(r"\b(sdn\.? ?bhd|bhd|s/b|gmbh|ag|ltd|limited|inc|llc|plc|s\.?a\.?|s\.?r\.?l\.?|"
                      r"s\.?p\.?a|b\.?v\.?|n\.?v\.?|e\.?k|co\.|corp|enterprise|trading|kg|oy|"
                      r"ab|as|sarl|sas)\b|有限公司|公司", re.IGNORECASE)
# a company's registration number: "(974306-T)", "( 121889-W )", "Co. Reg. No. 1234-X"
_REGISTRATION = re.compile(r"(?:[(\[]\s*|\b(?:co|company|reg)\.?\s*(?:reg\.?\s*)?(?:no|nr)\.?\s*:?\s*)"
                           r"\d[\d -]{3,}[A-Z]?\b|(?<![\w-])\d{4,}-[A-Z]\b", re.IGNORECASE)
_CONTACT = re.compile(r"\b(tel|phone|fax|mobile|hp|e-?mail|www\.|http|gst|reg|vat|sst|"
                      r"tax id|co\.? ?no|company no)\b|@|\+\d{2}", re.IGNORECASE)
_TAX = r"(?:gst|vat|tax|sst|mwst|ust|iva|tva|btw)"
# a tax the amount includes ("Total incl. GST 6%", "GST inclusive") is no tax line's label
_TAX_INCLUDED = re.compile(
    rf"\b(?:incl(?:usive|uding|\.)?|inkl\.?|inc\.)\s*(?:of\s*)?(?:[\d.,]+\s*%\s*)?{_TAX}"
    rf"(?![^\W\d_])|\b{_TAX}\s*(?:incl(?:usive|uded|\.)?|inkl\.?)(?![^\W\d_])", re.IGNORECASE)
_TAX_SUMMARY = re.compile(rf"\b{_TAX}\s*(?:sum\w{{1,3}}ry|analysis)|\bsummary of {_TAX}",
                          re.IGNORECASE)  # OCR reads "Summary" as "Sumnary", "Sumeary"
# a cash rounding: the amount due stands below it ("Rounding Adj -0.01", then "Nett Total")
_ROUNDING = re.compile(r"\bround(?:ing|ed)?\b", re.IGNORECASE)
# what ends an address: a contact, a registration, a document number, a time
_AFTER_ADDRESS = re.compile(r"\b(tva|btw|iva|ust|mwst|partita|steuer|receipt|bill|invoice|inv|"
                            r"trans|cashier|table|order|store|doc|ref|nr\.?)\b|\bno\s?:|#|"
                            r"\d{1,2}:\d{2}",  # "No." may start an address: "No. 2, Jalan ..."
                            re.IGNORECASE)


@dataclass
class Evidence:
    page: int  # 1-based
    box: tuple[int, int, int, int]  # on the page as rendered, in pixels
    text: str  # the whole line the value stands on

    def as_dict(self) -> dict:
        return {"page": self.page, "box": list(self.box), "text": self.text}


@dataclass
class Found:
    spec: FieldSpec
    parsed: Parsed
    confidence: float
    evidence: list[Evidence] = field(default_factory=list)
    by: str = "rules"  # who read it: "rules", "model" (a vision model), "person"


@dataclass
class ReadLine:
    page: PageTree
    order: int  # in reading order over the document
    text: str
    box: tuple[float, float, float, float]  # in the tree's frame
    words: list  # outputs.tree.Word
    confidence: float

    def evidence(self, span: tuple[int, int] | None = None) -> Evidence:
        """The line, or the words of it that ``span`` (character offsets) covers."""
        box = self.box
        if span is not None:
            covered, start = [], 0
            for word in self.words:
                end = start + len(word.text)
                if start < span[1] and end > span[0]:
                    covered.append(word.box)
                start = end + 1
            if covered:
                box = (min(b[0] for b in covered), min(b[1] for b in covered),
                       max(b[2] for b in covered), max(b[3] for b in covered))
        return Evidence(self.page.number, self.page.pixels(box), self.text)

    @property
    def height(self) -> float:
        return max(self.box[3] - self.box[1], 1.0)


@dataclass
class _Candidate:
    parsed: Parsed
    place: float
    line: ReadLine
    span: tuple[int, int] | None


def extract(pages: list[PageTree], specs: tuple[FieldSpec, ...]) -> dict[str, Found]:
    """The fields found on the document's pages (trees of its accepted results), by
    name; a field not found is absent."""
    lines = read_lines(pages)
    found: dict[str, Found] = {}
    header: ReadLine | None = None
    for spec in specs:
        if spec.locate == "header":
            header = _header_line(lines)
            candidates = [] if header is None else [_Candidate(
                kinds.parse("text", company_name(header.text)), HEADER, header, None)]
        elif spec.locate == "below_header":
            candidates = _below_header(lines, header or _header_line(lines))
        else:
            candidates = _labelled(lines, spec) or _unlabelled(lines, spec)
        chosen = _pick(spec, [c for c in candidates if c.parsed is not None], lines)
        if chosen is not None:
            found[spec.name] = Found(spec, chosen.parsed,
                                     round(chosen.place * chosen.line.confidence, 4),
                                     [chosen.line.evidence(chosen.span)])
    return found


def read_lines(pages: list[PageTree]) -> list[ReadLine]:
    lines = []
    for page in pages:
        if page.status != "done":
            continue
        for block in page.blocks:
            for line in block.lines:
                if not line.words:
                    continue
                scores = [w.confidence for w in line.words if w.confidence is not None]
                lines.append(ReadLine(page, len(lines), line.text, line.box, line.words,
                                   sum(scores) / len(scores) if scores else 1.0))
    return lines


# --- labelled values ---------------------------------------------------------------


def _label_end(text: str, labels: tuple[str, ...]) -> int | None:
    """Where the first of the labels found in the line ends (the longest label wins
    at a place), or None. A label is a whole word, its spaces optional (OCR drops
    some), and it may run straight into a capital (OCR joins "Total" and "EUR")."""
    best = None
    for label in sorted(labels, key=len, reverse=True):
        pattern = r"\s*".join(re.escape(part) for part in label.split())
        for match in re.finditer(rf"(?<![^\W\d_]){pattern}", text, re.IGNORECASE):
            after = text[match.end():match.end() + 1]
            if after.isalpha() and not (after.isupper() and text[match.end() - 1].islower()):
                continue
            if best is None or match.start() < best[0]:
                best = (match.start(), match.end())
            break
    return None if best is None else best[1]


def _labelled(lines: list[ReadLine], spec: FieldSpec) -> list[_Candidate]:
    candidates = []
    for line in lines:
        end = _label_end(line.text, spec.labels)
        if end is None or _disqualified(lines, line, spec):
            continue
        rest = line.text[end:]
        same_line = _values(spec, rest, offset=end)
        if same_line:
            candidates += [_Candidate(p, AFTER_LABEL, line, span) for span, p in same_line[:1]]
            continue
        for other, place in _neighbours(lines, line, spec.kind, line.page.slope):
            values = _values(spec, other.text, offset=0)
            if values:
                candidates += [_Candidate(p, place, other, span) for span, p in values[:1]]
                break
    return candidates


def _disqualified(lines: list[ReadLine], line: ReadLine, spec: FieldSpec) -> bool:
    """A label line that is not the field's: one with a label in ``not_labels`` (a tax
    the amount includes does not count), or a column header of a tax summary table
    (its "Amount" column holds the amounts before tax)."""
    if spec.not_labels and _label_end(_TAX_INCLUDED.sub(" ", line.text),
                                      spec.not_labels) is not None:
        return True
    return any(_TAX_SUMMARY.search(other.text) for other in lines if other.page is line.page
               and _overlap(other.box[1], other.box[3], line.box[1], line.box[3])
               > 0.5 * min(other.height, line.height))


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
    below = sorted((o for o in same_page
                    if line.box[3] - 0.3 * line.height <= o.box[1] <= line.box[3] + 1.6 * line.height
                    and _overlap(o.box[0], o.box[2], line.box[0], line.box[2]) > 0),
                   key=lambda o: o.box[1])[:1]
    if kind == "text":
        band = [o for o in band if o.box[0] - line.box[2] < 3 * line.height]
        yield from ((other, BELOW) for other in below)
        yield from ((other, SAME_BAND) for other in band)
    else:
        yield from ((other, SAME_BAND) for other in band)
        yield from ((other, BELOW) for other in below)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


_FINDERS = {"money": kinds.find_amounts, "number": kinds.find_amounts,
            "iban": kinds.find_ibans, "vat_id": kinds.find_vat_ids}


def _values(spec: FieldSpec, text: str, offset: int) -> list[tuple[tuple[int, int], Parsed]]:
    """The values of the field's kind in ``text`` (spans shifted by ``offset``)."""
    if spec.kind == "date" or spec.kind in _FINDERS:
        found = (kinds.find_dates(text, day_first=spec.day_first) if spec.kind == "date"
                 else _FINDERS[spec.kind](text))
        if spec.kind == "number":  # an amount's number, without its currency
            found = [(span, kinds.parse("number", p.raw)) for span, p in found]
        return [((offset + s, offset + e), p) for (s, e), p in found if p is not None]
    if spec.kind == "text":
        # the label's own punctuation goes; a name's final "." (S.A., Inc.) stays
        stripped = text.strip().lstrip(":.-#").rstrip(":").strip()
        if not stripped:
            return []
        start = offset + text.index(stripped)
        return [((start, start + len(stripped)), kinds.parse("text", stripped))]
    values = []  # regex and enum: a token of the line
    for match in re.finditer(r"\S+", text):
        token = match.group().strip(":;,.()[]")
        parsed = kinds.parse(spec.kind, token, choices=spec.choices, pattern=spec.pattern or None)
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


def _header_line(lines: list[ReadLine]) -> ReadLine | None:
    """The name at the head of the first page: among its top rows, one with a company
    form ("Sdn Bhd", "GmbH", "Ltd") if there is one, else the first that is a name; a
    name that starts on the row above its company form is joined to it."""
    if not lines:
        return None
    rows = _rows([line for line in lines if line.page is lines[0].page])
    names = [row for row in rows if _is_name(company_name(row.text))]
    if not names:
        return None
    # the head of the page: the top name and those on its band or just under it (a
    # logo line over the company's name); a company further down is the addressee's
    top = names[0]
    head = [row for row in names if row.box[1] - top.box[1] < 2.5 * top.height]
    chosen = next((row for row in head if _COMPANY.search(row.text)), top)
    above = rows[rows.index(chosen) - 1] if rows.index(chosen) > 0 else None
    if above is not None and above in names and _continues(above, chosen):
        return _joined([above, chosen])
    return chosen


def company_name(text: str) -> str:
    """A header line's name without what is printed around it: the company's
    registration number and what follows it ("(974306-T)", "Co. No. 12345-X"), a
    bracket left open at the end, decoration ("**Name**")."""
    name = _REGISTRATION.split(text, maxsplit=1)[0]
    return re.sub(r"\s*[(\[][^)\]]{0,4}$", "", name).strip(" *#=~_-,:;")


def _is_name(name: str) -> bool:
    letters = sum(ch.isalpha() for ch in name)
    # a price is no name's part, a number may be ("7-Eleven", "99 Market")
    prices = [p for _, p in kinds.find_amounts(name) if p.value.currency or re.search(r"[.,]\d", p.raw)]
    return (letters >= 3 and letters >= len(name.replace(" ", "")) / 2
            and not _TITLES.match(name) and not _CONTACT.search(name)
            and not kinds.find_dates(name) and not prices)


def _continues(above: ReadLine, row: ReadLine) -> bool:
    """Whether ``row`` is the end of a name that ``above`` starts: its company form comes
    after at most one word ("STATIONERY SDN BHD", "CO. (M) SDN BHD"), and ``above``,
    just over it, has no company form and no digits of its own."""
    form = _COMPANY.search(row.text)
    return (form is not None and len(re.findall(r"[^\W\d_]{2,}", row.text[:form.start()])) <= 1
            and not _COMPANY.search(above.text) and not re.search(r"\d", above.text)
            and row.box[1] - above.box[3] < 0.6 * row.height
            and _overlap(above.box[0], above.box[2], row.box[0], row.box[2]) > 0)


def _rows(lines: list[ReadLine]) -> list[ReadLine]:
    """The lines of a page top down, those that OCR split along one printed row
    ("POTTERS" "GARDEN SDN" "BHD") joined left to right; a logo or a line standing on
    end is no part of a row of print beside it."""
    rows: list[list[ReadLine]] = []
    for line in sorted(lines, key=lambda ln: (ln.box[1], ln.box[0])):
        row = next((row for row in rows if _overlap(row[0].box[1], row[0].box[3], line.box[1],
                                                    line.box[3]) > 0.6 * line.height
                    and max(row[0].height, line.height) < 1.5 * min(row[0].height, line.height)
                    and line.box[2] - line.box[0] > line.height
                    and line.box[0] - max(ln.box[2] for ln in row) < 2 * line.height), None)
        if row is None:
            rows.append([line])
        else:
            row.append(line)
    return [_joined(sorted(row, key=lambda ln: ln.box[0])) for row in rows]


def _joined(lines: list[ReadLine]) -> ReadLine:
    """Lines read as one, in the given order."""
    if len(lines) == 1:
        return lines[0]
    return ReadLine(lines[0].page, min(ln.order for ln in lines), " ".join(ln.text for ln in lines),
                    (min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines),
                     max(ln.box[2] for ln in lines), max(ln.box[3] for ln in lines)),
                    [w for ln in lines for w in ln.words], min(ln.confidence for ln in lines))


def _below_header(lines: list[ReadLine], header: ReadLine | None) -> list[_Candidate]:
    """The address: the rows under the header, down to the first that holds something
    else (a phone, a date, an amount, a registration number) or stands apart; the
    company's registration number or the document's title may stand over it."""
    if header is None:
        return []
    taken: list[ReadLine] = []
    below = _rows([ln for ln in lines if ln.page is header.page
                   and (ln.box[1] + ln.box[3]) / 2 > header.box[3]])
    bottom = header.box[3]
    for row in below:
        if not taken and row.box[1] - bottom <= 1.2 * row.height and (
                _TITLES.match(row.text.strip()) or _REGISTRATION.search(row.text)
                and not _is_name(company_name(row.text))):
            bottom = row.box[3]
            continue
        if row.box[1] - bottom > 1.2 * row.height or _CONTACT.search(row.text) \
                or _AFTER_ADDRESS.search(row.text) or kinds.find_vat_ids(row.text) \
                or kinds.find_dates(row.text) or _TITLES.match(row.text.strip()) \
                or sum(ch.isalpha() for ch in row.text) < 2 or len(taken) == 4:
            break
        taken.append(row)
        bottom = row.box[3]
    if not taken:
        return []
    joined = _joined(taken)
    return [_Candidate(kinds.parse("text", joined.text), UNLABELLED, joined, None)]


def _pick(spec: FieldSpec, candidates: list[_Candidate],
          lines: list[ReadLine]) -> _Candidate | None:
    if not candidates:
        return None
    valid = [c for c in candidates if c.parsed.problem is None] or candidates
    if spec.pick == "largest" and spec.kind == "money":
        return max(_after_rounding(valid, lines), key=lambda c: (_amount(c.parsed), -c.line.order))
    ordered = sorted(valid, key=lambda c: c.line.order)
    return ordered[-1] if spec.pick == "last" else ordered[0]


def _amount(parsed: Parsed) -> Decimal:
    return parsed.value.amount


def _after_rounding(candidates: list[_Candidate], lines: list[ReadLine]) -> list[_Candidate]:
    """The candidates below the page's first cash rounding line, where there are any:
    the total before rounding is larger by up to the adjustment but not what is due."""
    rounding = next((line for line in lines if _ROUNDING.search(line.text)), None)
    if rounding is None:
        return candidates
    below = [c for c in candidates
             if (c.line.page.number, (c.line.box[1] + c.line.box[3]) / 2)
             > (rounding.page.number, rounding.box[3])]
    return below or candidates
