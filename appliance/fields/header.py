"""The seller at the head of a document's first page: its name (a shop's, a company's)
and the address under it, read without labels."""

from __future__ import annotations

import re

from appliance.fields import kinds
from appliance.fields.lines import ReadLine, joined, overlap, rows

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
# what ends an address: a contact, a registration, a document number, a time
_AFTER_ADDRESS = re.compile(r"\b(tva|btw|iva|ust|mwst|partita|steuer|receipt|bill|invoice|inv|"
                            r"trans|cashier|table|order|store|doc|ref|nr\.?)\b|\bno\s?:|#|"
                            r"\d{1,2}:\d{2}",  # "No." may start an address: "No. 2, Jalan ..."
                            re.IGNORECASE)


def header_line(lines: list[ReadLine]) -> ReadLine | None:
    """The name at the head of the first page: among its top rows, one with a company
    form ("Sdn Bhd", "GmbH", "Ltd") if there is one, else the first that is a name; a
    name that starts on the row above its company form is joined to it."""
    if not lines:
        return None
    page_rows = rows([line for line in lines if line.page is lines[0].page])
    names = [row for row in page_rows if _is_name(company_name(row.text))]
    if not names:
        return None
    # the head of the page: the top name and those on its band or just under it (a
    # logo line over the company's name); a company further down is the addressee's
    top = names[0]
    head = [row for row in names if row.box[1] - top.box[1] < 2.5 * top.height]
    chosen = next((row for row in head if _COMPANY.search(row.text)), top)
    above = page_rows[page_rows.index(chosen) - 1] if page_rows.index(chosen) > 0 else None
    if above is not None and above in names and _continues(above, chosen):
        return joined([above, chosen])
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
    prices = [p for _, p in kinds.find_amounts(name)
              if p.value.currency or re.search(r"[.,]\d", p.raw)]
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
