"""The preprocessing chain on pages rendered here: turned, leaning, bordered, faded,
small print. Orientation runs the real RapidOCR text-direction classifier."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from appliance.config import DOC_TYPES, PreprocessSettings
from appliance.engines.orientation import TextBoxDirections, UpsideDownClassifier
from appliance.raster.layout import analyze
from appliance.raster.preprocess import (PROFILE_LADDER, READABLE_CHAR_HEIGHT_PX,
                                         RESOLUTION_PROFILES, preprocess,
                                         to_original)
from appliance.raster.synthetic import render_text_page, sample_lines

STEPS = {"orientation": "orientation", "deskew": "deskew", "crop_borders": "crop",
         "contrast": "contrast", "denoise": "denoise", "resolution_profiles": "resolution"}
OFF = PreprocessSettings(orientation=False, deskew=False, crop_borders=False, contrast=False,
                         denoise=False, resolution_profiles=False)


def only(flag: str, **overrides) -> PreprocessSettings:
    return replace(OFF, **{flag: True, **overrides})


@pytest.fixture(scope="module")
def classifier() -> UpsideDownClassifier:
    return UpsideDownClassifier(threads=1)


@pytest.fixture(scope="module")
def text_boxes() -> TextBoxDirections:
    return TextBoxDirections(threads=1)


@pytest.fixture(scope="module")
def page() -> Image.Image:
    return render_text_page(sample_lines(7, 16), font_size=32)


def ink(image: Image.Image, level: int = 128) -> np.ndarray:
    return np.asarray(image.convert("L")) < level


def profile_sharpness(image: Image.Image) -> float:
    """Sum of squared ink counts per pixel row: largest when the lines are level."""
    rows = ink(image).sum(axis=1).astype(np.float64)
    return float(np.dot(rows, rows))


def residual_by_search(image: Image.Image) -> float:
    """The turn (degrees) that makes the rows sharpest, searched by brute force with
    PIL: an independent check of what the code under test measured."""
    half = image.convert("L").reduce(2)
    angles = np.arange(-1.5, 1.51, 0.25)
    scores = [profile_sharpness(half.rotate(a, Image.Resampling.BILINEAR, fillcolor=255))
              for a in angles]
    return float(-angles[int(np.argmax(scores))])


# -- orientation ------------------------------------------------------------------------

@pytest.mark.parametrize("turned", [0, 90, 180, 270])
def test_turned_pages_come_out_upright(page, classifier, text_boxes, turned):
    rotated = page.rotate(turned, expand=True)  # multiples of 90: exact pixel moves
    out, [record] = preprocess(rotated, only("orientation"), classify_upside_down=classifier,
                               text_boxes=text_boxes)
    assert record.step == "orientation"
    assert record.detail["rotated_deg"] == (360 - turned) % 360
    assert record.detail["votes"]["upright" if turned in (0, 90) else "inverted"] >= 8
    assert np.array_equal(np.asarray(out), np.asarray(page))
    if turned == 0:
        assert out is rotated


@pytest.mark.parametrize("turned", [90, 180, 270])
def test_a_reviewers_turn_replaces_the_orientation_vote(page, classifier, turned):
    """A reviewer's "rotate and read again" (``turn_deg``, clockwise, from the page as
    it came) is done whatever the classifier would vote, and even with preprocessing
    off; its record maps the boxes back as the orientation step's does."""
    rotated = page.rotate(turned, expand=True)  # counter-clockwise
    for settings in (only("orientation"), replace(OFF, enabled=False)):
        out, [record] = preprocess(rotated, settings, classify_upside_down=classifier,
                                   turn_deg=turned, doc_type="generic")
        assert record.step == "orientation" and record.detail["by"] == "reviewer"
        assert np.array_equal(np.asarray(out), np.asarray(page))
        back = to_original([record.to_dict()])
        height, width = np.asarray(out).shape[:2]
        x, y, _ = back @ np.array([0.0, 0.0, 1.0])  # the turned page's top left corner
        assert (round(x), round(y)) in {(0, 0), (rotated.width, 0), (0, rotated.height),
                                        (rotated.width, rotated.height)}
    # turned back the other way round, a page upright as it came stays so
    out, _ = preprocess(page, only("orientation"), turn_deg=0)
    assert np.array_equal(np.asarray(out), np.asarray(page))


