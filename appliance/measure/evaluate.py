"""`appliance eval`: accuracy against ground truth, through the daemon's own pipeline.

Every sample goes to a daemon started here (throw-away data directory, the operator's
config with the engine chosen for the run) through its REST API, exactly as a client
would send it; the stored result is scored. So the figures include everything the
appliance does to a page, and a change to any stage shows up in them.

Per page, layered from the characters up (seed 000 §3):

- text: CER and WER on whitespace-normalised text, CER without any whitespace (scans'
  ground truth rarely agrees on spacing), and an order-free bag-of-words F1; all
  case-folded where the dataset's truth has no letter case (SROIE's);
- reading order: normalised edit distance of the order in which ground-truth units
  appear in the output (0 = same order);
- tables: TEDS against ground-truth Markdown tables, when the dataset has them; and
  where the truth is Markdown (so it states every table the page has), the tables the
  output has beyond the truth's: a false table (prose or a header written as one)
  costs the text its order, however well the real tables score;
- format: the Markdown has none of ``format_problems``;
- fields: share of key fields whose normalised value appears exactly in the text
  (what OCR can do), and, for document types with fields, the fields the appliance
  extracted scored per field (``field_scores``: found, exact, CER, validation
  precision);
- repair: share of pages whose Markdown needed level-1 repair, and of pages degraded
  to plain text (level 2);
- confidence: the AUROC of the pages' confidence for finding pages with CER (no
  whitespace) above 5 %, and the share the routing would accept automatically.

A page's **score** is 100 x the mean of the components it has: 1 - CER without
whitespace (capped at 1), 1 - reading-order distance, TEDS, format validity (0 or 1),
field accuracy. A page that failed scores 0. Groups (overall, per document type, per
dataset) average their pages; the release gate compares these scores.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from statistics import mean

from appliance.config import Settings
from appliance.measure.datasets import Sample, find_datasets, load_dataset
from appliance.measure.field_scores import (
    format_barcodes, format_fields, score_barcodes, score_fields, summarize_barcodes,
    summarize_fields,
)
from appliance.measure.driver import ApplianceClient, LocalDaemon, Rejected, daemon_config
from appliance.measure.metrics import (
    bag_of_words_f1, cer, field_accuracy, order_free_cer, reading_order_distance, table_similarity,
    wer,
)
from appliance.measure.release import output_structure, release_gate
from appliance.page import without_marks
from appliance.quality.calibration import auroc
from appliance.quality.repair import repair_rates
from appliance.quality.blocks import format_problems, parse_blocks

log = logging.getLogger(__name__)

REPORT_VERSION = 1
# summary columns: (key in the summary, header, format)
COLUMNS = (("pages", "pages", "{:d}"), ("failed", "failed", "{:d}"), ("score", "score", "{:.2f}"),
           ("cer", "CER", "{:.2%}"), ("cer_nows", "CER no-ws", "{:.2%}"),
           ("cer_order_free", "CER order-free", "{:.2%}"), ("wer", "WER", "{:.2%}"),
           ("bow_f1", "BoW F1", "{:.3f}"), ("reading_order", "order dist", "{:.3f}"),
           ("tables", "TEDS", "{:.3f}"), ("false_tables", "false tables", "{:.2f}"),
           ("format_validity", "format ok", "{:.0%}"), ("field_accuracy", "fields", "{:.1%}"),
           ("repaired_rate", "repaired", "{:.1%}"),
           ("degraded_rate", "degraded", "{:.1%}"), ("confidence_auroc", "conf AUROC", "{:.3f}"),
           ("auto_accepted", "auto-accepted", "{:.0%}"),
           ("accepted_cer", "CER accepted", "{:.2%}"), ("seconds_per_page", "s/page", "{:.2f}"))
BAD_PAGE_CER = 0.05  # a page worse than this needed a reviewer (issue 8's yardstick)
# A page's CER for judging its confidence is "cer_nows" where the truth's reading order is
# known, else "cer_order_free": a line read in another row order is no misread character.


def _tables(markdown: str) -> list[list[list[str]]]:
    return [block.rows for block in parse_blocks(markdown) if block.kind == "table"]


def score_page(sample: Sample, markdown: str, text: str, *, failed: bool = False) -> dict:
    """Every metric of one page's output against its ground truth, and its score."""
    problems = format_problems(markdown)
    truth, units = sample.text, sample.units
    text = without_marks(text)  # the check boxes' tokens were found, not read
    truth_tables, tables = _tables(sample.markdown or ""), _tables(markdown)
    if sample.caseless:
        truth, units, text = truth.casefold(), [unit.casefold() for unit in units], text.casefold()
    metrics = {
        "cer": cer(truth, text),
        "cer_nows": cer(truth, text, ignore_whitespace=True),
        "cer_order_free": order_free_cer(units, text),
        "wer": wer(truth, text),
        "bow_f1": bag_of_words_f1(truth, text),
        "reading_order": reading_order_distance(units, text),
        "tables": table_similarity(truth_tables, tables),
        "false_tables": (None if sample.markdown is None
                         else max(0, len(tables) - len(truth_tables))),
        "format_valid": not problems,
        "format_problems": problems,
        "fields": field_accuracy(sample.fields, text) if sample.fields else {},
    }
    metrics["page_cer"] = metrics["cer_nows" if sample.order_known else "cer_order_free"]
    parts = [1 - min(1.0, metrics["cer_nows"]), float(metrics["format_valid"])]
    if metrics["reading_order"] is not None:
        parts.append(1 - metrics["reading_order"])
    if metrics["tables"] is not None:
        parts.append(metrics["tables"])
    if metrics["fields"]:
        parts.append(sum(metrics["fields"].values()) / len(metrics["fields"]))
    metrics["score"] = 0.0 if failed else 100 * mean(parts)
    return metrics


