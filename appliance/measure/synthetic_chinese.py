"""The Chinese evaluation set (`appliance make-eval-set`: ``columns-zh``): pages of
simplified Chinese set as Chinese books, magazines and reports set them, with their
truth in reading order.

Chinese running text has no spaces between words, so every rule of reading order
that counts words by spaces takes its lines for labels. The kinds of page:

- one, two or three columns of running text under a title, sometimes a footer;
- a book spread: two pages scanned side by side, each with its running header, its
  text and its page number (the truth reads the left page, then the right);
- mixed Chinese and English (names of systems and products in Latin script);
- vertical text: a headline set in a column right of two columns of running text (a
  newspaper's), or a classical page of columns read right to left.

Rendered with Noto CJK (Debian's fonts-noto-cjk, installed by the set-up) and
scanned mildly, as the Latin ``columns`` set is.
"""

from __future__ import annotations

import random
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from appliance.errors import DatasetError

FONT_DIR = Path("/usr/share/fonts/opentype/noto")
FONTS = ("NotoSerifCJK-Regular.ttc", "NotoSansCJK-Regular.ttc")
BOLD = "NotoSansCJK-Bold.ttc"
SIMPLIFIED = 2  # the face of the collection for simplified Chinese (SC)
# Prose written for this set: a company's year, its archive and its plans.
PROSE = (
    "本年度公司在各个地区的收入均有增长，成本控制在去年制定的计划范围之内。"
    "客户订购的纸张和墨粉比以往更多，北方的新办公室也按时开业。"
    "董事会感谢全体员工在这一艰难时期付出的努力。能源和运输价格大幅上涨，"
    "与供应商的合同以更好的条件续签，产品中再生材料的比例创下新高。"
    "档案部门完成了历史文件的数字化工作，共扫描三万多页合同和发票，"
    "检索一份文件的时间从几天缩短到几分钟。明年我们计划扩大仓库的面积，"
    "并在南方设立第二个服务中心，为更多的客户提供及时的支持。"
    "财务部门按月核对每一张增值税发票，发现的问题都在当月得到解决。"
    "新的审批流程减少了纸质单据的流转，员工可以在系统中查看每一笔报销的进度。"
)
# Latin names a Chinese text about office systems holds, for the mixed pages.
LATIN_TERMS = ("OCR", "PDF", "ERP", "API", "Excel", "SAP", "2026", "ISO 9001")
TITLES = ("年度报告", "档案数字化进展", "北方分公司简报", "供应商合作回顾", "财务工作总结")
BOOK_TITLES = ("企业档案管理实务", "现代办公文书写作")


def _font(name: str, size: int) -> ImageFont.FreeTypeFont:
    path = FONT_DIR / name
    if not path.exists():
        raise DatasetError(f"the Chinese set needs the Noto CJK fonts ({path} is missing); "
                           f"install them with `apt-get install fonts-noto-cjk`")
    return ImageFont.truetype(str(path), size, index=SIMPLIFIED)


def _prose(rng: random.Random, characters: int, mixed: bool) -> str:
    """About ``characters`` characters of prose from the start of one of its sentences."""
    start = PROSE.index("。", rng.randrange(len(PROSE) - 1)) + 1
    text = "".join(PROSE[(start + i) % len(PROSE)] for i in range(characters))
    if mixed:  # a Latin name after some of the commas
        parts = text.split("，")
        text = "，".join(part + (f"{rng.choice(LATIN_TERMS)}系统" if rng.random() < 0.4 else "")
                        for part in parts)
    return text.strip("，。") + "。"


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    """Chinese is broken between any two characters (a Latin word is kept whole), and
    no line begins with a closing mark."""
    lines, current = [], ""
    for token in _tokens(text):
        if font.getlength(current + token) <= width or (token in "，。、；：" and current):
            current += token
        else:
            lines.append(current)
            current = token
    return lines + ([current] if current else [])


def _tokens(text: str) -> list[str]:
    tokens, latin = [], ""
    for ch in text:
        if ch.isascii() and ch != " ":
            latin += ch
            continue
        if latin:
            tokens.append(latin)
            latin = ""
        tokens.append(ch)
    return tokens + ([latin] if latin else [])


def _column(draw: ImageDraw.ImageDraw, rng: random.Random, font, x: int, top: int,
            bottom: int, width: int, pitch: int, mixed: bool) -> list[str]:
    """Paragraphs of running text down one column, each indented two characters."""
    truth, y = [], top
    while y < bottom - pitch * 3:
        paragraph = _wrap("\u3000\u3000" + _prose(rng, rng.randint(80, 220), mixed),
                          font, width)
        for line in paragraph:
            if y >= bottom:
                break
            draw.text((x, y), line, font=font, fill="black")
            truth.append(line.strip("\u3000"))
            y += pitch
        y += pitch // 2
    return truth


