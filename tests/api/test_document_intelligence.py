"""The Document Intelligence API through Microsoft's own SDK (azure-ai-documentintelligence
1.0.2), against a real daemon on loopback: the exact calls paperless-ngx makes, the
layout, receipt and invoice models, review, errors and many pollers at once."""

from __future__ import annotations

import http.server
import io
import json
import re
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import httpx
import numpy as np
import pytest
import segno
import zxingcpp
from PIL import Image, ImageDraw, ImageFont
from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import (
    AnalyzeDocumentRequest, AnalyzeOutputOption, AnalyzeResult, DocumentAnalysisFeature,
    DocumentContentFormat,
)
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

from appliance.config import Settings, load_settings
from appliance.intake.spool import Spool
from appliance.measure.synthetic_sets import BOLD, FONTS, make_sets
from appliance.review import ReviewService
from appliance.security import ApiKeys
from appliance.store import Database, queries
from appliance.users import Users
from tests.daemon import Daemon
from tests.fixtures.documents import (BILINGUAL, CONTRACT_HEADER, EXTENSION_B_LINES,
                                     REPORT_HEADER, write_bilingual_pdf, write_contract_pdf,
                                     write_extension_b_pdf, write_report_pdf)
from tests.fixtures.documents import (
    GROUPED, GROUPS, write_grouped_table_png, write_jpeg, write_multipage_tiff, write_pdf,
    write_png,
)

POLL_S = 0.05  # the SDK's polling interval here (paperless-ngx keeps its default, 1 s)
WAIT_S = 120  # no analysis here may take longer: a poller that hangs fails the test
MAX_PAGES = 3


def start(tmp: Path, review: dict | None = None, **sections) -> tuple[Daemon, str]:
    """A daemon with auth on (one API key, returned; a reviewer account) and the given
    config sections, started (``wait_ready`` before use)."""
    keys_file = tmp / "api-keys.toml"
    key = ApiKeys(keys_file).add("paperless")
    users_file = tmp / "users.toml"
    Users(users_file).add("anna", "reviewer", "a long enough password")
    daemon = Daemon(tmp, auth={"api_keys_file": str(keys_file), "rate_per_minute": 100_000},
                    review={"users_file": str(users_file), **(review or {})}, **sections)
    daemon.client.headers["X-API-Key"] = key
    daemon.start()
    return daemon, key


def sdk(daemon: Daemon, key: str, polling_s: float = POLL_S) -> DocumentIntelligenceClient:
    return DocumentIntelligenceClient(f"http://127.0.0.1:{daemon.port}", AzureKeyCredential(key),
                                      polling_interval=polling_s)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docintel")
    daemon, key = start(tmp, limits={"max_pages": MAX_PAGES}, di={"retry_after_s": 0},
                        webhooks={"allow_hosts": ["127.0.0.1"]})
    try:
        daemon.wait_ready()
        yield daemon, sdk(daemon, key)
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pages")
    make_sets(root, pages=1)
    return root


def paperless(client: DocumentIntelligenceClient, path: Path) -> tuple[str, AnalyzeResult, bytes]:
    """What paperless-ngx's remote parser does with a file (src/paperless_remote/parsers.py):
    the result id, the result, and the searchable PDF it archives."""
    with path.open("rb") as f:
        request = AnalyzeDocumentRequest(bytes_source=f.read())
    poller = client.begin_analyze_document(
        model_id="prebuilt-read", body=request,
        output_content_format=DocumentContentFormat.TEXT, output=[AnalyzeOutputOption.PDF],
        content_type="application/json")
    poller.wait(WAIT_S)  # paperless-ngx waits without a limit
    assert poller.done(), "the analysis did not finish"
    result_id = poller.details["operation_id"]
    result = poller.result()
    pdf = b"".join(client.get_analyze_result_pdf(model_id="prebuilt-read", result_id=result_id))
    return result_id, result, pdf


def pdf_text(pdf: bytes, tmp: Path) -> str:
    path = tmp / "archive.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def document_id(result_id: str) -> str:
    """The appliance's id of the document a result id (a GUID) names."""
    return uuid.UUID(result_id).hex


def appliance_text(daemon: Daemon, result_id: str) -> str:
    """The appliance's own text of the document (its pages apart by a form feed)."""
    response = daemon.client.get(f"/api/v1/documents/{document_id(result_id)}/result",
                                 params={"format": "txt"})
    assert response.status_code == 200, response.text
    return response.text.rstrip("\n").replace("\f", "\n")


