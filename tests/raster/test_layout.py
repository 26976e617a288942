"""The text-layout analysis on rendered pages: lines, print size, direction, skew sign."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from appliance.raster.layout import analyze
from appliance.raster.synthetic import MARGIN_PX, render_text_page, sample_lines

LINES = 16
FONT = 30


@pytest.fixture(scope="module")
def page() -> Image.Image:
    return render_text_page(sample_lines(11, LINES), font_size=FONT)


def test_upright_page(page):
    layout = analyze(page)
    assert len(layout.line_boxes) == LINES
    assert not layout.vertical_lines
    assert abs(layout.skew_deg) < 0.2
    assert layout.char_height_px == pytest.approx(FONT, rel=0.15)
    assert 0.01 < layout.ink_ratio < 0.2
    assert layout.density == pytest.approx(LINES * 1000 / page.height, rel=0.01)
    first = layout.line_boxes[0]  # top to bottom, in the input's pixels
    assert abs(first[0] - MARGIN_PX) <= 3 and abs(first[1] - MARGIN_PX) <= FONT // 2


def test_small_input_is_not_upscaled_and_large_is_mapped_back(page):
    big = page.resize((page.width * 2, page.height * 2), Image.Resampling.BICUBIC)
    layout = analyze(big)
    assert layout.char_height_px == pytest.approx(2 * FONT, rel=0.15)
    assert abs(layout.line_boxes[0][0] - 2 * MARGIN_PX) <= 6


@pytest.mark.parametrize("angle", [5.0, -3.0])
def test_skew_is_counter_clockwise_positive(page, angle):
    leaning = page.rotate(angle, Image.Resampling.BICUBIC, expand=True, fillcolor="white")
    layout = analyze(leaning)
    assert layout.skew_deg == pytest.approx(angle, abs=0.3)
    assert layout.char_height_px == pytest.approx(FONT, rel=0.15)  # measured across the line


@pytest.mark.parametrize("turn", [90, 270])
def test_page_on_its_side_has_vertical_lines_and_keeps_its_skew(page, turn):
    sideways = page.rotate(turn + 3, Image.Resampling.BICUBIC, expand=True, fillcolor="white")
    layout = analyze(sideways)
    assert layout.vertical_lines
    assert layout.skew_deg == pytest.approx(3.0, abs=0.3)
    assert len(layout.line_boxes) == LINES


def test_blank_page_has_no_text():
    layout = analyze(Image.new("L", (800, 1000), 250))
    assert layout.line_boxes == [] and layout.char_height_px is None and layout.skew_deg is None


@pytest.mark.parametrize("angle", [2.0, -2.5])
def test_scanner_noise_is_not_taken_for_a_steep_lean(angle):
    # A low-resolution, blurred, faint and very noisy copy: the specks outnumber the
    # glyphs, and the sharpest projection used to be the search range's edge, so such
    # pages were turned by 16 degrees and came out unreadable.
    page = render_text_page(sample_lines(4, 10), font_size=22).convert("L")
    page = page.rotate(angle, resample=Image.BICUBIC, fillcolor=255)
    page = page.resize((page.width * 2 // 5, page.height * 2 // 5), Image.LANCZOS)
    pixels = np.asarray(page.filter(ImageFilter.GaussianBlur(1.2)), dtype=np.float32)
    pixels = 125 + pixels * (235 - 125) / 255 + np.random.default_rng(4).normal(0, 32, pixels.shape)
    skew = analyze(Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))).skew_deg
    assert abs(skew) <= abs(angle) + 0.5


def _wide_table() -> Image.Image:
    """A wide, short table of pollutants and thresholds, as cropped from a report: its
    cells line up diagonally at about 14 degrees as well as along its rows."""
    page = Image.new("L", (1100, 290), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=24)
    draw.text((620, 20), "THRESHOLD FOR RELEASES", fill=0, font=font)
    for x, medium in ((530, "to air"), (750, "to water"), (980, "to land")):
        draw.text((x, 52), medium, fill=0, font=font)
        draw.text((x - 10, 80), "kg/year", fill=0, font=font)
    rows = [("Carbon dioxide (CO2)", "100 million"), ("Hydro-fluorocarbons (HFCs)", "100"),
            ("Methane (CH4)", "100 000"), ("Nitrous oxide (N2O)", "10 000"),
            ("Perfluorocarbons (PFCs)", "100"), ("Sulphur hexafluoride (SF6)", "50")]
    for number, (pollutant, threshold) in enumerate(rows):
        top = 112 + number * 26
        draw.text((18, top), pollutant, fill=0, font=font)
        draw.text((560 - font.getlength(threshold) / 2, top), threshold, fill=0, font=font)
        for x in (800, 1025):
            draw.text((x, top), "-", fill=0, font=font)
    return page


@pytest.mark.parametrize("angle", [0.0, 3.0, -4.0])
def test_a_wide_table_is_not_turned_to_where_its_cells_line_up_diagonally(angle):
    # Each angle was scored against its own projection's extent, which grows with the
    # tilt on a wide, short page: this table, straight, measured 14.4 degrees (and
    # leaning -4 degrees, 10.9), and was turned by it.
    table = _wide_table().rotate(angle, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    assert analyze(table).skew_deg == pytest.approx(angle, abs=0.6)
