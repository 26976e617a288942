"""Pages rendered from text: the workers' warm-up page, benchmark pages, test pages."""

from __future__ import annotations

import random

from PIL import Image, ImageDraw, ImageFont

MARGIN_PX = 100

_WORDS = ("invoice total amount date customer order delivery payment account number "
          "report contract receipt tax net gross quantity price item description "
          "address street city office reference signed board revenue quarter annual "
          "balance due period service terms conditions").split()


def render_text_page(lines: list[str], width: int = 1240, height: int = 1754,
                     font_size: int = 36, margin: int = MARGIN_PX) -> Image.Image:
    """An upright RGB page with one text line per entry (A4 at 150 dpi by default)."""
    page = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=font_size)
    pitch = round(font_size * 1.8)
    for number, line in enumerate(lines):
        draw.text((margin, margin + number * pitch), line, fill="black", font=font)
    return page


def text_page_words(lines: list[str], font_size: int = 36,
                    margin: int = MARGIN_PX) -> list[tuple[str, tuple[int, int, int, int]]]:
    """Each word ``render_text_page`` draws with these arguments, with its ink box: the
    truth that positioned outputs (hOCR, ALTO, text layers) are checked against."""
    font = ImageFont.load_default(size=font_size)
    pitch = round(font_size * 1.8)
    words = []
    for number, line in enumerate(lines):
        top, start = margin + number * pitch, 0
        for word in line.split(" "):
            if word:
                left = margin + font.getlength(line[:start])
                x0, y0, x1, y1 = font.getbbox(word)
                words.append((word, (round(left + x0), top + y0, round(left + x1), top + y1)))
            start += len(word) + 1
    return words


def sample_lines(seed: int, count: int = 20, words_per_line: int = 6) -> list[str]:
    """Deterministic business-like text lines, different for each seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(words_per_line)).capitalize()
            + f" {rng.randint(1, 9999)}" for _ in range(count)]
