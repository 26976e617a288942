"""Synthetic receipts and invoices with their key fields (`appliance make-eval-set`).

Two datasets in the plain layout, deterministic for a seed: ``<stem>.png`` beside
``<stem>.txt`` (every line in reading order: a receipt top to bottom, an invoice block by
block) and ``<stem>.fields.json``, the key fields as printed on the page, like SROIE's
key files (a date as printed, an amount without its currency):

- ``receipts-fields`` (receipt): ``company``, ``date``, ``address`` (its lines joined by
  a space), ``total``; beside the total stand subtotal, tax, rounding, cash and change.
- ``invoices-fields`` (invoice): ``number``, ``issue_date``, ``due_date``, ``seller``,
  ``buyer``, ``seller_vat_id``, ``net``, ``tax``, ``gross``, ``currency`` (ISO code),
  ``iban`` (in groups of four). Items sum to net, net + tax = gross to the cent, and VAT
  ids and IBANs pass their checksums.

Layouts, labels, date and amount formats, fonts and sizes change from page to page, so
an extractor cannot learn one template. About half the pages go through a good office
scanner and some lean up to 2 degrees; all stay legible (these sets measure extraction).
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from functools import partial
from pathlib import Path

from PIL import Image, ImageDraw

from appliance.measure.synthetic_sets import ITEMS, PAGE, _font, _scan, write_set

DEJAVU = "/usr/share/fonts/truetype/dejavu/"
FACES = ("DejaVuSans", "DejaVuSerif", "DejaVuSansCondensed", "DejaVuSansMono")  # each has -Bold
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
RECEIPT_DATES = ("{d:02}/{m:02}/{y}", "{d:02}-{m:02}-{yy:02}", "{y}-{m:02}-{d:02}",
                 "{d} {mon} {y}", "{d:02}.{m:02}.{y}", "{d:02}/{m:02}/{yy:02}", "{d:02}-{mon}-{y}")
INVOICE_DATES = {"en": ("{d:02}/{m:02}/{y}", "{y}-{m:02}-{d:02}", "{d} {mon} {y}",
                        "{month} {d}, {y}", "{d:02}.{m:02}.{y}"),
                 "de": ("{d:02}.{m:02}.{y}", "{d:02}.{m:02}.{y}", "{y}-{m:02}-{d:02}")}
INVOICE_NUMBERS = ("INV-{y}-{n:04}", "{y}/{n:03}", "{long}", "RE-{y}{n:05}", "{y}-{m:02}-{n:03}",
                   "F{yy:02}{n:04}")
NAMES = ("Green Leaf", "Sunrise", "Maju Jaya", "Golden Harvest", "Blue Harbour", "Oak & Ash",
         "Paper & Co", "Nordlicht", "Alpenblick", "La Esquina", "Bellavista", "Meridian",
         "Kingfisher", "Lumière", "Silverline", "Kedai Mesra")
KINDS = ("Trading", "Hardware", "Stationery", "Bakery", "Café", "Supplies", "Software",
         "Consulting", "Logistics", "", "")
GOODS = ITEMS + ("Kopi O", "Nasi Lemak", "Roti Canai", "Croissant", "Mineral water 1.5L",
                 "Cappuccino", "Batteries AA 4pk", "Notebook A5", "Teh Tarik", "Milk 1L")
SERVICES = ITEMS + ("Consulting (hours)", "Software licence, annual", "Support plan",
                    "Installation on site", "Travel expenses", "Training workshop",
                    "Website hosting", "Freight and packing")
TOTAL_LABELS = ("TOTAL", "Total", "GRAND TOTAL", "TOTAL AMOUNT", "AMOUNT DUE", "Nett Total")
CASH_LABELS = (("CASH", "CHANGE"), ("Cash", "Change"), ("CASH TENDERED", "CHANGE DUE"))
BANKS = ("Deutsche Bank", "Sparkasse KölnBonn", "Commerzbank", "Barclays", "ING", "BNP Paribas",
         "UniCredit", "KBC Bank", "Banco Santander")
# IBAN country -> (choices for the BBAN's leading letters, the digits after them)
IBAN_BBAN = {"DE": ("", 18), "FR": ("", 23), "NL": ("ABNA|INGB|RABO", 10),
             "GB": ("BARC|NWBK|LOYD|MIDL", 14), "AT": ("", 16), "BE": ("", 12),
             "IT": ("|".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), 22), "ES": ("", 20)}
VAT_COUNTRIES = ("DE", "IT", "BE")  # the VAT ids this module draws, with valid check digits
# A country's look. Choices are "|"-separated (an empty one: sometimes nothing); "local"
# holds its receipts' date label, total label, cash and change labels and thank-you line.
PLACES = {
    "MY": dict(suffixes="SDN BHD|SDN. BHD.|ENTERPRISE|", country="Malaysia",
               streets="NO. {n}, JALAN MERANTI {k}|LOT {n}, JALAN SAGU 18|{n}-G, JLN PUTRA {k}",
               areas="TAMAN DAYA|TAMAN SRI MUDA|BANDAR BARU BANGI|", money="RM|RM|",
               towns="81100 JOHOR BAHRU, JOHOR|40400 SHAH ALAM, SELANGOR|50450 KUALA LUMPUR",
               comma=False, tax="GST", rates=(6,), registry="GST REG NO|GST ID|SST ID",
               local=("Tarikh:", "Total Incl. GST", "TUNAI", "BAKI",
                      "THANK YOU. PLEASE COME AGAIN.")),
    "DE": dict(suffixes="GmbH|GmbH & Co. KG|e.K.|", country="Deutschland", areas="",
               streets="Hauptstraße {n}|Bahnhofstr. {n}|Lindenweg {n}a", money="€|EUR|",
               towns="10115 Berlin|80331 München|50667 Köln|20095 Hamburg", comma=True,
               tax="MwSt", rates=(19, 7), registry="USt-IdNr.|St.-Nr.",
               vat_labels="USt-IdNr.:|VAT ID:|USt-ID:",
               local=("Datum:", "SUMME", "BAR", "Rückgeld", "Vielen Dank für Ihren Einkauf!")),
    "GB": dict(suffixes="Ltd|Limited|& Sons Ltd|", country="United Kingdom", areas="Camden|",
               streets="{n} High Street|Unit {k}, Riverside Park|{n} Station Road",
               towns="London NW1 8QR|Leeds LS6 3HN", money="£|GBP|", comma=False, tax="VAT",
               rates=(20,), registry="VAT No.|VAT Reg No",
               local=("Date:", "Balance due", "Cash", "Change", "Thank you for shopping with us")),
    "US": dict(suffixes="Inc.|LLC|", country="USA", areas="", money="$|USD|",
               streets="{n} Market St|{n} Oak Avenue, Suite {k}", comma=False,
               towns="San Francisco, CA 94103|Austin, TX 78701|Portland, OR 97205",
               tax="Sales Tax", rates=(6, 8), registry="Store #|Tax ID",
               local=("Date", "BALANCE DUE", "CASH", "CHANGE", "Thank you! Have a nice day")),
    "IT": dict(suffixes="S.r.l.|S.p.A.|", country="Italia", areas="", money="€|EUR|",
               streets="Via Roma {n}|Corso Buenos Aires {n}|Via Garibaldi {n}",
               towns="20124 Milano MI|00184 Roma RM|10121 Torino TO", comma=True, tax="IVA",
               rates=(22, 10), registry="P.IVA|Partita IVA",
               vat_labels="P.IVA|Partita IVA:|VAT No.",
               local=("Data:", "TOTALE EURO", "CONTANTI", "RESTO", "Grazie e arrivederci")),
    "BE": dict(suffixes="S.A.|NV|SRL|BV", country="Belgique", areas="", money="€|EUR|",
               streets="Rue de la Loi {n}|Meir {n}|Avenue Louise {n}", comma=True,
               towns="1000 Bruxelles|2000 Antwerpen|4000 Liège", tax="TVA", rates=(21, 6),
               registry="TVA|BTW", vat_labels="TVA|BTW:|VAT No.",
               local=("Date:", "TOTAL TTC", "ESPECES", "RENDU", "Merci de votre visite")),
}
INVOICE_WORDS = {
    "en": dict(title="INVOICE|Invoice|TAX INVOICE", buyer="Bill to:|Invoice to|Customer:|BILL TO",
               number="Invoice No.|Invoice #|Invoice number:|Invoice No:",
               issued="Invoice date:|Date:|Date of issue|Issue date", currency="Currency:",
               due="Due date:|Payment due|Due by", customer="Customer No.|Account:|Customer ID",
               order="Order No.|PO number:|Your reference",
               columns=("Description", "Qty", "Unit price", "Amount"),
               net="Subtotal|Net amount|Total net", tax="VAT {rate}%|Tax ({rate}%)|VAT ({rate}%)",
               gross="Total|Total due|Amount due|Invoice total|Balance due",
               bank="Payment details|Bank details|Please transfer the amount to:",
               terms=("Payable on receipt.", "Please pay within {days} days of the invoice date.")),
    "de": dict(title="RECHNUNG|Rechnung", buyer="Rechnung an:|Kunde:|Empfänger",
               number="Rechnung Nr.|Rechnungsnummer:|Rechnungs-Nr.", currency="Währung:",
               issued="Rechnungsdatum:|Datum:", due="Fällig am:|Zahlbar bis",
               customer="Kundennummer:|Kunden-Nr.", order="Bestellnummer:|Ihre Referenz",
               columns=("Beschreibung", "Menge", "Einzelpreis", "Betrag"),
               net="Nettobetrag|Zwischensumme|Summe netto", tax="MwSt. {rate}%|USt. {rate}%",
               gross="Gesamtbetrag|Rechnungsbetrag|Summe brutto|Zu zahlen",
               bank="Bankverbindung|Bitte überweisen Sie den Betrag auf:",
               terms=("Zahlbar sofort ohne Abzug.",
                      "Zahlbar innerhalb von {days} Tagen ohne Abzug.")),
}


def make_field_sets(root: Path, pages: int = 40, seed: int = 11) -> dict[str, int]:
    """Write ``receipts-fields`` and ``invoices-fields`` under ``root``; answers how many
    pages each got."""
    makers = {"receipts-fields": ("receipt", _receipt), "invoices-fields": ("invoice", _invoice)}
    return {name: write_set(root, name, doc_type, _with_fields(make), pages, seed)
            for name, (doc_type, make) in makers.items()}


def _with_fields(make):
    """A page maker that gives its text lines and its key fields as truth files."""
    def page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
        image, lines, fields = make(rng)
        return image.convert("L"), {  # _scan answers RGB; grey will do
            ".txt": "\n".join(lines) + "\n",
            ".fields.json": json.dumps(fields, ensure_ascii=False, indent=1) + "\n"}
    return page


class _Sheet:
    """A white (greyscale) page being typeset. Every line drawn is kept as a line of the
    truth, so drawing the blocks in reading order is what keeps the truth in that order."""

    def __init__(self, width: int, height: int, leading: float):
        self.image = Image.new("L", (width, height), 255)
        self.draw = ImageDraw.Draw(self.image)
        self.leading = leading
        self.lines: list[str] = []

    def write(self, y: int, font, *cells: tuple[float, str, str]) -> int:
        """Cells ``(x, text, anchor)`` on one line: anchor "la" starts the text at x, "ma"
        centres it there, "ra" ends it there. Answers the y of the next line."""
        for x, text, anchor in cells:
            self.draw.text((x, y), text, font=font, fill="black", anchor=anchor)
        self.lines.append(" ".join(text.strip() for _, text, _ in cells if text.strip()))
        return y + round(font.size * self.leading)

    def block(self, x: float, y: int, lines: list[str], font, first=None, anchor="la") -> int:
        """Lines stacked from y, the first in ``first`` (a name or a heading) when given."""
        for index, text in enumerate(lines):
            y = self.write(y, first if first and index == 0 else font, (x, text, anchor))
        return y

    def rule(self, x0: int, x1: int, y: int, height: int, dashed: bool = False) -> int:
        """A line from x0 to x1 in the middle of ``height`` pixels; answers the y below."""
        middle = y + height // 2
        for x in range(x0, x1, 12) if dashed else [x0]:
            self.draw.line((x, middle, x + 6 if dashed else x1, middle), fill="black", width=2)
        return y + height


def _receipt(rng: random.Random) -> tuple[Image.Image, list[str], dict[str, str]]:
    code = rng.choice(tuple(PLACES))
    place = PLACES[code]
    date_label, total_label, cash_label, change_label, thanks = place["local"]
    comma = place["comma"] and rng.random() < 0.85
    plain = partial(_amount, comma=comma, grouped=rng.random() < 0.6)
    symbol = _pick(rng, place["money"])
    upper = rng.random() < 0.6
    font, bold = _faces(rng.choice(FACES), rng.randint(18, 26))
    margin, width = rng.randint(45, 60), rng.randint(600, 800)
    company = _company(rng, place, rng.choice(NAMES))
    company = company.upper() if upper else company
    head = _fitted((bold if rng.random() < 0.7 else font).font_variant(
        size=round(font.size * rng.uniform(1.0, 1.4))), [company], width - 2 * margin)
    address = _address(rng, place)
    if rng.random() < 0.4 and font.getlength(", ".join(address)) <= width - 2 * margin:
        address = [", ".join(address)]
    printed_date = _printed(_day(rng), rng.choice(RECEIPT_DATES))

    rows = [("head", company, "")]
    rows += [("centre", line, "") for line in address]
    if rng.random() < 0.6:
        rows.append(("centre", f"{rng.choice(('Tel:', 'TEL', 'Phone'))} {_phone(rng)}", ""))
    if rng.random() < 0.5:
        registry = _vat_id(rng, code) if code in VAT_COUNTRIES else f"{rng.randrange(10**12):012d}"
        rows.append(("centre", f"{_pick(rng, place['registry'])}: {registry}", ""))
    stamp = f"{rng.choice(('Date:', 'DATE', 'Date', '', date_label))} {printed_date}".strip()
    clock = _clock(rng) if rng.random() < 0.7 else ""
    receipt_no = (f"{rng.choice(('Receipt', 'Receipt No:', 'Bill No:', 'Inv No:', 'Trans #'))} "
                  f"{rng.randint(1000, 999999)}")
    rows += [("rule", "", ""), *rng.choice((
        [("pair", receipt_no, ""), ("pair", f"{stamp} {clock}".strip(), "")],
        [("pair", stamp, clock), ("pair", receipt_no, "")],
        [("pair", receipt_no, stamp)] + ([("pair", clock, "")] if clock else [])))]
    if rng.random() < 0.4:
        rows.append(("pair", f"Cashier: {rng.choice(('AMIRA', 'Jonas', 'K. Lee', 'Maria'))}", ""))
    rows.append(("rule", "", ""))

    style = rng.choice(("plain", "quantity first", "quantity line"))
    subtotal = 0
    for name in rng.sample(GOODS, rng.randint(2, 12)):
        big = name in ITEMS and rng.random() < 0.15  # office goods, dear enough for thousands
        name = name.upper() if upper else name
        quantity = 1 if big or rng.random() < 0.6 else rng.randint(2, 5)
        unit = rng.randint(3000, 60000) if big else rng.randint(50, 3000)
        subtotal += quantity * unit
        if style == "quantity first":
            rows.append(("pair", f"{quantity}{rng.choice((' x ', ' '))}{name}",
                         plain(quantity * unit)))
        elif style == "quantity line" and quantity > 1:
            rows += [("pair", name, ""),
                     ("pair", f"   {quantity} x {plain(unit)}", plain(quantity * unit))]
        else:
            rows.append(("pair", name, plain(quantity * unit)))
    rows.append(("rule", "", ""))

    # The currency on the totals block: on the amounts, in the total's label, or nowhere.
    where = rng.choice(("amounts", "amounts", "label", "none")) if symbol else "none"
    shape = "{}"
    if where == "amounts":
        shape = "{} €" if symbol == "€" and comma else symbol + " " * (len(symbol) > 1) + "{}"

    def money(cents: int) -> str:
        return shape.format(plain(cents))

    rate = rng.choice(place["rates"])
    tax_mode = rng.choice(("added", "included", "none"))
    tax = (subtotal * rate + 50) // 100 if tax_mode == "added" else 0
    if tax_mode == "added" or rng.random() < 0.4:
        rows.append(("pair", rng.choice(("Subtotal", "SUB TOTAL", "Sub-total")), money(subtotal)))
    if tax_mode == "added":
        rows.append(("pair", f"{place['tax']} {rate}%", money(tax)))
    total = subtotal + tax
    if code == "MY" and rng.random() < 0.6:  # cash totals round to 5 sen
        adjustment = (total + 2) // 5 * 5 - total
        if adjustment:
            rows.append(("pair", rng.choice(("Rounding Adj", "ROUNDING")), money(adjustment)))
            total += adjustment
    label = f"Total ({symbol})" if where == "label" else rng.choice(TOTAL_LABELS + (total_label,))
    rows.append(("total" if rng.random() < 0.5 else "pair", label, money(total)))
    if tax_mode == "included":
        included = (total * rate + (100 + rate) // 2) // (100 + rate)
        rows.append(("pair", f"{rng.choice(('Incl.', 'incl.'))} {place['tax']} {rate}%",
                     money(included)))
    if rng.random() < 0.3:
        rows.append(("pair", "Total paid", money(total)))
    if rng.random() < 0.65:
        cash = (total // 1000 + rng.choice((1, 1, 2, 5))) * 1000  # tendered: more than due
        cash_label, change_label = rng.choice(CASH_LABELS + ((cash_label, change_label),))
        rows += [("pair", cash_label, money(cash)), ("pair", change_label, money(cash - total))]
    else:
        rows.append(("pair", rng.choice(("VISA", "MASTERCARD", "CARD", "Debit card")),
                     money(total)))
    rows += [("rule", "", ""), ("centre", thanks, "")]

    strip, lines = _print_receipt(rng, rows, {"head": head, "centre": font, "pair": font,
                                              "total": bold}, width, margin)
    fields = {"company": company, "date": printed_date, "address": " ".join(address),
              "total": plain(total)}
    paper = 255
    if rng.random() < 0.35:  # photographed or scanned lying on a grey table
        paper = rng.randint(170, 215)
        canvas = Image.new("L", (strip.width + 2 * rng.randint(60, 220),
                                   strip.height + 2 * rng.randint(30, 70)), paper)
        canvas.paste(strip, ((canvas.width - strip.width) // 2,
                             (canvas.height - strip.height) // 2))
        strip = canvas
    return _weathered(strip, rng, paper), lines, fields


def _print_receipt(rng: random.Random, rows: list[tuple[str, str, str]], fonts: dict,
                   width: int, margin: int) -> tuple[Image.Image, list[str]]:
    """A paper strip with rows of kind head/centre (centred or flush left), pair (text
    left, amount right), total (a pair, in bold) and rule (a dashed line, no text)."""
    leading = rng.uniform(1.3, 1.55)
    centred = rng.random() < 0.75
    needed = max(fonts[kind].getlength(f"{left}    {right}")
                 for kind, left, right in rows if kind != "rule")
    width = max(width, round(needed) + 2 * margin)
    rule_height = round(fonts["pair"].size * leading / 2)
    height = sum(rule_height if kind == "rule" else round(fonts[kind].size * leading)
                 for kind, _, _ in rows)
    sheet = _Sheet(width, height + 2 * margin, leading)
    y = margin
    for kind, left, right in rows:
        if kind == "rule":
            y = sheet.rule(margin, width - margin, y, rule_height, dashed=True)
        elif kind in ("head", "centre") and centred:
            y = sheet.write(y, fonts[kind], (width / 2, left, "ma"))
        else:
            y = sheet.write(y, fonts[kind], (margin, left, "la"),
                            *([(width - margin, right, "ra")] if right else []))
    return sheet.image, sheet.lines


def _invoice(rng: random.Random) -> tuple[Image.Image, list[str], dict[str, str]]:
    seller_code, buyer_code = rng.choice(("DE", "DE", "IT", "BE")), rng.choice(tuple(PLACES))
    seller_place, buyer_place = PLACES[seller_code], PLACES[buyer_code]
    lang = "de" if seller_code == "DE" and rng.random() < 0.6 else "en"
    words = {key: _pick(rng, value) if isinstance(value, str) else value
             for key, value in INVOICE_WORDS[lang].items()}  # this page's labels
    amount = partial(_amount, comma=rng.random() < (0.85 if lang == "de" else 0.3))
    currency = rng.choice(("EUR", "EUR", "EUR", "GBP", "USD", "CHF"))
    # Where the currency code is printed: the info block, the total's label, before the
    # totals' amounts, or the amount column's header.
    currency_at = rng.choice(("info", "gross", "amounts", "column"))
    font, bold = _faces(rng.choice(FACES), rng.randint(20, 28))
    size = font.size
    margin = rng.randint(80, 120)
    right = PAGE[0] - margin
    sheet = _Sheet(*PAGE, rng.uniform(1.3, 1.5))

    seller_name, buyer_name = rng.sample(NAMES, 2)
    seller = _company(rng, seller_place, seller_name)
    buyer = _company(rng, buyer_place, buyer_name)
    vat_id = _vat_id(rng, seller_code)
    vat_line = f"{_pick(rng, seller_place['vat_labels'])} {vat_id}"
    seller_address = _address(rng, seller_place)
    seller_lines = [seller, *seller_address]
    if rng.random() < 0.5:
        seller_lines.append(f"Tel. {_phone(rng)}")
    vat_in_footer = rng.random() < 0.3
    if not vat_in_footer:
        seller_lines.append(vat_line)
    buyer_lines = [words["buyer"], buyer, *_address(rng, buyer_place)]
    if buyer_code != seller_code:
        buyer_lines.append(buyer_place["country"])
    if buyer_code in VAT_COUNTRIES and rng.random() < 0.5:  # a second VAT id, the wrong one
        buyer_lines.append(f"{_pick(rng, buyer_place['vat_labels'])} {_vat_id(rng, buyer_code)}")

    issued = _day(rng)
    due = issued + timedelta(days=rng.choice((0, 7, 10, 14, 14, 30, 30, 45, 60)))
    date_format = rng.choice(INVOICE_DATES[lang])
    issue_date, due_date = _printed(issued, date_format), _printed(due, date_format)
    number = rng.choice(INVOICE_NUMBERS).format(
        y=issued.year, yy=issued.year % 100, m=issued.month, n=rng.randint(1, 999),
        long=rng.randint(100000, 999999))
    info = [(words["number"], number), (words["issued"], issue_date), (words["due"], due_date)]
    extras = [(words["currency"], currency)] if currency_at == "info" else []
    if rng.random() < 0.5:
        extras.append((words["customer"], str(rng.randint(10000, 99999))))
    if rng.random() < 0.4:
        extras.append((words["order"], f"PO-{rng.randint(1000, 9999)}"))
    for extra in extras:
        info.insert(rng.randint(1, len(info)), extra)

    top = rng.randint(70, 110)
    title_font = bold.font_variant(size=round(size * rng.uniform(1.5, 2.1)))
    name_font = _fitted(bold.font_variant(size=round(size * rng.uniform(1.1, 1.4))), [seller],
                        right - margin - title_font.getlength(words["title"]) - 2 * size)
    if rng.random() < 0.5:  # the seller top left, the title opposite
        y = sheet.block(margin, top, seller_lines, font, name_font)
        sheet.write(top, title_font, (right, words["title"], "ra"))
    else:
        sheet.write(top, title_font, (margin, words["title"], "la"))
        y = sheet.block(right, top, seller_lines, font, name_font, anchor="ra")

    y += rng.randint(2, 3) * size
    buyer_bottom = sheet.block(margin, y, buyer_lines, font, bold)
    buyer_width = max(bold.getlength(text) for text in buyer_lines)
    label_width = max(font.getlength(label) for label, _ in info) + size
    x_info = round(right - label_width - max(font.getlength(value) for _, value in info)
                   - rng.randint(0, 3) * size)
    if x_info < margin + buyer_width + 2 * size or rng.random() < 0.3:  # below the buyer
        x_info, y = margin, buyer_bottom + size
    tabbed = rng.random() < 0.6  # values in a column after the labels, else flush right
    for label, value in info:
        value_cell = (x_info + label_width, value, "la") if tabbed else (right, value, "ra")
        y = sheet.write(y, font, (x_info, label, "la"), value_cell)
    y = max(y, buyer_bottom) + rng.randint(1, 2) * size

    iban = _iban(rng)
    printed_iban = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
    days = (due - issued).days
    payment = [words["bank"]]
    if rng.random() < 0.6:
        payment.append(f"Bank: {rng.choice(BANKS)}")
    payment.append(f"IBAN{rng.choice((':', ''))} {printed_iban}")
    if rng.random() < 0.7:
        letters = "".join(rng.choice("ABCDEFGHKLMNPRSTUVWXZ") for _ in range(4))
        payment.append(f"BIC: {letters}{iban[:2]}{rng.choice(('FF', '2X', '33', 'MM'))}")
    payment.append(words["terms"][min(days, 1)].format(days=days))

    # As many item rows as leave room for the totals, the payment block and a footer.
    line = round(size * sheet.leading)
    footer_top = PAGE[1] - margin - 2 * size
    room = footer_top - y - (5 + len(payment)) * line - 5 * size
    numbered = rng.random() < 0.4
    x_description = margin + 3 * size if numbered else margin
    columns = list(words["columns"])
    if currency_at == "column":
        columns[3] += f" ({currency})"
    x_unit = right - round(max(8.5 * size, bold.getlength(columns[3]) + 1.5 * size))
    x_quantity = x_unit - round(max(7.5 * size, bold.getlength(columns[2]) + 1.5 * size))
    y = sheet.rule(margin, right, y, size // 2)
    y = sheet.write(y, bold, *([(margin, "Pos.", "la")] if numbered else []),
                    (x_description, columns[0], "la"), (x_quantity, columns[1], "ra"),
                    (x_unit, columns[2], "ra"), (right, columns[3], "ra"))
    y = sheet.rule(margin, right, y, size // 2)
    net = 0
    items = rng.sample(SERVICES, rng.randint(2, max(2, min(12, room // line))))
    for position, description in enumerate(items, start=1):
        quantity = rng.choice((1, 1, 2, 3, 5, 10, rng.randint(1, 40)))
        unit = rng.randint(500, 250000) if quantity < 5 else rng.randint(200, 20000)
        net += quantity * unit
        y = sheet.write(y, font, *([(margin, str(position), "la")] if numbered else []),
                        (x_description, description, "la"), (x_quantity, str(quantity), "ra"),
                        (x_unit, amount(unit), "ra"), (right, amount(quantity * unit), "ra"))
    y = sheet.rule(margin, right, y, size // 2)

    rate = rng.choice(seller_place["rates"])
    tax = (net * rate + 50) // 100
    gross_label = words["gross"]
    if currency_at == "gross":
        gross_label += rng.choice((f" {currency}", f" ({currency})"))
    prefix = f"{currency} " if currency_at == "amounts" else ""
    totals = [(words["net"], amount(net)), (words["tax"].format(rate=rate), amount(tax)),
              (gross_label, amount(net + tax))]
    x_label = round(right - 2 * size - max(bold.getlength(f"{label}  {prefix}{value}")
                                           for label, value in totals))
    for label, value in totals[:2]:
        y = sheet.write(y, font, (x_label, label, "la"), (right, prefix + value, "ra"))
    y = sheet.rule(x_label, right, y, size // 2)
    label, value = totals[2]
    y = sheet.write(y, bold if rng.random() < 0.7 else font,
                    (x_label, label, "la"), (right, prefix + value, "ra"))
    sheet.block(margin, y + rng.randint(1, 2) * size, payment, font, bold)

    footer = [f"{seller} · {' · '.join(seller_address)}"] + ([vat_line] if vat_in_footer else [])
    if vat_in_footer or rng.random() < 0.4:
        sheet.block(PAGE[0] / 2, footer_top, footer,
                    _fitted(font.font_variant(size=size - 4), footer, right - margin), anchor="ma")
    fields = {"number": number, "issue_date": issue_date, "due_date": due_date, "seller": seller,
              "buyer": buyer, "seller_vat_id": vat_id, "net": amount(net), "tax": amount(tax),
              "gross": amount(net + tax), "currency": currency, "iban": printed_iban}
    return _weathered(sheet.image, rng, 255), sheet.lines, fields


def _weathered(page: Image.Image, rng: random.Random, paper: int) -> Image.Image:
    """Some pages lean up to 2 degrees (with the scanner's own 0.6 at most); about half go
    through a good office scanner."""
    if rng.random() < 0.35:
        page = page.rotate(rng.uniform(-1.4, 1.4), resample=Image.BICUBIC, fillcolor=paper)
    return _scan(page, rng, mild=True) if rng.random() < 0.5 else page


def _pick(rng: random.Random, choices: str) -> str:
    """One of the "|"-separated ``choices`` (an empty one stands for printing nothing)."""
    return rng.choice(choices.split("|"))


def _faces(face: str, size: int):
    """One DejaVu face at ``size``, regular and bold."""
    return _font(f"{DEJAVU}{face}.ttf", size), _font(f"{DEJAVU}{face}-Bold.ttf", size)


def _fitted(font, texts: list[str], width: float):
    """``font``, made smaller where the widest of ``texts`` would not fit ``width`` pixels."""
    widest = max(font.getlength(text) for text in texts)
    return font if widest <= width else font.font_variant(size=int(font.size * width / widest))


def _company(rng: random.Random, place: dict, name: str) -> str:
    return " ".join(part for part in (name, rng.choice(KINDS), _pick(rng, place["suffixes"]))
                    if part)


def _address(rng: random.Random, place: dict) -> list[str]:
    """Street, district (where the country writes one) and town, one a line."""
    street = _pick(rng, place["streets"]).format(n=rng.randint(1, 250), k=rng.randint(1, 20))
    parts = (street, _pick(rng, place["areas"]), _pick(rng, place["towns"]))
    return [part for part in parts if part]


def _day(rng: random.Random) -> date:
    return date(2016, 1, 1) + timedelta(days=rng.randrange(10 * 365))


def _printed(day: date, pattern: str) -> str:
    return pattern.format(d=day.day, m=day.month, y=day.year, yy=day.year % 100,
                          mon=MONTHS[day.month - 1][:3], month=MONTHS[day.month - 1])


def _clock(rng: random.Random) -> str:
    hour, minute = rng.randint(7, 22), rng.randint(0, 59)
    return rng.choice((f"{hour:02}:{minute:02}", f"{hour:02}:{minute:02}:{rng.randint(0, 59):02}",
                       f"{(hour - 1) % 12 + 1:02}:{minute:02} {'AM' if hour < 12 else 'PM'}"))


def _phone(rng: random.Random) -> str:
    return f"0{rng.randint(20, 99)}-{rng.randint(100, 999)} {rng.randint(1000, 9999)}"


def _amount(cents: int, comma: bool, grouped: bool = True) -> str:
    """Cents as printed: 1,234.50; 1.234,50 where the decimal mark is a comma; 1234.50
    without grouping. A negative amount (a rounding adjustment) leads with "-"."""
    whole = f"{abs(cents) // 100:,}" if grouped else str(abs(cents) // 100)
    text = f"{whole}.{abs(cents) % 100:02d}"
    if comma:
        text = text.translate(str.maketrans(",.", ".,"))
    return f"-{text}" if cents < 0 else text


def _iban(rng: random.Random) -> str:
    """An IBAN of a random country's length and BBAN shape, with ISO 13616 check digits."""
    country = rng.choice(tuple(IBAN_BBAN))
    letters, digits = IBAN_BBAN[country]
    bban = _pick(rng, letters) + "".join(rng.choice("0123456789") for _ in range(digits))
    return f"{country}{_iban_check(country, bban):02d}{bban}"


def _iban_check(country: str, bban: str) -> int:
    """ISO 13616 check digits: the BBAN, the country code and "00" read as one number
    (letters A=10 .. Z=35), 98 minus its remainder mod 97."""
    number = "".join(str(int(char, 36)) for char in bban + country + "00")
    return 98 - int(number) % 97


def _vat_id(rng: random.Random, country: str) -> str:
    """A VAT id that passes its country's check: DE (ISO 7064 MOD 11,10), IT (Luhn on the
    Partita IVA), BE (97 minus the enterprise number's first eight digits mod 97)."""
    if country == "DE":
        body = str(rng.randint(10**7, 10**8 - 1))
        return f"DE{body}{_mod_11_10(body)}"
    if country == "IT":  # seven digits for the company, three for its tax office
        body = f"{rng.randint(0, 10**7 - 1):07d}{rng.randint(1, 100):03d}"
        return f"IT{body}{_luhn(body)}"
    body = f"0{rng.randint(2 * 10**6, 10**7 - 1)}"
    return f"BE{body}{97 - int(body) % 97:02d}"


def _mod_11_10(digits: str) -> int:
    """ISO 7064 MOD 11,10 check digit (German VAT ids)."""
    product = 10
    for digit in digits:
        total = (int(digit) + product) % 10 or 10
        product = 2 * total % 11
    return (11 - product) % 10


def _luhn(digits: str) -> int:
    """Luhn check digit for ``digits`` (Italian VAT ids): every second digit doubled,
    counting from the rightmost."""
    total = 0
    for index, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if index % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return -total % 10
