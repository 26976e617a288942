"""The check digits that prove an identifier was read right: IBANs (ISO 13616), EU VAT
numbers (each country's published rule, where there is one) and China's unified social
credit code (GB 32100-2015).

The checks take identifiers compact and upper case, without spaces, dots or dashes
(``iban_valid`` also takes an IBAN printed in groups); ``kinds`` finds them in text,
normalises them and words their problems.
"""

from __future__ import annotations

import re

# ISO 13616 lengths: the SEPA countries and most of the others with IBANs
IBAN_LENGTHS = {entry[:2]: int(entry[2:]) for entry in (
    "AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BR29 CH21 CR22 CY28 CZ24 DE22 DK18 DO28 "
    "EE20 EG29 ES24 FI18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IQ23 "
    "IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20 LV21 MC27 MD24 ME22 MK19 MR27 MT31 "
    "MU30 NL18 NO15 PK24 PL28 PS29 PT25 QA29 RO24 RS22 SA24 SC31 SE24 SI19 SK24 SM27 ST25 "
    "SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20").split()}


def _as_digits(code: str) -> int:
    """ISO 7064's reading of letters as numbers, A=10 ... Z=35, for the mod-97 checks."""
    return int("".join(str(int(ch, 36)) for ch in code))


def iban_valid(iban: str) -> bool:
    """ISO 13616: the country's length, and the number with its first four characters
    moved to the end leaves 1 when divided by 97."""
    compact = re.sub(r"\s", "", iban).upper()
    return (compact.isascii() and compact.isalnum() and compact[2:4].isdigit()
            and IBAN_LENGTHS.get(compact[:2]) == len(compact)
            and _as_digits(compact[4:] + compact[:4]) % 97 == 1)


USCC_CHARSET = "0123456789ABCDEFGHJKLMNPQRTUWXY"  # no I, O, S, V, Z


def uscc_valid(code: str) -> bool:
    """GB 32100-2015: 18 characters of the code's charset; the last is 31 minus the sum
    of the first 17 weighted by 3^i mod 31, modulo 31."""
    if len(code) != 18 or any(ch not in USCC_CHARSET for ch in code):
        return False
    total = sum(USCC_CHARSET.index(ch) * pow(3, i, 31) for i, ch in enumerate(code[:17]))
    return code[17] == USCC_CHARSET[-total % 31]


# the part after the country prefix ("EL" is Greece's prefix for VAT, not "GR")
_UK = r"\d{9}|\d{12}|GD[0-4]\d{2}|HA[5-9]\d{2}"
VAT_FORMATS = {country: re.compile(pattern) for country, pattern in {
    "AT": r"U\d{8}", "BE": r"[01]\d{9}", "BG": r"\d{9,10}", "CY": r"\d{8}[A-Z]",
    "CZ": r"\d{8,10}", "DE": r"\d{9}", "DK": r"\d{8}", "EE": r"\d{9}", "EL": r"\d{9}",
    "ES": r"[0-9A-Z]\d{7}[0-9A-Z]", "FI": r"\d{8}", "FR": r"[0-9A-HJ-NP-Z]{2}\d{9}",
    "HR": r"\d{11}", "HU": r"\d{8}", "IE": r"\d{7}[A-W][A-IW]?|\d[A-Z+*]\d{5}[A-W]",
    "IT": r"\d{11}", "LT": r"\d{9}|\d{12}", "LU": r"\d{8}", "LV": r"\d{11}", "MT": r"\d{8}",
    "NL": r"\d{9}B\d{2}", "PL": r"\d{10}", "PT": r"\d{9}", "RO": r"[1-9]\d{1,9}",
    "SE": r"\d{10}01", "SI": r"[1-9]\d{7}", "SK": r"\d{10}", "GB": _UK, "XI": _UK,
}.items()}


def vat_checksum(country: str, body: str) -> bool | None:
    """Whether the check digits of a VAT number in its country's format agree; None for
    a country whose rule is not checked here (its format is all there is to check)."""
    check = _VAT_CHECKS.get(country)
    return None if check is None else check(body)


def _de(body: str) -> bool:  # ISO 7064 MOD 11,10
    product = 10
    for digit in body[:8]:
        total = (int(digit) + product) % 10 or 10
        product = 2 * total % 11
    return (11 - product) % 10 == int(body[8])


def _at(body: str) -> bool:  # U + 7 digits, Luhn-like weights 1,2,..., then (10 - (S + 4)) mod 10
    total = sum(sum(divmod(int(digit) * (1 + i % 2), 10)) for i, digit in enumerate(body[1:8]))
    return (10 - (total + 4) % 10) % 10 == int(body[8])


def _nl(body: str) -> bool:
    """A company's number (weights 9..2, mod 11) or, since 2020, a sole trader's
    (the whole id, letters as numbers, mod 97 == 1)."""
    weighted = sum(int(digit) * weight for digit, weight in zip(body[:8], range(9, 1, -1)))
    return weighted % 11 == int(body[8]) or _as_digits("NL" + body) % 97 == 1


def _be(body: str) -> bool:
    return 97 - int(body[:8]) % 97 == int(body[8:])


def _it(body: str) -> bool:  # Luhn over the 11 digits
    total = sum(int(digit) if i % 2 == 0 else sum(divmod(2 * int(digit), 10))
                for i, digit in enumerate(body))
    return total % 10 == 0


def _fr(body: str) -> bool | None:
    """The numeric key of a SIREN; newer keys with letters follow an unpublished rule."""
    key, siren = body[:2], body[2:]
    return int(key) == (12 + 3 * (int(siren) % 97)) % 97 if key.isdigit() else None


def _pl(body: str) -> bool:
    weighted = sum(int(digit) * weight for digit, weight in zip(body, (6, 5, 7, 2, 3, 4, 5, 6, 7)))
    return weighted % 11 == int(body[9])


def _gb(body: str) -> bool | None:
    """Weights 8..2 plus the last two digits: a multiple of 97, or of 97 after adding 55
    (numbers issued since 2010). Government departments and health authorities have none."""
    if not body.isdigit():
        return None
    weighted = sum(int(digit) * weight for digit, weight in zip(body, range(8, 1, -1)))
    total = weighted + int(body[7:9])
    return total % 97 == 0 or (total + 55) % 97 == 0


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def _es(body: str) -> bool:
    """A person's NIF (8 digits and a letter), a foreigner's NIE (X/Y/Z for 0/1/2) and
    K/L/M numbers: the letter of the number mod 23. A company's CIF: a Luhn-like sum of
    the 7 digits gives a control digit, printed as that digit or as a letter of JABCDEFGHI."""
    if body[0].isdigit() or body[0] in "XYZKLM":
        number = int(body[:8].translate(str.maketrans("XYZKLM", "012000")))
        return body[8] == _DNI_LETTERS[number % 23]
    total = sum(int(digit) if i % 2 else sum(divmod(2 * int(digit), 10))
                for i, digit in enumerate(body[1:8]))
    control = -total % 10
    return body[8] in (str(control), "JABCDEFGHI"[control])


_VAT_CHECKS = {"DE": _de, "AT": _at, "NL": _nl, "BE": _be, "IT": _it, "FR": _fr, "PL": _pl,
               "GB": _gb, "XI": _gb, "ES": _es}
