"""What stops a release: the score gate against a baseline, and the format contract.

The gate (seed 000 §3.4) compares an eval report with an older one, type by type: a
change ships only when no document type loses more than ``MAX_TYPE_DROP`` points and
the overall score gains at least ``MIN_OVERALL_GAIN``.

The format contract (seed 000 §6.6) pins what downstream systems parse: which kinds
of block each page's Markdown has, and the shape of each table. A new model that
answers with HTML tables, or merges two columns, breaks consumers even when its text
scores better; the contract check catches that. Paragraph counts are deliberately
not part of it: they vary with any change of model or prompt and no parser cares.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.quality.blocks import parse_blocks

MAX_TYPE_DROP = 1.0
MIN_OVERALL_GAIN = 0.5
CONTRACT_VERSION = 1


@dataclass
class Verdict:
    blocked: bool
    lines: list[str]  # one per finding, for the terminal


def release_gate(baseline: dict, current: dict) -> Verdict:
    """Compare two eval reports (their "summary" sections)."""
    old, new = baseline["summary"], current["summary"]
    lines, offending = [], []
    for doc_type, before in sorted(old["by_type"].items()):
        after = new["by_type"].get(doc_type)
        if after is None:
            offending.append(doc_type)
            lines.append(f"{doc_type}: in the baseline ({before['pages']} pages) but not in "
                         f"this run")
            continue
        delta = after["score"] - before["score"]
        if delta < -MAX_TYPE_DROP:
            offending.append(doc_type)
        lines.append(f"{doc_type}: {before['score']:.2f} -> {after['score']:.2f} ({delta:+.2f})")
    gain = new["overall"]["score"] - old["overall"]["score"]
    lines.append(f"overall: {old['overall']['score']:.2f} -> {new['overall']['score']:.2f} "
                 f"({gain:+.2f}, needs {MIN_OVERALL_GAIN:+.2f})")
    if old["overall"]["pages"] != new["overall"]["pages"]:
        lines.append(f"note: the baseline scored {old['overall']['pages']} pages, this run "
                     f"{new['overall']['pages']}; compare runs on the same pages")
    blocked = bool(offending) or gain < MIN_OVERALL_GAIN
    if blocked:
        reasons = []
        if offending:
            reasons.append(f"types dropped more than {MAX_TYPE_DROP} point: "
                           + ", ".join(offending))
        if gain < MIN_OVERALL_GAIN:
            reasons.append(f"overall gain {gain:+.2f} is under {MIN_OVERALL_GAIN}")
        lines.append("BLOCK: " + "; ".join(reasons))
    else:
        lines.append("PASS")
    return Verdict(blocked, lines)


def output_structure(markdown: str) -> dict:
    """The part of a page's Markdown that the format contract pins."""
    blocks = parse_blocks(markdown)
    return {"kinds": sorted({b.kind for b in blocks}),
            "tables": [[len(b.rows), max((len(r) for r in b.rows), default=0)]
                       for b in blocks if b.kind == "table"]}


def snapshot(report: dict) -> dict:
    """The contract of an eval run: each page's output structure, by dataset/stem."""
    return {"version": CONTRACT_VERSION, "engine": report["engine"],
            "pages": {f"{p['dataset']}/{p['stem']}": p["structure"] for p in report["pages"]}}


def _shapes(tables: list[list[int]]) -> str:
    return ", ".join(f"{rows}x{cols}" for rows, cols in tables) or "none"


def contract_drift(contract: dict, report: dict) -> list[str]:
    """Every way this run's output structure departs from the saved contract."""
    current = snapshot(report)["pages"]
    drift = []
    for page, pinned in sorted(contract["pages"].items()):
        now = current.get(page)
        if now is None:
            drift.append(f"{page}: pinned by the contract but not in this run")
            continue
        if now["kinds"] != pinned["kinds"]:
            gone = sorted(set(pinned["kinds"]) - set(now["kinds"]))
            new = sorted(set(now["kinds"]) - set(pinned["kinds"]))
            drift.append(f"{page}: block kinds {pinned['kinds']} -> {now['kinds']}"
                         + (f" (lost {', '.join(gone)})" if gone else "")
                         + (f" (new {', '.join(new)})" if new else ""))
        if now["tables"] != pinned["tables"]:
            drift.append(f"{page}: table shapes {_shapes(pinned['tables'])} -> "
                         f"{_shapes(now['tables'])}")
    return drift
