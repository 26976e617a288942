"""The synthetic receipts and invoices with key fields: files, fields, sums and checksums."""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np
import pytest
from PIL import Image

from appliance.measure.datasets import load_dataset
from appliance.measure.synthetic_fields import make_field_sets

RECEIPT_KEYS = {"company", "date", "address", "total"}
INVOICE_KEYS = {"number", "issue_date", "due_date", "seller", "buyer", "seller_vat_id", "net",
                "tax", "gross", "currency", "iban"}
IBAN_LENGTHS = {"DE": 22, "FR": 27, "NL": 18, "GB": 22, "AT": 20, "BE": 16, "IT": 27, "ES": 24}
INVOICE_DATE_FORMATS = ("%d/%m/%Y", "%Y-%m-%d", "%d %b %Y", "%B %d, %Y", "%d.%m.%Y")


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """The sets drawn twice with one seed, and their first pages with another."""
    root = tmp_path_factory.mktemp("fields")
    counts = [make_field_sets(root / name, pages=pages, seed=seed)
              for name, pages, seed in (("a", 6, 3), ("again", 6, 3), ("other", 2, 4))]
    return root, counts


def cents(printed: str) -> int:
    """1,234.50, 1.234,50 or 1234.50 in cents: two decimals after either mark."""
    assert re.fullmatch(r"\d+([.,]\d{3})*[.,]\d{2}", printed), printed
    return int(re.sub(r"\D", "", printed))


def iban_valid(iban: str) -> bool:
    compact = iban.replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    return (len(compact) == IBAN_LENGTHS.get(compact[:2])
            and int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1)


def vat_id_valid(vat_id: str) -> bool:
    country, digits = vat_id[:2], vat_id[2:]
    if not digits.isdigit():
        return False
    if country == "DE" and len(digits) == 9:  # ISO 7064 MOD 11,10
        product = 10
        for digit in digits[:8]:
            product = 2 * ((int(digit) + product) % 10 or 10) % 11
        return (11 - product) % 10 == int(digits[8])
    if country == "IT" and len(digits) == 11:  # Luhn over all eleven digits
        doubled = [int(digit) * 2 for digit in digits[-2::-2]]
        kept = [int(digit) for digit in digits[::-2]]
        return (sum(kept) + sum(d - 9 if d > 9 else d for d in doubled)) % 10 == 0
    if country == "BE" and len(digits) == 10:
        return int(digits[:8]) % 97 + int(digits[8:]) == 97
    return False


def test_the_checks_accept_known_valid_ids_and_reject_a_typo():
    for good in ("DE136695976", "IT00743110157", "BE0428759497"):
        assert vat_id_valid(good)
        assert not vat_id_valid(good[:-1] + str((int(good[-1]) + 1) % 10))
    for good in ("DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"):
        assert iban_valid(good)
        assert not iban_valid(good.replace("3", "4", 1))


def test_both_sets_load_with_every_field(sets):
    root, counts = sets
    assert counts[0] == {"receipts-fields": 6, "invoices-fields": 6}
    for name, doc_type, keys in (("receipts-fields", "receipt", RECEIPT_KEYS),
                                 ("invoices-fields", "invoice", INVOICE_KEYS)):
        folder = root / "a" / name
        samples = load_dataset(folder)
        assert len(samples) == 6
        for sample in samples:
            assert sample.doc_type == doc_type and sample.dataset == f"synthetic-{name}"
            for suffix in (".png", ".txt", ".fields.json"):
                assert (folder / f"{sample.stem}{suffix}").is_file()
            assert set(sample.fields) == keys
            assert all(value.strip() for value in sample.fields.values()), sample.fields
            # each value stands on the page as printed (an address over several lines)
            for key, value in sample.fields.items():
                assert (any(value in unit for unit in sample.units) if key != "address"
                        else value in " ".join(sample.units)), (sample.stem, key, value)
            page = np.asarray(Image.open(sample.image).convert("L"))
            assert 0.003 < (page < 110).mean() < 0.4, sample.stem  # ink, on paper


def test_invoice_amounts_add_up_and_ids_pass_their_checksums(sets):
    root, _ = sets
    for sample in load_dataset(root / "a" / "invoices-fields"):
        fields = sample.fields
        assert cents(fields["net"]) + cents(fields["tax"]) == cents(fields["gross"]), fields
        assert cents(fields["tax"]) > 0
        assert iban_valid(fields["iban"]) and re.fullmatch(r"(\w{4} )+\w{1,4}", fields["iban"])
        assert vat_id_valid(fields["seller_vat_id"]), fields["seller_vat_id"]
        assert fields["currency"] in ("EUR", "GBP", "USD", "CHF")
        for pattern in INVOICE_DATE_FORMATS:
            try:
                issued, due = (datetime.strptime(fields[key], pattern)
                               for key in ("issue_date", "due_date"))
            except ValueError:
                continue
            assert due >= issued
            break
        else:
            pytest.fail(f"unreadable dates {fields['issue_date']!r}, {fields['due_date']!r}")


def test_receipt_totals_are_amounts_without_currency(sets):
    root, _ = sets
    for sample in load_dataset(root / "a" / "receipts-fields"):
        assert cents(sample.fields["total"]) > 0


def test_a_seed_draws_the_same_pages_and_another_seed_other_pages(sets):
    root, _ = sets
    files = sorted(path.relative_to(root / "a") for path in (root / "a").rglob("*")
                   if path.is_file())
    assert len(files) == 2 * (1 + 6 * 3)
    for relative in files:
        assert (root / "a" / relative).read_bytes() == (root / "again" / relative).read_bytes()
    others = sorted((root / "other").rglob("*-00[01].*"))  # png, txt, fields.json of each
    assert len(others) == 2 * 2 * 3
    for other in others:
        drawn = root / "a" / other.relative_to(root / "other")
        assert other.read_bytes() != drawn.read_bytes(), other