@pytest.mark.parametrize("kind", ["pdf", "jpeg", "tiff", "multipage-pdf"])
def test_the_paperless_ngx_call_sequence(service, tmp_path, kind):
    daemon, client = service
    lines = [["Quarterly report of the archive", "Invoices filed 2024"],
             ["Second page holds minutes", "Board meeting March"],
             ["Third page lists members", "Treasurer signed here"]]
    path = {"pdf": lambda p: write_pdf(p, lines[:1]),
            "jpeg": lambda p: write_jpeg(p, lines[0]),
            "tiff": lambda p: write_multipage_tiff(p, lines[:2]),
            "multipage-pdf": lambda p: write_pdf(p, lines)}[kind](tmp_path / f"scan.{kind}")
    result_id, result, pdf = paperless(client, path)
    assert result.model_id == "prebuilt-read" and result.content_format == "text"
    assert result.content == appliance_text(daemon, result_id)
    pages = {"pdf": 1, "jpeg": 1, "tiff": 2, "multipage-pdf": 3}[kind]
    assert [p.page_number for p in result.pages] == list(range(1, pages + 1))
    for page, page_lines in zip(result.pages, lines):
        assert page.unit == ("inch" if kind.endswith("pdf") else "pixel")
        words = [w.content for w in page.words]
        assert words == " ".join(page_lines).split()
        for word in page.words:  # each word's span is where the content holds it
            assert result.content[word.span.offset:][:word.span.length] == word.content
            assert 0 < word.confidence <= 1 and len(word.polygon) == 8
            assert all(0 <= x <= page.width for x in word.polygon[::2])
        assert [line.content for line in page.lines] == page_lines
    archived = pdf_text(pdf, tmp_path)
    assert pdf.startswith(b"%PDF")
    for word in " ".join(" ".join(page) for page in lines[:pages]).split():
        assert word in archived
    # an ordinary document of the workspace, with every other result the appliance makes
    # the result id is a GUID, as the service's; its document's id (32 hex) polls too
    assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", result_id), result_id
    assert operation(daemon, "prebuilt-read", document_id(result_id)).json()["status"] == (
        "succeeded")
    document = daemon.document(document_id(result_id))
    assert document["status"] == "done" and document["source"] == "api"
    assert "docintel" in document["tags"]
    # each request in the access log, as the REST API's are: the analysis, its polls
    # and the PDF's download
    log = daemon.log_path.read_text(errors="replace")
    for request in ("POST /documentintelligence/documentModels/prebuilt-read:analyze",
                    f"GET /documentintelligence/documentModels/prebuilt-read/analyzeResults/"
                    f"{result_id}?", f"/analyzeResults/{result_id}/pdf?"):
        assert request in log, request


def analyze(client: DocumentIntelligenceClient, model_id: str, path: Path, **options):
    with path.open("rb") as f:
        poller = client.begin_analyze_document(model_id, AnalyzeDocumentRequest(
            bytes_source=f.read()), **options)
    return poller.details["operation_id"], poller.result(timeout=WAIT_S)


def native_result(daemon: Daemon, result_id: str) -> dict:
    response = daemon.client.get(f"/api/v1/documents/{document_id(result_id)}/result",
                                 params={"format": "json"})
    assert response.status_code == 200, response.text
    return response.json()


HEADING = "Stock on hand"
TABLE = [["Item", "Region", "Quantity"], ["Stapler", "North", "40"],
         ["Ring binder", "South", "125"], ["Desk lamp", "East", "7"], ["Toner", "West", "310"]]


def write_table_page(path: Path) -> Path:
    """A heading in print twice the body's over a table of five rows and three columns."""
    page = Image.new("L", (1240, 900), 255)
    draw = ImageDraw.Draw(page)
    draw.text((90, 80), HEADING, font=ImageFont.truetype(BOLD, 64), fill=0)
    font = ImageFont.truetype(FONTS[0], 30)
    for r, row in enumerate(TABLE):
        for x, cell in zip((90, 520, 860), row):
            draw.text((x, 260 + 70 * r), cell, font=font, fill=0)
    page.save(path)
    return path


