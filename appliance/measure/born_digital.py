"""Born-digital PDFs with their truth (`appliance make-eval-set`'s ``born-digital``
set), and the PDFs that trip each of the text layer's checks (``engines.pdf_text``).

Made with fpdf2 (text in one and two columns, tables with and without rules, a CJK
page, a stamp scanned over text) and pikepdf (a font whose ToUnicode map is removed;
a Type 3 font without one; text off the page; text stacked twice). A scan is a page
image drawn by Pillow and embedded whole: a PDF of scans, a scan under an invisible
OCR layer whose words are wrong, a document with a scan between born-digital pages.

Each maker answers the PDF's bytes and its truth by file-name ending (``.txt``, or
``.md`` where it holds a table); the truth of a document of several pages is its
pages' in order.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from appliance.measure.synthetic_sets import BOLD, FONTS, ITEMS, WORDS

SANS = FONTS[0]
CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"  # Debian's fonts-noto-cjk
A4 = (595.28, 841.89)  # points
MARGIN = 56.0
BODY = 10.0  # points
SCAN_DPI = 150
CJK_TEXT = ("本年度報告によると、すべての地域で売上が伸びました。費用は計画どおりでした。"
            "新しい事務所は予定どおり開設されました。取締役会は全社員の努力に感謝します。")
STAMP = "RECEIVED 12 MAR 2024"
CREATED = datetime(2024, 3, 12, tzinfo=timezone.utc)


def _pdf():
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="A4")
    pdf.set_creation_date(CREATED)  # the same seed makes the same bytes
    pdf.set_auto_page_break(False)
    pdf.add_font("sans", "", SANS)
    pdf.add_font("sans", "B", BOLD)
    return pdf


def _wrap(pdf, rng: random.Random, width: float, words: int) -> list[str]:
    lines, line = [], ""
    for _ in range(words):
        word = rng.choice(WORDS)
        trial = f"{line} {word}".strip()
        if line and pdf.get_string_width(trial) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    return [*lines, line] if line else lines


def _text_lines(pdf, lines: list[str], x: float, y: float, pitch: float) -> float:
    for line in lines:
        pdf.set_xy(x, y)
        pdf.cell(text=line)
        y += pitch
    return y


def _title(pdf, rng: random.Random) -> tuple[str, float]:
    title = rng.choice(("Annual report", "Quarterly statement", "Notes to the accounts",
                        "Letter to our customers"))
    pdf.set_font("sans", "B", 18)
    pdf.set_xy(MARGIN, MARGIN)
    pdf.cell(text=title)
    pdf.set_font("sans", "", BODY)
    return title, MARGIN + 40


def _column_page(pdf, rng: random.Random) -> str:
    """A page of a title over paragraphs added to ``pdf``; answers its truth."""
    pdf.add_page()
    title, y = _title(pdf, rng)
    truth = [title]
    for _ in range(rng.randint(2, 4)):
        lines = _wrap(pdf, rng, A4[0] - 2 * MARGIN, rng.randint(40, 90))
        y = _text_lines(pdf, lines, MARGIN, y, BODY * 1.4) + BODY
        truth += lines
    return "\n".join(truth) + "\n"


def one_column(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    pdf = _pdf()
    truth = _column_page(pdf, rng)
    return bytes(pdf.output()), {".txt": truth}


def two_columns(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    pdf = _pdf()
    pdf.add_page()
    title, top = _title(pdf, rng)
    truth = [title]
    width = (A4[0] - 2 * MARGIN - 24) / 2
    for column in range(2):
        lines = _wrap(pdf, rng, width, rng.randint(150, 220))
        _text_lines(pdf, lines, MARGIN + column * (width + 24), top, BODY * 1.4)
        truth += lines
    return bytes(pdf.output()), {".txt": "\n".join(truth) + "\n"}


def table(rng: random.Random, ruled: bool) -> tuple[bytes, dict[str, str]]:
    pdf = _pdf()
    pdf.add_page()
    heading = rng.choice(("Orders by region", "Stock on hand", "Invoices due"))
    pdf.set_font("sans", "B", 16)
    pdf.set_xy(MARGIN, MARGIN)
    pdf.cell(text=heading)
    pdf.set_font("sans", "", BODY)
    header = ["Item", "Region", "Quantity", "Amount"]
    body = [[rng.choice(ITEMS), rng.choice(("North", "South", "East", "West")),
             str(rng.randint(1, 500)), f"{rng.randint(100, 99999) / 100:.2f}"]
            for _ in range(rng.randint(4, 9))]
    widths = [200, 100, 90, 90]
    pitch = BODY * 2
    y = MARGIN + 40
    for row in [header, *body]:
        pdf.set_xy(MARGIN, y)
        for width, cell in zip(widths, row):
            pdf.cell(w=width, h=pitch, text=f" {cell}", border=1 if ruled else 0)
        y += pitch
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows += ["| " + " | ".join(row) + " |" for row in body]
    return bytes(pdf.output()), {".md": f"# {heading}\n\n" + "\n".join(rows) + "\n"}


def cjk(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    pdf = _pdf()
    pdf.add_font("cjk", "", CJK)
    pdf.add_page()
    pdf.set_font("cjk", "", 12)
    text = "".join(rng.sample(CJK_TEXT, len(CJK_TEXT)))
    per_line = 36
    lines = [text[i:i + per_line] for i in range(0, len(text), per_line)]
    _text_lines(pdf, lines, MARGIN, MARGIN, 20)
    return bytes(pdf.output()), {".txt": "\n".join(lines) + "\n"}


def without_tounicode(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    """One column whose embedded fonts lost their ToUnicode maps: pdfium cannot say
    which character each glyph is (``unicode``)."""
    data, truth = one_column(rng)
    return _edit(data, _drop_tounicode), truth


def _drop_tounicode(pdf) -> None:
    for page in pdf.pages:
        for font in page.Resources.Font.values():
            if "/ToUnicode" in font:
                del font["/ToUnicode"]


def type3(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    """A line of a Type 3 font without ToUnicode (glyphs named g1, g2, ...), printed
    as boxes; the truth is what a reader sees: nothing legible (``unicode``)."""
    import pikepdf
    from pikepdf import Array, Dictionary, Name

    pdf = pikepdf.new()
    pdf.add_blank_page(page_size=A4)
    page = pdf.pages[0]
    procs = Dictionary({f"/g{i}": pdf.make_stream(b"600 0 0 0 500 700 d1 0 0 500 700 re f")
                        for i in range(1, 6)})
    font = Dictionary(Type=Name.Font, Subtype=Name.Type3, FontBBox=Array([0, 0, 500, 700]),
                      FontMatrix=Array([0.001, 0, 0, 0.001, 0, 0]), CharProcs=procs,
                      Encoding=Dictionary(Type=Name.Encoding, Differences=Array(
                          [1, *(Name(f"/g{i}") for i in range(1, 6))])),
                      FirstChar=1, LastChar=5, Widths=Array([600] * 5), Resources=Dictionary())
    page.Resources = Dictionary(Font=Dictionary(F1=pdf.make_indirect(font)))
    shown = bytes(rng.randint(1, 5) for _ in range(30))
    page.Contents = pdf.make_stream(b"BT /F1 12 Tf 56 700 Td (" + shown + b") Tj ET")
    out = io.BytesIO()
    pdf.save(out, deterministic_id=True)
    return out.getvalue(), {".txt": "\n"}


def off_page(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    """One column, and as much text again drawn beyond the page's edge (``outside``)."""
    pdf = _pdf()
    truth = _column_page(pdf, rng)
    hidden = _wrap(pdf, rng, A4[0] - 2 * MARGIN, 400)
    _text_lines(pdf, hidden, A4[0] + 100, MARGIN, BODY * 1.4)
    return bytes(pdf.output()), {".txt": truth}