def _mean(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return mean(present) if present else None


def summarize(pages: list[dict], accept_from: float = 0.75) -> dict:
    """One group's figures: means over its pages (fields over all its fields), and how
    well the pages' confidence separates good from bad pages (CER above 5 %)."""
    fields = [ok for p in pages for ok in p["fields"].values()]
    repair = repair_rates(p["repair_level"] for p in pages if p["repair_level"] is not None)
    return {
        "pages": len(pages),
        "failed": sum(1 for p in pages if p["status"] != "done"),
        "score": mean(p["score"] for p in pages),
        **{key: _mean([p[key] for p in pages])
           for key in ("cer", "cer_nows", "cer_order_free", "wer", "bow_f1", "reading_order",
                       "tables", "false_tables")},
        "format_validity": mean(float(p["format_valid"]) for p in pages),
        "field_accuracy": sum(fields) / len(fields) if fields else None,
        # repair (seed 000 §6.3): healthy is level 1 under 3 % and level 2 under 0.5 %
        "repaired_rate": repair["level1_rate"], "degraded_rate": repair["level2_rate"],
        "repair_healthy": repair["healthy"],
        "seconds_per_page": _mean([p["seconds"] for p in pages]),
        **_confidence_figures(pages, accept_from),
    }


def _confidence_figures(pages: list[dict], accept_from: float) -> dict:
    scored = [p for p in pages if p["confidence"] is not None]
    confidences = [p["confidence"] for p in scored]
    accepted = [p["page_cer"] for p in scored if p["confidence"] >= accept_from]
    return {
        "confidence_auroc": auroc(confidences, [p["page_cer"] > BAD_PAGE_CER for p in scored]),
        "auto_accepted": len(accepted) / len(scored) if scored else None,
        "accepted_cer": mean(accepted) if accepted else None,  # what auto-accepting let through
    }


def _grouped(pages: list[dict], key: str, accept_from: float) -> dict[str, dict]:
    groups: dict[str, list[dict]] = {}
    for page in pages:
        groups.setdefault(page[key], []).append(page)
    return {name: summarize(members, accept_from) for name, members in sorted(groups.items())}


def load_samples(dataset_dirs: list[Path], *, limit: int | None = None,
                 doc_type: str | None = None) -> list[Sample]:
    """The samples of every dataset under the given directories, the first ``limit`` of each."""
    samples = []
    for root in dataset_dirs:
        for dataset in find_datasets(root):
            samples.extend(load_dataset(dataset, doc_type=doc_type)[:limit])
    return samples


def _page_record(sample: Sample, client: ApplianceClient, outcome: str | Rejected,
                 listing: dict[str, dict]) -> dict:
    record = {"dataset": sample.dataset, "stem": sample.stem, "doc_type": sample.doc_type}
    if isinstance(outcome, Rejected):
        return record | {"status": "failed", "error": outcome.code, "seconds": None,
                         "field_scores": None, "barcode_scores": None,
                         "model_id": None, "repair_level": None, "confidence": None,
                         "signals": None,
                         "structure": output_structure(""),
                         **score_page(sample, "", "", failed=True)}
    result = client.result(outcome)
    pages, extracted = result["pages"], result["document"].get("fields")
    markdown = "\n\n".join(p["markdown"] or "" for p in pages).strip()
    text = "\n".join(p["text"] or "" for p in pages).strip()
    status = listing[outcome]["status"]
    errors = [p["error"]["code"] for p in pages if p["error"]]
    accepted = [p for p in pages if p["started_at"] is not None]
    return record | {
        "status": status, "error": errors[0] if errors else None,
        # service time of the accepted attempts: the worker's clock, without queue wait
        "seconds": sum(p["finished_at"] - p["started_at"] for p in accepted) if accepted else None,
        "model_id": next((p["provenance"]["model_id"] for p in accepted), None),
        "repair_level": max((p["provenance"]["repair"]["level"] for p in accepted), default=None),
        # the weakest page decides: a document is as doubtful as its worst page
        "confidence": min((p["confidence"] for p in accepted), default=None),
        "signals": min(accepted, key=lambda p: p["confidence"])["signals"] if accepted else None,
        "structure": output_structure(markdown),
        "field_scores": (score_fields(sample.fields, extracted)
                         if extracted is not None and sample.fields else None),
        "barcode_scores": (score_barcodes(sample.barcodes, pages, extracted)
                           if sample.barcodes else None),
        **score_page(sample, markdown, text, failed=status != "done"),
    }


def run_eval(settings: Settings, dataset_dirs: list[Path], *, engine: str | None = None,
             limit: int | None = None, doc_type: str | None = None,
             concurrency: int = 4, model: tuple[Path, Path] | None = None,
             text_layer: str | None = None) -> dict:
    """Read the datasets' pages with a daemon of ``settings`` (its engine ``engine``,
    its model pair ``model`` where given; each PDF's own text as ``text_layer`` asks,
    else as the config does) and score them."""
    samples = load_samples(dataset_dirs, limit=limit, doc_type=doc_type)
    pair = {"model": str(model[0]), "mmproj": str(model[1])} if model else {}
    raw, settings = daemon_config(settings, name=engine, **pair)
    accept_from = settings.review.accept_from
    with (tempfile.TemporaryDirectory(prefix="appliance-eval-") as tmp,
          LocalDaemon(raw, Path(tmp)) as daemon,
          ApplianceClient(daemon.url, daemon) as client):
        ready = client.wait_ready()
        started = time.monotonic()
        outcomes = client.submit_all(
            [(s.image, {"doc_type": s.doc_type, "lane": "batch",
                        **({"text_layer": text_layer} if text_layer else {})})
             for s in samples], concurrency)
        listing = client.wait_exported([o for o in outcomes if isinstance(o, str)])
        elapsed = time.monotonic() - started
        pages = [_page_record(sample, client, outcome, listing)
                 for sample, outcome in zip(samples, outcomes)]
    model_ids = sorted({p["model_id"] for p in pages if p["model_id"]})
    return {
        "version": REPORT_VERSION, "created_at": time.time(), "engine": ready["engine"],
        "model_id": ", ".join(model_ids) or None,
        "datasets": sorted({s.dataset for s in samples}), "elapsed_s": elapsed,
        "accept_from": accept_from,
        "summary": {"overall": summarize(pages, accept_from),
                    "by_type": _grouped(pages, "doc_type", accept_from),
                    "by_dataset": _grouped(pages, "dataset", accept_from),
                    "fields": summarize_fields(pages),
                    "barcodes": summarize_barcodes(pages)},
        "pages": pages,
    }


def _cell(value, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def format_table(report: dict) -> str:
    """The summary as a Markdown table: overall, then per type, then per dataset."""
    header = ["group", *(title for _key, title, _fmt in COLUMNS)]
    rows = [header, ["---"] * len(header)]
    summary = report["summary"]
    groups = [("overall", summary["overall"])]
    groups += [(f"type {name}", group) for name, group in summary["by_type"].items()]
    groups += [(f"dataset {name}", group) for name, group in summary["by_dataset"].items()]
    for name, group in groups:
        rows.append([name, *(_cell(group[key], fmt) for key, _title, fmt in COLUMNS)])
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    fields, codes = summary.get("fields"), summary.get("barcodes")
    return (f"engine {report['engine']}, model {report['model_id'] or '-'}, "
            f"{summary['overall']['pages']} pages in {report['elapsed_s']:.0f} s\n\n"
            + "\n".join(lines)
            + (f"\n\nKey fields extracted:\n\n{format_fields(fields)}" if fields else "")
            + (f"\n\n{format_barcodes(codes)}" if codes else ""))


COMPARED = (("score", "score", "{:.2f}"), ("cer", "CER", "{:.2%}"),
            ("cer_nows", "CER no-ws", "{:.2%}"), ("reading_order", "order dist", "{:.3f}"),
            ("tables", "TEDS", "{:.3f}"), ("false_tables", "false tables", "{:.2f}"),
            ("format_validity", "format ok", "{:.0%}"), ("auto_accepted", "auto-accepted", "{:.0%}"),
            ("seconds_per_page", "s/page", "{:.3f}"))


def format_comparison(reports: list[dict], labels: list[str]) -> str:
    """Several runs on the same pages side by side, lettered A, B, ... in the table."""
    letters = [chr(ord("A") + index) for index in range(len(reports))]
    header = ["group", *(f"{letter} {title}" for letter in letters
                         for _key, title, _fmt in COMPARED)]
    rows = [header, ["---"] * len(header)]
    first = reports[0]["summary"]
    groups = [("overall", "overall", None), *((f"type {name}", "by_type", name)
                                              for name in first["by_type"]),
              *((f"dataset {name}", "by_dataset", name) for name in first["by_dataset"])]
    for title, section, name in groups:
        cells = []
        for report in reports:
            summary = report["summary"]
            group = summary[section] if name is None else summary[section].get(name)
            cells += [_cell(group and group[key], fmt) for key, _title, fmt in COMPARED]
        rows.append([title, *cells])
    legend = [f"{letter}: {label} ({report['model_id'] or '-'})"
              for letter, label, report in zip(letters, labels, reports)]
    return "\n".join([*legend, "", *("| " + " | ".join(row) + " |" for row in rows)])


def compare_models(reports: list[dict], labels: list[str]) -> tuple[str, bool]:
    """The runs side by side and each later one through the release gate against the
    first: the text, and whether any is blocked."""
    parts, blocked = [format_comparison(reports, labels)], False
    for label, report in zip(labels[1:], reports[1:]):
        verdict = release_gate(reports[0], report)
        parts.append(f"\nrelease gate, {label} against {labels[0]}:\n"
                     + "\n".join(verdict.lines))
        blocked |= verdict.blocked
    return "\n".join(parts), blocked