def monospaced_receipt(font_size: int = 22) -> Image.Image:
    """An upright receipt in monospaced print, its rows close together: its characters
    stack into columns (item names, quantities, an "X", decimal points)."""
    font = ImageFont.load_default(size=font_size)
    advance, pitch = round(0.62 * font_size), round(1.1 * font_size)
    items = ("MILO TIN 400G", "ROTI BAKAR", "TEH TARIK", "NASI LEMAK", "AIR SIRAP", "KOPI O")
    receipt = Image.new("RGB", (640, 1500), "white")
    draw = ImageDraw.Draw(receipt)
    for row in range(48):
        line = f"{items[row % 6]:<16}{row % 9 + 1:>2} X {(row * 7919 % 9900 + 100) / 100:>7.2f}"
        for column, char in enumerate(line):  # each character in its own cell
            draw.text((30 + column * advance, 30 + row * pitch), char, fill="black", font=font)
    return receipt


def test_a_receipt_in_monospaced_print_is_not_turned_on_its_side(classifier, text_boxes):
    receipt = monospaced_receipt()
    # the projections take its columns of stacked characters for lines running down
    assert analyze(receipt).vertical_lines
    out, [record] = preprocess(receipt, only("orientation"), classify_upside_down=classifier)
    assert record.detail["rotated_deg"] in (90, 270)  # what it did without the detector
    out, [record] = preprocess(receipt, only("orientation"), classify_upside_down=classifier,
                               text_boxes=text_boxes)
    assert record.detail["rotated_deg"] == 0 and out is receipt
    across, down = record.detail["text_boxes"]["across"], record.detail["text_boxes"]["down"]
    assert across > 20 and down < across / 10, record.detail
    json.dumps(record.detail)  # it goes into the page's provenance


def test_without_a_classifier_only_the_geometry_runs(page):
    out, [record] = preprocess(page.rotate(90, expand=True), only("orientation"))
    assert record.detail["lines"] == "vertical" and record.detail["rotated_deg"] == 0
    assert "classifier" in record.detail["skipped"]
    out, [record] = preprocess(page.rotate(180), only("orientation"))
    assert record.detail["lines"] == "horizontal" and record.detail["rotated_deg"] == 0
    assert record.detail["classifier"] is None


@pytest.mark.parametrize(("turned", "lean"), [(180, 5.0), (90, -4.0)])
def test_turned_and_leaning_page(page, classifier, turned, lean):
    """Orientation reads straightened crops of leaning lines, then deskew levels them."""
    leaning = page.rotate(turned + lean, Image.Resampling.BICUBIC, expand=True,
                          fillcolor="white")
    out, (turn, deskew) = preprocess(leaning, replace(OFF, orientation=True, deskew=True),
                                     classify_upside_down=classifier)
    assert turn.detail["rotated_deg"] == 360 - turned
    assert deskew.detail["angle_deg"] == pytest.approx(lean, abs=0.3)
    layout = analyze(out)
    assert abs(layout.skew_deg) <= 0.5 and not layout.vertical_lines
    assert abs(residual_by_search(out)) <= 0.5


# -- deskew -----------------------------------------------------------------------------

@pytest.mark.parametrize("angle", [4.0, -4.0])
def test_leaning_page_is_straightened(page, angle):
    leaning = page.rotate(angle, Image.Resampling.BICUBIC, expand=True, fillcolor="white")
    assert abs(residual_by_search(leaning)) > 1.4  # the check sees the lean it should
    out, [record] = preprocess(leaning, only("deskew"))
    assert record.detail["angle_deg"] == pytest.approx(angle, abs=0.3)
    assert abs(analyze(out).skew_deg) <= 0.5
    assert abs(residual_by_search(out)) <= 0.5
    # the canvas grew instead of cutting corners: all the ink is still there
    assert ink(out).sum() == pytest.approx(ink(page).sum(), rel=0.05)
    assert record.detail["fill"] == [255, 255, 255]


