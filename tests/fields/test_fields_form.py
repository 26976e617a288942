"""The review console's "Key fields" form: the rows and inputs it shows (escaped where
Markdown renders), the values it sends, and "Save fields" on a real Appliance and
SQLite store (no OCR: the page and its fields are made in the store)."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from appliance.daemon import Appliance
from appliance.fields.document import read_fields
from appliance.fields.schema import DEFAULTS
from appliance.store import queries, transitions
from appliance.review import page_image
from appliance.store.models import Document, FieldSet, Page, PageResult
from tests.conftest import make_settings
from tests.fixtures.documents import write_png
from tests.fields.test_fields import INVOICE_ROWS, TODAY, no_history, page
from tests.fixtures.results import page_done
from tests.service.test_review import in_review
from ui import fields_form
from ui.i18n import ZH
from ui.page_image import annotate_page
from ui.review import document_fields, open_next, page_view, save_fields, shortcuts_js

HOSTILE = "<img src=x onerror=alert(1)>"
GROSS_SUM = "gross 1910.00 != net 1000.00 + tax 190.00"


def invoice_fields() -> list[dict]:
    return read_fields([page(*INVOICE_ROWS)], DEFAULTS["invoice"], no_history,
                       today=TODAY).fields


def field(name: str, value: str | None, *, valid=True, checks=(), evidence=(), raw=None,
          currency=None) -> dict:
    return {"name": name, "kind": "text", "required": False, "raw": raw or value,
            "value": value, "currency": currency, "confidence": 0.9,
            "evidence": list(evidence), "checks": list(checks), "valid": valid,
            "corrected_by": None}


def unescaped_html(markdown: str) -> bool:
    """True if a "<" that could open a tag is not backslash-escaped."""
    return re.search(r"(?<!\\)<[A-Za-z/!?]", markdown) is not None


def test_rows_show_each_field_s_value_validity_why_and_evidence_page():
    fields = invoice_fields()
    rows = {row[0]: row for row in fields_form.field_rows(fields)}
    assert list(rows) == [f["name"] for f in fields]
    # a field that passed says why: every check's words
    assert rows["number"] == ["number", "INV-2024-0042", "✓", "valid regex", "1"]
    assert rows["gross"][3] == "valid money; gross 1190.00 = net 1000.00 + tax 190.00"
    assert rows["gross"][1] == "1190.00 EUR"  # an amount with its currency
    assert rows["iban"][1] == "DE89370400440532013000"

    missing = field("due_date", None, valid=False,
                    checks=[{"layer": "format", "ok": False, "message": "required, not found"}])
    optional = field("buyer", None, valid=None)
    wrong = field("gross", "1910.00", valid=False, currency="EUR",
                  evidence=[{"page": 2, "box": [1, 2, 3, 4], "text": "Total 1.910,00"}],
                  checks=[{"layer": "format", "ok": True, "message": "an amount"},
                          {"layer": "logic", "ok": False, "message": GROSS_SUM}])
    assert fields_form.field_rows([missing, optional, wrong]) == [
        ["due_date", "", "✗", "required, not found", ""],
        ["buyer", "", "–", "", ""],
        ["gross", "1910.00 EUR", "✗", GROSS_SUM, "2"]]
    row = fields_form.field_rows([wrong])[0]
    assert fields_form.field_label(row, required=True) == f"gross (required) ✗ {GROSS_SUM}"
    assert fields_form.field_info(row) == "on page 2"
    assert fields_form.field_info(fields_form.field_rows([optional])[0]) == "not found"
    assert fields_form.field_info(["total", "9.90", "✓", "", ""]) == "no box on a page"


def test_why_a_field_passed_is_translated_by_its_checks_codes():
    rows = {row[0]: row for row in fields_form.field_rows(invoice_fields(), ZH)}
    assert rows["gross"][3] == "格式有效（money）; gross 1190.00 = net 1000.00 + tax 190.00，相符"
    assert rows["issue_date"][3] == "2024-03-15 是真实存在的日期; 2024-03-15 不在未来"
    # a check stored before checks had codes shows its message as it is
    old = field("total", "9.90", checks=[{"layer": "logic", "ok": True, "message": "as read"}])
    assert fields_form.why(old, ZH) == "as read"


def test_what_a_document_says_never_becomes_html():
    hostile = field("company", HOSTILE, valid=False, checks=[
        {"layer": "business", "ok": False, "message": f"{HOSTILE} is not on the page"}],
        evidence=[{"page": 1, "box": [5, 5, 50, 20], "text": HOSTILE}])
    [row] = fields_form.field_rows([hostile])
    # an input's value and label are shown as text by Gradio, never as markup; its info
    # line is formatted, so it holds none of the document's words
    [update, hidden] = fields_form.input_updates([hostile], 2)
    assert update.value == HOSTILE and update.visible
    assert update.label == f"company ✗ {HOSTILE} is not on the page"
    assert update.info == "on page 1"
    assert not hidden.visible and hidden.value == ""
    status = fields_form.saved_text({"company": HOSTILE}, [hostile])
    assert "1 check still fails (company)" in status and not unescaped_html(status)
    assert not unescaped_html(fields_form.saved_text({HOSTILE: "x"}, []))


def test_only_changed_values_are_sent_and_an_emptied_one_as_empty():
    fields = invoice_fields()
    shown = [row[1] for row in fields_form.field_rows(fields)]
    assert fields_form.changed_values(fields, shown) == {}
    # spaces around or inside a value are not a change; the pool's hidden slots are ignored
    edited = [f"  {value} " for value in shown] + ["", "left over"]
    assert fields_form.changed_values(fields, edited) == {}
    names = [f["name"] for f in fields]
    edited = list(shown)
    edited[names.index("gross")] = "1.910,00"
    edited[names.index("iban")] = ""
    assert fields_form.changed_values(fields, edited) == {"gross": "1.910,00", "iban": ""}
    # a field that was not found, given a value
    missing = field("due_date", None, valid=False)
    assert fields_form.changed_values([missing], ["14.04.2024"]) == {"due_date": "14.04.2024"}
    assert fields_form.changed_values([missing], ["  "]) == {}
    assert fields_form.changed_values([missing], [None]) == {}  # an input never touched


def test_status_lines_and_form_notes():
    good = field("total", "9.90")
    bad = field("gross", "1", valid=False, checks=[
        {"layer": "logic", "ok": False, "message": "a"},
        {"layer": "business", "ok": False, "message": "b"}])
    assert fields_form.saved_text({"total": "9.90"}, [good]) == \
        "saved: total; every check passes"
    assert fields_form.saved_text({"gross": "1", "total": "9.90"}, [good, bad]) == \
        "saved: gross, total; 2 checks still fail (gross)"
    assert fields_form.form_size({"receipt": (1, 2), "invoice": (1, 2, 3)}) == 3
    assert fields_form.form_size({}) == 0
    assert fields_form.form_note(None, 3) == "" and fields_form.form_note([good], 3) == ""
    assert fields_form.form_note([], 3) == fields_form.NO_FIELDS_TEXT
    assert fields_form.form_note([good, good, bad], 1).startswith("2 more fields")


def test_evidence_boxes_of_the_page_shown_are_drawn_with_the_field_names(tmp_path):
    ok = field("total", "9.90", evidence=[{"page": 1, "box": [40, 40, 140, 80], "text": "9.90"}])
    bad = field("date", "2031-01-01", valid=False, evidence=[
        {"page": 1, "box": [200, 40, 300, 80], "text": "x"},
        {"page": 2, "box": [10, 10, 20, 20], "text": "y"}])
    marks = fields_form.field_highlights([ok, bad, field("company", None, valid=None)], 1)
    assert [(m["label"], m["box"], m["ok"]) for m in marks] == [
        ("total", [40, 40, 140, 80], True), ("date", [200, 40, 300, 80], False)]
    assert fields_form.field_highlights([ok], 2) == []
    assert fields_form.field_highlights(None, 1) == []
    # the boxes lie on the page as rendered; the image shown may be cropped from it
    [moved] = fields_form.field_highlights([ok], 1, to_image=(1, 0, -30, 0, 1, -20))
    assert moved["box"] == [[10, 20], [110, 20], [110, 60], [10, 60]]

    image = write_png(tmp_path / "page.png", ["Some text"])
    drawn = annotate_page(image, marks)
    red, green, blue = drawn.getpixel((90, 60))  # inside the passing field's box
    assert blue > red and (red, green, blue) != (255, 255, 255)
    red, green, blue = drawn.getpixel((250, 60))  # a failing one: the low-confidence style
    assert red > blue
    with Image.open(image) as original:
        assert drawn.size == original.size


def test_save_in_a_field_saves_the_fields_not_the_page_text():
    script = shortcuts_js()
    assert '"review-fields"' in script and '"review-fields-save"' in script
    assert "e.target.closest(\"#\" + FIELDS)" in script


@pytest.fixture
def appliance(tmp_path):
    running = Appliance(make_settings(tmp_path, review={"enabled": True}))
    yield running
    running.db.close()


def test_save_fields_stores_the_reviewer_s_values_checked_again(appliance):
    """The function "Save fields" (and Enter in a field) calls: only the changed values
    go to Appliance.correct_fields, as the reviewer; the form shows them checked
    again, a bad value with its failing check."""
    db = appliance.db
    doc = in_review(db, doc_type="invoice", name="inv.png")
    transitions.record_fields(db, FieldSet(document_id=doc.id, doc_type="invoice",
                                           fields=invoice_fields(), reasons=[]))
    in_review(db, doc_type="report", name="report.png")  # a type without fields

    view, problem = open_next(appliance.review, "anna")
    assert problem == "" and view.key_fields["document_id"] == doc.id
    assert view.key_fields["page"] == 1
    fields = view.key_fields["fields"]
    names = [f["name"] for f in fields]
    values = [row[1] for row in fields_form.field_rows(fields)]

    assert save_fields(appliance, "anna", view.page_id, view.key_fields, values) == (
        "No field was changed.", None)
    values[names.index("gross")] = "1.910,00"
    values[names.index("iban")] = ""
    status, after = save_fields(appliance, "anna", view.page_id, view.key_fields, values)
    assert status.startswith("saved: gross, iban; ") and "still fail" in status
    assert after.page_id == view.page_id and after.key_fields["document_id"] == doc.id

    stored = queries.latest_fields(db, doc.id)
    assert stored.source == "corrected" and stored.actor == "anna"
    by_name = {f["name"]: f for f in stored.fields}
    assert by_name["gross"]["value"] == "1910.00" and by_name["gross"]["valid"] is False
    assert by_name["gross"]["corrected_by"] == "anna"
    assert by_name["iban"]["value"] is None and by_name["iban"]["corrected_by"] == "anna"
    assert by_name["net"]["corrected_by"] is None  # untouched
    assert f"field_invalid: gross: {GROSS_SUM}" in stored.reasons

    # the form shows the fields as checked again: the bad value, its failing check
    rows = {row[0]: row for row in fields_form.field_rows(after.key_fields["fields"])}
    # typed without a currency, the amount keeps the one it was read in
    assert rows["gross"][1:4] == ["1910.00 EUR", "✗", GROSS_SUM]
    assert rows["iban"][1:3] == ["", "–"]
    update = fields_form.input_updates(after.key_fields["fields"], 11)[names.index("gross")]
    assert update.value == "1910.00 EUR" and update.label == f"gross (required) ✗ {GROSS_SUM}"
    # net's evidence is still on this page, boxed as a failing field now
    assert {"label": "net", "ok": False}.items() <= next(
        m for m in fields_form.field_highlights(after.key_fields["fields"], 1)
        if m["label"] == "net").items()

    # put right from the redisplayed form: every check passes again
    values = [row[1] for row in fields_form.field_rows(after.key_fields["fields"])]
    values[names.index("gross")] = "1190.00 EUR"
    status, again = save_fields(appliance, "anna", view.page_id, after.key_fields, values)
    assert status == "saved: gross; every check passes"
    assert queries.latest_fields(db, doc.id).reasons == []

    # errors are messages: a document that is gone, no page open, a type without fields
    gone = dict(again.key_fields, document_id="nope")
    values[names.index("gross")] = "1"
    assert save_fields(appliance, "anna", view.page_id, gone, values) == (
        "no document with id nope", None)
    assert save_fields(appliance, "anna", None, None, [])[1] is None
    appliance.review.skip("anna", view.page_id)
    report, _ = open_next(appliance.review, "anna")
    assert "report" in report.title and report.key_fields is None


def test_evidence_is_boxed_where_the_cropped_page_shows_it(appliance):
    """The fields' evidence boxes are on the page as rendered; the console shows the
    page as the engine read it, here cropped by 80 x 70 pixels: the box moves with it."""
    db = appliance.db
    doc = transitions.submit_document(db, Document(
        name="crop.png", sha256="c" * 64, kind="png", size_bytes=1, source="api",
        doc_type="receipt"), 1)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    cropped = {"preprocess": [{"step": "crop", "detail": {"transform": [1, 0, -80, 0, 1, -70]}}]}
    transitions.complete_page(db, claim, page_done("TOTAL 9.90", provenance=cropped),
                              ["missing_field: date"], review=True)
    total = field("total", "9.90", evidence=[{"page": 1, "box": [180, 170, 280, 210],
                                              "text": "TOTAL 9.90"}])
    transitions.record_fields(db, FieldSet(document_id=doc.id, doc_type="receipt",
                                           fields=[total], reasons=["missing_field: date"]))
    opened = appliance.review.next_page("anna")
    assert opened.to_image == (1, 0, -80, 0, 1, -70)
    with db.read() as session:
        row, stored = session.get(Page, opened.item.page_id), session.get(Document, doc.id)
        result = session.get(PageResult, row.result_id)
    path = page_image(appliance.spool, appliance.settings, stored, row, result)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (400, 300), "white").save(path)

    page = appliance.review.open_page(opened.item.page_id)
    view = page_view(page, fields=document_fields(appliance.review, page))
    assert view.key_fields["fields"] == [total]
    assert view.image.getpixel((150, 120)) != (255, 255, 255)  # on the cropped page
    assert view.image.getpixel((230, 190)) == (255, 255, 255)  # not where it was rendered
