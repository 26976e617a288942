"""`appliance eval`: scoring, the release gate and the format contract.

The end-to-end tests run the real command: a daemon with the classic engine reads
rendered pages of a plain-layout dataset built here, and the report is checked
against what those pages say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.config import dump_toml
from appliance.gguf.family_models import write_family_test_model
from appliance.gguf.testmodel import write_test_model
from appliance.measure.datasets import Sample
from appliance.measure.evaluate import score_page, summarize
from appliance.measure.field_scores import format_fields, score_fields, summarize_fields
from appliance.measure.release import contract_drift, output_structure, release_gate, snapshot
from appliance.raster.synthetic import render_text_page

TABLE_MD = "# Invoice 7\n\n| item | qty |\n|---|---|\n| pens | 2 |\n| ink | 1 |\n"
HTML_MD = ("# Invoice 7\n\n<table><tr><td>item</td><td>qty</td></tr>"
           "<tr><td>pens</td><td>2</td></tr></table>\n")


def sample(text: str, **extra) -> Sample:
    units = [line for line in text.splitlines() if line.strip()]
    return Sample(dataset="d", stem="s", image=Path("s.png"), doc_type="generic",
                  text="\n".join(units), units=units, **extra)


def test_a_perfect_page_scores_100_and_a_failed_page_0():
    truth = sample("Invoice 2024 number 17\nTotal due 118.50 EUR\nPayable within 30 days")
    perfect = score_page(truth, truth.text, truth.text)
    assert perfect["cer"] == perfect["wer"] == perfect["reading_order"] == 0
    assert perfect["score"] == 100
    assert score_page(truth, truth.text, truth.text, failed=True)["score"] == 0
    garbled = score_page(truth, "Invoise 2024 numbr 17\nTotal due 118.50 EUR", "")
    assert 0 < garbled["score"] < 100


def test_a_truth_written_in_capitals_is_compared_without_case():
    print_ = "Golden Key Maker\nNo 5, Jalan Kenari 2"
    capitals = print_.upper()
    assert score_page(sample(capitals), print_, print_)["cer"] > 0.5
    caseless = score_page(sample(capitals, caseless=True), print_, print_)
    assert caseless["cer"] == caseless["cer_nows"] == caseless["wer"] == 0
    assert caseless["reading_order"] == 0 and caseless["score"] == 100
    # a letter read wrong still counts
    assert score_page(sample(capitals, caseless=True), print_, "Golden Kay Maker\nNo 5")["cer"] > 0


def test_a_truth_without_reading_order_judges_confidence_by_the_order_free_cer():
    rows = "CASH 20.00\nTOTAL 9.90\nCHANGE 10.10\nTHANK YOU FOR COMING"
    swapped = "TOTAL 9.90\nCASH 20.00\nCHANGE 10.10\nTHANK YOU FOR COMING"
    boxed = score_page(sample(rows, order_known=False), swapped, swapped)
    assert boxed["cer_nows"] > 0.2 and boxed["cer_order_free"] == 0.0
    assert boxed["page_cer"] == 0.0  # the order was the truth's guess, not an error
    ordered = score_page(sample(rows), swapped, swapped)
    assert ordered["page_cer"] == ordered["cer_nows"] > 0.2
    misread = score_page(sample(rows, order_known=False), swapped,
                         swapped.replace("9.90", "8.80").replace("20.00", "28.08"))
    group = summarize([boxed | {"status": "done", "seconds": 1.0, "repair_level": 0,
                                "confidence": 0.9},
                       misread | {"status": "done", "seconds": 1.0, "repair_level": 0,
                                  "confidence": 0.5}])
    assert misread["page_cer"] > 0.05 and group["confidence_auroc"] == 1.0
    assert group["cer_order_free"] == pytest.approx(misread["cer_order_free"] / 2)


def test_fields_tables_and_format_enter_the_score():
    truth = sample("Invoice 7\nitem qty\npens 2\nink 1", markdown=TABLE_MD,
                   fields={"number": "Invoice 7", "total": "99.00"})
    right = score_page(truth, TABLE_MD, "Invoice 7\nitem qty\npens 2\nink 1")
    assert right["tables"] == 1.0
    assert right["fields"] == {"number": True, "total": False}
    as_html = score_page(truth, HTML_MD, "Invoice 7\nitem qty\npens 2")
    assert as_html["tables"] == 0.0 and not as_html["format_valid"]
    assert as_html["format_problems"] and as_html["score"] < right["score"]
    group = summarize([right | {"status": "done", "seconds": 1.0, "repair_level": 1,
                                "confidence": 0.9},
                       as_html | {"status": "failed", "seconds": None, "repair_level": None,
                                  "confidence": None}])
    assert group["pages"] == 2 and group["failed"] == 1
    assert group["field_accuracy"] == 0.5 and group["format_validity"] == 0.5
    assert group["seconds_per_page"] == 1.0
    assert group["repaired_rate"] == 1.0 and group["degraded_rate"] == 0.0
    assert not group["repair_healthy"]
    assert group["auto_accepted"] == 1.0  # of the pages that have a confidence
    assert group["confidence_auroc"] is None  # one page: no good/bad pair to rank


def test_a_table_where_a_markdown_truth_has_none_is_a_false_table():
    prose = "Two columns of running text\nread as a table of line pairs"
    as_table = "| Two columns of | running text |\n|---|---|\n| read as a table | of line pairs |\n"
    stated = sample(prose, markdown=prose + "\n")
    assert score_page(stated, prose, prose)["false_tables"] == 0
    assert score_page(stated, as_table, prose)["false_tables"] == 1
    assert score_page(sample("Invoice 7\nitem qty\npens 2\nink 1", markdown=TABLE_MD),
                      TABLE_MD + "\n" + as_table, "")["false_tables"] == 1
    # a text truth does not say whether the page has a table
    assert score_page(sample(prose), as_table, prose)["false_tables"] is None
    group = summarize([score_page(stated, page, prose) | {
        "status": "done", "seconds": 1.0, "repair_level": 0, "confidence": 0.9}
        for page in (prose, as_table)])
    assert group["false_tables"] == 0.5


def report(scores: dict[str, float], overall: float, pages: int = 10) -> dict:
    return {"summary": {"overall": {"score": overall, "pages": pages},
                        "by_type": {t: {"score": s, "pages": 5} for t, s in scores.items()}}}


def test_the_gate_blocks_a_worse_run_and_passes_a_better_one():
    baseline = report({"invoice": 90.0, "receipt": 80.0}, 85.0)
    worse = release_gate(baseline, report({"invoice": 92.0, "receipt": 78.5}, 85.6))
    assert worse.blocked
    assert "BLOCK" in worse.lines[-1] and "receipt" in worse.lines[-1]
    assert "invoice" not in worse.lines[-1]
    better = release_gate(baseline, report({"invoice": 91.0, "receipt": 79.5}, 85.5))
    assert not better.blocked and better.lines[-1] == "PASS"
    # the same scores again: no type dropped, but nothing improved either
    same = release_gate(baseline, baseline)
    assert same.blocked and "overall gain" in same.lines[-1]
    missing = release_gate(baseline, report({"invoice": 99.0}, 99.0))
    assert missing.blocked and "receipt" in missing.lines[-1]


def test_the_contract_catches_a_table_turned_into_html():
    assert output_structure(TABLE_MD) == {"kinds": ["heading", "table"], "tables": [[3, 2]]}
    pinned = snapshot({"engine": "llama", "pages": [
        {"dataset": "d", "stem": "s", "structure": output_structure(TABLE_MD)}]})
    same = {"pages": [{"dataset": "d", "stem": "s", "structure": output_structure(TABLE_MD)}],
            "engine": "llama"}
    assert contract_drift(pinned, same) == []
    drifted = {"pages": [{"dataset": "d", "stem": "s", "structure": output_structure(HTML_MD)}],
               "engine": "llama"}
    drift = contract_drift(pinned, drifted)
    assert any("lost table" in line and "new html" in line for line in drift)
    assert any("table shapes 3x2 -> none" in line for line in drift)
    wider = TABLE_MD.replace("| item | qty |\n|---|---|", "| item | qty | price |\n|---|---|---|")
    wider = wider.replace("| 2 |", "| 2 | 3 |").replace("| 1 |", "| 1 | 4 |")
    assert contract_drift(pinned, {"engine": "llama", "pages": [
        {"dataset": "d", "stem": "s", "structure": output_structure(wider)}]}) == [
        "d/s: table shapes 3x2 -> 3x3"]


# --- the real command -----------------------------------------------------------------

PAGES = {
    "memo": ["Quarterly report 2024", "Revenue grew by 12 percent", "Costs fell in March"],
    "invoice": ["Invoice number 4711", "Customer Acme Limited", "Total 118.50 EUR"],
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dataset")
    for stem, lines in PAGES.items():
        render_text_page(lines, width=900, height=500, font_size=36).save(root / f"{stem}.png")
        (root / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    (root / "invoice.fields.json").write_text(json.dumps({"total": "118.50", "po": "PO-999"}))
    (root / "dataset.json").write_text(json.dumps({"name": "synthetic"}))
    return root


def run_eval(tmp_path: Path, dataset: Path, *args: str) -> subprocess.CompletedProcess:
    config = tmp_path / "eval.toml"
    config.write_text(dump_toml({"engine": {"name": "classic", "threads": 1}}))
    return subprocess.run([sys.executable, "-m", "appliance.cli", "eval", str(dataset),
                           "--config", str(config), *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, dataset) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("eval")
    run = run_eval(out, dataset, "--report", str(out / "r.json"), "--report", str(out / "r.md"),
                   "--snapshot", str(out / "contract.json"))
    return out, run


def test_eval_scores_the_pages_through_the_daemon(first_run):
    out, run = first_run
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((out / "r.json").read_text())
    assert result["engine"] == "classic" and result["model_id"].startswith("rapidocr")
    overall = result["summary"]["overall"]
    assert overall["pages"] == 2 and overall["failed"] == 0
    assert overall["cer_nows"] < 0.1 and overall["score"] > 85
    assert overall["format_validity"] == 1.0
    # "118.50" is on the page, the purchase order number is not
    assert overall["field_accuracy"] == 0.5
    assert overall["seconds_per_page"] > 0
    assert set(result["summary"]["by_dataset"]) == {"synthetic"}
    assert set(result["summary"]["by_type"]) == {"generic"}
    table = (out / "r.md").read_text()
    assert "| overall | 2 | 0 |" in table and "| dataset synthetic |" in table
    assert "| overall |" in run.stdout
    contract = json.loads((out / "contract.json").read_text())
    assert contract["pages"]["synthetic/memo"] == {"kinds": ["paragraph"], "tables": []}


def test_the_gate_and_the_contract_on_a_real_run(tmp_path, dataset, first_run):
    out, _ = first_run
    result = json.loads((out / "r.json").read_text())
    overall = result["summary"]["overall"]["score"]
    # a baseline that this run falls short of, and a contract that pinned a table
    better = json.loads(json.dumps(result))
    better["summary"]["by_type"]["generic"]["score"] = overall + 5
    (tmp_path / "better.json").write_text(json.dumps(better))
    contract = json.loads((out / "contract.json").read_text())
    contract["pages"]["synthetic/invoice"] = {"kinds": ["paragraph", "table"],
                                              "tables": [[3, 2]]}
    (tmp_path / "contract.json").write_text(json.dumps(contract))
    blocked = run_eval(tmp_path, dataset, "--baseline", str(tmp_path / "better.json"),
                       "--check-contract", str(tmp_path / "contract.json"))
    assert blocked.returncode == 1, blocked.stderr[-3000:]
    assert "BLOCK" in blocked.stdout and "generic" in blocked.stdout
    assert "synthetic/invoice: block kinds" in blocked.stdout
    assert "synthetic/memo" not in blocked.stdout

    worse = json.loads(json.dumps(result))
    worse["summary"]["overall"]["score"] = overall - 1
    worse["summary"]["by_type"]["generic"]["score"] = overall - 1
    (tmp_path / "worse.json").write_text(json.dumps(worse))
    passed = run_eval(tmp_path, dataset, "--baseline", str(tmp_path / "worse.json"),
                      "--check-contract", str(out / "contract.json"))
    assert passed.returncode == 0, passed.stdout + passed.stderr[-3000:]
    assert "PASS" in passed.stdout and "format contract: no drift" in passed.stdout


def test_eval_refuses_a_bad_baseline_before_running(tmp_path, dataset):
    (tmp_path / "broken.json").write_text("{not json")
    run = run_eval(tmp_path, dataset, "--baseline", str(tmp_path / "broken.json"))
    assert run.returncode == 2
    assert "cannot read the baseline report" in run.stderr


def test_key_fields_are_scored_per_type_and_field_with_validation_precision():
    def field(name, kind, raw, valid, value=None):
        return {"name": name, "kind": kind, "raw": raw, "value": value or raw, "valid": valid}

    # an amount is scored by the value given, not as read: "28-90" beside TOTAL is 28.90
    misread = score_fields({"total": "28.90"}, [field("total", "money", "28-90", True, "28.90")])
    assert misread["total"]["exact"] is True

    receipts = [
        {"doc_type": "receipt", "field_scores": score_fields(
            {"total": "RM 15.70", "company": "Kedai Maju"},
            [field("total", "money", "15.70", True), field("company", "text", "KEDAI MAJU", True)])},
        {"doc_type": "receipt", "field_scores": score_fields(
            {"total": "9.90", "company": "Kedai Maju"},
            [field("total", "money", "99.00", False), field("company", "text", "KEDAl MAJU", True)])},
        {"doc_type": "receipt", "field_scores": None},  # a failed page
    ]
    invoice = {"doc_type": "invoice", "field_scores": score_fields(
        {"gross": "1.190,00"}, [field("gross", "money", "1190.00", False),
                                field("net", "money", None, None)])}
    summary = summarize_fields([*receipts, invoice])
    assert list(summary) == ["invoice", "receipt"]
    total, company = summary["receipt"]["total"], summary["receipt"]["company"]
    assert (total["documents"], total["found"], total["exact"]) == (2, 1.0, 0.5)
    assert (total["flagged"], total["validation_precision"]) == (1, 1.0)  # flagged and wrong
    assert company["exact"] == 0.5 and company["cer"] == pytest.approx(0.05)
    gross = summary["invoice"]["gross"]
    assert (gross["exact"], gross["validation_precision"]) == (1.0, 0.0)  # a false flag
    assert list(summary["invoice"]) == ["gross"]  # net is not in the truth: not scored
    table = format_fields(summary)
    assert "| receipt | total | 2 | 100% | 50% | - | 1 | 100% |" in table
    assert "| invoice | gross | 1 | 100% | 100% | - | 1 | 0% |" in table


def test_eval_compares_two_models_on_the_same_pages_with_the_release_gate(tmp_path, dataset):
    """`--model A --model B`: two daemons, one per model pair, side by side; the second
    gated against the first."""
    gemma = write_test_model(tmp_path / "gemma3")
    paddle = write_family_test_model(tmp_path / "paddle", "paddleocr_vl")
    pairs = [",".join(str(path) for path in pair) for pair in (gemma, paddle)]
    run = run_eval(tmp_path, dataset, "--engine", "llama", "--limit", "1",
                   "--model", pairs[0], "--model", pairs[1],
                   "--report", str(tmp_path / "compared.json"))
    assert run.returncode in (0, 1), run.stderr[-3000:]
    compared = json.loads((tmp_path / "compared.json").read_text())["compared"]
    assert [report["engine"] for report in compared] == ["llama", "llama"]
    assert "tiny-gemma3" in compared[0]["model_id"]
    assert "tiny-paddleocr_vl" in compared[1]["model_id"]
    for report in compared:
        assert report["summary"]["overall"]["pages"] == 1
    assert f"A: {pairs[0]} (tiny-gemma3" in run.stdout and f"B: {pairs[1]} (tiny-p" in run.stdout
    header = next(line for line in run.stdout.splitlines() if line.startswith("| group"))
    assert "| A score |" in header and "| B score |" in header
    overall = next(line for line in run.stdout.splitlines() if line.startswith("| overall"))
    assert overall.count("|") == len(header.split("|")) - 1
    assert f"release gate, {pairs[1]} against {pairs[0]}:" in run.stdout
    assert "overall:" in run.stdout


def test_eval_refuses_a_model_it_cannot_find_before_running(tmp_path, dataset):
    run = run_eval(tmp_path, dataset, "--model", "glm-ocr", "--models-dir", str(tmp_path))
    assert run.returncode == 2
    assert "not in" in run.stderr and "appliance models pull glm-ocr" in run.stderr
