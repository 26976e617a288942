"""Tiling: strip plans cover the page with the overlap asked for, a page in columns column
by column; stitch undoes the overlap."""

from __future__ import annotations

import difflib
import random

import pytest
from PIL import Image

from appliance.engines.tiling import crop_tiles, plan_region_tiles, plan_tiles, stitch
from appliance.measure import synthetic_sets
from appliance.raster.layout import analyze
from appliance.raster.synthetic import render_text_page, sample_lines
from appliance.reading.regions import column_regions

# --- plan_tiles -----------------------------------------------------------------


@pytest.mark.parametrize("width, height, tile_height, overlap", [
    (1240, 1754, 1240, 0.15),   # A4 at 150 dpi, square tiles: two strips
    (2480, 3508, 2480, 0.15),   # A4 at 300 dpi
    (1000, 3000, 1000, 0.15),
    (1000, 1001, 1000, 0.15),   # one pixel too tall for one strip
    (800, 10_000, 896, 0.25),   # a long receipt
    (1000, 2500, 1000, 0.0),
])
def test_tiles_cover_the_page_with_at_least_the_overlap_asked_for(width, height, tile_height, overlap):
    boxes = plan_tiles(width, height, tile_height=tile_height, overlap=overlap)
    assert len(boxes) >= 2
    assert boxes[0][1] == 0
    assert boxes[-1][3] == height  # the last strip is flush with the bottom edge
    for left, top, right, bottom in boxes:
        assert (left, right) == (0, width)
        assert bottom - top == tile_height
        assert 0 <= top < bottom <= height
    for (_, _, _, above_bottom), (_, below_top, _, _) in zip(boxes, boxes[1:]):
        assert above_bottom - below_top >= overlap * tile_height - 1  # rounding
        assert below_top < above_bottom or overlap == 0.0
    # No more strips than needed: one fewer could not keep the overlap.
    if len(boxes) > 2:
        spacing = (height - tile_height) / (len(boxes) - 2)
        assert tile_height - spacing < overlap * tile_height


@pytest.mark.parametrize("height", [1, 500, 1000])
def test_a_page_no_taller_than_a_tile_is_one_tile(height):
    assert plan_tiles(1000, height, tile_height=1000, overlap=0.15) == [(0, 0, 1000, height)]


@pytest.mark.parametrize("kwargs", [
    {"width": 0, "height": 100, "tile_height": 10, "overlap": 0.1},
    {"width": 100, "height": 100, "tile_height": 0, "overlap": 0.1},
    {"width": 100, "height": 100, "tile_height": 10, "overlap": 1.0},
    {"width": 100, "height": 100, "tile_height": 10, "overlap": -0.1},
])
def test_nonsense_plans_are_refused(kwargs):
    width, height = kwargs.pop("width"), kwargs.pop("height")
    with pytest.raises(ValueError):
        plan_tiles(width, height, **kwargs)


def test_crop_tiles_cuts_the_planned_strips():
    # Each 100-px band of the page has its own grey level, so a strip's rows say where it came from.
    page = Image.new("L", (300, 1000))
    for band in range(10):
        page.paste(band * 25, (0, band * 100, 300, band * 100 + 100))
    boxes = plan_tiles(300, 1000, tile_height=400, overlap=0.15)
    tiles = crop_tiles(page, boxes)
    assert [tile.size for tile in tiles] == [(300, 400)] * len(boxes)
    for tile, (_, top, _, bottom) in zip(tiles, boxes):
        assert tile.getpixel((0, 0)) == top // 100 * 25
        assert tile.getpixel((299, 399)) == (bottom - 1) // 100 * 25
    with pytest.raises(ValueError):
        crop_tiles(page, [(0, 900, 300, 1100)])


# --- stitch: the boundary cases -------------------------------------------------


def test_exact_overlap_lines_are_dropped():
    upper = "# Title\n\nFirst line of text.\nSecond line of text.\nThird line here.\nFourth line, the end."
    lower = "Third line here.\nFourth line, the end.\nFifth line is new.\nSixth line too."
    assert stitch([upper, lower]) == (
        "# Title\n\nFirst line of text.\nSecond line of text.\nThird line here.\n"
        "Fourth line, the end.\nFifth line is new.\nSixth line too."
    )