def columns_page(rng: random.Random, page_size: tuple[int, int],
                 columns: int | None = None) -> tuple[Image.Image, list[str]]:
    """A title over one, two or three columns of Chinese running text (mixed with
    Latin names on some pages), sometimes a footer; ``columns`` drawn when None."""
    page = Image.new("RGB", page_size, "white")
    draw = ImageDraw.Draw(page)
    size = rng.choice((22, 24, 26))
    font = _font(rng.choice(FONTS), size)
    columns = columns or rng.choice((1, 2, 2, 3))
    mixed = rng.random() < 0.3
    margin, gutter = 90, rng.choice((40, 52, 64))
    title = rng.choice(TITLES) + f"（{rng.randint(2019, 2026)}年）"
    draw.text((margin, margin), title, font=_font(BOLD, size * 2), fill="black")
    truth = [title]
    width = (page_size[0] - 2 * margin - (columns - 1) * gutter) // columns
    pitch = round(size * 1.6)
    top, bottom = margin + size * 4, page_size[1] - margin - pitch * 3
    for column in range(columns):
        x = margin + column * (width + gutter)
        truth += _column(draw, rng, font, x, top, bottom, width, pitch, mixed)
    if rng.random() < 0.5:
        footer = f"第 {rng.randint(2, 40)} 页 · 内部资料，注意保存"
        draw.text((margin, page_size[1] - margin - size), footer,
                  font=_font(FONTS[1], size - 6), fill="black")
        truth.append(footer)
    return page, truth


def book_spread(rng: random.Random, page_size: tuple[int, int]) -> tuple[Image.Image, list[str]]:
    """Two pages of a book side by side on one scan (landscape), each with its running
    header, its text and its page number, and the shadow of the spine between."""
    width, height = page_size[1], page_size[0] * 1070 // 1000
    spread = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(spread)
    size = rng.choice((20, 22))
    font = _font(rng.choice(FONTS), size)
    small = _font(FONTS[1], size - 4)
    book, number = rng.choice(BOOK_TITLES), rng.randint(12, 300)
    half, margin = width // 2, 70
    pitch = round(size * 1.7)
    for x0 in range(half - 14, half + 14):  # the spine's shadow
        shade = 200 + abs(x0 - half) * 3
        draw.line([(x0, 0), (x0, height)], fill=(shade, shade, shade))
    truth: list[str] = []
    for side in range(2):
        left = side * half + margin
        column_width = half - 2 * margin
        header = book if side == 0 else f"第{rng.choice('一二三四五六')}章  档案的整理与保管"
        draw.text((left, margin // 2 + 10), header, font=small, fill="black")
        truth.append(header)
        truth += _column(draw, rng, font, left, margin + size * 2, height - margin - pitch * 2,
                         column_width, pitch, mixed=False)
        folio = str(number + side)
        draw.text((left + column_width // 2, height - margin), folio, font=small, fill="black")
        truth.append(folio)
    return spread, truth


def vertical_page(rng: random.Random, page_size: tuple[int, int]) -> tuple[Image.Image, list[str]]:
    """Vertical text, each character under the one before: a headline in a column
    right of two columns of running text, or a classical page whose columns read right
    to left (the truth: the headline, then the columns; or the columns, right first)."""
    page = Image.new("RGB", page_size, "white")
    draw = ImageDraw.Draw(page)
    size = rng.choice((22, 24, 26))
    font = _font(rng.choice(FONTS), size)
    margin, pitch = 90, round(size * 1.6)
    if rng.random() < 0.5:
        headline = rng.choice(TITLES)
        big = _font(BOLD, size * 2)
        x, y = page_size[0] - margin - size * 2, margin
        for character in headline:
            draw.text((x, y), character, font=big, fill="black")
            y += round(size * 2.3)
        truth = [headline]
        gutter = rng.choice((40, 52, 64))
        width = (x - size * 2 - margin - gutter) // 2
        for column in range(2):
            truth += _column(draw, rng, font, margin + column * (width + gutter), margin,
                             page_size[1] - margin, width, pitch, mixed=False)
        return page, truth
    step, spacing = round(size * 1.15), round(size * rng.choice((1.8, 2.2)))
    per_column = (page_size[1] - 2 * margin) // step
    text = _prose(rng, per_column * 40, mixed=False).replace("，", "").replace("。", "")
    truth, x = [], page_size[0] - margin - size
    while x >= margin and text:
        column, text = text[:per_column], text[per_column:]
        for row, character in enumerate(column):
            draw.text((x, margin + row * step), character, font=font, fill="black")
        truth.append(column)
        x -= spacing
    return page, truth
