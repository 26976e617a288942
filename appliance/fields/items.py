"""A document's item rows, where they prove themselves, and what they add up to.

Item rows are hard to read from OCR lines alone: a description wraps, a quantity
stands on a line of its own, a discount or a deposit follows its item. A row counts
as an item here only where its own figures agree: a quantity times a unit price is the
amount at the row's end ("2 pc @ 269.00 538.00"), or the amount is written twice for
one piece ("1 10.00 10.00"). The items are summed only where every row with an amount
above the first sum row is such a row, and every figure with cents there was read as
an amount ("S0.50" for "$0.50" was not); on other pages nothing is said (``item_sum``
is None), because a sum over rows read wrongly would send right documents to a person.

The sums printed under the items (subtotal, total, amount due) are what the item sum
is held to by the logic layer (``validate``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from appliance.fields import kinds, payment
from appliance.fields.lines import ReadLine, rows

# a row that sums the items above it; OCR reads "Total" as "Tota1" and "TOTAl"
_SUM_ROW = re.compile(r"(?<![^\W\d_])(?:sub\s*-?\s*)?(?:tota[l1i]|ttl|amount due|due|nett?|"
                      r"jumlah|summe|gesamt|totale|totaal|montant)(?![^\W\d_])", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\d.,])\d{1,6}(?:[.,]\d{1,3})?(?![\d.,])")
MIN_ITEMS = 2


@dataclass(frozen=True)
class ItemSum:
    amount: Decimal  # the item rows' amounts added up
    rows: tuple[ReadLine, ...]  # the item rows, top down
    sums: tuple[Decimal, ...]  # the amounts on the rows that sum them, under them

    def agrees(self, total: Decimal | None) -> bool:
        """Whether a sum printed under the items, or the document's total, is theirs."""
        return self.amount in self.sums or self.amount == total


def item_sum(lines: list[ReadLine]) -> ItemSum | None:
    """The items of the first page that has a sum row under items that prove themselves
    (see the module's rules); None where no page has such items."""
    for number in sorted({line.page.number for line in lines}):
        printed = [(row, _amounts(row)) for row in
                   rows([line for line in lines if line.page.number == number], columns=False)]
        first_sum = next((i for i, (row, amounts) in enumerate(printed)
                          if _SUM_ROW.search(row.text) and amounts), None)
        if first_sum is None:
            continue
        above = [(row, amounts) for row, amounts in printed[:first_sum]
                 if not kinds.find_dates(row.text)]
        if any(len(kinds.CENTS.findall(row.text)) > len(amounts) for row, amounts in above):
            continue  # a figure with cents that is no amount ("S0.50"): a row unread
        items = [(row, amounts[-1]) for row, amounts in above if amounts]
        if len(items) < MIN_ITEMS or not all(_proves_itself(row, amount) for row, amount in items):
            continue
        sums = tuple(amounts[-1] for row, amounts in printed[first_sum:]
                     if _SUM_ROW.search(row.text) and amounts)
        return ItemSum(sum(amount for _, amount in items), tuple(row for row, _ in items), sums)
    return None


def _amounts(row: ReadLine) -> list[Decimal]:
    """The amounts written with cents on the row, left to right."""
    return [parsed.value.amount for _, parsed in kinds.find_amounts(row.text)
            if parsed.problem is None and payment.with_cents(parsed)]


def _proves_itself(row: ReadLine, amount: Decimal) -> bool:
    """Whether a quantity times a unit price on the row is its amount, or the amount of
    one piece stands twice ("1 10.00 10.00")."""
    numbers = [Decimal(match[0].replace(",", ".")) for match in _NUMBER.finditer(row.text)]
    quantities = [Decimal(match[0]) for match in _NUMBER.finditer(row.text)
                  if match[0].isdigit() and 0 < int(match[0]) < 1000]
    if numbers.count(amount) >= 2 and Decimal(1) in quantities:
        return True
    return any(price != amount and quantity * price == amount
               for quantity in quantities for price in numbers)
