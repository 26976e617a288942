"""Dataset adapters for `appliance eval`: tiny datasets of each layout built in tmp_path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from PIL import Image

from appliance.errors import DatasetError
from appliance.measure.datasets import Sample, find_datasets, load_dataset, reading_order


def write_image(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (64, 48), 255).save(path)
    return path


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def entity(text: str, x0: int, y0: int, x1: int, y1: int, **extra) -> dict:
    """An entity in the shared/eval FUNSD form: transcription and four corner points."""
    return {"transcription": text, "label": "other", "id": 0, "linking": [],
            "points": [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], **extra}


def make_funsd(root: Path) -> Path:
    write_image(root / "images" / "b.png")
    write_image(root / "images" / "a.png")
    # Stored out of order: a title, a row with two columns, a row below, an empty checkbox.
    write_json(root / "labels" / "b.json", {"image": "b.png", "entities": [
        entity("Date:", 300, 52, 350, 66),
        entity("Name:", 10, 50, 60, 64),
        entity("Notes", 10, 100, 80, 114),
        entity("", 200, 100, 210, 110),
        entity("FORM TITLE", 100, 10, 200, 30),
        entity("Smith", 70, 54, 150, 68),
    ]})
    # The original FUNSD form: "form", "text", "box" [x0, y0, x1, y1].
    write_json(root / "labels" / "a.json", {"form": [
        {"text": "second", "box": [10, 40, 60, 52], "label": "answer", "id": 1},
        {"text": "first", "box": [10, 10, 60, 22], "label": "question", "id": 0},
    ]})
    return root


def make_sroie(root: Path) -> Path:
    write_image(root / "img" / "x001.jpg")
    write_image(root / "img" / "x000.jpg")
    write_image(root / "img" / "unlabelled.jpg")
    # listed out of reading order, as SROIE's files are
    csv = ("72,25,326,25,326,64,72,64,TAN WOON YANN\r\n"
           "\r\n"
           "110,459,170,459,170,478,110,478,TOTAL: 9,00\r\n"
           "50,82,440,82,440,121,50,121,BOOK TA .K(TAMAN DAYA) SDN BND\r\n")
    (root / "box").mkdir(parents=True)
    (root / "box" / "x000.csv").write_bytes(b"\xef\xbb\xbf" + csv.encode("utf-8"))
    latin1 = "1,2,3,4,5,6,7,8,CAF\xc9 R\xc9SUM\xc9\n".encode("latin-1")
    (root / "box" / "x001.csv").write_bytes(latin1)
    write_json(root / "key" / "x000.json", {"company": "BOOK TA .K(TAMAN DAYA) SDN BHD",
                                            "date": "25/12/2018", "total": "9.00"})
    return root


def make_plain(root: Path) -> Path:
    write_image(root / "letter.png")
    (root / "letter.txt").write_text("Dear Sir,\n\n  I write to you.  \n\nYours\n",
                                     encoding="utf-8")
    write_image(root / "sheet.tif")
    (root / "sheet.md").write_text("# Prices\n\n| Item | Price |\n|---|:--:|\n| Tea | 2,50 |\n",
                                   encoding="utf-8")
    write_json(root / "sheet.fields.json", {"total": 2.5, "currency": "EUR"})
    write_image(root / "no-truth.png")
    return root


# --- FUNSD-style ---


def test_funsd_samples_in_reading_order(tmp_path):
    root = make_funsd(tmp_path / "forms")
    samples = load_dataset(root)

    assert [s.stem for s in samples] == ["a", "b"]
    a, b = samples
    assert a.units == ["first", "second"]
    # Title; then Name/Smith/Date on one row (boxes overlap vertically), left to right;
    # then the row below. The empty entity is gone.
    assert b.units == ["FORM TITLE", "Name:", "Smith", "Date:", "Notes"]
    assert b.text == "FORM TITLE\nName:\nSmith\nDate:\nNotes"
    assert b.image == root / "images" / "b.png"
    assert b.dataset == "forms"
    assert b.doc_type == "generic"
    assert b.markdown is None and b.fields == {}
    assert not a.order_known  # sorted by their boxes: pages are judged order-free


def test_reading_order_two_columns_and_tall_entity():
    boxed = [
        ((300, 10, 400, 22), "right column"),
        ((10, 12, 100, 24), "left column"),
        ((10, 40, 100, 52), "row below"),
        # A tall multi-line answer beside three short lines: the lines below the first
        # stay rows of their own instead of collapsing into the tall entity's row.
        ((10, 80, 60, 92), "line 1"),
        ((200, 78, 400, 130), "tall answer"),
        ((10, 98, 60, 110), "line 2"),
        ((10, 116, 60, 128), "line 3"),
    ]
    assert reading_order(boxed) == ["left column", "right column", "row below",
                                    "line 1", "tall answer", "line 2", "line 3"]


def test_funsd_missing_image(tmp_path):
    root = make_funsd(tmp_path / "forms")
    (root / "images" / "b.png").unlink()
    with pytest.raises(DatasetError, match=r"b\.json.*image.*b\.png.*missing"):
        load_dataset(root)


def test_funsd_bad_json(tmp_path):
    root = make_funsd(tmp_path / "forms")
    (root / "labels" / "a.json").write_text('{"form": [', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"a\.json.*malformed JSON"):
        load_dataset(root)


def test_funsd_entity_without_box(tmp_path):
    root = make_funsd(tmp_path / "forms")
    write_json(root / "labels" / "a.json", {"form": [{"text": "x", "label": "other"}]})
    with pytest.raises(DatasetError, match=r'a\.json: entity 0 has neither "box" nor "points"'):
        load_dataset(root)


def test_funsd_label_without_entities(tmp_path):
    root = make_funsd(tmp_path / "forms")
    write_json(root / "labels" / "a.json", {"image": "a.png"})
    with pytest.raises(DatasetError, match=r'a\.json: no "entities" or "form" list'):
        load_dataset(root)


# --- SROIE-style ---


def test_sroie_samples(tmp_path, caplog):
    root = make_sroie(tmp_path / "receipts")
    with caplog.at_level(logging.WARNING, logger="appliance.measure.datasets"):
        samples = load_dataset(root)

    assert [s.stem for s in samples] == ["x000", "x001"]
    first, second = samples
    # Split on the first 8 commas only: "TOTAL: 9,00" keeps its comma; the BOM and the
    # blank line are gone; the lines come in reading order, by their boxes.
    assert first.units == ["TAN WOON YANN", "BOOK TA .K(TAMAN DAYA) SDN BND", "TOTAL: 9,00"]
    assert first.fields == {"company": "BOOK TA .K(TAMAN DAYA) SDN BHD", "date": "25/12/2018",
                            "total": "9.00"}
    assert first.image == root / "img" / "x000.jpg"
    assert first.doc_type == "receipt"
    assert first.caseless  # SROIE writes its truth in capitals
    assert not first.order_known
    assert second.units == ["CAF\xc9 R\xc9SUM\xc9"]     # a latin-1 file
    assert second.fields == {}
    assert "count=1" in caplog.text


def test_sroie_bad_csv_line(tmp_path):
    root = make_sroie(tmp_path / "receipts")
    (root / "box" / "x001.csv").write_text("1,2,3,4,5,6,7,8,fine\n1,2,three,4,5,6,7,8,bad\n")
    with pytest.raises(DatasetError, match=r"x001\.csv line 2: .*integer coordinates"):
        load_dataset(root)
    (root / "box" / "x001.csv").write_text("1,2,3,4,only a text\n")
    with pytest.raises(DatasetError, match=r"x001\.csv line 1: expected 8 coordinates"):
        load_dataset(root)


def test_sroie_missing_image(tmp_path):
    root = make_sroie(tmp_path / "receipts")
    (root / "img" / "x001.jpg").unlink()
    with pytest.raises(DatasetError, match=r"x001\.csv.*image.*missing"):
        load_dataset(root)


def test_sroie_bad_key_json(tmp_path):
    root = make_sroie(tmp_path / "receipts")
    (root / "key" / "x000.json").write_text("{'company': 'x'}")
    with pytest.raises(DatasetError, match=r"x000\.json.*malformed JSON"):
        load_dataset(root)


# --- plain ---


def test_plain_samples(tmp_path, caplog):
    root = make_plain(tmp_path / "pages")
    with caplog.at_level(logging.WARNING, logger="appliance.measure.datasets"):
        samples = load_dataset(root)

    assert [s.stem for s in samples] == ["letter", "sheet"]
    letter, sheet = samples
    assert letter.units == ["Dear Sir,", "I write to you.", "Yours"]
    assert letter.text == "Dear Sir,\nI write to you.\nYours"
    assert letter.markdown is None
    assert sheet.image == root / "sheet.tif"
    # the text of Markdown truth is its words, cells apart: no "#", no "|"
    assert sheet.units == ["Prices", "Item\tPrice", "Tea\t2,50"]
    assert sheet.markdown == (root / "sheet.md").read_text(encoding="utf-8")
    assert sheet.fields == {"total": "2.5", "currency": "EUR"}
    assert sheet.doc_type == "generic"
    assert letter.order_known and sheet.order_known  # a text file is read in its order
    assert "count=1" in caplog.text      # no-truth.png


def test_plain_images_without_truth_is_no_dataset(tmp_path):
    write_image(tmp_path / "scan.png")
    with pytest.raises(DatasetError, match="not a dataset: expected FUNSD-style.*SROIE.*plain"):
        load_dataset(tmp_path)


# --- dataset.json, doc_type, find_datasets, empty ---


def test_dataset_json_name_and_doc_type(tmp_path):
    root = make_plain(tmp_path / "pages")
    write_json(root / "dataset.json", {"name": "invoices-2024", "doc_type": "invoice"})
    samples = load_dataset(root)
    assert {(s.dataset, s.doc_type) for s in samples} == {("invoices-2024", "invoice")}
    # The argument overrides dataset.json.
    assert {s.doc_type for s in load_dataset(root, doc_type="table")} == {"table"}
    assert not any(s.caseless for s in samples)
    write_json(root / "dataset.json", {"caseless": True})
    assert all(s.caseless for s in load_dataset(root))
    write_json(root / "dataset.json", {"caseless": "yes"})
    with pytest.raises(DatasetError, match=r'"caseless" must be true or false'):
        load_dataset(root)


def test_bad_doc_type(tmp_path):
    root = make_plain(tmp_path / "pages")
    with pytest.raises(DatasetError, match=r"'letters'.*one of: generic, receipt"):
        load_dataset(root, doc_type="letters")
    write_json(root / "dataset.json", {"doc_type": "letters"})
    with pytest.raises(DatasetError, match=r'dataset\.json "doc_type" is \'letters\''):
        load_dataset(root)


def test_bad_dataset_json(tmp_path):
    root = make_plain(tmp_path / "pages")
    (root / "dataset.json").write_text("{name: x}")
    with pytest.raises(DatasetError, match=r"dataset\.json: malformed JSON"):
        load_dataset(root)
    write_json(root / "dataset.json", ["a list"])
    with pytest.raises(DatasetError, match=r"dataset\.json: expected a JSON object"):
        load_dataset(root)


def test_find_datasets(tmp_path):
    make_funsd(tmp_path / "forms")
    make_sroie(tmp_path / "receipts")
    (tmp_path / "notes").mkdir()                      # not a dataset: left out
    assert find_datasets(tmp_path) == [tmp_path / "forms", tmp_path / "receipts"]
    assert find_datasets(tmp_path / "forms") == [tmp_path / "forms"]


def test_find_datasets_none(tmp_path):
    (tmp_path / "notes").mkdir()
    with pytest.raises(DatasetError, match="FUNSD-style.*SROIE-style.*plain"):
        find_datasets(tmp_path)
    with pytest.raises(DatasetError, match="not found"):
        find_datasets(tmp_path / "missing")


def test_empty_dataset(tmp_path):
    (tmp_path / "labels").mkdir()
    (tmp_path / "images").mkdir()
    with pytest.raises(DatasetError, match="holds no samples"):
        load_dataset(tmp_path)


def test_sample_defaults():
    sample = Sample(dataset="d", stem="s", image=Path("s.png"), doc_type="generic", text="",
                    units=[])
    assert sample.markdown is None and sample.fields == {}


def test_synthetic_sets_load_as_plain_datasets_and_are_repeatable(tmp_path):
    from appliance.measure import born_digital
    from appliance.measure.synthetic_sets import make_sets

    assert make_sets(tmp_path / "a", pages=2, seed=5) == {
        "columns": 2, "columns-zh": 2, "columns-span": 2, "columns-span-zh": 2,
        "prose": 2, "receipts": 2, "tables": 2, "degraded": 2,
        "receipts-fields": 2, "invoices-fields": 2, "fapiao-fields": 2,
        "born-digital": len(born_digital.MAKERS)}
    make_sets(tmp_path / "b", pages=2, seed=5)
    found = {path.name: load_dataset(path) for path in find_datasets(tmp_path / "a")}
    assert {name: samples[0].dataset for name, samples in found.items()} == {
        "columns": "synthetic-columns", "columns-zh": "synthetic-columns-zh",
        "columns-span": "synthetic-columns-span", "columns-span-zh": "synthetic-columns-span-zh",
        "prose": "synthetic-prose", "receipts": "synthetic-receipts",
        "tables": "synthetic-tables", "degraded": "synthetic-degraded",
        "receipts-fields": "synthetic-receipts-fields",
        "invoices-fields": "synthetic-invoices-fields",
        "fapiao-fields": "synthetic-fapiao-fields",
        "born-digital": "synthetic-born-digital"}
    assert all("| --- |" in s.markdown or "|---|" in s.markdown for s in found["tables"])
    assert found["receipts"][0].doc_type == "receipt" and len(found["columns"][0].units) > 20
    assert "年" in found["columns-zh"][0].text  # Chinese, in the CJK font the set-up installs
    for name, samples in found.items():  # the same seed draws the same pages
        for sample in samples:
            again = tmp_path / "b" / name / sample.image.name
            assert again.read_bytes() == sample.image.read_bytes()