def stacked(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    """One column whose content is drawn twice, on itself (``duplicates``)."""
    data, truth = one_column(rng)

    def twice(pdf) -> None:
        page = pdf.pages[0]
        content = page.Contents.read_bytes()
        page.Contents = pdf.make_stream(content + b"\n" + content)
    return _edit(data, twice), truth


def _edit(data: bytes, change: Callable) -> bytes:
    import pikepdf

    with pikepdf.open(io.BytesIO(data)) as pdf:
        change(pdf)
        out = io.BytesIO()
        pdf.save(out, deterministic_id=True)
        return out.getvalue()


def scan_image(rng: random.Random) -> tuple[Image.Image, list[tuple[str, tuple]]]:
    """A page of one column drawn at SCAN_DPI, a little grey and soft as a scan is,
    with each line's text and box (pixels)."""
    scale = SCAN_DPI / 72
    page = Image.new("L", (round(A4[0] * scale), round(A4[1] * scale)), 250)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(SANS, round(11 * scale))
    measure = _pdf()
    measure.add_page()
    measure.set_font("sans", "", 11)
    lines = _wrap(measure, rng, A4[0] - 2 * MARGIN - 20, rng.randint(150, 250))
    placed, y = [], MARGIN * scale
    for line in lines:
        x = MARGIN * scale + rng.uniform(-2, 2)
        draw.text((x, y), line, font=font, fill=rng.randint(20, 50))
        placed.append((line, draw.textbbox((x, y), line, font=font)))
        y += 16 * scale
    return page.convert("RGB"), placed


def _scan_page(pdf, image: Image.Image) -> None:
    pdf.add_page()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    pdf.image(buffer, x=0, y=0, w=A4[0], h=A4[1])


def ocr_layer(rng: random.Random, wrong: bool = False) -> tuple[bytes, dict[str, str]]:
    """A scan under an invisible text layer (render mode 3) at the lines' places, as a
    scanner's OCR writes one: its lines' words, or (``wrong``) other words, as a poor
    OCR reads them (``invisible_ocr``)."""
    from fpdf.enums import TextMode

    image, placed = scan_image(rng)
    pdf = _pdf()
    _scan_page(pdf, image)
    pdf.text_mode = TextMode.INVISIBLE
    pdf.set_font("sans", "", 11)
    scale = SCAN_DPI / 72
    for line, (x0, y0, _x1, _y1) in placed:
        pdf.set_xy(x0 / scale, y0 / scale)
        pdf.cell(text=" ".join(_garble(rng, word) for word in line.split()) if wrong else line)
    return bytes(pdf.output()), {".txt": "\n".join(line for line, _box in placed) + "\n"}


def _garble(rng: random.Random, word: str) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) if rng.random() < 0.6 else ch for ch in word)