def test_chinese_words_are_one_a_character_as_the_service_gives_them(service, tmp_path):
    """The service gives each character of Chinese or Japanese text a word of its own
    (a run of digits one): a client that highlights a word, or matches an invoice's
    fields by words, finds "发" and "票", not one word a line. Each word's span is where
    the content holds it; a line's content has no spaces the page has not."""
    _daemon, client = service
    lines = ["发票号码12345678", "开票日期2026年3月5日"]
    page = Image.new("L", (1240, 500), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 48,
                              index=2)
    for i, text in enumerate(lines):
        draw.text((100, 120 + 120 * i), text, font=font, fill=0)
    page.save(tmp_path / "fapiao.png")
    _result_id, result = analyze(client, "prebuilt-read", tmp_path / "fapiao.png")
    (page,) = result.pages
    words = [w.content for w in page.words]
    assert words[:5] == ["发", "票", "号", "码", "12345678"], words
    assert [line.content for line in page.lines] == lines
    for word in page.words:
        assert result.content[word.span.offset:][:word.span.length] == word.content
    lefts = [w.polygon[0] for w in page.words[:5]]
    assert lefts == sorted(lefts) and len(set(lefts)) == 5  # each on its own ink


def test_offsets_count_as_the_client_asks(service, tmp_path):
    """stringIndexType: text elements unless asked otherwise, as the service; UTF-16
    code units for the .NET, Java and JavaScript SDKs, whose strings index so. "𠮷"
    (past U+FFFF, in a born-digital invoice's name) is one text element and two UTF-16
    units: every word's span finds the word where the client's string holds it."""
    _daemon, client = service
    path = write_extension_b_pdf(tmp_path / "names.pdf")
    for asked, kind in ((None, "textElements"), ("utf16CodeUnit", "utf16CodeUnit"),
                        ("unicodeCodePoint", "unicodeCodePoint")):
        options = {"string_index_type": asked} if asked else {}
        _result_id, result = analyze(client, "prebuilt-read", path, **options)
        assert result.string_index_type == kind and not result.warnings
        assert result.content.splitlines() == EXTENSION_B_LINES
        units = result.content
        if kind == "utf16CodeUnit":  # what a UTF-16 string holds at each index
            units = [part for ch in units for part in ((ch, "") if ord(ch) > 0xFFFF else (ch,))]
        for word in result.pages[0].words:
            assert "".join(units[word.span.offset:][:word.span.length]) == word.content, kind
        assert "".join(units[:result.paragraphs[0].spans[0].length]).startswith("𠮷野家")


FAPIAO_QR = "01,32,,24442000000012345678,14464.00,20260305,,3F2A"
SHIPMENT = "ARCHIVE-2026-0042"


def write_barcode_page(path: Path) -> tuple[Path, tuple[int, int, int, int]]:
    """A page with a fapiao's QR code (made by segno) and a Code 128 code (made by
    zxing-cpp's writer); answers the page and the QR code's box."""
    page = Image.new("L", (1240, 900), 255)
    ImageDraw.Draw(page).text((100, 80), "Shipment and invoice codes", fill=0,
                              font=ImageFont.truetype(FONTS[0], 40))
    buffer = io.BytesIO()
    segno.make(FAPIAO_QR, error="m").save(buffer, kind="png", scale=6, border=4)
    qr = Image.open(buffer).convert("L")
    page.paste(qr, (100, 200))
    code128 = zxingcpp.create_barcode(SHIPMENT, zxingcpp.BarcodeFormat.Code128)
    page.paste(Image.fromarray(np.asarray(code128.to_image(scale=3))), (500, 300))
    page.save(path)
    return path, (100, 200, 100 + qr.width, 200 + qr.height)


def test_barcodes_are_given_when_asked_for_as_the_service_gives_them(service, tmp_path):
    """features=barcodes: each code's kind and value, exactly, its corners on its ink;
    without the feature a page has no barcodes, as the service's."""
    _daemon, client = service
    path, (x0, y0, x1, y1) = write_barcode_page(tmp_path / "codes.png")
    _result_id, result = analyze(client, "prebuilt-read", path,
                                 features=[DocumentAnalysisFeature.BARCODES])
    (page,) = result.pages
    assert sorted((code.kind, code.value) for code in page.barcodes) == [
        ("Code128", SHIPMENT), ("QRCode", FAPIAO_QR)]
    qr = next(code for code in page.barcodes if code.kind == "QRCode")
    assert all(x0 <= x <= x1 for x in qr.polygon[::2]) and all(
        y0 <= y <= y1 for y in qr.polygon[1::2])
    assert qr.confidence == 1.0 and qr.span.offset == len(result.content)
    assert not result.warnings  # the feature is offered, not ignored
    _result_id, plain = analyze(client, "prebuilt-read", path)
    assert plain.pages[0].barcodes is None