def test_fuzzy_overlap_lines_are_dropped():
    upper = "Alpha paragraph opens here.\nThe payment is due within 30 days.\nLate fees apply after that date."
    lower = (
        "the payment is due  within 30 dayz.\n"      # case, spacing and one character differ
        "**Late fees apply after that date.**\n"    # emphasis added by the second reading
        "Questions go to the billing office."
    )
    assert stitch([upper, lower]) == (
        "Alpha paragraph opens here.\nThe payment is due within 30 days.\n"
        "Late fees apply after that date.\nQuestions go to the billing office."
    )


def test_one_line_read_quite_differently_does_not_break_a_longer_overlap():
    upper = "Intro.\nClause 4 covers delivery.\nClause 5 covers payment.\nSigned: J. Smith\nDate: 3 May\nWitness: A. Jones"
    lower = "Clause 4 covers delivery.\nClause 5 covers payment.\nSigned: [illegible]\nDate: 3 May\nWitness: A. Jones\nEnd."
    assert stitch([upper, lower]) == upper + "\nEnd."


def test_text_without_overlap_is_kept_and_joined_with_a_newline():
    upper = "The first strip ends here."
    lower = "An entirely different line starts the next strip.\nAnd another."
    assert stitch([upper, lower]) == upper + "\n" + lower
    assert stitch([upper]) == upper
    assert stitch([]) == ""
    assert stitch(["", upper, "  \n", lower]) == upper + "\n" + lower


def test_a_cut_line_read_partially_at_the_end_of_the_upper_strip_gives_way_to_the_full_reading():
    upper = "Alpha beta gamma delta.\nThe quick brown fox jumps ov"
    lower = "The quick brown fox jumps over the lazy dog.\nNext line."
    assert stitch([upper, lower]) == "Alpha beta gamma delta.\nThe quick brown fox jumps over the lazy dog.\nNext line."


def test_cut_lines_read_partially_on_both_sides_of_an_overlap_keep_the_longer_readings():
    upper = (
        "Opening line of the page.\n"
        "The quick brown fox jumps over the lazy dog.\n"     # cut by the lower strip's top edge
        "Some more text in the overlap.\n"
        "Cut line at the bottom ed"                          # cut by the upper strip's bottom edge
    )
    lower = (
        "ps over the lazy dog.\n"
        "Some more text in the overlap.\n"
        "Cut line at the bottom edge, read whole here.\n"
        "After the overlap."
    )
    assert stitch([upper, lower]) == (
        "Opening line of the page.\nThe quick brown fox jumps over the lazy dog.\n"
        "Some more text in the overlap.\nCut line at the bottom edge, read whole here.\nAfter the overlap."
    )


def test_the_longer_reading_wins_even_when_the_upper_one_is_cut():
    upper = "Intro line.\nThe quick brown fox jumps over the lazy dog."
    lower = "he quick brown fox jumps over the\nFollowing line."
    assert stitch([upper, lower]) == "Intro line.\nThe quick brown fox jumps over the lazy dog.\nFollowing line."


TABLE_TOP = "| # | Item | Amount |\n|---|---|---|\n| 9 | Washers | 0.00 |\n| 10 | Nuts | 0.00 |"


def test_a_table_keeps_one_header_when_the_next_strip_repeats_it():
    lower = "| # | Item | Amount |\n|---|---|---|\n| 10 | Nuts | 0.00 |\n| 11 | Bolts | 0.00 |"
    assert stitch([TABLE_TOP, lower]) == TABLE_TOP + "\n| 11 | Bolts | 0.00 |"


def test_a_table_keeps_one_header_when_the_next_strip_promotes_a_row_to_header():
    lower = "| 10 | Nuts | 0.00 |\n| --- | --- | --- |\n| 11 | Bolts | 0.00 |"
    assert stitch([TABLE_TOP, lower]) == TABLE_TOP + "\n| 11 | Bolts | 0.00 |"


def test_near_identical_rows_are_not_mistaken_for_overlap():
    upper = "| # | a |\n|---|---|\n| 9 | 0.00 |\n| 10 | 0.00 |"
    shifted = "| 10 | 0.00 |\n| 11 | 0.00 |\n| 12 | 0.00 |"     # one row of overlap
    assert stitch([upper, shifted]).splitlines()[2:] == [f"| {i} | 0.00 |" for i in range(9, 13)]
    following = "| 11 | 0.00 |\n| 12 | 0.00 |"                    # no overlap at all
    assert stitch([upper, following]).splitlines()[2:] == [f"| {i} | 0.00 |" for i in range(9, 13)]


