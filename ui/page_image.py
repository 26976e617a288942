"""A page image with boxes drawn on it, for the review console and the document view.

The boxes are in the pixels of the image the engine read (``ReviewPage.image_path``,
``PageView.image_path``), so they are drawn on that image as it is. Each highlight (a
low-confidence line, or a key field's evidence) is filled and numbered as in its list,
or marked with its ``label``; every other line of the page can be outlined thinly
beneath them, so a reader sees what the engine found and what it doubted; and the
page's blocks can be framed and numbered in their reading order, so a reviewer sees
the order the text was read in. Shown in a
``gr.Image`` of class ``ZOOMABLE``, the image zooms by its ``--page-zoom`` (``zoom.css``).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

HIGHLIGHT_FILL = (255, 196, 0, 70)
HIGHLIGHT_LINE = (220, 40, 20, 255)
FIELD_FILL = (40, 120, 255, 50)  # a key field's evidence that passes its checks
FIELD_LINE = (20, 80, 200, 255)
LINE_OUTLINE = (0, 150, 90, 200)  # a line read with confidence: outlined only
BLOCK_LINE = (120, 40, 200, 255)  # a block of the reading order, numbered
# the class that lets a gr.Image zoom, and its CSS (for the mount's css)
ZOOMABLE = "zoomable"
ZOOM_CSS = (Path(__file__).parent / "zoom.css").read_text()


def box_of(box) -> tuple[float, float, float, float] | None:
    """[x0, y0, x1, y1], or a polygon of points, as a rectangle; None if neither."""
    try:
        if box and len(box) == 4 and all(isinstance(v, (int, float)) for v in box):
            x0, y0, x1, y1 = (float(v) for v in box)
        elif box and all(len(point) == 2 for point in box):
            xs, ys = [float(p[0]) for p in box], [float(p[1]) for p in box]
            x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
        else:
            return None
    except (TypeError, ValueError):
        return None
    return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def annotate_page(image_path: Path, highlights: list[dict], lines: list = (),
                  blocks: list[dict] = ()) -> Image.Image | Path:
    """The page image with each highlight's box drawn on it and numbered as in the list
    (or marked with its ``label``; one with ``ok`` true in the key fields' colour), over
    the thin outlines of ``lines`` (boxes) and the frames of ``blocks`` (their "box"),
    numbered from 1 in their order; the file itself when nothing has a box."""
    marks = [(h, str(h.get("label") or number), box_of(h.get("box")))
             for number, h in enumerate(highlights, 1)]
    marks = [(h, label, box) for h, label, box in marks if box]
    outlines = [box for box in map(box_of, lines) if box]
    frames = [(str(number), box) for number, block in enumerate(blocks, 1)
              if (box := box_of(block.get("box")))]
    if not marks and not outlines and not frames:
        return image_path
    with Image.open(image_path) as source:
        page = source.convert("RGB")
    overlay = Image.new("RGBA", page.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    width = max(2, round(max(page.size) / 600))
    for x0, y0, x1, y1 in outlines:
        draw.rectangle((x0 - width, y0 - width, x1 + width, y1 + width), outline=LINE_OUTLINE,
                       width=max(1, width // 2))
    try:
        font = ImageFont.load_default(size=max(12, round(max(page.size) / 90)))
    except TypeError:  # Pillow < 10.1: a fixed bitmap font
        font = ImageFont.load_default()
    for label, (x0, y0, x1, y1) in frames:
        pad = width * 4
        draw.rectangle((x0 - pad, y0 - pad, x1 + pad, y1 + pad), outline=BLOCK_LINE, width=width)
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        tx, ty = max(0, x0 - pad), max(0, y0 - pad - (bottom - top) - 2 * width)
        draw.rectangle((tx, ty, tx + right - left + 2 * width, ty + bottom - top + 2 * width),
                       fill=BLOCK_LINE)
        draw.text((tx + width, ty - top + width), label, fill=(255, 255, 255, 255), font=font)
    for mark, label, (x0, y0, x1, y1) in marks:
        fill, line = (FIELD_FILL, FIELD_LINE) if mark.get("ok") else (HIGHLIGHT_FILL,
                                                                       HIGHLIGHT_LINE)
        pad = width * 2
        draw.rectangle((x0 - pad, y0 - pad, x1 + pad, y1 + pad), fill=fill, outline=line,
                       width=width)
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        text_w, text_h = right - left, bottom - top
        tx, ty = max(0, x0 - pad - text_w - 3 * width), max(0, y0 - pad)
        draw.rectangle((tx - width, ty, tx + text_w + width, ty + text_h + 2 * width),
                       fill=line)
        draw.text((tx, ty - top + width), label, fill=(255, 255, 255, 255), font=font)
    return Image.alpha_composite(page.convert("RGBA"), overlay).convert("RGB")