def mixed(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    """A born-digital letter, a scanned attachment, a born-digital closing page."""
    pdf = _pdf()
    first = _column_page(pdf, rng)
    image, placed = scan_image(rng)
    _scan_page(pdf, image)
    last = _column_page(pdf, rng)
    scanned = "\n".join(line for line, _box in placed) + "\n"
    return bytes(pdf.output()), {".txt": first + scanned + last}


def stamp_image() -> Image.Image:
    """A red rubber stamp, scanned: its words on white, in a frame."""
    font = ImageFont.truetype(BOLD, 44)
    left, top, right, bottom = font.getbbox(STAMP)
    image = Image.new("RGB", (right - left + 60, bottom - top + 50), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((4, 4, image.width - 5, image.height - 5), outline=(200, 30, 40), width=5)
    draw.text((30 - left, 25 - top), STAMP, font=font, fill=(200, 30, 40))
    return image


def stamped(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    """One column with a scanned stamp over the end of its title and the top of its
    first paragraph; the stamp's line reads between them."""
    pdf = _pdf()
    lines = _column_page(pdf, rng).splitlines()
    buffer = io.BytesIO()
    stamp_image().save(buffer, format="PNG")
    pdf.image(buffer, x=MARGIN + 120, y=MARGIN + 14, w=190)
    return bytes(pdf.output()), {".txt": "\n".join([lines[0], STAMP, *lines[1:]]) + "\n"}


MAKERS: dict[str, Callable[[random.Random], tuple[bytes, dict[str, str]]]] = {
    "one-column": one_column, "two-columns": two_columns,
    "table-ruled": lambda rng: table(rng, ruled=True),
    "table-unruled": lambda rng: table(rng, ruled=False),
    "cjk": cjk, "no-tounicode": without_tounicode, "ocr-layer": ocr_layer,
    "wrong-ocr-layer": lambda rng: ocr_layer(rng, wrong=True),
    "mixed": mixed, "stamp": stamped,
}


def make_born_digital(root: Path, pages: int, seed: int) -> int:
    """The ``born-digital`` dataset under ``root``: ``pages`` documents of each kind
    (at least one), PDFs beside their truth. Answers the number of documents."""
    folder = root / "born-digital"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps({"name": "synthetic-born-digital",
                                                     "doc_type": "report"}))
    count = max(1, pages // len(MAKERS))
    for name, make in MAKERS.items():
        for number in range(count):
            data, truths = make(random.Random(f"{seed}-born-digital-{name}-{number}"))
            stem = f"{name}-{number:03d}"
            (folder / f"{stem}.pdf").write_bytes(data)
            for suffix, text in truths.items():
                (folder / f"{stem}{suffix}").write_text(text, encoding="utf-8")
    return count * len(MAKERS)
