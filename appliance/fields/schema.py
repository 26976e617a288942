"""Which fields a document type has, and where on the page each is found: the
shipped defaults, and the operator's ``[[fields.<type>]]`` tables over them.

A field is found by its labels: the words printed before or above its value
("Invoice No.", "TOTAL", "Bill to"). Its value is what follows the label on the same
line, or stands to its right on the same line band, or on the line below. A label
in ``not_labels`` on the same line disqualifies it (CASH and CHANGE are not the
TOTAL; "Subtotal" is not "Total"). Where several labelled values are found,
``pick`` chooses: the first in reading order, the last, or the largest amount (a
receipt's total is the largest of its "total" lines; its subtotal and tax are
smaller).

Two fields have no label on most documents: a shop's or seller's name is the
``header`` (the first line of the page that is a name, not a date, amount or
title such as "TAX INVOICE"), and its address the lines ``below`` it up to the first
line that holds something else (a phone number, a date, a label).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from appliance.fields.choices import LOCATES, PICKS
from appliance.fields.kinds import KINDS, Parsed, parse

if TYPE_CHECKING:
    from appliance.config import FieldsSettings


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: str  # one of kinds.KINDS
    required: bool = False
    labels: tuple[str, ...] = ()
    not_labels: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()  # enum
    pattern: str = ""  # regex: the value must match it whole
    pick: str = "first"
    locate: str = "label"
    # taken without a label when none is labelled: the first value anywhere that passes
    # its check (a document's own date, an IBAN, a VAT id prove themselves)
    anywhere: bool = False
    day_first: bool = True  # a date's day before its month (false: as in the US)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"field {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.pick not in PICKS or self.locate not in LOCATES:
            raise ValueError(f"field {self.name!r}: pick must be one of {PICKS} and locate "
                             f"one of {LOCATES}")

    def parse(self, raw: str) -> Parsed | None:
        """``raw`` read as this field's kind, with its choices, pattern and date order;
        None when it does not look like the kind at all."""
        return parse(self.kind, raw, choices=self.choices, pattern=self.pattern or None,
                     day_first=self.day_first)


_TOTAL_NOT = ("sub", "subtotal", "sub-total", "cash", "change", "tendered", "rounding",
              "round", "tax", "gst", "vat", "mwst", "discount", "saving", "qty", "quantity",
              "items", "item", "paid", "tender", "card", "contanti", "especes", "bar", "rendu",
              "resto", "rückgeld")

DEFAULTS: dict[str, tuple[FieldSpec, ...]] = {
    "receipt": (
        FieldSpec("company", "text", required=True, locate="header"),
        FieldSpec("date", "date", required=True, anywhere=True,
                  labels=("date", "tarikh", "datum", "dated", "trans date", "txn date")),
        FieldSpec("address", "text", locate="below_header"),
        FieldSpec("total", "money", required=True, pick="largest",
                  labels=("total", "grand total", "amount due", "total amount", "nett total",
                          "net total", "total due", "balance due", "due", "amount", "total rm",
                          "total amt", "net amt", "gross amt", "total after rounding",
                          "rounded total",
                          "total incl", "total payable", "jumlah", "summe", "gesamt",
                          "zu zahlen", "totale", "importo", "total ttc", "montant", "totaal",
                          "te betalen", "importe"),
                  not_labels=_TOTAL_NOT),
        # what was handed over and given back: paid - change is the total (``payment``)
        FieldSpec("paid", "money", pick="largest",
                  labels=("cash", "cash tendered", "tendered", "amount tendered", "tender",
                          "paid", "amount paid", "payment", "tunai", "bargeld", "gegeben",
                          "espèces", "especes", "contanti", "efectivo", "contant"),
                  not_labels=("change", "bill", "carry", "sale", "refund", "rounding")),
        FieldSpec("change", "money",
                  labels=("change", "your change", "cash change", "change due", "baki",
                          "rückgeld", "wechselgeld", "rendu", "monnaie", "resto", "cambio",
                          "wisselgeld")),
    ),
    "invoice": (
        FieldSpec("number", "regex", required=True, pattern=r"[A-Za-z0-9][A-Za-z0-9\-/.#]*\d[A-Za-z0-9\-/.]*",
                  labels=("invoice no", "invoice number", "invoice #", "invoice nr", "inv no",
                          "rechnung nr", "rechnungs-nr", "rechnungsnummer", "rechnungsnr",
                          "facture n", "bill no", "number", "no."),
                  not_labels=("vat", "tax id", "customer no", "order no", "phone", "tel", "iban",
                              "account", "ust", "steuer")),
        FieldSpec("issue_date", "date", required=True, anywhere=True,
                  labels=("invoice date", "date of issue", "issue date", "issued", "date",
                          "rechnungsdatum", "datum"),
                  not_labels=("due", "delivery", "payment", "fällig", "faellig", "order")),
        FieldSpec("due_date", "date",
                  labels=("due date", "payment due", "due", "pay by", "fällig", "zahlbar bis")),
        FieldSpec("seller", "text", required=True, locate="header"),
        FieldSpec("buyer", "text",
                  labels=("bill to", "billed to", "invoice to", "customer", "buyer", "sold to",
                          "rechnungsempfänger", "rechnung an", "empfänger", "kunde"),
                  not_labels=("customer no", "customer id", "customer number", "kundennummer",
                              "kunden-nr")),
        FieldSpec("seller_vat_id", "vat_id", anywhere=True,
                  labels=("vat id", "vat no", "vat reg", "vat", "ust-idnr", "ust-id", "tva",
                          "tax id", "p.iva", "btw")),
        FieldSpec("net", "money", pick="last",
                  labels=("subtotal", "sub-total", "net amount", "net total", "total net", "net",
                          "nettobetrag", "netto", "summe netto", "zwischensumme", "total excl",
                          "amount excl"),
                  not_labels=("gross", "incl", "vat ", "tax ")),
        FieldSpec("tax", "money", pick="last",
                  labels=("vat", "tax", "mwst", "ust", "tva", "gst", "iva"),
                  not_labels=("id", "no.", "number", "reg", "excl", "incl", "net", "total")),
        FieldSpec("gross", "money", required=True, pick="largest",
                  labels=("total", "total due", "amount due", "gross", "total amount", "balance due",
                          "invoice total", "gesamtbetrag", "gesamt", "bruttobetrag", "brutto",
                          "summe brutto", "rechnungsbetrag", "zu zahlen", "total incl"),
                  not_labels=("subtotal", "sub-total", "sub total", "net", "excl", "vat ", "tax ",
                              "mwst", "netto")),
        FieldSpec("currency", "enum", choices=("EUR", "USD", "GBP", "CHF", "CNY", "JPY", "MYR",
                                               "SGD", "PLN", "SEK", "DKK", "NOK", "CZK"),
                  labels=("currency", "währung", "wahrung", "devise"), anywhere=True),
        FieldSpec("iban", "iban", labels=("iban",), anywhere=True),
    ),
    "fapiao": (
        FieldSpec("code", "regex", required=True, pattern=r"\d{10,12}",
                  labels=("发票代码",)),
        FieldSpec("number", "regex", required=True, pattern=r"\d{8,20}",
                  labels=("发票号码",)),
        FieldSpec("issue_date", "date", required=True, labels=("开票日期",), anywhere=True),
        FieldSpec("buyer_name", "text", required=True, labels=("购买方名称", "名称")),
        FieldSpec("buyer_tax_id", "vat_id", labels=("纳税人识别号", "统一社会信用代码")),
        FieldSpec("seller_name", "text", required=True, labels=("销售方名称", "名称"), pick="last"),
        FieldSpec("seller_tax_id", "vat_id", labels=("纳税人识别号", "统一社会信用代码"), pick="last"),
        FieldSpec("amount", "money", labels=("合计金额", "金额合计", "合计"),
                  not_labels=("税额", "价税")),
        FieldSpec("tax", "money", labels=("合计税额", "税额合计", "税额")),
        FieldSpec("total", "money", required=True, labels=("价税合计（小写）", "（小写）", "小写",
                                                            "价税合计"), not_labels=("大写",)),
        FieldSpec("total_capital", "money", labels=("价税合计（大写）", "（大写）", "大写"),
                  not_labels=("小写",)),
    ),
}


def schemas(settings: FieldsSettings | None = None) -> dict[str, tuple[FieldSpec, ...]]:
    """The fields of every document type: the defaults, with the operator's
    ``[[fields.<type>]]`` over them by name (a field of the same name replaces the
    default's; others are added)."""
    merged = {doc_type: list(specs) for doc_type, specs in DEFAULTS.items()}
    tables = {name: value for name, value in vars(settings).items()
              if isinstance(value, list)} if settings is not None else {}
    for doc_type, items in tables.items():
        current = merged.setdefault(doc_type, [])
        for item in items:
            spec = FieldSpec(item.name, item.kind, item.required, tuple(item.labels),
                             tuple(item.not_labels), tuple(item.choices), item.pattern,
                             item.pick, item.locate, item.anywhere)
            names = [existing.name for existing in current]
            if spec.name in names:
                current[names.index(spec.name)] = spec
            else:
                current.append(spec)
    day_first = settings.day_first if settings is not None else True
    return {doc_type: tuple(replace(spec, day_first=day_first) for spec in specs)
            for doc_type, specs in merged.items() if specs}
