"""Amounts in the capital numerals (大写) of a Chinese invoice: 壹万肆仟肆佰陆拾肆元整 is
14464.00. Printed beside the numeric total so that no digit can be altered; the
checks compare the two."""

from __future__ import annotations

import re
from decimal import Decimal

_CAPITAL_DIGITS = {ch: n for n, ch in enumerate("零壹贰叁肆伍陆柒捌玖")}
_CAPITAL_UNITS = {"拾": 10, "佰": 100, "仟": 1000}
_CAPITAL_VARIANTS = str.maketrans("圆圓萬億貳參陸", "元元万亿贰叁陆")  # older and traditional forms
_CAPITAL_MARKS = r"(?:人民币|[⊗Ⓧⓧ×])"  # printed in front so that no numeral can be put there
CAPITAL = re.compile(rf"{_CAPITAL_MARKS}*[零壹贰叁肆伍陆柒捌玖拾佰仟万亿元角分整正圆圓萬億貳參陸]+")
_CAPITAL_FRACTION = re.compile("零?(?:([零壹贰叁肆伍陆柒捌玖])角)?零?(?:([零壹贰叁肆伍陆柒捌玖])分)?")


def chinese_capital_amount(text: str) -> Decimal | None:
    """An amount in the capital numerals (大写) of a Chinese invoice, with its 元, 角 or
    分: 壹万肆仟肆佰陆拾肆元整 -> 14464.00; None when ``text`` is not one."""
    numerals = re.sub(rf"^(?:{_CAPITAL_MARKS}|[:：\s])*", "", text.strip())
    numerals = numerals.translate(_CAPITAL_VARIANTS).rstrip("整正")
    yuan, has_yuan, fraction = numerals.partition("元")
    if not has_yuan:
        yuan, fraction = "", numerals
    cents = _CAPITAL_FRACTION.fullmatch(fraction)
    whole = _capital_whole(yuan) if yuan else None if has_yuan else 0
    if cents is None or whole is None or not (has_yuan or cents[1] or cents[2]):
        return None
    jiao, fen = (_CAPITAL_DIGITS[ch] if ch else 0 for ch in (cents[1], cents[2]))
    return Decimal(whole * 100 + jiao * 10 + fen).scaleb(-2)


def _capital_whole(numerals: str) -> int | None:
    """壹拾万零伍 -> 100005: digits times 拾/佰/仟 make a section; 万 and 亿 scale all
    that precedes them up to the next larger one."""
    above_wan = below_wan = total = 0
    digit = None
    for ch in numerals:
        if ch in _CAPITAL_DIGITS:
            if digit:  # two digits in a row ("壹贰") are no number
                return None
            digit = _CAPITAL_DIGITS[ch]
        elif ch in _CAPITAL_UNITS:
            if digit is None and ch != "拾":  # 拾 alone is ten; 佰 alone is nothing
                return None
            below_wan += (1 if digit is None else digit) * _CAPITAL_UNITS[ch]
            digit = None
        elif ch in "万亿" and (below_wan or digit):
            below_wan += digit or 0
            if ch == "万":
                above_wan, below_wan = above_wan + below_wan * 10_000, 0
            else:
                total, above_wan, below_wan = (total + above_wan + below_wan) * 10**8, 0, 0
            digit = None
        else:
            return None
    return total + above_wan + below_wan + (digit or 0)
