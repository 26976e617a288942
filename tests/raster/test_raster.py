from __future__ import annotations

import time

import pytest
from PIL import Image, ImageStat

from appliance.errors import CorruptFile, EncryptedPdf, TooManyPixels
from appliance.raster import (PageRendering, check_image_data, count_pages, decrypted_pdf,
                              render_page, save_page_image)
from tests.fixtures.documents import (
    render_text_page,
    write_encrypted_pdf,
    write_jpeg,
    write_multipage_tiff,
    write_pdf,
    write_png,
    write_png_header_only,
)

MAX_PIXELS = 50_000_000
A4_150DPI = (1240, 1754)


def _has_ink(image: Image.Image, box: tuple[int, int, int, int]) -> bool:
    return ImageStat.Stat(image.crop(box).convert("L")).extrema[0][0] < 128


def test_page_counts(tmp_path):
    pdf = write_pdf(tmp_path / "three.pdf", [["one"], ["two"], ["three"]])
    png = write_png(tmp_path / "one.png", ["one"])
    tiff = write_multipage_tiff(tmp_path / "three.tif", [["one"], ["two"], ["three"]])
    assert count_pages(pdf, "pdf", MAX_PIXELS) == 3
    assert count_pages(png, "png", MAX_PIXELS) == 1
    assert count_pages(tiff, "tiff", MAX_PIXELS) == 3


def test_multiframe_tiff_renders_the_requested_frame(tmp_path):
    tiff = write_multipage_tiff(tmp_path / "two.tif", [["first page"], []])
    first = render_page(tiff, "tiff", 0, dpi=150, max_pixels=MAX_PIXELS)
    second = render_page(tiff, "tiff", 1, dpi=150, max_pixels=MAX_PIXELS)
    assert first.mode == second.mode == "RGB"
    assert _has_ink(first, (0, 0, *A4_150DPI))
    assert not _has_ink(second, (0, 0, *A4_150DPI))
    with pytest.raises(IndexError):
        render_page(tiff, "tiff", 2, dpi=150, max_pixels=MAX_PIXELS)


def test_exif_orientation_is_applied(tmp_path):
    jpeg = write_jpeg(tmp_path / "phone.jpg", ["Upright text line"], exif_orientation=6)
    with Image.open(jpeg) as stored:
        assert stored.size == (A4_150DPI[1], A4_150DPI[0])
    page = render_page(jpeg, "jpeg", 0, dpi=150, max_pixels=MAX_PIXELS)
    assert page.size == A4_150DPI
    # The text sits at the top left of the upright page, and nowhere else.
    assert _has_ink(page, (90, 90, 500, 160))
    assert not _has_ink(page, (0, 900, *A4_150DPI))


def test_pdf_dpi_scaling(tmp_path):
    pdf = write_pdf(tmp_path / "a4.pdf", [["scaled"]], dpi=150)
    at_72 = render_page(pdf, "pdf", 0, dpi=72, max_pixels=MAX_PIXELS)
    at_150 = render_page(pdf, "pdf", 0, dpi=150, max_pixels=MAX_PIXELS)
    assert at_72.mode == at_150.mode == "RGB"
    assert at_72.size == (596, 842)  # A4 in points, rounded up
    assert abs(at_150.size[0] - A4_150DPI[0]) <= 1 and abs(at_150.size[1] - A4_150DPI[1]) <= 1


def test_pdf_render_is_capped_at_max_pixels(tmp_path):
    pdf = write_pdf(tmp_path / "a4.pdf", [["capped"]], dpi=150)
    page = render_page(pdf, "pdf", 0, dpi=600, max_pixels=1_000_000)
    width, height = page.size
    assert 990_000 < width * height <= 1_000_000
    assert abs(width / height - A4_150DPI[0] / A4_150DPI[1]) < 0.01


def test_corrupt_pdf(tmp_path):
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.7\n this is not a PDF body at all \x00\xff" * 20)
    with pytest.raises(CorruptFile) as caught:
        count_pages(path, "pdf", MAX_PIXELS)
    assert "rescan" in caught.value.message


def test_encrypted_pdf(tmp_path):
    path = write_encrypted_pdf(tmp_path / "locked.pdf", user_password="secret")
    with pytest.raises(EncryptedPdf) as caught:
        count_pages(path, "pdf", MAX_PIXELS)
    assert "qpdf --decrypt" in caught.value.message


def test_an_encrypted_pdf_decrypted_twice_is_the_same_content(tmp_path):
    # qpdf stamps a saved file's /ID from the clock unless asked otherwise: a retried
    # upload a second later was stored as other content, not recognised as the same
    path = write_encrypted_pdf(tmp_path / "locked.pdf", user_password="secret")
    first = decrypted_pdf(path, "secret")
    time.sleep(1.1)
    assert decrypted_pdf(path, "secret") == first
    with pytest.raises(EncryptedPdf):
        decrypted_pdf(path, "guess")