# --- stitch: a page read in three strips ----------------------------------------

PAGE_LINES = [
    "# Northwind Supplies Ltd.",
    "",
    "Unit 4, Harbour Road, Portsmouth PO2 8QX",
    "VAT no. GB 123 4567 89 | Phone 023 9200 1100",
    "",
    "## Invoice INV-2024-0117",
    "",
    "**Invoice date:** 14 March 2024",
    "**Due date:** 13 April 2024",
    "**Customer:** Acme Engineering GmbH, Industriestrasse 12, 70565 Stuttgart",
    "**Order reference:** PO-88213",
    "",
    "Thank you for your order. The goods listed below were dispatched from our",
    "Portsmouth warehouse on 12 March 2024 by road freight. Please check the",
    "delivery against this invoice and report any shortfall within seven days.",
    "",
    "| # | Description | Qty | Unit price | Amount |",
    "|---|---|---|---|---|",
    "| 1 | Hex bolt M8 x 40, zinc plated | 500 | 0.12 | 60.00 |",
    "| 2 | Hex nut M8, zinc plated | 500 | 0.05 | 25.00 |",
    "| 3 | Washer M8, form A | 1000 | 0.02 | 20.00 |",
    "| 4 | Threaded rod M8 x 1000 | 40 | 1.85 | 74.00 |",
    "| 5 | Anchor bolt M10 x 120 | 200 | 0.95 | 190.00 |",
    "| 6 | Cable tie 300 mm, black | 2000 | 0.03 | 60.00 |",
    "| 7 | Cable tie 200 mm, natural | 2000 | 0.02 | 40.00 |",
    "| 8 | Hose clamp 20-32 mm | 150 | 0.48 | 72.00 |",
    "| 9 | Hose clamp 32-50 mm | 150 | 0.56 | 84.00 |",
    "| 10 | Spring washer M10 | 800 | 0.04 | 32.00 |",
    "| 11 | Wood screw 5 x 60 | 1500 | 0.03 | 45.00 |",
    "| 12 | Wall plug 8 mm | 1500 | 0.01 | 15.00 |",
    "| 13 | Eye bolt M12 | 60 | 1.20 | 72.00 |",
    "| 14 | Shackle 10 mm, galvanised | 40 | 2.75 | 110.00 |",
    "| 15 | Chain 6 mm, per metre | 25 | 3.10 | 77.50 |",
    "| 16 | Rope clip 6 mm | 100 | 0.65 | 65.00 |",
    "| 17 | Turnbuckle M10 | 30 | 2.20 | 66.00 |",
    "| 18 | Safety glove, size 9 | 24 | 3.40 | 81.60 |",
    "",
    "| | | | **Subtotal** | 1,189.10 |",
    "| | | | VAT 20% | 237.82 |",
    "| | | | **Total due** | **1,426.92** |",
    "",
    "## Payment",
    "",
    "Please pay by bank transfer to Northwind Supplies Ltd., sort code 20-45-77,",
    "account 83920174, quoting the invoice number. Payments received after the due",
    "date may be charged interest at 4% above the Bank of England base rate under",
    "the Late Payment of Commercial Debts (Interest) Act 1998.",
    "",
    "Goods remain the property of Northwind Supplies Ltd. until paid for in full.",
    "Returns are accepted within 30 days in their original packaging; a restocking",
    "fee of 10% applies to items that were not faulty.",
    "",
    "Registered in England and Wales no. 04512873. Registered office as above.",
    "Page 1 of 1",
]


def three_strips() -> list[str]:
    """The page as three overlapping strips might read it, with the usual blemishes."""
    lines = PAGE_LINES
    first = lines[:22] + ["| 5 | Anchor bolt M10 x"]                # bottom edge cuts row 5
    second = (
        ["on 12 March 2024 by road freight. Please check the"]      # top edge cuts this line
        + ["delivery against this invoice and report any shortfall within 7 days."]  # misread
        + lines[15:19]
        + ["| 2 | Hex nut M8, zinc-plated | 500 | 0.05 | 25.00 |"]  # one character differs
        + ["| 3 | washer m8, form a | 1000 | 0.02 | 20.00 |"]        # case differs
        + lines[21:36]
    )
    third = (
        ["| # | Description | Qty | Unit price | Amount |", "|---|---|---|---|---|"]  # header repeated
        + lines[31:]
    )
    return ["\n".join(first), "\n".join(second), "\n".join(third)]


