"""Pages whose columns an element across the page cuts: a table or a figure spanning two
or three columns of prose, at the top, in the middle or at the bottom, in Latin or
Chinese script (``make-eval-set``'s ``columns-span`` and ``columns-span-zh``). The
columns above and below such an element must each be read top to bottom, never row
by row across the gutter.

The truth is in reading order: the title, the columns above the element (left before
right), the element (a table row by row, its cells apart by spaces; a figure's
caption), the columns below. The white between the columns and the element is drawn
from half a line's pitch to a line and a half: a narrow one is what a typeset page
leaves under a table.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from PIL import Image, ImageDraw

from appliance.measure import synthetic_chinese as zh
from appliance.measure import synthetic_sets as latin

# a table's body and a figure's caption, in each script
LATIN_HEADER = ("Item", "Region", "Quantity", "Amount")
LATIN_REGIONS = ("North", "South", "East", "West")
ZH_HEADER = ("物品", "地区", "数量", "金额")
ZH_ITEMS = ("复印纸A4", "黑色墨粉盒", "订书机", "档案盒", "白板笔", "打印机电缆")
ZH_REGIONS = ("华北", "华南", "华东", "西部")


def latin_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    size = rng.choice((20, 22, 24))
    font = latin._font(rng.choice(latin.FONTS), size)
    title = rng.choice(("Annual report", "Quarterly review", "Supplier update")) + \
        f" {rng.randint(2019, 2026)}"
    rows = [[rng.choice(latin.ITEMS), rng.choice(LATIN_REGIONS), str(rng.randint(1, 500)),
             f"{rng.randint(100, 99999) / 100:.2f}"] for _ in range(rng.randint(3, 6))]
    caption = f"Figure {rng.randint(1, 9)}. Revenue by region, {rng.randint(2019, 2025)} to 2026"
    return _page(rng, size, font, latin._font(latin.BOLD, size * 2), title,
                 lambda width: latin._wrap(rng, font, width, rng.randint(25, 70)),
                 [list(LATIN_HEADER), *rows], caption)


def chinese_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    size = rng.choice((22, 24, 26))
    font = zh._font(rng.choice(zh.FONTS), size)
    title = rng.choice(zh.TITLES) + f"（{rng.randint(2019, 2026)}年）"
    rows = [[rng.choice(ZH_ITEMS), rng.choice(ZH_REGIONS), str(rng.randint(1, 500)),
             f"{rng.randint(100, 99999) / 100:.2f}"] for _ in range(rng.randint(3, 6))]
    caption = f"图 {rng.randint(1, 9)} 各地区收入（{rng.randint(2019, 2025)}—2026 年）"
    return _page(rng, size, font, zh._font(zh.BOLD, size * 2), title,
                 lambda width: zh._wrap(zh._prose(rng, rng.randint(80, 220), False), font, width),
                 [list(ZH_HEADER), *rows], caption)


def _page(rng: random.Random, size: int, font, title_font, title: str,
          paragraph: Callable[[int], list[str]], table: list[list[str]],
          caption: str) -> tuple[Image.Image, dict[str, str]]:
    page = Image.new("RGB", latin.PAGE, "white")
    draw = ImageDraw.Draw(page)
    margin, gutter = 90, rng.choice((36, 48, 60))
    columns = rng.choice((2, 2, 3))
    width = (latin.PAGE[0] - 2 * margin - (columns - 1) * gutter) // columns
    pitch = round(size * 1.5)
    draw.text((margin, margin), title, font=title_font, fill="black")
    truth = [title]
    top, bottom = margin + size * 4, latin.PAGE[1] - margin
    gap = round(pitch * rng.choice((0.5, 0.8, 1.0, 1.5)))
    figure = rng.random() < 0.4
    height = (rng.randint(220, 380) + pitch) if figure else pitch * len(table)
    where = rng.choice(("top", "middle", "bottom"))
    at = {"top": top, "bottom": bottom - height,
          "middle": top + (bottom - top - height) // 2 + rng.randint(-3, 3) * pitch}[where]
    bands = [(top, at - gap), (at + height + gap, bottom)]
    element = (_figure(draw, font, margin, at, height - pitch, caption) if figure else
               _table(draw, font, rng, margin, at, pitch, table))
    for number, (band_top, band_bottom) in enumerate(bands):
        if number == 1:
            truth += element
        for column in range(columns):
            truth += _column(draw, font, paragraph, margin + column * (width + gutter),
                             band_top, band_bottom, width, pitch)
    return latin._scan(page, rng, mild=True), {".txt": "\n".join(truth) + "\n"}


def _column(draw: ImageDraw.ImageDraw, font, paragraph: Callable[[int], list[str]], x: int,
            top: int, bottom: int, width: int, pitch: int) -> list[str]:
    """Paragraphs down one column of a band, as far as the band goes."""
    truth, y = [], top
    while y + pitch <= bottom:
        for line in paragraph(width):
            if y + pitch > bottom:
                break
            draw.text((x, y), line, font=font, fill="black")
            truth.append(line)
            y += pitch
        y += pitch // 2
    return truth


def _table(draw: ImageDraw.ImageDraw, font, rng: random.Random, left: int, top: int,
           pitch: int, rows: list[list[str]]) -> list[str]:
    """A table across the page, ruled or not, its cells in columns of their own (not
    those of the prose); its rows as the truth has them."""
    right = latin.PAGE[0] - left
    starts = [left + round((right - left) * share) for share in (0.0, 0.4, 0.62, 0.8)]
    ruled = rng.random() < 0.5
    for number, row in enumerate(rows):
        y = top + number * pitch
        for x, cell in zip(starts, row):
            draw.text((x + 8, y + pitch // 8), cell, font=font, fill="black")
        if ruled:
            draw.line((left, y, right, y), fill="black", width=2)
    if ruled:
        draw.line((left, top + len(rows) * pitch, right, top + len(rows) * pitch),
                  fill="black", width=2)
    return [" ".join(row) for row in rows]


def _figure(draw: ImageDraw.ImageDraw, font, left: int, top: int, height: int,
            caption: str) -> list[str]:
    """A picture across the page (a grey panel with a chart's bars) and its caption."""
    right = latin.PAGE[0] - left
    draw.rectangle((left, top, right, top + height), fill=(225, 225, 225))
    bar = (right - left) // 9
    for number in range(6):
        x = left + bar * (number + 1) + bar // 2 * number
        draw.rectangle((x, top + height // (number + 2), x + bar // 2, top + height - 10),
                       fill=(120, 120, 120))
    draw.text((left, top + height + 6), caption, font=font, fill="black")
    return [caption]
