from __future__ import annotations

import io

import pytest
from PIL import Image

from appliance.errors import EmptyFile, UnsupportedType
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


def test_pdf_marker_beyond_search_window_is_unsupported():
    with pytest.raises(UnsupportedType):
        sniff_kind(b"x" * HEAD_BYTES + b"%PDF-1.7")


def test_empty():
    with pytest.raises(EmptyFile):
        sniff_kind(b"")


@pytest.mark.parametrize("head", [b"PK\x03\x04word.docx", b"hello, plain text", b"\x00\x00\x00\x0cjP  "])
def test_unsupported_message_is_actionable(head):
    with pytest.raises(UnsupportedType) as caught:
        sniff_kind(head)
    message = caught.value.message
    assert "PDF" in message and "TIFF" in message and "Convert" in message
    assert caught.value.code == "unsupported_type"


def test_kind_constants():
    assert set(IMAGE_KINDS) <= set(ALL_KINDS)
    assert set(ALL_KINDS) == set(IMAGE_KINDS) | {"pdf"}