def test_three_strips_of_a_page_stitch_back_into_the_page():
    page = "\n".join(PAGE_LINES)
    stitched = stitch(three_strips())
    similarity = difflib.SequenceMatcher(None, stitched, page, autojunk=False).ratio()
    assert similarity > 0.97, stitched
    out = stitched.splitlines()
    # every table row exactly once, one header, one separator
    for row in [line for line in PAGE_LINES if line.startswith("| ")]:
        assert sum(difflib.SequenceMatcher(None, row.casefold(), line.casefold()).ratio() > 0.95
                   for line in out) == 1, row
    assert sum(line.startswith("|---") for line in out) == 1
    assert "| 5 | Anchor bolt M10 x 120 | 200 | 0.95 | 190.00 |" in out
    assert "Portsmouth warehouse on 12 March 2024 by road freight. Please check the" in out
    assert out[-1] == "Page 1 of 1"


def test_tiling_is_decided_by_print_size_and_line_count():
    from appliance.engines.tiling import decide_tiling

    # A4 at 150 dpi: 1240 x 1754; the model's input is 896 px square
    small = decide_tiling(1240, 1754, char_height_px=18, line_count=50, model_side=896)
    assert small.tile and "print under" in small.reason  # 18 px -> 9.2 px at the model
    normal = decide_tiling(1240, 1754, char_height_px=30, line_count=30, model_side=896)
    assert not normal.tile
    crowded = decide_tiling(1240, 1754, char_height_px=30, line_count=90, model_side=896)
    assert crowded.tile and "over 70 lines" in crowded.reason
    landscape = decide_tiling(1754, 1240, char_height_px=10, line_count=90, model_side=896)
    assert not landscape.tile and "not tall enough" in landscape.reason
    assert not decide_tiling(1240, 1754, char_height_px=None, line_count=0, model_side=896).tile


# --- pages set in columns --------------------------------------------------------------


def page_in_columns(columns: int, seed: int = 5) -> Image.Image:
    """A title over ``columns`` columns of prose, as the synthetic eval set draws them."""
    rng = random.Random(seed)
    while True:
        page, _truth = synthetic_sets.columns_page(rng)
        if _column_count(page) == columns:
            return page


def _column_count(page: Image.Image) -> int:
    regions = column_regions(analyze(page), page.width, page.height) or []
    return sum(1 for box in regions if box[3] - box[1] > page.height / 2)


def test_a_page_in_columns_is_cut_into_its_columns_in_reading_order():
    for columns in (2, 3):
        page = page_in_columns(columns)
        regions = column_regions(analyze(page), page.width, page.height)
        tall = [box for box in regions if box[3] - box[1] > page.height / 2]
        assert len(tall) == columns
        assert [box[0] for box in tall] == sorted(box[0] for box in tall)  # left first
        for left, right in zip(tall, tall[1:]):
            assert left[2] <= right[0]  # the gutter between them is in neither
        title = regions[0]
        assert title[3] < tall[0][1]  # the title over the columns is read first, alone


def test_a_page_of_one_column_a_form_and_a_receipt_are_no_columns():
    prose = render_text_page(sample_lines(3, count=30, words_per_line=9), font_size=28)
    receipt = render_text_page(["KEDAI MAJU JAYA", "MILO TIN        12.50",
                                "ROTI BAKAR       3.20", "TOTAL           15.70",
                                "CASH            20.00", "CHANGE           4.30"])
    for page in (prose, receipt):
        assert column_regions(analyze(page), page.width, page.height) is None


def test_each_column_gets_strips_of_its_own_within_it():
    regions = [(90, 100, 1150, 150), (90, 170, 600, 1600), (640, 170, 1150, 1600)]
    groups = plan_region_tiles(regions, tile_height=1240, overlap=0.15)
    assert groups[0] == [(90, 100, 1150, 150)]  # the title: one strip
    for (x0, y0, x1, y1), group in zip(regions[1:], groups[1:]):
        assert len(group) == 2
        assert all(box[0] == x0 and box[2] == x1 for box in group)
        assert group[0][1] == y0 and group[-1][3] == y1