def test_small_lean_is_left_alone(page):
    leaning = page.rotate(1.0, Image.Resampling.BICUBIC, expand=True, fillcolor="white")
    out, [record] = preprocess(leaning, only("deskew"))
    assert out is leaning
    assert record.detail["skipped"].startswith("angle 1.0") and "1.5" in record.detail["skipped"]
    out, [record] = preprocess(leaning, only("deskew", deskew_min_angle_deg=0.5))
    assert abs(analyze(out).skew_deg) <= 0.3


# -- crop -------------------------------------------------------------------------------

@pytest.mark.parametrize("border", [(0, 0, 0), (128, 128, 128)])
def test_border_is_cropped_close_to_the_page(page, border):
    canvas = Image.new("RGB", (2000, 2400), border)
    offset = (380, 323)
    canvas.paste(page, offset)
    out, [record] = preprocess(canvas, only("crop_borders"))
    left, top, right, bottom = record.detail["box"]
    assert out.size == (right - left, bottom - top)
    # within the page, around all of its text
    ys, xs = np.nonzero(ink(page))
    assert offset[0] <= left <= offset[0] + xs.min()
    assert offset[1] <= top <= offset[1] + ys.min()
    assert offset[0] + xs.max() < right <= offset[0] + page.width
    assert offset[1] + ys.max() < bottom <= offset[1] + page.height
    assert ink(out).sum() == ink(page).sum()  # every ink pixel survived, no border did
    assert min(right - left - np.ptp(xs), bottom - top - np.ptp(ys)) >= 2 * 8  # a margin is kept


def test_page_without_border_is_left_alone():
    snug = render_text_page(sample_lines(3, 28, words_per_line=14), width=900, height=1100,
                            font_size=24, margin=12)  # text from edge to edge
    out, [record] = preprocess(snug, only("crop_borders"))
    assert out is snug and "skipped" in record.detail


# -- contrast ---------------------------------------------------------------------------

def faded_page_with_stamp(page: Image.Image) -> Image.Image:
    stamped = page.copy()
    draw = ImageDraw.Draw(stamped)
    draw.rectangle((700, 1200, 1100, 1400), outline=(220, 0, 0), width=12)
    draw.text((740, 1260), "PAID", fill=(220, 0, 0), font=ImageFont.load_default(size=80))
    pixels = np.asarray(stamped).astype(np.float64)
    return Image.fromarray((255 - (255 - pixels) * 0.35).astype(np.uint8))  # faded to 35%


def spread(image: Image.Image) -> float:
    low, high = np.percentile(np.asarray(image.convert("L")), [0.5, 99])
    return float(high - low)


def test_faded_colour_page_gains_contrast_and_keeps_its_colour(page):
    faded = faded_page_with_stamp(page)
    out, [record] = preprocess(faded, only("contrast"))
    assert out.mode == "RGB" and record.detail["gain"] > 1.5
    assert spread(out) > 1.8 * spread(faded)
    stamp = np.asarray(out)[1200:1400, 700:1100].reshape(-1, 3).astype(int)
    red = stamp[(stamp[:, 0] - stamp[:, 1] > 40)]
    assert len(red) > 2000  # the stamp is still red ...
    assert np.all(np.abs(red[:, 1] - red[:, 2]) < 25)  # ... not orange or purple
    text = np.asarray(out)[100:700, 100:1000].reshape(-1, 3).astype(int)
    dark = text[text.sum(axis=1) < 300]
    assert len(dark) > 1000 and np.all(np.ptp(dark, axis=1) < 20)  # black text stays grey
    assert len(np.unique(np.asarray(out.convert("L")))) > 32  # not binarised


def test_grayscale_page_stays_grayscale(page):
    faded = faded_page_with_stamp(page).convert("L")
    out, [record] = preprocess(faded, only("contrast"))
    assert out.mode == "L" and spread(out) > 1.8 * spread(faded)


