from __future__ import annotations

import pytest

from appliance.config import RequiredField, ReviewSettings
from appliance.quality.routing import (
    ACCEPT_CODES,
    REVIEW_CODES,
    RoutingRules,
    reason_code,
    route_page,
    routing_rules,
    sample_point,
)

RULES = RoutingRules()  # 0.5 / 0.75 / 10 %


def route(confidence, *, doc_type="generic", key="doc:1", text=None, rules=RULES):
    return route_page(confidence, doc_type=doc_type, page_key=key, text=text, rules=rules)


def _key_with_point(low: float, high: float) -> str:
    return next(f"page-{i}" for i in range(10_000) if low <= sample_point(f"page-{i}") < high)


SAMPLED_KEY = _key_with_point(0.0, 0.1)
UNSAMPLED_KEY = _key_with_point(0.5, 1.0)


def test_below_review_threshold_goes_to_review():
    result = route(0.42)
    assert result.review
    assert result.reasons == ["low_confidence: 0.420 < 0.5"]


def test_exactly_review_below_is_in_the_sample_band():
    sampled, unsampled = route(0.5, key=SAMPLED_KEY), route(0.5, key=UNSAMPLED_KEY)
    assert sampled.review and sampled.reasons == ["sampled: 0.500 in [0.5, 0.75), rate 10%"]
    assert not unsampled.review
    assert unsampled.reasons == ["not_sampled: 0.500 in [0.5, 0.75), rate 10%"]
    assert route(0.4999, key=UNSAMPLED_KEY).review


def test_exactly_accept_from_is_accepted():
    result = route(0.75, key=SAMPLED_KEY)
    assert not result.review
    assert result.reasons == ["confident: 0.750 >= 0.75"]
    assert route(0.7499, key=SAMPLED_KEY).review  # still in the band, and this key samples


def test_a_page_whose_order_is_in_doubt_goes_to_review_however_confident():
    doubt = "block 1 reads running text across a gutter in 4 rows or more"
    result = route_page(0.98, doc_type="report", page_key="doc:1", text=None, rules=RULES,
                        layout_doubt=doubt)
    assert result.review
    assert result.reasons == ["confident: 0.980 >= 0.75", f"layout_doubt: {doubt}"]
    assert reason_code(result.reasons[1]) in REVIEW_CODES


def test_sampling_is_deterministic_and_close_to_the_rate():
    assert sample_point("doc:abc:3") == sample_point("doc:abc:3")
    assert 0.0 <= sample_point("") < 1.0
    decisions = [route(0.6, key=f"sha-{i}:1").review for i in range(10_000)]
    assert decisions == [route(0.6, key=f"sha-{i}:1").review for i in range(10_000)]
    assert sum(decisions) / len(decisions) == pytest.approx(0.1, abs=0.01)  # ~3.3 sigma


def test_sample_rate_extremes():
    never = RoutingRules(sample_rate=0.0)
    always = RoutingRules(sample_rate=1.0)
    assert not any(route(0.6, key=f"k{i}", rules=never).review for i in range(200))
    assert all(route(0.6, key=f"k{i}", rules=always).review for i in range(200))


def test_always_review_doc_type():
    rules = RoutingRules(always_review=("invoice",))
    result = route(0.95, doc_type="invoice", rules=rules)
    assert result.review
    assert result.reasons == ["confident: 0.950 >= 0.75", "always_review: doc_type invoice"]
    assert not route(0.95, doc_type="receipt", rules=rules).review


def test_missing_required_field_routes_to_review_a_present_one_does_not():
    rules = RoutingRules(required_fields={"invoice": [
        ("total", r"\btotal\b.*\d"), ("invoice number", r"invoice\s*(no|number|#)")]})
    missing = route(0.9, doc_type="invoice", text="Invoice no 17\nSubtotal 12.00", rules=rules)
    assert missing.review
    assert missing.reasons == ["confident: 0.900 >= 0.75", "missing_field: total"]
    present = route(0.9, doc_type="invoice", text="INVOICE NO 17\nTotal: 12.00", rules=rules)
    assert not present.review
    # not the document's last page: no text, no check
    assert not route(0.9, doc_type="invoice", text=None, rules=rules).review
    # other types have no required fields
    assert not route(0.9, doc_type="receipt", text="", rules=rules).review
    # every rule that fires is listed
    both = route(0.3, doc_type="invoice", text="", rules=rules)
    assert [reason_code(r) for r in both.reasons] == ["low_confidence", "missing_field",
                                                      "missing_field"]


def test_reason_codes():
    assert set(REVIEW_CODES).isdisjoint(ACCEPT_CODES)
    for confidence in (0.1, 0.6, 0.9):
        for key in (SAMPLED_KEY, UNSAMPLED_KEY):
            result = route(confidence, key=key)
            codes = [reason_code(r) for r in result.reasons]
            assert all(code in REVIEW_CODES + ACCEPT_CODES for code in codes)
            assert result.review == any(code in REVIEW_CODES for code in codes)


@pytest.mark.parametrize("kwargs, match", [
    ({"review_below": 0.8, "accept_from": 0.7}, "review_below <= accept_from"),
    ({"accept_from": 1.5}, "accept_from"),
    ({"sample_rate": -0.1}, "sample_rate"),
    ({"required_fields": {"invoice": [("total", "(unclosed")]}}, "required_fields.invoice"),
])
def test_bad_rules_are_refused_naming_the_setting(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RoutingRules(**kwargs)


def test_rules_from_config():
    review = ReviewSettings(review_below=0.4, accept_from=0.8, sample_rate=0.2,
                            always_review=["contract"],
                            required_fields=[RequiredField("invoice", "total", r"total"),
                                             RequiredField("invoice", "date", r"\d{4}"),
                                             RequiredField("receipt", "total", r"sum")])
    rules = routing_rules(review)
    assert rules == RoutingRules(0.4, 0.8, 0.2, ("contract",), {
        "invoice": [("total", "total"), ("date", r"\d{4}")], "receipt": [("total", "sum")]})
    assert routing_rules(ReviewSettings()) == RULES
