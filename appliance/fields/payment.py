"""What a cash receipt's arithmetic says its total is: the amount paid less the change
given back. A cashier checks it first, and so do the rules: it picks the total among
the page's amounts where its label was misread or is another ("SUBTOTAL", "TL:RM"),
and a total that disagrees with it goes to a person (``validate``)."""

from __future__ import annotations

from decimal import Decimal

from appliance.fields import kinds
from appliance.fields.kinds import Money, Parsed

# the fields, by name, whose arithmetic this is: total = paid - change
TOTAL, PAID, CHANGE = "total", "paid", "change"
# cash is paid in the coins there are: a total of 41.81 is paid as 41.80 where the
# smallest coin is 5 cents (10 in some countries)
CASH_STEP, CASH_ROUNDING = Decimal("0.05"), Decimal("0.10")


def settled(paid: Parsed | None, change: Parsed | None) -> tuple[Decimal, Decimal] | None:
    """(paid, change), where both were read as amounts with cents; else None. A dash
    before an amount paid is a leader, not a sign ("CASH --20.00"): nobody pays a
    negative amount."""
    amounts = [_amount(parsed) for parsed in (paid, change)]
    if None in amounts:
        return None
    given, back = (abs(amount) for amount in amounts)
    return given, back


def handed(paid: Parsed | None, change: Parsed | None) -> tuple[Decimal, Decimal] | None:
    """(paid, change) as ``settled`` gives them, where more was paid than given back:
    a reading that can stand for what was owed; else None."""
    settlement = settled(paid, change)
    return settlement if settlement and settlement[0] > settlement[1] else None


def due(paid: Parsed | None, change: Parsed | None) -> Decimal | None:
    """Paid less change (see ``handed``), or None."""
    settlement = handed(paid, change)
    return None if settlement is None else settlement[0] - settlement[1]


def with_cents(parsed: Parsed) -> bool:
    """Whether an amount was written with its cents, as money changing hands is: a
    number without them beside "CASH" is a company's registration number ("Cash & Carry
    (317041-W)")."""
    return kinds.with_cents(parsed.raw)


def _amount(parsed: Parsed | None) -> Decimal | None:
    if parsed is None or parsed.problem is not None or not isinstance(parsed.value, Money) \
            or not with_cents(parsed):
        return None
    return parsed.value.amount