def test_good_contrast_is_left_alone(page):
    out, [record] = preprocess(page, only("contrast"))
    assert out is page and record.detail["skipped"].startswith("contrast already good")


# -- denoise ----------------------------------------------------------------------------

def test_denoise_removes_specks_not_text(page):
    rng = np.random.default_rng(5)
    pixels = np.asarray(page).copy()
    ys, xs = rng.integers(0, page.height, 3000), rng.integers(0, page.width, 3000)
    pixels[ys, xs] = 0
    noisy = Image.fromarray(pixels)
    out, [record] = preprocess(noisy, only("denoise"))
    assert record.detail["specks_removed"] > 2000
    below_text = slice(page.height * 2 // 3, None)
    assert ink(noisy)[below_text].sum() > 1000 and not ink(out)[below_text].any()
    assert ink(out)[ink(page)].all()  # the text's own ink is untouched
    clean, [record] = preprocess(page, only("denoise"))  # dots on i, periods: not specks
    assert clean is page and record.detail["specks_removed"] == 0


# -- resolution -------------------------------------------------------------------------

def test_invoice_is_scaled_to_its_profile(page):
    out, [record] = preprocess(page, only("resolution_profiles"), doc_type="invoice")
    assert max(out.size) == 1536 and record.detail["steps_up"] == 0
    assert record.detail["profile"] == "invoice"
    assert record.detail["char_height_px"] >= RESOLUTION_PROFILES["invoice"].min_char_height_px
    # a smaller page whose print is big enough is not enlarged: that adds no detail
    small = page.resize((620, 877), Image.Resampling.LANCZOS)
    out, [record] = preprocess(small, only("resolution_profiles"), doc_type="id_card")
    assert out.size == small.size and record.detail["scale"] == 1
    # a smaller page with small print is enlarged just until the print is big enough
    smaller = page.resize((310, 438), Image.Resampling.LANCZOS)
    out, [record] = preprocess(smaller, only("resolution_profiles"), doc_type="id_card")
    assert 1 < record.detail["scale"] and max(out.size) < 1024
    assert record.detail["char_height_px"] == pytest.approx(
        RESOLUTION_PROFILES["id_card"].min_char_height_px, abs=0.5)


def test_small_print_moves_up_a_profile():
    fine = render_text_page(sample_lines(4, 30, words_per_line=9), font_size=16)
    out, [record] = preprocess(fine, only("resolution_profiles"), doc_type="invoice")
    # 1536 would shrink this print below 16 px: one rung up, which keeps the page's own
    # 1754 px (enlarging to 1792 adds nothing the print needs)
    assert record.detail["steps_up"] == 1 and out.size == fine.size
    assert record.detail["char_height_px"] >= 16
    # print the recogniser reads as it is stays as it is, even below the profile's minimum
    small = render_text_page(sample_lines(4, 30, words_per_line=9), font_size=12)
    out, [record] = preprocess(small, only("resolution_profiles"), doc_type="invoice")
    assert READABLE_CHAR_HEIGHT_PX <= record.detail["char_height_px"] < 16
    assert out.size == small.size and record.detail["scale"] == 1
    # print too small for that is enlarged, as far as the top of the ladder
    tiny = render_text_page(sample_lines(4, 30, words_per_line=9), font_size=7)
    out, [record] = preprocess(tiny, only("resolution_profiles"), doc_type="invoice")
    assert max(out.size) == PROFILE_LADDER[-1] and record.detail["below_min_char_height"]
    # a reviewer's boost enlarges readable print too
    out, [record] = preprocess(small, only("resolution_profiles"), doc_type="invoice",
                               resolution_boost=1)
    assert max(out.size) == PROFILE_LADDER[-1] and record.detail["scale"] > 1


def test_pixel_cap_wins(page):
    out, [record] = preprocess(page, only("resolution_profiles"), doc_type="handwriting",
                               max_pixels=1_000_000)
    assert out.width * out.height <= 1_000_000 and record.detail["capped_by_max_pixels"]


def test_every_document_type_has_a_profile_on_the_ladder():
    assert set(RESOLUTION_PROFILES) == set(DOC_TYPES)
    assert all(p.long_side in PROFILE_LADDER for p in RESOLUTION_PROFILES.values())
    with pytest.raises(ValueError, match="unknown document type"):
        preprocess(Image.new("RGB", (10, 10)), PreprocessSettings(), doc_type="poster")


# -- switches and records ---------------------------------------------------------------

def test_disabled_changes_nothing(page):
    out, records = preprocess(page, PreprocessSettings(enabled=False, denoise=True))
    assert out is page and records == []


@pytest.mark.parametrize("flag", [f for f in STEPS if f != "denoise"])
def test_each_flag_switches_its_step_off(page, classifier, flag):
    leaning = page.rotate(3, Image.Resampling.BICUBIC, expand=True, fillcolor="white")
    _, records = preprocess(leaning, replace(PreprocessSettings(), **{flag: False}),
                            classify_upside_down=classifier)
    assert [r.step for r in records] == [s for f, s in STEPS.items()
                                         if f not in (flag, "denoise")]


def test_all_steps_record_time_and_detail(page, classifier):
    faded = faded_page_with_stamp(page).rotate(183, Image.Resampling.BICUBIC, expand=True,
                                              fillcolor="white")
    settings = PreprocessSettings(denoise=True)
    assert all(getattr(settings, f) for f in STEPS)
    out, records = preprocess(faded, settings, doc_type="report", max_pixels=50_000_000,
                              classify_upside_down=classifier)
    assert [r.step for r in records] == list(STEPS.values())
    for record in records:
        assert record.ms >= 0 and isinstance(record.detail, dict) and record.detail
    json.dumps([r.to_dict() for r in records])  # provenance is stored as JSON
    by_step = {r.step: r.detail for r in records}
    assert by_step["orientation"]["rotated_deg"] == 180
    assert by_step["deskew"]["angle_deg"] == pytest.approx(3, abs=0.3)
    assert "gain" in by_step["contrast"] and "box" in by_step["crop"]
    assert max(out.size) <= 1536 and out.mode == "RGB"


def test_settings_fields_are_all_covered():
    names = {f.name for f in fields(PreprocessSettings)}
    assert names == set(STEPS) | {"enabled", "deskew_min_angle_deg"}


def test_a_single_short_line_is_never_turned_sideways(classifier):
    # one line of print projects about as sharply down as across, and its letters look
    # like short vertical "lines": turning it by a quarter would ruin the page
    memo = render_text_page(["Memo to all staff"], font_size=36)
    out, [record] = preprocess(memo, only("orientation"), classify_upside_down=classifier)
    assert record.detail["rotated_deg"] == 0 and out.size == memo.size


def test_the_recorded_steps_map_the_page_back_to_the_original(page, classifier):
    """A mark on a turned, leaning, bordered page is found again where it was once the
    steps' recorded transforms are undone (what the text layers are placed with)."""
    marked = page.copy()
    ImageDraw.Draw(marked).rectangle((600, 300, 629, 329), fill="black")  # centre 614.5, 314.5
    original = Image.new("RGB", (marked.width + 120, marked.height + 120), "white")
    original.paste(marked.rotate(3, expand=True, fillcolor="white").rotate(90, expand=True),
                   (60, 60))
    out, steps = preprocess(original, PreprocessSettings(), doc_type="invoice",
                            classify_upside_down=classifier,  # and scaled down to fit:
                            max_pixels=original.width * original.height // 3)
    moved = {s.step for s in steps if "transform" in s.detail}
    assert {"orientation", "deskew", "crop", "resolution"} <= moved
    # the mark in the original and in the output: the centre of its solid block
    def centre(image):
        solid = np.asarray(image.convert("L").filter(ImageFilter.MinFilter(15))) < 100
        ys, xs = np.nonzero(solid)
        return np.array([xs.mean(), ys.mean(), 1.0])

    back = to_original([s.to_dict() for s in steps]) @ centre(out)
    assert np.hypot(*(back - centre(original))[:2]) < 4
