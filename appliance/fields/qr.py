"""The QR code of a Chinese VAT invoice (fapiao): what it holds, and whether the fields
read from the print agree with it.

Its text is comma-separated (some printers use full-width commas): the format version
("01"), the invoice's type (01 special, 04 ordinary, 10 electronic ordinary, ...; 31
and 32 the digital invoices, 数电票), its code (10 or 12 digits; a digital invoice has
none), its number (8 digits; 20 on a digital invoice), an amount, the issue date
(YYYYMMDD), the check code (20 digits, or empty) and a checksum. The amount is the
total before tax (合计金额) on an invoice with a code, and the total with tax (价税合计)
on a digital invoice.

The code is printed by the issuing system from the invoice's own record, so where it
and the print disagree, the reading of the print is the suspect: the field fails a
business check that names both values, and the document goes to review.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

QR_FORMAT = "QRCode"  # engines.barcodes' name of the format
QR_DOC_TYPES = frozenset({"fapiao"})  # whose every page carries such a code
_FIELDS = re.compile(r"01,(\d{2}),(\d{10}|\d{12})?,(\d{8}|\d{20}),(\d+(?:\.\d{1,2})?),(\d{8}),"
                     r"\d{0,20}(?:,|$)")  # then the check code


@dataclass(frozen=True)
class FapiaoQr:
    kind: str  # the invoice's type
    code: str | None  # None on a digital invoice
    number: str
    amount: Decimal  # before tax where there is a code, else with tax
    issue_date: datetime.date

    @property
    def amount_field(self) -> str:
        """The field of the fapiao schema (``fields.schema``) the QR code's amount is."""
        return "amount" if self.code else "total"


def parse(text: str) -> FapiaoQr | None:
    """A fapiao QR code's fields, None for any other text."""
    match = _FIELDS.match(text.replace("，", ",").strip())
    if match is None:
        return None
    kind, code, number, amount, day = match.groups()
    try:
        issue_date = datetime.datetime.strptime(day, "%Y%m%d").date()
        return FapiaoQr(kind, code, number, Decimal(amount), issue_date)
    except (ValueError, InvalidOperation):
        return None


def fapiao_qr(barcodes: list[dict]) -> FapiaoQr | None:
    """The first of a document's barcodes that is a fapiao's QR code."""
    for code in barcodes:
        if code.get("format") == QR_FORMAT and (found := parse(code.get("value", ""))):
            return found
    return None
