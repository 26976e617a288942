"""Route a scored page: accept it, or send it to the review console, and say why.

The bands (seed 000 §6.4), from config:

- confidence < ``review_below`` (0.5): review;
- ``review_below`` <= confidence < ``accept_from`` (0.5 to 0.75): the sample band; a
  page is reviewed when its sample point is below ``sample_rate``. The point is a
  hash of the page's key (``sample_point``), so a page rescored or finished twice
  gets the same decision, and over many pages the reviewed share is the rate;
- confidence >= ``accept_from``: accepted automatically.

More triggers, whatever the confidence: ``always_review`` document types;
``required_fields``: for a document type with required fields, a document whose
text matches none of a field's pattern goes to review (checked once, on the page
that carries the document's text: see ``route_page``); and the document's key
fields (``appliance.fields``): a required one missing, or any that fails a check.

Reasons, after A2I's activation reasons: every rule that fired is listed, in the
order above, as ``"<code>: <detail>"``. The code is a fixed word from REVIEW_CODES
(the rule sent the page to review) or ACCEPT_CODES (why it passed); the review
console filters on it (``reason_code``), the detail is for people:

- ``low_confidence: 0.420 < 0.5``
- ``sampled: 0.610 in [0.5, 0.75), rate 10%``
- ``always_review: doc_type invoice``
- ``missing_field: total``
- ``field_invalid: gross: gross 191.00 != net 100.00 + tax 19.00``
- ``layout_doubt: block 2 reads running text across a gutter ...`` (the reading's
  order is in doubt, ``reading.doubt``)
- ``sent_to_review: by ann`` (a person sent a finished page back, not a rule)
- ``confident: 0.820 >= 0.75``
- ``not_sampled: 0.610 in [0.5, 0.75), rate 10%``

A page goes to review exactly when one of its reasons has a review code.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from appliance.config import ReviewSettings

__all__ = ["ACCEPT_CODES", "REVIEW_CODES", "Route", "RoutingRules", "reason_code",
           "review_reasons", "route_page", "routing_rules", "sample_point"]

REVIEW_CODES = ("low_confidence", "sampled", "always_review", "missing_field", "field_invalid",
                "layout_doubt", "sent_to_review")
ACCEPT_CODES = ("confident", "not_sampled")


@dataclass(frozen=True)
class RoutingRules:
    review_below: float = 0.5
    accept_from: float = 0.75
    sample_rate: float = 0.1
    always_review: tuple[str, ...] = ()  # document types
    # doc_type -> [(field name, regex)]: the regex is searched in the document's text,
    # case-insensitively; a field is present when it matches anywhere
    required_fields: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def __post_init__(self):
        """Refuse rules that cannot route: the message names the setting."""
        if not 0.0 <= self.review_below <= self.accept_from <= 1.0:
            raise ValueError(f"need 0 <= review_below <= accept_from <= 1, got review_below="
                             f"{self.review_below} and accept_from={self.accept_from}")
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ValueError(f"sample_rate must lie in [0, 1], got {self.sample_rate}")
        for doc_type, fields in self.required_fields.items():
            for name, pattern in fields:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"required_fields.{doc_type}: the pattern of field "
                                     f"{name!r} is not a valid regular expression ({exc}): "
                                     f"{pattern!r}") from None


def routing_rules(review: ReviewSettings) -> RoutingRules:
    """The rules from config's ``[review]`` section."""
    required: dict[str, list[tuple[str, str]]] = {}
    for item in review.required_fields:
        required.setdefault(item.doc_type, []).append((item.name, item.pattern))
    return RoutingRules(review_below=review.review_below, accept_from=review.accept_from,
                        sample_rate=review.sample_rate, always_review=tuple(review.always_review),
                        required_fields=required)


@dataclass
class Route:
    review: bool
    reasons: list[str]  # "<code>: <detail>", see the module docstring


def route_page(confidence: float, *, doc_type: str, page_key: str, text: str | None,
               rules: RoutingRules, field_reasons: tuple[str, ...] | list[str] = (),
               layout_doubt: str | None = None) -> Route:
    """Where a page goes, and every reason.

    ``page_key``: stable for the page (its document's sha256 and page number, say),
    so its sampling decision never changes. ``text``: the text to search for the
    document type's required fields: the caller passes the whole document's text
    with its last page and None otherwise (then no field check happens).
    ``field_reasons``: the document's key fields that are missing or fail a check
    (``fields.validate.reasons``), read with its last page. ``layout_doubt``: why the
    reading's order is in doubt, where it is.
    """
    reasons = []
    band = f"{confidence:.3f} in [{rules.review_below:g}, {rules.accept_from:g}), " \
           f"rate {rules.sample_rate * 100:g}%"
    if confidence < rules.review_below:
        reasons.append(f"low_confidence: {confidence:.3f} < {rules.review_below:g}")
    elif confidence < rules.accept_from:
        sampled = sample_point(page_key) < rules.sample_rate
        reasons.append(f"{'sampled' if sampled else 'not_sampled'}: {band}")
    else:
        reasons.append(f"confident: {confidence:.3f} >= {rules.accept_from:g}")
    if doc_type in rules.always_review:
        reasons.append(f"always_review: doc_type {doc_type}")
    if text is not None:
        for name, pattern in rules.required_fields.get(doc_type, []):
            if not re.search(pattern, text, re.IGNORECASE):
                reasons.append(f"missing_field: {name}")
    reasons += field_reasons
    if layout_doubt:
        reasons.append(f"layout_doubt: {layout_doubt}")
    review = any(reason_code(reason) in REVIEW_CODES for reason in reasons)
    return Route(review=review, reasons=reasons)


def reason_code(reason: str) -> str:
    """The machine-readable part of a reason: the word before the first colon."""
    return reason.split(":", 1)[0]


def review_reasons(reasons: list[str] | None) -> list[str]:
    """The reasons that send a page to review (``not_sampled`` and ``confident`` say
    why a page passed: they are no reason to review it)."""
    return [reason for reason in reasons or [] if reason_code(reason) in REVIEW_CODES]


def sample_point(page_key: str) -> float:
    """A uniform number in [0, 1) fixed by ``page_key``: the first 8 bytes of its
    sha256 over 2**64."""
    digest = hashlib.sha256(page_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64
