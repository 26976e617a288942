"""The seller at the head of a document's first page: its name (a shop's, a company's)
and the address under it, read without labels."""

from __future__ import annotations

import re

from appliance.fields import kinds
from appliance.fields.lines import ReadLine, joined, overlap, rows

# "SIMPLIFIED TAX INVOICE", and "TAXINVOICE" as OCR reads tight print
_TITLE = (r"(?:(?:tax|simplified|official|cash|credit|debit|adjustment)\s?)*(?:invoice|receipt|"
          r"bill|rechnung|facture|quittung|kassenbon|sale|welcome|copy|original|re-?print|"
          r"duplicate|statement|quotation|note)s?")
# a document's title, or titles ("TAX INVOICE / ADJUSTMENT NOTE")
_TITLES = re.compile(rf"^{_TITLE}(?:\s*[/&-]\s*{_TITLE})*\W*$", re.IGNORECASE)
_COMPANY = re.compile(r"\b(sdn\.? ?bhd|bhd|s/b|gmbh|ag|ltd|limited|inc|llc|plc|s\.?a\.?|s\.?r\.?l\.?|"
                      r"s\.?p\.?a|b\.?v\.?|n\.?v\.?|e\.?k|co\.|corp|enterprise|trading|kg|oy|"
                      r"ab|as|sarl|sas)\b|有限公司|公司", re.IGNORECASE)
# a company's registration number: "(974306-T)", "( 121889-W )", "Co. Reg. No. 1234-X",
# "BRN: 631002-U", and "(S19537-X)" with its first digit misread
_REGISTRATION = re.compile(r"(?:[(\[]\s*|\b(?:co|comp|company|reg|br|roc)\.?\s*(?:reg\.?\s*)?"
                           r"(?:no|nr)\.?\s*:?\s*[(\[]?\s*|\b(?:brn|roc)\s*:?\s*)"
                           r"[A-Z]?\d[\d -]{3,}[A-Z]?\b|(?<![\w-])\d{4,}-[A-Z]\b", re.IGNORECASE)
# where an address starts: "No: 28, Jalan ...", "Lot 1851-A"
_STREET = re.compile(r"\s(?:no\b\.?\s*:?|lot)\s*\d", re.IGNORECASE)
# a greeting, a shop's terms or a promotion, printed over its name on some receipts
_GREETING = re.compile(r"\b(thank|tq(?:\b|for)|welcome|please|come again|terima kasih|selamat|"
                       r"goods sold|returnable|danke|merci|your order|redeem|voucher)",
                       re.IGNORECASE)
# who a brand belongs to, before the company's name: "Owned by:", "Dimiliki oleh"
_OWNED_BY = re.compile(r"^\W*(?:own(?:ed)?\s*by|operated\s*by|dimiliki(?:\s*oleh)?)\s*:?\s*",
                       re.IGNORECASE)
_CONTACT = re.compile(r"\b(tel|phone|fax|mobile|hp|e-?mail|www\.|http|gst|reg|vat|sst|"
                      r"tax id|co\.? ?no|company no)\b|@|\+\d{2}", re.IGNORECASE)
# what ends an address: a contact, a registration, a document number, a time
_AFTER_ADDRESS = re.compile(r"\b(tva|btw|iva|ust|mwst|partita|steuer|receipt|bill|invoice|inv|"
                            r"trans|cashier|table|order|store|doc|ref|nr\.?)\b|\bno\s?:|#|"
                            r"\d{1,2}:\d{2}",  # "No." may start an address: "No. 2, Jalan ..."
                            re.IGNORECASE)


def header_line(lines: list[ReadLine]) -> ReadLine | None:
    """The name at the head of the first page. Its candidates are the names down to the
    first date or price under one; a greeting is no name, nor a logo read as text.
    Among the top rows, the one with a company form ("Sdn Bhd", "GmbH", "Ltd") is the
    name, else the first; a first line that stands well apart over a registered name
    (a note written over the print) gives way to it. A name that starts on the row
    above its company form, or goes on in a bracket on the row below, is joined."""
    if not lines:
        return None
    page_rows = rows([line for line in lines if line.page is lines[0].page])
    names = []
    for row in page_rows:
        if names and _dated_or_priced(row.text):
            break
        if _is_name(company_name(row.text)) and not _GREETING.search(row.text) \
                and not _logo(row, page_rows):
            names.append(row)
    if not names:
        return None
    if len(names) > 1 and _apart(names[0], page_rows) and _registered(names[1], page_rows):
        names = names[1:]
    # the head of the page: the top name and those on its band or just under it (a
    # logo line over the company's name); a company further down is the addressee's
    top = names[0]
    head = [row for row in names if row.box[1] - top.box[1] < 2.5 * top.height]
    chosen = next((row for row in head if _COMPANY.search(row.text)), top)
    at = page_rows.index(chosen)
    if at > 0 and page_rows[at - 1] in names and _continues(page_rows[at - 1], chosen):
        return joined([page_rows[at - 1], chosen])
    if at + 1 < len(page_rows) and _bracket_goes_on(chosen, page_rows[at + 1]):
        return joined([chosen, page_rows[at + 1]])
    return chosen


