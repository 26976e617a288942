"""The ``fapiao-fields`` set: Chinese VAT invoices (fapiao) with the QR code that every
one carries, made by a real QR encoder (segno), for `appliance make-eval-set`.

Each page prints its code (on the older types; a digital invoice, 数电票, has none),
number, date, the buyer and the seller with their credit codes, one to three item
rows, the totals before tax and of tax, and the total in capitals and in figures; its
QR code holds what ``fields.qr`` reads. Truth files beside each page: the text in
reading order, the printed fields (``.fields.json``) and the codes
(``.barcodes.json``: each code's format and value, the fields the print says
otherwise than the code, ``disagrees``, and how the page was scanned, ``scan``).

One page in four prints an amount or a number the code does not hold (an altered or
misprinted invoice): the QR check must catch it. Half the pages are scanned, by a good
office scanner or a tired photocopier (``synthetic_sets._scan``), so that the set
measures how often the code is still read.
"""

from __future__ import annotations

import io
import json
import random
from datetime import date, timedelta

import segno
from PIL import Image, ImageDraw

from appliance.fields.checksums import USCC_CHARSET
from appliance.measure.synthetic_chinese import _font
from appliance.measure.synthetic_sets import _scan

SIZE = (1500, 900)  # a fapiao's 240 x 140 mm at about 160 dpi
COLUMNS = (60, 620, 760, 960, 1160, 1290)  # the item table's
SANS, BOLD = "NotoSansCJK-Regular.ttc", "NotoSansCJK-Bold.ttc"
CITIES = ("北京", "上海", "深圳", "杭州", "广州", "成都", "南京", "武汉")
NAMES = ("华信", "东方", "金达", "恒通", "远航", "新纪元", "博雅", "长城", "瑞丰", "嘉禾")
TRADES = ("科技", "贸易", "商贸", "电子", "物流", "文化传媒", "信息技术", "办公用品")
GOODS = ("*纸制品*复印纸", "*办公用品*文件夹", "*计算机配套产品*硒鼓", "*信息技术服务*软件服务费",
         "*物流辅助服务*仓储服务", "*印刷品*档案盒")
# invoice types: the code's length (None: a digital invoice, which has no code) and title
KINDS = {"04": (10, "增值税普通发票"), "10": (12, "增值税电子普通发票"),
         "32": (None, "电子发票（普通发票）")}
_CAPITAL_DIGITS = "零壹贰叁肆伍陆柒捌玖"
_CAPITAL_UNITS = ("", "拾", "佰", "仟")