def test_truncated_png_fails_at_render(tmp_path):
    full = write_png(tmp_path / "full.png", ["a line that will be cut off"]).read_bytes()
    path = tmp_path / "cut.png"
    path.write_bytes(full[: len(full) // 2])
    assert count_pages(path, "png", MAX_PIXELS) == 1  # the header alone is intact
    with pytest.raises(CorruptFile) as caught:
        render_page(path, "png", 0, dpi=150, max_pixels=MAX_PIXELS)
    assert "rescan or re-export" in caught.value.message


def test_garbage_named_png_is_corrupt(tmp_path):
    path = tmp_path / "fake.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    with pytest.raises(CorruptFile):
        count_pages(path, "png", MAX_PIXELS)


def test_huge_declared_size_is_refused_before_decoding(tmp_path):
    # 30000 x 30000 RGB would need 2.7 GB; the file is under 100 bytes.
    path = write_png_header_only(tmp_path / "bomb.png", 30_000, 30_000)
    with pytest.raises(TooManyPixels):
        count_pages(path, "png", MAX_PIXELS)
    with pytest.raises(TooManyPixels):
        render_page(path, "png", 0, dpi=150, max_pixels=MAX_PIXELS)


def test_our_pixel_limit_applies_below_pillows(tmp_path):
    path = write_png_header_only(tmp_path / "big.png", 5_000, 5_000)
    with pytest.raises(TooManyPixels) as caught:
        count_pages(path, "png", max_pixels=10_000_000)
    assert "5000x5000" in caught.value.message


def test_transparency_becomes_white(tmp_path):
    path = tmp_path / "alpha.png"
    Image.new("RGBA", (20, 20), (0, 0, 0, 0)).save(path)
    page = render_page(path, "png", 0, dpi=150, max_pixels=MAX_PIXELS)
    assert page.mode == "RGB"
    assert page.getpixel((10, 10)) == (255, 255, 255)


def test_16_bit_grey_is_scaled_not_clipped(tmp_path):
    path = tmp_path / "grey16.png"
    Image.new("I;16", (20, 20), 32768).save(path)
    page = render_page(path, "png", 0, dpi=150, max_pixels=MAX_PIXELS)
    assert page.getpixel((10, 10)) == (128, 128, 128)


def test_save_page_image_is_atomic_and_lossless(tmp_path):
    image = render_text_page(["saved"], width=300, height=200)
    dest = tmp_path / "pages" / "150" / "page-0001.png"
    save_page_image(image, dest)
    assert [p.name for p in dest.parent.iterdir()] == ["page-0001.png"]
    with Image.open(dest) as reloaded:
        assert reloaded.tobytes() == image.tobytes()


@pytest.mark.parametrize("rotate, crop, dpi, max_pixels", [
    (0, None, 200, MAX_PIXELS), (90, None, 200, MAX_PIXELS), (270, (30.5, 40, 500.3, 700), 150,
                                                              MAX_PIXELS),
    (0, None, 600, 1_000_000)])
def test_a_pdf_page_knows_its_rendered_size_without_rendering(tmp_path, rotate, crop, dpi,
                                                                max_pixels):
    """What the worker records for a page read from its own text (the size hOCR and ALTO
    are placed on) is the size its rendering has: turned, cropped, or capped."""
    import pikepdf

    path = write_pdf(tmp_path / "plain.pdf", [["sized"]], dpi=150)
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        pdf.pages[0].obj.Rotate = rotate
        if crop:
            pdf.pages[0].obj.CropBox = pikepdf.Array(crop)
        pdf.save(path)
    page = PageRendering(path, "pdf", 0, dpi, max_pixels)
    size, at = page.size, page.dpi
    assert "image" not in page.__dict__  # measured, not rendered
    assert page.image.size == size and page.image.info["dpi"][0] == pytest.approx(at)
    assert (size[0] > size[1]) == (rotate in (90, 270))


@pytest.mark.parametrize("size", [(1, 1), (7, 3), (1, 2000)])
def test_intakes_image_check_takes_a_jpeg_narrower_than_its_draft_scale(tmp_path, size):
    """Intake decodes an image's first frame (check_image_data), a JPEG at an eighth of
    its size: a side under eight pixels scaled to 0 and failed the upload with a server
    error (found by schemathesis with a 1x1 JPEG)."""
    path = tmp_path / "tiny.jpg"
    Image.new("L", size, 255).save(path, "JPEG")
    check_image_data(path, "jpeg", max_pixels=10**8)
