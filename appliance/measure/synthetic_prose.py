"""Journal pages of running prose in two or three columns, in five scripts
(``make-eval-set``'s ``prose``): the pages on which a table rule must find no table
but the one the page has.

What a journal page puts around its prose is what tempts such a rule: justified lines
(wide gaps between words, lines of one length side by side), gutters from a fifth of
a line's height to two lines wide, lists with hanging indents, section headings, a
running head of a few words spread across the page, and one page in three a line
printed up the margin ("Downloaded from ... on ..."), as journals stamp every page of
a download. One page in three holds a real table of figures, within a column or across
the page.

The truth is Markdown, so that it states the page's tables: the title, the columns
top to bottom (left before right, the table where it stands), then the running head
(page furniture, which the reading puts after the body) and the margin's line last.
Latin, Chinese, Japanese, Korean and Cyrillic prose; the classic reader reads the first
three, so Korean and Cyrillic pages measure tables and order, not characters.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image, ImageDraw

from appliance.measure import synthetic_chinese as zh
from appliance.measure import synthetic_sets as latin

SCRIPTS = ("latin", "latin", "zh", "zh", "ja", "ko", "ru")
JAPANESE = (
    "本研究では、紙の文書を電子化する際の読み取り順序について検討した。"
    "二段組の論文では、左の段を上から下まで読んだ後に右の段へ移る必要がある。"
    "表や図が段をまたぐ場合、その前後で段の区切りを改めて求めなければならない。"
    "実験には三百ページの資料を用い、文字の誤り率と順序の誤りを別々に測定した。"
    "その結果、段の間の余白が狭いページで誤りが多く見られた。"
)
KOREAN = ("본 연구는 종이 문서를 디지털화할 때 읽는 순서를 다룬다 두 단으로 된 논문에서는 왼쪽 "
          "단을 위에서 아래로 읽은 뒤 오른쪽 단으로 넘어가야 한다 표나 그림이 단을 가로지르면 "
          "그 앞뒤에서 단의 경계를 다시 찾아야 한다 실험에는 삼백 쪽의 자료를 사용하였고 글자 "
          "오류율과 순서 오류를 따로 측정하였다 그 결과 단 사이의 여백이 좁은 쪽에서 오류가 "
          "많았다").split()
RUSSIAN = ("в работе рассматривается порядок чтения при оцифровке бумажных документов в "
           "статье набранной в две колонки левую колонку читают сверху вниз а затем переходят "
           "к правой если таблица или рисунок пересекает колонки границу между ними нужно "
           "искать заново до и после них в опыте использовали триста страниц и отдельно "
           "измеряли ошибки в знаках и ошибки в порядке строк больше всего ошибок дали "
           "страницы с узким промежутком между колонками").split()
SPACED = {"latin": latin.WORDS, "ko": KOREAN, "ru": RUSSIAN}
HEADINGS = {"latin": ("Method", "Results", "Discussion", "Related work"),
            "zh": ("研究方法", "实验结果", "讨论", "相关工作"),
            "ja": ("方法", "結果", "考察", "関連研究"),
            "ko": ("방법", "결과", "논의", "관련 연구"),
            "ru": ("Метод", "Результаты", "Обсуждение", "Обзор")}
TITLES = {"latin": "Reading order in scanned journals", "zh": "扫描期刊的阅读顺序研究",
          "ja": "スキャンした論文の読み取り順序", "ko": "스캔한 논문의 읽기 순서",
          "ru": "Порядок чтения сканированных журналов"}
CJK_FACE = {"zh": zh.SIMPLIFIED, "ja": 0, "ko": 1}  # faces of the Noto CJK collection
DEJAVU_SERIF = latin.FONTS[1]


@dataclass
class Setting:
    script: str
    size: int
    font: object
    bold: object
    small: object
    pitch: int
    rng: random.Random

    def paragraph(self, width: int, words: int) -> list[str]:
        """A paragraph wrapped to ``width``."""
        if self.script in SPACED:
            vocabulary = SPACED[self.script]
            start = self.rng.randrange(len(vocabulary))
            text = [vocabulary[(start + i) % len(vocabulary)] for i in range(words)]
            text[0] = text[0].capitalize()
            return latin.wrap_words(text, self.font, width)
        source = zh._prose(self.rng, words * 3, False) if self.script == "zh" else \
            _japanese(self.rng, words * 3)
        # a closing mark may end a line past the measure (``zh._wrap``): the measure
        # leaves room for it, so that it never stands in the gutter, as a typesetter's
        return zh._wrap(source, self.font, width - self.size)


def prose_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    script = rng.choice(SCRIPTS)
    size = rng.choice((18, 20, 22))
    setting = Setting(script, size, _face(script, size, bold=False),
                      _face(script, round(size * 1.6), bold=True),
                      _face(script, size - 6, bold=False),
                      round(size * rng.uniform(1.3, 1.5)), rng)
    page = Image.new("RGB", latin.PAGE, "white")
    draw = ImageDraw.Draw(page)
    margin = 90
    truth: list[str] = []
    running_head = None
    top = margin
    if rng.random() < 0.6:  # a running head: a few words spread across the page
        head = ["Journal of", "Office Studies", f"Vol. {rng.randint(3, 40)}",
                f"No. {rng.randint(1, 12)}", str(rng.randint(2, 400))]
        for number, word in enumerate(head):
            x = margin + number * (latin.PAGE[0] - 2 * margin - 120) // (len(head) - 1)
            draw.text((x, top - 40), word, font=setting.small, fill="black")
        draw.line((margin, top - 12, latin.PAGE[0] - margin, top - 12), fill="black", width=1)
        running_head = " ".join(head)
    if rng.random() < 0.7:
        draw.text((margin, top + 10), TITLES[script], font=setting.bold, fill="black")
        truth.append(TITLES[script])
        top += size * 4
    columns = rng.choice((2, 2, 3))
    gutter = rng.choice((round(size * 0.8), size, 2 * size, 3 * size))
    width = (latin.PAGE[0] - 2 * margin - (columns - 1) * gutter) // columns
    bottom = latin.PAGE[1] - margin - setting.pitch
    table_column = rng.randrange(columns) if rng.random() < 0.33 else None
    for column in range(columns):
        x = margin + column * (width + gutter)
        truth += _column(draw, setting, x, top, bottom, width, with_table=column == table_column)
    if running_head:  # page furniture, read after the body (output.page_furniture)
        truth.append(running_head)
    if rng.random() < 0.33:
        truth.append(_margin_line(page, setting, rng))
    return latin._scan(page, rng, mild=True), {".md": "\n".join(truth) + "\n"}


def _column(draw: ImageDraw.ImageDraw, setting: Setting, x: int, top: int, bottom: int,
            width: int, with_table: bool) -> list[str]:
    """One column: paragraphs, a heading now and then, a list one time in seven, a
    table of figures where ``with_table``; its truth lines in order."""
    rng, pitch = setting.rng, setting.pitch
    truth: list[str] = []
    y = top
    table_at = rng.randint(1, 3) if with_table else None
    block = 0
    while y + pitch * 3 < bottom:
        block += 1
        if block == table_at:
            rows = _figures(setting)
            if y + pitch * (len(rows) + 1) < bottom:
                y = _table(draw, setting, x, y, width, rows)
                truth += ["", *_markdown_table(rows), ""]
            continue
        if rng.random() < 0.2:
            heading = f"{rng.randint(1, 6)} {rng.choice(HEADINGS[setting.script])}"
            draw.text((x, y), heading, font=setting.font, fill="black", stroke_width=1,
                      stroke_fill="black")
            truth.append(heading)
            y += pitch
        if rng.random() < 0.15:
            for number in range(rng.randint(3, 5)):
                item = setting.paragraph(width - 3 * setting.size, rng.randint(6, 16))
                for index, line in enumerate(item):
                    if y + pitch > bottom:
                        return truth
                    marker = f"{number + 1}." if index == 0 else ""
                    draw.text((x, y), marker, font=setting.font, fill="black")
                    draw.text((x + 2 * setting.size, y), line, font=setting.font, fill="black")
                    truth.append(f"{marker} {line}".strip())
                    y += pitch
        else:
            lines = setting.paragraph(width, rng.randint(25, 70))
            for index, line in enumerate(lines):
                if y + pitch > bottom:
                    return truth
                _justified(draw, setting, x, y, width, line, last=index == len(lines) - 1)
                truth.append(line)
                y += pitch
        y += pitch // 2
    return truth


def _justified(draw: ImageDraw.ImageDraw, setting: Setting, x: int, y: int, width: int,
               line: str, last: bool) -> None:
    """A line set full width, the white shared between its words (a paragraph's last
    line and lines without spaces as they are)."""
    words = line.split(" ")
    if last or len(words) < 2:
        draw.text((x, y), line, font=setting.font, fill="black")
        return
    spare = width - sum(setting.font.getlength(word) for word in words)
    gap = spare / (len(words) - 1)
    for word in words:
        draw.text((round(x), y), word, font=setting.font, fill="black")
        x += setting.font.getlength(word) + gap


def _figures(setting: Setting) -> list[list[str]]:
    rng = setting.rng
    label = {"latin": "Set", "zh": "数据集", "ja": "データ", "ko": "자료", "ru": "Набор"}[setting.script]
    rows = [[label, "CER", "Order", "Pages"]]
    for number in range(rng.randint(3, 6)):
        rows.append([f"{label} {number + 1}", f"{rng.uniform(0.1, 12):.2f}",
                     f"{rng.uniform(0.5, 1):.3f}", str(rng.randint(10, 900))])
    return rows


def _table(draw: ImageDraw.ImageDraw, setting: Setting, x: int, y: int, width: int,
           rows: list[list[str]]) -> int:
    """A ruled table of figures as wide as the column; answers the y under it."""
    starts = [x + round(width * share) for share in (0.0, 0.4, 0.62, 0.82)]
    draw.line((x, y, x + width, y), fill="black", width=2)
    y += setting.pitch // 3
    for number, row in enumerate(rows):
        for start, cell in zip(starts, row):
            draw.text((start, y), cell, font=setting.small, fill="black")
        y += round(setting.pitch * 0.9)
        if number == 0:
            draw.line((x, y - 4, x + width, y - 4), fill="black", width=1)
    draw.line((x, y, x + width, y), fill="black", width=2)
    return y + setting.pitch


def _markdown_table(rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    return [lines[0], "|" + "---|" * len(rows[0]), *lines[1:]]


def _margin_line(page: Image.Image, setting: Setting, rng: random.Random) -> str:
    """A line printed up the page's left or right margin; answers its text."""
    text = (f"Downloaded from archive.example.org on July {rng.randint(1, 28)}, "
            f"{rng.randint(2010, 2025)} - Published by the Office Studies Society")
    strip = Image.new("RGB", (round(setting.small.getlength(text)) + 10, setting.size), "white")
    ImageDraw.Draw(strip).text((5, 0), text, font=setting.small, fill="black")
    strip = strip.rotate(90, expand=True)
    x = 25 if rng.random() < 0.5 else latin.PAGE[0] - 25 - strip.width
    page.paste(strip, (x, (latin.PAGE[1] - strip.height) // 2))
    return text


def _japanese(rng: random.Random, characters: int) -> str:
    start = JAPANESE.index("。", rng.randrange(len(JAPANESE) - 1)) + 1
    return "".join(JAPANESE[(start + i) % len(JAPANESE)] for i in range(characters))


def _face(script: str, size: int, bold: bool):
    if script in CJK_FACE:
        from PIL import ImageFont
        name = zh.BOLD if bold else zh.FONTS[0]
        zh._font(name, size)  # the clear error when the fonts are missing
        return ImageFont.truetype(str(zh.FONT_DIR / name), size, index=CJK_FACE[script])
    return latin._font(latin.BOLD if bold else DEJAVU_SERIF, size)