@pytest.mark.parametrize("model_id, content_format", [("prebuilt-read", "text"),
                                                     ("prebuilt-layout", "markdown")])
def test_languages_are_given_when_asked_for_as_the_service_gives_them(service, tmp_path,
                                                                      model_id, content_format):
    """features=languages on a born-digital page of three paragraphs, in Simplified
    Chinese, English and Traditional Chinese: a language for each line, the lines of one
    language together one span, each span finding its paragraph in the content; without
    the feature the result has no languages, as the service's."""
    _daemon, client = service
    path = write_bilingual_pdf(tmp_path / "report.pdf")
    _result_id, result = analyze(client, model_id, path, output_content_format=content_format,
                                 features=[DocumentAnalysisFeature.LANGUAGES])
    found = {language.locale: [result.content[span.offset:span.offset + span.length]
                               for span in language.spans] for language in result.languages}
    assert found == {locale: ["\n".join(lines)] for locale, lines in BILINGUAL.items()}
    assert all(0.5 <= language.confidence <= 1.0 for language in result.languages)
    assert not result.warnings  # the feature is offered, not ignored
    _result_id, plain = analyze(client, model_id, path)
    assert plain.languages is None


BOXES = [("Delivery", True), ("Assembly", False), ("Removal of old furniture", True),
         ("Insurance", False)]


