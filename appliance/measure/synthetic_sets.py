"""Synthetic evaluation sets with ground truth in reading order (`appliance make-eval-set`).

Ten datasets in the plain layout (``<stem>.png`` beside ``<stem>.txt`` or ``.md``, a
``dataset.json`` each), deterministic for a seed:

- ``columns``: report and magazine pages, a title across the page over two or three
  columns of prose, sometimes a footer; the truth reads the title, then each column
  top to bottom.
- ``columns-zh`` (``synthetic_chinese``): the same in Chinese, one to three columns,
  mixed with Latin names on some pages, and book spreads.
- ``columns-span`` and ``columns-span-zh`` (``synthetic_spans``): a table or a figure
  across the columns; ``prose`` (``synthetic_prose``): journal pages of running prose
  in five scripts, whose Markdown truth states the few tables they hold.
- ``receipts``: a shop's name, item rows with prices at the right edge, totals as
  label/value pairs; the truth reads row by row.
- ``tables``: a heading over a ruled or unruled table; the truth is Markdown (TEDS).
- ``degraded``: one column of text, scanned badly: leaning, low resolution, blurred,
  noisy, faint, JPEG-compressed, from a fair copy to barely legible (the set for
  judging confidence: its truth is exact, so every error is the reader's).
- ``receipts-fields`` and ``invoices-fields`` (`synthetic_fields`): receipts and invoices
  of many layouts with their key fields as printed (``<stem>.fields.json``), for judging
  field extraction.
- ``born-digital`` (`born_digital`): PDFs with text of their own (one and two
  columns, tables with and without rules, CJK), and those whose text must not be
  trusted (a font without ToUnicode, a wrong invisible OCR layer over a scan), a
  document with a scanned page between born-digital ones, a stamp scanned over text.

They are the measure for the layout work that real scans of these kinds need; real
scans remain the check (`appliance eval` on FUNSD, SROIE, ...).
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from appliance.measure import synthetic_chinese

PAGE = (1240, 1754)  # A4 at 150 dpi
FONTS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSansCondensed.ttf")
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
WORDS = ("the annual report shows that revenue grew in every region while costs stayed "
         "close to the plan of last year our customers ordered more paper and toner than "
         "before and the new office in the north opened on time the board thanks all staff "
         "for their work during a demanding period in which prices for energy and transport "
         "rose sharply contracts with suppliers were renewed at better terms and the share "
         "of recycled material in our products reached a new high").split()
ITEMS = ("Paper A4 500 sheets", "Toner cartridge black", "Stapler", "Envelopes C5 pack",
         "Ballpoint pens blue", "Desk lamp LED", "Ring binder", "Sticky notes", "Coffee beans 1kg",
         "Printer cable", "Whiteboard marker", "Archive box")


def make_sets(root: Path, pages: int = 12, seed: int = 7) -> dict[str, int]:
    """Write the datasets under ``root``; answers how many pages each got."""
    # imported here, not at the top: synthetic_fields and synthetic_spans import this module
    from appliance.measure import synthetic_prose, synthetic_spans
    from appliance.measure.born_digital import make_born_digital
    from appliance.measure.synthetic_fapiao import fapiao_page
    from appliance.measure.synthetic_fields import make_field_sets

    makers = {"columns": ("report", columns_page), "columns-zh": ("report", _chinese_page),
              "columns-span": ("report", synthetic_spans.latin_page),
              "columns-span-zh": ("report", synthetic_spans.chinese_page),
              "prose": ("report", synthetic_prose.prose_page),
              "receipts": ("receipt", receipt_page),
              "tables": ("table", _table_page), "degraded": ("generic", _degraded_page)}
    counts = {name: write_set(root, name, doc_type, make, pages, seed)
              for name, (doc_type, make) in makers.items()}
    return counts | make_field_sets(root, pages, seed) | {
        "fapiao-fields": write_set(root, "fapiao-fields", "fapiao", fapiao_page, pages, seed),
        "born-digital": make_born_digital(root, pages, seed)}


def write_set(root: Path, name: str, doc_type: str,
              make: Callable[[random.Random], tuple[Image.Image, dict[str, str]]],
              pages: int, seed: int) -> int:
    """One dataset in the plain layout under ``root / name``: its dataset.json, and for
    each page its PNG beside its truth files (``make`` answers the image and the text
    of each, by file-name ending). Answers the number of pages."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps({"name": f"synthetic-{name}",
                                                     "doc_type": doc_type}))
    for number in range(pages):
        image, truths = make(random.Random(f"{seed}-{name}-{number}"))
        stem = f"{name}-{number:03d}"
        image.save(folder / f"{stem}.png")
        for suffix, text in truths.items():
            (folder / f"{stem}{suffix}").write_text(text, encoding="utf-8")
    return pages


