"""How well a document's key fields were read (``appliance.fields``), against the
dataset's truth: per field, whether it was found, whether its normal value is exact
(dates as ISO dates, amounts as decimals, IBANs without spaces, text with its
whitespace collapsed and its case folded), the CER of a free-text field, and whether
the checks flagged it. Over many documents, the *validation precision* is the share of
flagged values that were really wrong: a flag a reviewer can trust.
"""

from __future__ import annotations

from appliance.fields.kinds import Money, parse
from appliance.measure.metrics import cer


_AS_TEXT = ("text", "regex", "enum")  # compared as their text, whitespace and case aside


def normal(kind: str, raw: str) -> str:
    """A value's normal form for comparison."""
    if kind in _AS_TEXT:
        return " ".join(raw.split()).casefold()
    parsed = parse(kind, raw)
    if parsed is None:
        return " ".join(raw.split()).casefold()
    value = parsed.value
    return str(value.amount if isinstance(value, Money) else value)


def score_fields(truth: dict[str, str], extracted: list[dict]) -> dict[str, dict]:
    """Per true field that the document type has: found, exact, cer (text fields),
    flagged (its checks failed)."""
    scores = {}
    for item in extracted:
        name, kind = item["name"], item["kind"]
        if not truth.get(name):
            continue
        want = normal(kind, truth[name])
        # the value the appliance gives, normalised ("28-90" read beside TOTAL is 28.90)
        got = (None if item["raw"] is None
               else item["value"] if kind not in _AS_TEXT and item["value"] is not None
               else normal(kind, item["raw"]))
        scores[name] = {
            "found": got is not None,
            "exact": got == want,
            "cer": cer(want, got or "") if kind == "text" else None,
            "flagged": item["valid"] is False,
        }
    return scores


def summarize_fields(pages: list[dict]) -> dict[str, dict[str, dict]]:
    """Per document type and field name over the pages' ``field_scores``: how many
    documents have it, found and exact rates, mean CER, and validation precision
    (None: nothing flagged)."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for page in pages:
        for name, score in (page.get("field_scores") or {}).items():
            grouped.setdefault((page["doc_type"], name), []).append(score)
    summary: dict[str, dict[str, dict]] = {}
    for (doc_type, name), scores in sorted(grouped.items()):
        flagged = [s for s in scores if s["flagged"]]
        cers = [s["cer"] for s in scores if s["cer"] is not None]
        summary.setdefault(doc_type, {})[name] = {
            "documents": len(scores),
            "found": sum(s["found"] for s in scores) / len(scores),
            "exact": sum(s["exact"] for s in scores) / len(scores),
            "cer": sum(cers) / len(cers) if cers else None,
            "flagged": len(flagged),
            "validation_precision": (sum(not s["exact"] for s in flagged) / len(flagged)
                                     if flagged else None),
        }
    return summary


def format_fields(summary: dict[str, dict[str, dict]]) -> str:
    """The per-type, per-field summary as a Markdown table."""
    rows = ["| type | field | documents | found | exact | CER | flagged | validation precision |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for doc_type, fields in summary.items():
        for name, s in fields.items():
            cer_text = "-" if s["cer"] is None else f"{s['cer']:.3f}"
            precision = ("-" if s["validation_precision"] is None
                         else f"{s['validation_precision']:.0%}")
            rows.append(f"| {doc_type} | {name} | {s['documents']} | {s['found']:.0%} | "
                        f"{s['exact']:.0%} | {cer_text} | {s['flagged']} | {precision} |")
    return "\n".join(rows)


# a field check that failed because a fapiao's QR code holds another value (fields.validate)
_QR_DISAGREES = "in its QR code"


def score_barcodes(truth: dict, pages: list[dict], extracted: list[dict] | None) -> dict:
    """A page's codes against the truth (``Sample.barcodes``): how many there are and how
    many were read exactly (format and value); of the fields printed otherwise than the
    QR code holds, how many the QR check caught, and how many it flagged that agree."""
    read = {(code["format"], code["value"]) for page in pages for code in page["barcodes"]}
    codes = [(code["format"], code["value"]) for code in truth["codes"]]
    flagged = {item["name"] for item in extracted or []
               if any(not check["ok"] and _QR_DISAGREES in check["message"]
                      for check in item["checks"])}
    disagrees = set(truth.get("disagrees") or [])
    return {"scan": truth.get("scan"), "codes": len(codes),
            "read": sum(code in read for code in codes),
            "disagree": len(disagrees), "caught": len(disagrees & flagged),
            "false_alarms": len(flagged - disagrees)}


def summarize_barcodes(pages: list[dict]) -> dict | None:
    """Over the pages with barcode truth: codes read of codes printed, overall and by
    how the page was scanned; disagreements caught of those printed; false alarms."""
    scored = [page["barcode_scores"] for page in pages if page.get("barcode_scores")]
    if not scored:
        return None

    def total(key: str, scores: list[dict]) -> int:
        return sum(score[key] for score in scores)

    scans = sorted({score["scan"] for score in scored if score["scan"]})
    return {"codes": total("codes", scored), "read": total("read", scored),
            "by_scan": {scan: {"codes": total("codes", mine), "read": total("read", mine)}
                        for scan in scans
                        if (mine := [score for score in scored if score["scan"] == scan])},
            "disagree": total("disagree", scored), "caught": total("caught", scored),
            "false_alarms": total("false_alarms", scored)}


def format_barcodes(summary: dict) -> str:
    """The barcodes' summary in words: codes read, by scan; the QR check's catches."""
    scans = ", ".join(f"{scan} {s['read']}/{s['codes']}" for scan, s in summary["by_scan"].items())
    return (f"Barcodes read exactly: {summary['read']}/{summary['codes']}"
            + (f" ({scans})" if scans else "")
            + f"; printed fields that disagree with their QR code caught: "
              f"{summary['caught']}/{summary['disagree']}, false alarms: {summary['false_alarms']}")