def write_form_page(path: Path) -> list[tuple[int, int, int, int]]:
    """A question over four labelled check boxes (``BOXES``), the ticked ones ticked;
    the boxes' bounds."""
    page = Image.new("L", (1240, 700), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(FONTS[0], 30)
    draw.text((100, 60), "Which services do you need?", font=font, fill=0)
    boxes = []
    for i, (label, ticked) in enumerate(BOXES):
        x, y = 100, 150 + 90 * i
        draw.rectangle([x, y, x + 28, y + 28], outline=0, width=3)
        if ticked:
            draw.line([x + 6, y + 15, x + 12, y + 22, x + 23, y + 6], fill=0, width=4)
        draw.text((x + 50, y - 2), label, font=font, fill=0)
        boxes.append((x, y, x + 28, y + 28))
    page.save(path)
    return boxes


def test_selection_marks_are_given_on_their_boxes_and_in_the_content(service, tmp_path):
    """Each check box of a form, ticked or empty, is a selection mark on its box, and
    its token stands in the content before its label, where its span points."""
    _daemon, client = service
    boxes = write_form_page(tmp_path / "form.png")
    _result_id, result = analyze(client, "prebuilt-layout", tmp_path / "form.png")
    marks = result.pages[0].selection_marks
    assert [mark.state for mark in marks] == [
        "selected" if ticked else "unselected" for _label, ticked in BOXES]
    for mark, (x0, y0, x1, y1), (label, _ticked) in zip(marks, boxes, BOXES):
        xs, ys = mark.polygon[::2], mark.polygon[1::2]  # on the box, give or take its stroke
        assert all(abs(x - x0) <= 4 or abs(x - x1) <= 4 for x in xs), (mark.polygon, x0, x1)
        assert all(abs(y - y0) <= 4 or abs(y - y1) <= 4 for y in ys), (mark.polygon, y0, y1)
        assert 0.5 <= mark.confidence <= 1.0
        token = result.content[mark.span.offset:mark.span.offset + mark.span.length]
        assert token == f":{mark.state.value}:"
        assert result.content[mark.span.offset + mark.span.length:].startswith(f" {label}")
    # the tokens were found, not read: they are no words
    assert not any(word.content.endswith("selected:") for word in result.pages[0].words)


def test_chinese_text_and_a_grid_give_no_selection_marks(service, tmp_path):
    """Characters drawn as squares (口, 日, 田, 回, 国) are read as text, and the cells of a
    ruled grid as large as the print are a table's: neither is a check box."""
    _daemon, client = service
    page = Image.new("L", (1240, 900), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 40,
                              index=2)
    lines = ["人口普查日期：四月十日", "回国人员田中先生", "品名：口罩 数量：四百"]
    for i, text in enumerate(lines):
        draw.text((100, 80 + 90 * i), text, font=font, fill=0)
    for r in range(5):  # a grid of 44 px cells, a digit in some
        for c in range(8):
            x, y = 100 + 44 * c, 420 + 44 * r
            draw.rectangle([x, y, x + 44, y + 44], outline=0, width=2)
            if (r + c) % 3 == 0:
                draw.text((x + 12, y + 2), str(c), font=font, fill=0)
    page.save(tmp_path / "no-marks.png")
    _result_id, result = analyze(client, "prebuilt-layout", tmp_path / "no-marks.png")
    assert "人口" in result.content
    assert result.pages[0].selection_marks == []


def test_a_pages_range_past_the_document_costs_nothing(service, tmp_path):
    """pages=2-99999999999 on a three-page PDF: pages 2 and 3, answered as any other
    (the range once became a set of 99999999998 numbers at every poll)."""
    _daemon, client = service
    lines = [["Page one of three"], ["Page two of three"], ["Page three of three"]]
    _result_id, result = analyze(client, "prebuilt-read", write_pdf(tmp_path / "three.pdf", lines),
                                 pages="2-99999999999")
    assert [page.page_number for page in result.pages] == [2, 3]


def test_layout_with_markdown_finds_the_heading_and_the_table(service, tmp_path):
    daemon, client = service
    page = write_table_page(tmp_path / "stock.png")
    result_id, result = analyze(client, "prebuilt-layout", page,
                                output_content_format=DocumentContentFormat.MARKDOWN)
    assert result.content_format == "markdown"
    assert result.content == native_result(daemon, result_id)["pages"][0]["markdown"]
    assert result.content.startswith(f"# {HEADING}\n\n| Item | Region | Quantity |")
    assert [(p.role, p.content) for p in result.paragraphs if p.role] == [("title", HEADING)]
    header, *body = TABLE
    (table,) = result.tables
    assert (table.row_count, table.column_count) == (len(body) + 1, len(header))
    grid = [[None] * table.column_count for _ in range(table.row_count)]
    for cell in table.cells:
        grid[cell.row_index][cell.column_index] = cell.content
        assert (cell.kind == "columnHeader") == (cell.row_index == 0)
        region = cell.bounding_regions[0]  # each cell stands on its words
        assert region.page_number == 1 and len(region.polygon) == 8
        assert result.content[cell.spans[0].offset:][:cell.spans[0].length].startswith(
            cell.content.split()[0])
    assert grid == [header, *body]
    assert result.sections and "/tables/0" in result.sections[0].elements + \
        [e for s in result.sections for e in s.elements]


def test_layout_paragraph_roles_are_the_page_furniture_the_reading_found(service, tmp_path):
    """The running header and the page numbers of a two-page report are the paragraphs'
    pageHeader and pageNumber: the same lines the Markdown sets apart and the JSON
    marks, found by one rule (``reading.furniture``); the body has no role."""
    daemon, client = service
    result_id, result = analyze(client, "prebuilt-layout", write_report_pdf(tmp_path / "r.pdf"))
    roles = [(p.role, p.content, p.bounding_regions[0].page_number) for p in result.paragraphs
             if p.role]
    assert roles == [("pageHeader", REPORT_HEADER, 1), ("pageNumber", "1", 1),
                     ("pageHeader", REPORT_HEADER, 2), ("pageNumber", "2", 2)], roles
    native = native_result(daemon, result_id)
    marked = [(line["role"], line["text"]) for page in native["pages"] for line in page["lines"]
              if line["role"] in ("header", "page_number")]
    assert marked == [("header", REPORT_HEADER), ("page_number", "1"),
                      ("header", REPORT_HEADER), ("page_number", "2")]


def test_layout_page_headers_include_those_the_document_s_pages_show_together(service, tmp_path):
    """A contract's header in its body's print, unnumbered, is each page's pageHeader:
    its repetition over the pages shows it (``pipeline.document``), as in the export."""
    _daemon, client = service
    _result_id, result = analyze(client, "prebuilt-layout",
                                 write_contract_pdf(tmp_path / "contract.pdf", pages=3))
    headers = [(p.content, p.bounding_regions[0].page_number) for p in result.paragraphs
               if p.role == "pageHeader"]
    assert headers == [(CONTRACT_HEADER, number) for number in (1, 2, 3)], headers


def test_layout_gives_the_cells_that_span_columns_their_span(service, tmp_path):
    daemon, client = service
    result_id, result = analyze(client, "prebuilt-layout",
                                write_grouped_table_png(tmp_path / "grouped.png"))
    assert native_result(daemon, result_id)["pages"][0]["markdown"].startswith("<table>")
    (table,) = result.tables
    assert (table.row_count, table.column_count) == (len(GROUPED) + 1, len(GROUPED[0]))
    assert {(cell.row_index, cell.column_index, cell.column_span): cell.content
            for cell in table.cells if cell.column_span} == {
        (0, 1, 2): GROUPS[0], (0, 3, 2): GROUPS[1]}
    grid = [[None] * table.column_count for _ in range(table.row_count)]
    for cell in table.cells:
        grid[cell.row_index][cell.column_index] = cell.content
    assert grid[1:] == GROUPED


def test_receipt_and_invoice_fields_typed_as_the_sdk_parses_them(service, pages):
    daemon, client = service
    receipt_id, receipt = analyze(client, "prebuilt-receipt",
                                  pages / "receipts-fields" / "receipts-fields-000.png")
    truth = json.loads((pages / "receipts-fields" / "receipts-fields-000.fields.json").read_text())
    (document,) = receipt.documents
    assert document.doc_type == "receipt"
    own = {f["name"]: f for f in native_result(daemon, receipt_id)["document"]["fields"]}
    fields = document.fields
    assert fields["MerchantName"].type == "string"
    assert fields["MerchantName"].value_string == truth["company"] == own["company"]["value"]
    assert fields["TransactionDate"].value_date == date.fromisoformat(own["date"]["value"])
    assert fields["Total"].value_currency.amount == float(own["total"]["value"])
    # the currency the receipt names, where it names one, as the native result gives it
    assert fields["Total"].value_currency.currency_code == own["total"]["currency"]
    for name, source in (("TransactionDate", "date"), ("Total", "total")):
        assert fields[name].content == own[source]["raw"] == truth[source]  # as printed
        assert fields[name]["applianceValidation"]["valid"] == own[source]["valid"]
        assert fields[name].bounding_regions[0].page_number == 1

    invoice_id, invoice = analyze(client, "prebuilt-invoice",
                                  pages / "invoices-fields" / "invoices-fields-000.png")
    truth = json.loads((pages / "invoices-fields" / "invoices-fields-000.fields.json").read_text())
    own = {f["name"]: f for f in native_result(daemon, invoice_id)["document"]["fields"]}
    fields = invoice.documents[0].fields
    for name, source in (("InvoiceId", "number"), ("VendorName", "seller"),
                         ("VendorTaxId", "seller_vat_id")):
        assert fields[name].value_string == own[source]["value"] == truth[source]
    for name, source in (("InvoiceDate", "issue_date"), ("DueDate", "due_date")):
        assert fields[name].value_date == date.fromisoformat(own[source]["value"])
        assert fields[name].content == truth[source]
    for name, source in (("SubTotal", "net"), ("TotalTax", "tax"), ("InvoiceTotal", "gross")):
        value = fields[name].value_currency
        assert (value.amount, value.currency_code) == (float(own[source]["value"]),
                                                       truth["currency"])
        assert fields[name].content == truth[source]
    assert fields["InvoiceTotal"]["applianceValidation"] == {"valid": True, "failed": []}
    sure = fields["InvoiceTotal"].confidence

    # a gross that no longer adds up fails its check: less sure, and the reason given
    response = daemon.client.put(f"/api/v1/documents/{document_id(invoice_id)}/fields",
                                 json={"fields": {"gross": "9,999.00"}})
    assert response.status_code == 200, response.text
    fields = operation_result(daemon, "prebuilt-invoice", invoice_id).documents[0].fields
    assert fields["InvoiceTotal"].value_currency.amount == 9999.0
    checked = fields["InvoiceTotal"]["applianceValidation"]
    assert checked["valid"] is False and any("gross" in reason for reason in checked["failed"])
    assert fields["InvoiceTotal"].confidence <= 0.3 < sure


def operation(daemon: Daemon, model_id: str, result_id: str) -> httpx.Response:
    return daemon.client.get(f"/documentintelligence/documentModels/{model_id}/analyzeResults/"
                             f"{result_id}", params={"api-version": "2024-11-30"})


def operation_result(daemon: Daemon, model_id: str, result_id: str) -> AnalyzeResult:
    body = operation(daemon, model_id, result_id).json()
    assert body["status"] == "succeeded", body
    return AnalyzeResult(body["analyzeResult"])


def raises(call) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as caught:
        call()
    return caught.value


def test_refusals_raise_the_sdk_s_error_with_the_service_s_code(service, tmp_path):
    daemon, client = service
    png = write_png(tmp_path / "page.png", ["Refusals are answered"])

    wrong = DocumentIntelligenceClient(f"http://127.0.0.1:{daemon.port}",
                                       AzureKeyCredential("ocr_not-a-key"))
    error = raises(lambda: analyze(wrong, "prebuilt-read", png))
    assert isinstance(error, ClientAuthenticationError) and error.status_code == 401
    assert error.error.code == "Unauthorized"

    # a file the appliance cannot read is answered at the door, as the service answers
    # it: 400 InvalidContent at begin_analyze_document (JSON and raw bytes alike); the
    # failed document is in the workspace with its reason
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40 + b"\n%%EOF\n")
    text = tmp_path / "notes.txt"
    text.write_text("plain text is no scan\n" * 20)
    over = write_pdf(tmp_path / "long.pdf", [[f"Page {n}"] for n in range(MAX_PAGES + 1)])
    for path, reason, raw in ((corrupt, "corrupt_file", False), (text, "unsupported_type", True),
                              (over, "too_many_pages", False)):
        with path.open("rb") as f:
            body = f.read()
        error = raises(lambda: client.begin_analyze_document(
            "prebuilt-read", body if raw else AnalyzeDocumentRequest(bytes_source=body),
            content_type="application/octet-stream" if raw else "application/json"))
        assert isinstance(error, HttpResponseError) and error.status_code == 400, path
        assert (error.error.code, error.error.innererror["code"]) == (
            "InvalidRequest", "InvalidContent"), path
        assert f"[{reason}]" in error.error.innererror["message"]
        failed = daemon.client.get("/api/v1/documents", params={
            "tag": "docintel", "status": "failed"}).json()["documents"]
        assert reason in [document["error"]["code"] for document in failed]

    error = raises(lambda: analyze(client, "prebuilt-idDocument", png))
    assert (error.status_code, error.error.code) == (404, "NotFound")
    assert error.error.innererror["code"] == "ModelNotFound"

    # a body that is no document: the service's 415
    response = daemon.client.post(
        "/documentintelligence/documentModels/prebuilt-read:analyze",
        params={"api-version": "2024-11-30"}, content=b"hello",
        headers={"Content-Type": "text/plain"})
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "UnsupportedMediaType"
    error = raises(lambda: client.get_analyze_result_pdf("prebuilt-read", "0" * 32))
    assert (error.status_code, error.error.code) == (404, "NotFound")


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args):
        pass