def fapiao_page(rng: random.Random) -> tuple[Image.Image, dict[str, str]]:
    """A fapiao and its truth files (by file-name ending)."""
    kind = rng.choice(tuple(KINDS))
    code_length, title = KINDS[kind]
    code = "".join(rng.choice("0123456789") for _ in range(code_length)) if code_length else ""
    number = "".join(rng.choice("0123456789") for _ in range(20 if not code else 8))
    day = date(2019, 1, 1) + timedelta(days=rng.randrange(7 * 365))
    rate = rng.choice((3, 6, 9, 13))
    items = [(rng.choice(GOODS), rng.randint(1, 40), rng.randint(500, 250000))
             for _ in range(rng.randint(1, 3))]
    amount = sum(quantity * price for _, quantity, price in items)  # cents
    tax = round(amount * rate / 100)
    check_code = "".join(rng.choice("0123456789") for _ in range(20)) if code else ""
    payload = (f"01,{kind},{code},{number},{_yuan(amount if code else amount + tax)},"
               f"{day:%Y%m%d},{check_code},{rng.randrange(16 ** 4):04X}")
    disagrees = []
    if rng.random() < 0.25:  # the print says otherwise than the code
        if rng.random() < 0.5:
            number = number[:-1] + str((int(number[-1]) + rng.randint(1, 9)) % 10)
            disagrees.append("number")
        else:
            amount += rng.choice((-1, 1)) * rng.randint(1, 9) * 100
            tax = round(amount * rate / 100)
            disagrees.append("amount" if code else "total")
    buyer, seller = (_company(rng) for _ in range(2))
    buyer_id, seller_id = _credit_code(rng), _credit_code(rng)
    page = Image.new("L", SIZE, 255)
    draw = ImageDraw.Draw(page)
    body, small, heading = _font(SANS, 26), _font(SANS, 22), _font(BOLD, 40)
    lines: list[str] = []

    def write(x: float, y: float, text: str, font=body, anchor: str = "la") -> None:
        draw.text((x, y), text, font=font, fill=0, anchor=anchor)
        lines.append(text)

    def row(y: float, cells: tuple[str, ...], font=small) -> None:
        """Cells in the item table's columns: one line of the truth."""
        for x, text in zip(COLUMNS, cells):
            draw.text((x, y), text, font=font, fill=0)
        lines.append(" ".join(cells))

    buffer = io.BytesIO()
    segno.make(payload, error="m").save(buffer, kind="png", scale=4, border=2)
    page.paste(Image.open(buffer).convert("L"), (50, 40))
    write(SIZE[0] / 2, 60, title, heading, "ma")
    heads = ([f"发票代码：{code}"] if code else []) + [
        f"发票号码：{number}", f"开票日期：{day.year}年{day.month:02}月{day.day:02}日"]
    heads += [f"校验码：{check_code}"] if check_code else []
    for line, text in enumerate(heads):
        write(1030, 50 + 38 * line, text, small)
    write(60, 250, f"购买方名称：{buyer}")
    write(60, 290, f"纳税人识别号：{buyer_id}")
    row(350, ("项目名称", "数量", "单价", "金额", "税率", "税额"))
    for index, (name, quantity, price) in enumerate(items):
        row(390 + 36 * index, (name, str(quantity), _yuan(price), _yuan(quantity * price),
                                f"{rate}%", _yuan(round(quantity * price * rate / 100))))
    write(60, 520, f"合计金额 ¥{_yuan(amount)}")
    write(760, 520, f"合计税额 ¥{_yuan(tax)}")
    write(60, 570, f"价税合计（大写） {_capitals(amount + tax)}")
    write(960, 570, f"（小写） ¥{_yuan(amount + tax)}")
    write(60, 640, f"销售方名称：{seller}")
    write(60, 680, f"纳税人识别号：{seller_id}")
    write(60, 780, f"开票人：{rng.choice(('王芳', '李强', '张伟', '刘洋'))}", small)
    scan = rng.choice(("clean", "clean", "office", "photocopy"))
    if scan != "clean":
        page = _scan(page, rng, mild=scan == "office")
    fields = {"number": number, "issue_date": day.isoformat(), "buyer_name": buyer,
              "buyer_tax_id": buyer_id, "seller_name": seller, "seller_tax_id": seller_id,
              "amount": _yuan(amount), "tax": _yuan(tax), "total": _yuan(amount + tax),
              **({"code": code} if code else {})}
    codes = {"codes": [{"format": "QRCode", "value": payload}], "disagrees": disagrees,
             "scan": scan}
    return page.convert("L"), {".txt": "\n".join(lines) + "\n",
                               ".fields.json": json.dumps(fields, ensure_ascii=False, indent=1),
                               ".barcodes.json": json.dumps(codes, ensure_ascii=False, indent=1)}


def _company(rng: random.Random) -> str:
    return f"{rng.choice(CITIES)}{rng.choice(NAMES)}{rng.choice(TRADES)}有限公司"


def _credit_code(rng: random.Random) -> str:
    """A unified social credit code whose check character is right (GB 32100-2015)."""
    body = "91" + "".join(rng.choice("0123456789") for _ in range(6)) + "".join(
        rng.choice(USCC_CHARSET) for _ in range(9))
    total = sum(USCC_CHARSET.index(ch) * pow(3, i, 31) for i, ch in enumerate(body))
    return body + USCC_CHARSET[-total % 31]


def _yuan(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02}"


def _capitals(cents: int) -> str:
    """An amount in capital numerals: 1446400 -> 壹万肆仟肆佰陆拾肆元整."""
    yuan, jiao, fen = cents // 100, cents // 10 % 10, cents % 10
    words, zero = "", False
    for section, unit in ((yuan // 10**8, "亿"), (yuan // 10**4 % 10**4, "万"), (yuan % 10**4, "")):
        if not section:
            zero = zero or bool(words)
            continue
        if words and (zero or section < 1000):
            words += "零"
        words += _section(section) + unit
        zero = False
    words = (words + "元") if words else ""
    if not jiao and not fen:
        return words + "整"
    if jiao:
        words += _CAPITAL_DIGITS[jiao] + "角"
    elif words:
        words += "零"
    return words + (_CAPITAL_DIGITS[fen] + "分" if fen else "")


def _section(number: int) -> str:
    """A number under 10000 in capital numerals, a zero for each gap."""
    text, gap = "", False
    for power in (3, 2, 1, 0):
        digit = number // 10**power % 10
        if digit:
            text += ("零" if gap and text else "") + _CAPITAL_DIGITS[digit] + _CAPITAL_UNITS[power]
            gap = False
        else:
            gap = True
    return text
