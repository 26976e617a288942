from __future__ import annotations

import io
import random
import zipfile

import pytest
from PIL import Image

from appliance.errors import BadInput, EmptyFile, TruncatedFile, UnrecognizedFile, UnsupportedType
from appliance.intake.sniff import ALL_KINDS, HEAD_BYTES, IMAGE_KINDS, sniff_kind
from tests.fixtures.documents import write_pdf


def _encoded(fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(buffer, format=fmt, **options)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("fmt", "kind"),
    [("PNG", "png"), ("JPEG", "jpeg"), ("TIFF", "tiff"), ("BMP", "bmp"), ("WEBP", "webp"), ("GIF", "gif")],
)
def test_images_real_encoders(fmt, kind):
    assert sniff_kind(_encoded(fmt)[:HEAD_BYTES]) == kind


def test_big_endian_tiff():
    assert sniff_kind(b"MM\x00*\x00\x00\x00\x08") == "tiff"


def test_pdf(tmp_path):
    path = write_pdf(tmp_path / "scan.pdf", [["hello"]])
    assert sniff_kind(path.read_bytes()[:HEAD_BYTES]) == "pdf"


def test_pdf_after_leading_junk():
    assert sniff_kind(b"\xef\xbb\xbfgarbage from a mail gateway\r\n%PDF-1.7\n") == "pdf"


def test_pdf_marker_beyond_search_window_is_unrecognized():
    with pytest.raises(UnrecognizedFile):
        sniff_kind(b"\x01\xfe\x02" * HEAD_BYTES + b"%PDF-1.7")


def test_empty():
    with pytest.raises(EmptyFile):
        sniff_kind(b"")


def _zip(*members: tuple[str, bytes], stored_first: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for number, (name, data) in enumerate(members):
            compress = zipfile.ZIP_STORED if stored_first and number == 0 else zipfile.ZIP_DEFLATED
            archive.writestr(name, data, compress_type=compress)
    return buffer.getvalue()


_CONTENT_TYPES = b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/"/>' * 20


@pytest.mark.parametrize(
    ("head", "named"),
    [
        (b"hello, plain text", "plain text"),
        ("Rechnung Nr. 4711\nGrüße aus Köln\n".encode("utf-8"), "plain text"),
        ("Rechnung Nr. 4711\nGrüße aus Köln\n".encode("latin-1"), "plain text"),
        ("a \u201cquoted\u201d word\r\n".encode("cp1252"), "plain text"),
        ("\ufeffutf-16 text with a BOM".encode("utf-16-le"), "plain text"),
        (b"\xef\xbb\xbfName;Amount\r\nChairs;118.50\r\n", "plain text"),
        (b"BMW service invoice, plain text", "plain text"),  # "BM" alone is not a bitmap
        ("é".encode("utf-8") * 600, "plain text"),  # a character cut at the end of the head
        (b"<!DOCTYPE html>\n<html><body>Invoice</body></html>", "HTML"),
        (b"  <html lang='en'><head>", "HTML"),
        (b'<?xml version="1.0" encoding="UTF-8"?>\n<invoice number="4711"/>', "XML"),
        (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg">', "SVG"),
        (b"{\\rtf1\\ansi\\deff0 {\\fonttbl}", "RTF"),
        (_zip(("[Content_Types].xml", _CONTENT_TYPES), ("word/document.xml", b"<w:document/>")),
         "Word"),
        # the second entry's name beyond the head: still named as an Office file
        (_zip(("[Content_Types].xml", random.Random(3).randbytes(2 * HEAD_BYTES)),
              ("xl/workbook.xml", b"<workbook/>")), "Microsoft Office"),
        (_zip(("word/document.xml", b"<w:document/>")), "Word"),
        (_zip(("xl/workbook.xml", b"<workbook/>")), "Excel"),
        (_zip(("ppt/presentation.xml", b"<presentation/>")), "PowerPoint"),
        (_zip(("mimetype", b"application/vnd.oasis.opendocument.text"), ("content.xml", b"<x/>"),
              stored_first=True), "OpenDocument"),
        (_zip(("scans/page-1.png", b"\x89PNG...")), "ZIP archive"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, "legacy Microsoft Office"),
        (b"%!PS-Adobe-3.0\n", "PostScript"),
        (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "JPEG 2000"),
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00", "HEIC"),
    ],
)
def test_known_non_scan_formats_are_named(head, named):
    with pytest.raises(UnsupportedType) as caught:
        sniff_kind(head[:HEAD_BYTES])
    message = caught.value.message
    assert caught.value.code == "unsupported_type"
    assert named in message
    assert "PDF" in message and "TIFF" in message and "Convert" in message and "scan" in message


@pytest.mark.parametrize(
    "head",
    [random.Random(7).randbytes(HEAD_BYTES),
     bytes(range(256)) * 4,
     b"\x00\x01\x02\x03 no signature",
     b"\xde\xad\xbe\xef" * 8],
)
def test_unknown_binary_is_unrecognized(head):
    with pytest.raises(UnrecognizedFile) as caught:
        sniff_kind(head)
    message = caught.value.message
    assert caught.value.code == "unrecognized_file"
    assert "PDF" in message and "PNG" in message and "TIFF" in message and "damaged" in message


@pytest.mark.parametrize("head", [b"\x89PNG\r\n", b"\xff\xd8", b"%PDF", b"GIF8"])
def test_file_cut_inside_its_signature_is_truncated(head):
    with pytest.raises(TruncatedFile) as caught:
        sniff_kind(head)
    assert caught.value.code == "truncated_file"


def test_new_codes_are_bad_input():
    assert issubclass(UnrecognizedFile, BadInput) and issubclass(TruncatedFile, BadInput)
    assert not UnrecognizedFile.retryable and not TruncatedFile.retryable
    assert {UnsupportedType.code, UnrecognizedFile.code, TruncatedFile.code} == \
        {"unsupported_type", "unrecognized_file", "truncated_file"}


def test_kind_constants():
    assert set(IMAGE_KINDS) <= set(ALL_KINDS)
    assert set(ALL_KINDS) == set(IMAGE_KINDS) | {"pdf"}


def test_bytes_named_as_a_type_we_read_are_said_not_to_be_one():
    with pytest.raises(UnrecognizedFile) as caught:
        sniff_kind(b"\x00" + bytes(range(1, 200)) * 4, "scan.PDF")
    assert "named as a PDF but is not one" in caught.value.message
    with pytest.raises(UnrecognizedFile) as caught:
        sniff_kind(b"\x00" + bytes(range(1, 200)) * 4, "notes")
    assert "named as" not in caught.value.message
