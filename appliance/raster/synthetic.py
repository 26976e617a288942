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


def sample_lines(seed: int, count: int = 20, words_per_line: int = 6) -> list[str]:
    """Deterministic business-like text lines, different for each seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(words_per_line)).capitalize()
            + f" {rng.randint(1, 9999)}" for _ in range(count)]