def test_url_source_is_fetched_only_from_a_host_webhooks_may_go_to(service, tmp_path):
    daemon, client = service
    write_png(tmp_path / "hosted.png", ["Fetched from the intranet"])
    handler = lambda *a: _Files(*a, directory=str(tmp_path))  # noqa: E731
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/hosted.png"
            poller = client.begin_analyze_document(
                "prebuilt-read", AnalyzeDocumentRequest(url_source=url))
            assert poller.result(timeout=WAIT_S).content == "Fetched from the intranet"
            # a host outside webhooks.allow_hosts: refused before anything is fetched
            for refused in ("http://169.254.169.254/latest/meta-data/",
                            f"http://localhost:{server.server_address[1]}/hosted.png",
                            "file:///etc/passwd"):
                error = raises(lambda: client.begin_analyze_document(
                    "prebuilt-read", AnalyzeDocumentRequest(url_source=refused)))
                assert (error.status_code, error.error.code) == (403, "Forbidden"), refused
        finally:
            server.shutdown()


def test_twenty_concurrent_analyses_are_each_answered_once(service, tmp_path):
    daemon, _client = service
    # twenty pollers at paperless-ngx's own 1 s would idle; at 0.05 s they would take
    # the CPU from the engine
    client = sdk(daemon, daemon.client.headers["X-API-Key"], polling_s=0.5)
    words = [f"Parcel {n:02d} {name}" for n, name in enumerate(
        "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
        "november oscar papa quebec romeo sierra tango".split())]
    paths = [write_png(tmp_path / f"parcel-{n}.png", [text]) for n, text in enumerate(words)]
    before = daemon.client.get("/api/v1/documents", params={"tag": "docintel"}).json()["total"]
    with ThreadPoolExecutor(len(paths)) as pool:
        answers = list(pool.map(lambda path: analyze(client, "prebuilt-read", path), paths))
    assert [result.content for _id, result in answers] == words
    assert len({result_id for result_id, _result in answers}) == len(paths)
    after = daemon.client.get("/api/v1/documents", params={"tag": "docintel"}).json()["total"]
    assert after - before == len(paths)  # no analysis was submitted twice