def _font(path: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(path, size)


def _wrap(rng: random.Random, font, width: int, words: int) -> list[str]:
    """Prose of about ``words`` words, wrapped to ``width`` pixels."""
    start = rng.randrange(len(WORDS))
    text = [WORDS[(start + i) % len(WORDS)] for i in range(words)]
    text[0] = text[0].capitalize()
    return wrap_words(text, font, width)


def wrap_words(words: list[str], font, width: int) -> list[str]:
    """``words`` wrapped to ``width`` pixels, the last line ending a sentence."""
    lines, current = [], ""
    for word in words:
        candidate = f"{current} {word}".strip()
        if font.getlength(candidate) <= width:
            current = candidate
        else:
            lines.append(current)
            current = word
    return lines + ([current + "."] if current else [])


def columns_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    """A title over two or three columns of prose, often a footer, scanned mildly; its
    truth in reading order (by file suffix)."""
    page = Image.new("RGB", PAGE, "white")
    draw = ImageDraw.Draw(page)
    size = rng.choice((20, 22, 24))
    font = _font(rng.choice(FONTS), size)
    columns = rng.choice((2, 2, 3))
    margin, gutter = 90, rng.choice((36, 48, 60))
    title_font = _font(BOLD, size * 2)
    title = rng.choice(("Annual report", "Quarterly review", "News from the north office",
                        "Supplier update")) + f" {rng.randint(2019, 2026)}"
    draw.text((margin, margin), title, font=title_font, fill="black")
    truth = [title]
    column_width = (PAGE[0] - 2 * margin - (columns - 1) * gutter) // columns
    pitch = round(size * 1.45)
    top = margin + size * 4
    bottom_limit = PAGE[1] - margin - (pitch * 3)
    for column in range(columns):
        x = margin + column * (column_width + gutter)
        y = top
        while y < bottom_limit - pitch * 4:
            paragraph = _wrap(rng, font, column_width, rng.randint(25, 70))
            for line in paragraph:
                if y >= bottom_limit:
                    break
                draw.text((x, y), line, font=font, fill="black")
                truth.append(line)
                y += pitch
            y += pitch  # a blank line between paragraphs
    if rng.random() < 0.5:
        footer = f"Page {rng.randint(2, 40)} of the report, printed for internal use only"
        draw.text((margin, PAGE[1] - margin - size), footer, font=_font(FONTS[0], size - 4),
                  fill="black")
        truth.append(footer)
    return _scan(page, rng, mild=True), {".txt": "\n".join(truth) + "\n"}


def _chinese_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    """A page of the Chinese set (``synthetic_chinese``): a book spread one time in
    four, a page of vertical text one in seven, else a title over one to three
    columns; scanned mildly."""
    draw = rng.random()
    make = (synthetic_chinese.book_spread if draw < 0.25 else
            synthetic_chinese.vertical_page if draw < 0.4 else synthetic_chinese.columns_page)
    image, truth = make(rng, PAGE)
    return _scan(image, rng, mild=True), {".txt": "\n".join(truth) + "\n"}


def receipt_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    """A till receipt (shop, items, total, date) in a proportional or a monospaced face,
    scanned mildly; its truth (by file suffix)."""
    width = 620
    size = rng.choice((22, 24, 26))
    font = _font(rng.choice((FONTS[0], "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")),
                 size)
    rows: list[tuple[str, str]] = [(rng.choice(("CORNER STATIONERY", "OFFICE WORLD LTD",
                                                "PAPER & CO")), "")]
    rows.append((f"Receipt {rng.randint(1000, 9999)}  {rng.randint(1, 28):02d}/"
                 f"{rng.randint(1, 12):02d}/2026", ""))
    total = 0.0
    for item in rng.sample(ITEMS, rng.randint(3, 8)):
        price = rng.randint(100, 9999) / 100
        total += price
        rows.append((item, f"{price:.2f}"))
    paid = total + rng.randint(0, 2000) / 100
    rows += [("TOTAL", f"{total:.2f}"), ("CASH", f"{paid:.2f}"), ("CHANGE", f"{paid - total:.2f}"),
             ("Thank you for your visit", "")]
    pitch = round(size * 1.6)
    page = Image.new("RGB", (width, 80 + pitch * (len(rows) + 2)), "white")
    draw = ImageDraw.Draw(page)
    y = 40
    for label, value in rows:
        draw.text((30, y), label, font=font, fill="black")
        if value:
            draw.text((width - 30 - font.getlength(value), y), value, font=font, fill="black")
        y += pitch
    truth = "\n".join(f"{label} {value}".strip() for label, value in rows)
    return _scan(page, rng, mild=True), {".txt": truth + "\n"}


def _table_page(rng: random.Random) -> tuple[Image.Image, str, str]:
    page = Image.new("RGB", PAGE, "white")
    draw = ImageDraw.Draw(page)
    size = rng.choice((22, 24))
    font = _font(rng.choice(FONTS), size)
    heading = rng.choice(("Orders by region", "Stock on hand", "Invoices due"))
    draw.text((90, 90), heading, font=_font(BOLD, round(size * 1.6)), fill="black")
    header = ["Item", "Region", "Quantity", "Amount"]
    body = [[rng.choice(ITEMS), rng.choice(("North", "South", "East", "West")),
             str(rng.randint(1, 500)), f"{rng.randint(100, 99999) / 100:.2f}"]
            for _ in range(rng.randint(4, 9))]
    widths = [430, 220, 200, 200]
    x_starts = [90 + sum(widths[:i]) for i in range(len(widths))]
    ruled = rng.random() < 0.5
    pitch = round(size * 2.0)
    y = 200
    for row in [header, *body]:
        for x, cell in zip(x_starts, row):
            draw.text((x + 10, y + (pitch - size) // 2), cell, font=font, fill="black")
        if ruled:
            draw.line((90, y, x_starts[-1] + widths[-1], y), fill="black", width=2)
        y += pitch
    if ruled:
        draw.line((90, y, x_starts[-1] + widths[-1], y), fill="black", width=2)
        for x in [*x_starts, x_starts[-1] + widths[-1]]:
            draw.line((x, 200, x, y), fill="black", width=2)
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table += ["| " + " | ".join(row) + " |" for row in body]
    return _scan(page, rng, mild=True), {".md": f"# {heading}\n\n" + "\n".join(table) + "\n"}


def _degraded_page(rng: random.Random) -> tuple[Image.Image, str, str]:
    page = Image.new("RGB", PAGE, "white")
    draw = ImageDraw.Draw(page)
    size = rng.choice((18, 20, 24))
    font = _font(rng.choice(FONTS), size)
    lines = _wrap(rng, font, PAGE[0] - 200, rng.randint(120, 260))
    pitch = round(size * 1.5)
    for number, line in enumerate(lines[: (PAGE[1] - 200) // pitch]):
        draw.text((100, 100 + number * pitch), line, font=font, fill="black")
    shown = lines[: (PAGE[1] - 200) // pitch]
    return _scan(page, rng, mild=False), {".txt": "\n".join(shown) + "\n"}


def _scan(page: Image.Image, rng: random.Random, *, mild: bool) -> Image.Image:
    """What a scanner and a tired photocopier do to a page. A mild scan is a good
    office scanner's; otherwise the damage has a severity drawn evenly from 0 (a fair
    copy) to 1 (barely legible: half the resolution, heavy blur and noise, grey paper,
    hard JPEG), so a set spans pages a reader gets right and pages it does not, and
    confidence has something to separate."""
    severity = 0.0 if mild else rng.random()
    angle = rng.uniform(-0.6, 0.6) if mild else rng.uniform(-3.0, 3.0)
    page = page.convert("L").rotate(angle, resample=Image.BICUBIC, expand=False, fillcolor=255)
    if not mild:  # scanned at a lower resolution
        scale = 1.0 - 0.5 * severity
        page = page.resize((round(page.width * scale), round(page.height * scale)),
                           Image.LANCZOS)
    if not mild or rng.random() < 0.3:
        radius = rng.uniform(0.4, 1.2) if mild else 0.3 + 1.5 * severity * rng.uniform(0.6, 1.0)
        page = page.filter(ImageFilter.GaussianBlur(radius))
    pixels = np.asarray(page, dtype=np.float32)
    if not mild:  # faint toner on grey paper
        low, high = 20 + 90 * severity, 250 - 50 * severity * rng.random()
        pixels = low + pixels * (high - low) / 255
    noise = rng.uniform(3, 8) if mild else 4 + 24 * severity
    pixels = pixels + np.random.default_rng(rng.randrange(2**32)).normal(0, noise, pixels.shape)
    page = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    page.save(buffer, format="JPEG", quality=85 if mild else round(70 - 50 * severity))
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