def _below(row: ReadLine, page_rows: list[ReadLine]) -> ReadLine | None:
    at = page_rows.index(row) + 1
    return page_rows[at] if at < len(page_rows) else None


def _apart(row: ReadLine, page_rows: list[ReadLine]) -> bool:
    """Whether the row stands alone over the print below it, more than two lines off."""
    under = _below(row, page_rows)
    return under is not None and under.box[1] - row.box[3] > 2 * under.height


def _registered(row: ReadLine, page_rows: list[ReadLine]) -> bool:
    """Whether a company's registration number follows the name, on its row or alone on
    the row right under it."""
    if _REGISTRATION.search(row.text):
        return True
    under = _below(row, page_rows)
    return (under is not None and _REGISTRATION.search(under.text) is not None
            and not _is_name(company_name(under.text))
            and under.box[1] - row.box[3] < 1.2 * under.height)


def _bracket_goes_on(row: ReadLine, under: ReadLine) -> bool:
    """Whether a bracket the row leaves open closes on the row right under it
    ("... ENTERPRISE (SETIA" over "ALAM) SDN BHD")."""
    return (row.text.count("(") > row.text.count(")")
            and ")" in under.text.split("(")[0]
            and under.box[1] - row.box[3] < 0.6 * under.height)


def _logo(row: ReadLine, page_rows: list[ReadLine]) -> bool:
    """Whether the row is a logo or a stamp read as text ("peaypacin", "Staff lund"): a
    word or two read with doubt. A doubtful name of three words, a company form or a
    registration number is still the name."""
    return (row.confidence < 0.6 and len(row.text.split()) < 3
            and not _COMPANY.search(row.text) and not _registered(row, page_rows))


def _dated_or_priced(text: str) -> bool:
    return bool(kinds.find_dates(text)) or _priced(text)


def _priced(text: str) -> bool:
    """Whether the text holds a price: a number is part of some names ("7-Eleven")."""
    return any(p.value.currency or re.search(r"[.,]\d", p.raw) for _, p in kinds.find_amounts(text))


def company_name(text: str) -> str:
    """A header line's name without what is printed around it: the company's
    registration number and what follows it ("(974306-T)", "Co. No. 12345-X"), the
    address that OCR read on its row after its company form ("... SDN BHD No: 28,
    JALAN"), a bracket left open at the end, decoration ("**Name**"), and who it is
    owned by ("OWN BY: CHEF LEE SDN BHD")."""
    name = _REGISTRATION.split(_OWNED_BY.sub("", text), maxsplit=1)[0]
    form = _COMPANY.search(name)
    street = form and _STREET.search(name, form.end())
    if street:
        name = name[:street.start()]
    return re.sub(r"\s*[(\[][^)\]]{0,4}$", "", name).strip(" *#=~_-,:;")


def _is_name(name: str) -> bool:
    letters = sum(ch.isalpha() for ch in name)
    return (letters >= 3 and letters >= len(name.replace(" ", "")) / 2
            and not _TITLES.match(name) and not _CONTACT.search(name)
            and not _dated_or_priced(name))


def _continues(above: ReadLine, row: ReadLine) -> bool:
    """Whether ``row`` is the end of a name that ``above`` starts: its company form comes
    after at most one word ("STATIONERY SDN BHD", "CO. (M) SDN BHD"), and ``above``,
    just over it, has no company form and no digits of its own."""
    form = _COMPANY.search(row.text)
    return (form is not None and len(re.findall(r"[^\W\d_]{2,}", row.text[:form.start()])) <= 1
            and not _COMPANY.search(above.text) and not re.search(r"\d", above.text)
            and row.box[1] - above.box[3] < 0.6 * row.height
            and overlap(above.box[0], above.box[2], row.box[0], row.box[2]) > 0)


def address_below(lines: list[ReadLine], header: ReadLine) -> ReadLine | None:
    """The address: the rows under the header, read as one, down to the first that
    holds something else (a phone, a date, an amount, a registration number) or
    stands apart; the company's registration number or the document's title may stand
    over it."""
    taken: list[ReadLine] = []
    below = rows([ln for ln in lines if ln.page is header.page
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
    return joined(taken) if taken else None