@pytest.fixture(scope="module")
def reviewing(tmp_path_factory):
    """Two daemons that send every page to review, one for each [di] review setting."""
    # every classic page scores under 0.99: each goes to review, and its words, read at
    # 0.99 and over, must come out lowered when they are answered before a reviewer
    review = {"enabled": True, "review_below": 0.99, "accept_from": 0.99}
    daemons = {mode: start(tmp_path_factory.mktemp(f"review-{mode}"), review=review,
                           di={"review": mode, "retry_after_s": 1})
               for mode in ("wait", "skip")}
    try:
        for daemon, _key in daemons.values():  # started side by side, then waited for
            daemon.wait_ready()
        yield daemons
    finally:
        for daemon, _key in daemons.values():
            daemon.stop()


def approve_all(daemon: Daemon) -> int:
    """A reviewer approves every waiting page, in the review console's service on the
    daemon's own store."""
    settings: Settings = load_settings(daemon.config_path)
    db = Database(settings.paths.database)
    service = ReviewService(settings, db, Spool(settings.paths.spool), on_settled=lambda _d: None,
                            wake=lambda: None)
    approved = 0
    try:
        while (page := service.next_page("anna")) is not None:
            service.approve("anna", page.item.page_id)
            approved += 1
    finally:
        db.close()
    return approved


def test_review_wait_keeps_the_analysis_running_until_a_reviewer_decides(reviewing, tmp_path):
    daemon, key = reviewing["wait"]
    client = sdk(daemon, key)
    png = write_png(tmp_path / "doubtful.png", ["Doubtful page waits for a person"])
    with png.open("rb") as f:
        poller = client.begin_analyze_document("prebuilt-read", AnalyzeDocumentRequest(
            bytes_source=f.read()))
    result_id = poller.details["operation_id"]
    deadline = time.monotonic() + WAIT_S
    while (daemon.document(document_id(result_id))["status"] != "review"
           and time.monotonic() < deadline):
        time.sleep(0.1)
    poller.wait(3)  # a real timeout: the poller is still waiting on a person
    assert not poller.done()
    running = operation(daemon, "prebuilt-read", result_id)
    assert running.json()["status"] == "running" and running.headers["Retry-After"] == "1"
    assert approve_all(daemon) == 1
    result = poller.result(timeout=WAIT_S)
    assert result.content == "Doubtful page waits for a person"
    assert not result.warnings


def test_review_skip_answers_at_once_with_lowered_confidences(reviewing, tmp_path):
    daemon, key = reviewing["skip"]
    client = sdk(daemon, key)
    png = write_png(tmp_path / "doubtful.png", ["Doubtful page answered at once"])
    result_id, result = analyze(client, "prebuilt-read", png)
    assert result.content == "Doubtful page answered at once"
    # still before a reviewer
    assert daemon.document(document_id(result_id))["status"] == "review"
    machine = [w["score"] for line in native_page_lines(daemon, result_id) for w in line["words"]]
    assert max(machine) > 0.99  # so the cap below is a real lowering
    assert all(word.confidence <= 0.99 for word in result.pages[0].words)
    assert [(w.code, w.target) for w in result.warnings] == [("PageAwaitingReview", "1")]


def native_page_lines(daemon: Daemon, result_id: str) -> list[dict]:
    """The machine's lines of a page still in review (its JSON result is not final yet)."""
    db = Database(load_settings(daemon.config_path).paths.database)
    try:
        ((_page, result),) = queries.accepted_results(db, document_id(result_id))
        return result.lines
    finally:
        db.close()


def test_a_base64_body_is_decoded_as_it_lies_not_held_whole():
    """A 20 MB document as base64Source (27 MB of JSON): decoded from the body's file a
    chunk at a time, so the route holds a few MiB, not the body three times over (a
    53 MB body once added about 157 MB to the daemon's peak). A body the quick look
    cannot take apart (an escaped slash, a member of the same name inside another) is
    parsed whole, and reads the same."""
    import base64
    import tempfile
    import tracemalloc

    from appliance.docintel.routes import analyze_request

    document = bytes(range(256)) * 80_000
    source = base64.b64encode(document).decode()

    def read(body: bytes) -> tuple[bytes, float]:
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as into:
            given.write(body)
            given.seek(0)
            tracemalloc.start()
            try:
                assert analyze_request(given, into) is None
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            into.seek(0)
            return into.read(), peak / 2**20

    decoded, peak_mib = read(json.dumps({"base64Source": source}).encode())
    assert decoded == document and peak_mib < 8, peak_mib
    for body in (json.dumps({"base64Source": source}).replace("/", "\\/"),
                 json.dumps({"x": {"base64Source": "QUJD"}, "base64Source": source})):
        assert read(body.encode())[0] == document
