"""Datasets with ground truth for `appliance eval`: three folder layouts, one Sample type.

- FUNSD-style: ``labels/<stem>.json`` beside ``images/<stem>.png``. Both label forms are
  read: ``{"form": [{"text", "box": [x0, y0, x1, y1]}]}`` (the original FUNSD release)
  and ``{"entities": [{"transcription", "points": [[x, y], ...]}]}`` (the copy in
  ``shared/eval``). FUNSD stores entities in no particular order, so the reading order
  is derived from the boxes: rows top to bottom, entities left to right in a row.
- SROIE-style: ``img/<stem>.jpg`` beside ``box/<stem>.csv`` (``x1,y1,...,x4,y4,text``
  per line; the text may hold commas) and an optional ``key/<stem>.json`` of key fields.
  The lines are listed in no reading order either (a label's value may come two lines
  after it), so it is derived from their boxes in the same way.
- Plain: an image beside ``<stem>.txt`` or ``<stem>.md`` (and optional
  ``<stem>.fields.json``) in one folder.

Any layout may carry a ``dataset.json`` at its root with ``name``, ``doc_type`` and
``caseless``: true when the truth was written without letter case, as SROIE's
annotations are (all in capitals, over print in mixed case); the SROIE layout is
caseless unless its dataset.json says otherwise. A caseless truth is compared
case-folded, or every lower-case letter read right would count as an error.
A broken dataset (a label without its image, malformed JSON or CSV) stops the load
with a DatasetError that names the file: an eval must never quietly score half a
dataset.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from appliance.config import DOC_TYPES
from appliance.errors import DatasetError
from appliance.quality.markdown import markdown_to_text

log = logging.getLogger(__name__)

Box = tuple[float, float, float, float]   # x0, y0, x1, y1
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".pdf", ".webp", ".bmp")
LAYOUTS_HELP = ("FUNSD-style (labels/<stem>.json with images/<stem>.png), "
                "SROIE-style (img/<stem>.jpg with box/<stem>.csv, optional key/<stem>.json), "
                "or plain (<stem>.png with <stem>.txt or <stem>.md in one folder)")



@dataclass
class Sample:
    dataset: str            # the dataset's name: dataset.json "name", else the directory name
    stem: str
    image: Path             # the page/document file to OCR
    doc_type: str           # one of DOC_TYPES
    text: str               # ground-truth text: the units joined with "\n"
    units: list[str]        # ground-truth text blocks/lines in reading order
    markdown: str | None = None   # ground-truth Markdown when the dataset has it
    fields: dict[str, str] = field(default_factory=dict)   # key fields, when the dataset has them
    # the page's barcodes, where the dataset has them (``<stem>.barcodes.json``): "codes"
    # (format, value each), "disagrees" (fields printed otherwise than a fapiao's QR code
    # holds) and "scan" (how the page was scanned)
    barcodes: dict | None = None
    caseless: bool = False  # the truth has no letter case: compare case-folded
    # the units are in the page's reading order; False where the layout's truth has no
    # order and its units were only sorted by their boxes (FUNSD, SROIE): a page is then
    # judged by its order-free CER
    order_known: bool = True


def load_dataset(path: Path, *, doc_type: str | None = None) -> list[Sample]:
    """Every sample of the dataset at `path`, sorted by stem.

    `doc_type` overrides both dataset.json and the layout's default.
    """
    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"dataset folder not found: {path}")
    layout = detect_layout(path)
    if layout is None:
        raise DatasetError(f"{path} is not a dataset: expected {LAYOUTS_HELP}")
    meta = _read_meta(path)
    name = meta.get("name") or path.resolve().name
    if doc_type is not None:
        _check_doc_type(doc_type, "the doc_type option")
    kind = doc_type or meta.get("doc_type") or _DEFAULT_DOC_TYPE[layout]
    caseless = meta.get("caseless", layout == "sroie")
    rows = _READERS[layout](path)
    if not rows:
        raise DatasetError(f"dataset {path} ({layout} layout) holds no samples with ground truth")
    samples = [Sample(dataset=name, stem=stem, image=image, doc_type=kind, text="\n".join(units),
                      units=units, markdown=markdown, fields=fields, caseless=caseless,
                      order_known=layout not in _BOXED_LAYOUTS, barcodes=_read_barcodes(image))
               for stem, image, units, markdown, fields in rows]
    _check_unique_stems(path, samples)
    samples.sort(key=lambda s: s.stem)
    log.info("dataset loaded name=%s layout=%s samples=%d doc_type=%s", name, layout,
             len(samples), kind)
    return samples


def find_datasets(path: Path) -> list[Path]:
    """[path] when it is a dataset itself, else its immediate subfolders that are (sorted)."""
    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"dataset folder not found: {path}")
    if detect_layout(path) is not None:
        return [path]
    found = sorted(child for child in path.iterdir()
                   if child.is_dir() and detect_layout(child) is not None)
    if not found:
        raise DatasetError(f"no dataset in {path} or its subfolders: expected {LAYOUTS_HELP}")
    return found


def detect_layout(path: Path) -> str | None:
    """'funsd', 'sroie', 'plain', or None when `path` has none of the three layouts."""
    if (path / "labels").is_dir() and (path / "images").is_dir():
        return "funsd"
    if (path / "box").is_dir() and (path / "img").is_dir():
        return "sroie"
    if any(_plain_truth(image) for image in _images_in(path)):
        return "plain"
    return None


# --- dataset.json ---


def _read_meta(root: Path) -> dict:
    meta_path = root / "dataset.json"
    if not meta_path.is_file():
        return {}
    meta = _read_json(meta_path)
    if not isinstance(meta, dict):
        raise DatasetError(f"{meta_path}: expected a JSON object with optional "
                             f'"name", "doc_type" and "caseless" keys')
    name = meta.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise DatasetError(f'{meta_path}: "name" must be a non-empty string')
    if meta.get("doc_type") is not None:
        _check_doc_type(meta["doc_type"], f'{meta_path} "doc_type"')
    if not isinstance(meta.get("caseless", False), bool):
        raise DatasetError(f'{meta_path}: "caseless" must be true or false')
    return meta


def _check_doc_type(value, where: str) -> None:
    if value not in DOC_TYPES:
        raise DatasetError(f"{where} is {value!r}; expected one of: {', '.join(DOC_TYPES)}")


# --- FUNSD-style ---


def _read_funsd(root: Path) -> list[tuple]:
    images_dir = root / "images"
    rows = []
    for label_path in sorted((root / "labels").glob("*.json")):
        label = _read_json(label_path)
        if not isinstance(label, dict):
            raise DatasetError(f"{label_path}: expected a JSON object with an "
                                 f'"entities" or "form" list')
        entities = label.get("entities", label.get("form"))
        if not isinstance(entities, list):
            raise DatasetError(f'{label_path}: no "entities" or "form" list')
        image = _funsd_image(images_dir, label_path, label.get("image"))
        boxed = []
        for index, entity in enumerate(entities):
            text, box = _funsd_entity(label_path, index, entity)
            if text.strip():
                boxed.append((box, text.strip()))
        rows.append((label_path.stem, image, reading_order(boxed), None, {}))
    return rows


def _funsd_image(images_dir: Path, label_path: Path, named) -> Path:
    if isinstance(named, str) and named and (images_dir / named).is_file():
        return images_dir / named
    candidates = [images_dir / f"{label_path.stem}{suffix}" for suffix in IMAGE_SUFFIXES]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    wanted = images_dir / (named if isinstance(named, str) and named else f"{label_path.stem}.png")
    raise DatasetError(f"{label_path}: its image {wanted} is missing")


def _funsd_entity(label_path: Path, index: int, entity) -> tuple[str, Box]:
    where = f"{label_path}: entity {index}"
    if not isinstance(entity, dict):
        raise DatasetError(f"{where} is not a JSON object")
    text = entity.get("text", entity.get("transcription"))
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise DatasetError(f'{where}: "text"/"transcription" must be a string')
    if "box" in entity:
        coords = entity["box"]
    elif "points" in entity:
        coords = entity["points"]
        if isinstance(coords, list) and coords and all(isinstance(p, list) for p in coords):
            coords = [c for point in coords for c in point]
    else:
        raise DatasetError(f'{where} has neither "box" nor "points"')
    if (not isinstance(coords, list) or len(coords) < 4 or len(coords) % 2
            or not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in coords)):
        raise DatasetError(f"{where}: box/points must be numbers, "
                             f"[x0, y0, x1, y1] or [[x, y], ...]; got {coords!r}")
    xs, ys = coords[0::2], coords[1::2]
    return text, (min(xs), min(ys), max(xs), max(ys))


def reading_order(boxed: list[tuple[Box, str]]) -> list[str]:
    """Texts of (box, text) pairs in reading order: rows top to bottom, left to right.

    Entities are taken by their top edge. One joins the current row when its vertical
    centre falls inside the row's band, or the band's centre falls inside it (a tall,
    multi-line entity beside a line). The band is the extent of the row's shortest
    member, so a tall entity does not pull the lines below it into its row.
    """
    rows: list[list] = []
    band: tuple[float, float] | None = None
    for box, text in sorted(boxed, key=lambda item: (item[0][1], item[0][0])):
        _, top, _, bottom = box
        centre = (top + bottom) / 2
        if band is not None:
            band_centre = (band[0] + band[1]) / 2
            if band[0] <= centre <= band[1] or top <= band_centre <= bottom:
                rows[-1].append((box, text))
                if bottom - top < band[1] - band[0]:
                    band = (top, bottom)
                continue
        rows.append([(box, text)])
        band = (top, bottom)
    return [text for row in rows for _, text in sorted(row, key=lambda item: item[0][0])]


# --- SROIE-style ---


def _read_sroie(root: Path) -> list[tuple]:
    images = _by_stem(root / "img")
    rows = []
    for box_path in sorted((root / "box").glob("*.csv")):
        stem = box_path.stem
        if stem not in images:
            wanted = root / "img" / f"{stem}.jpg"
            raise DatasetError(f"{box_path}: its image {wanted} is missing")
        units = _read_box_csv(box_path)
        fields = {}
        key_path = root / "key" / f"{stem}.json"
        if key_path.is_file():
            fields = _read_fields(key_path)
        rows.append((stem, images[stem], units, None, fields))
    unlabelled = len(set(images) - {row[0] for row in rows})
    if unlabelled:
        log.warning("images without ground truth skipped dataset=%s count=%d", root, unlabelled)
    return rows


def _read_box_csv(path: Path) -> list[str]:
    units = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(",", 8)
        if len(parts) < 9:
            raise DatasetError(f"{path} line {number}: expected 8 coordinates and a text, "
                                 f"got {line!r}")
        try:
            coords = [int(part) for part in parts[:8]]
        except ValueError:
            raise DatasetError(f"{path} line {number}: the first 8 values must be integer "
                                 f"coordinates, got {','.join(parts[:8])!r}") from None
        text = parts[8].strip()
        if text:
            xs, ys = coords[0::2], coords[1::2]
            units.append(((min(xs), min(ys), max(xs), max(ys)), text))
    # the boxes are listed in the order they were annotated, not read
    return reading_order(units)


# --- plain ---


def _read_plain(root: Path) -> list[tuple]:
    rows, unlabelled = [], 0
    for image in _images_in(root):
        truth = _plain_truth(image)
        if truth is None:
            unlabelled += 1
            continue
        content = _read_text(truth)
        markdown = content if truth.suffix == ".md" else None
        # the text of Markdown truth is its words: no "#", no "|", no delimiter rows
        text = markdown_to_text(content) if markdown is not None else content
        units = [line.strip() for line in text.splitlines() if line.strip()]
        fields_path = image.with_name(f"{image.stem}.fields.json")
        fields = _read_fields(fields_path) if fields_path.is_file() else {}
        rows.append((image.stem, image, units, markdown, fields))
    if unlabelled:
        log.warning("images without ground truth skipped dataset=%s count=%d", root, unlabelled)
    return rows


def _plain_truth(image: Path) -> Path | None:
    """`<stem>.md` (preferred: it carries the tables) or `<stem>.txt` beside the image."""
    for suffix in (".md", ".txt"):
        candidate = image.with_name(image.stem + suffix)
        if candidate.is_file():
            return candidate
    return None


# --- shared helpers ---


def _images_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _by_stem(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for image in _images_in(folder):
        if image.stem in found:
            raise DatasetError(f"two images share the stem {image.stem!r}: "
                                 f"{found[image.stem].name} and {image.name} in {folder}")
        found[image.stem] = image
    return found


def _check_unique_stems(root: Path, samples: list[Sample]) -> None:
    seen: dict[str, Path] = {}
    for sample in samples:
        if sample.stem in seen:
            raise DatasetError(f"two samples share the stem {sample.stem!r} in {root}: "
                                 f"{seen[sample.stem].name} and {sample.image.name}")
        seen[sample.stem] = sample.image


def _read_text(path: Path) -> str:
    """UTF-8 (with or without BOM), else latin-1, which decodes any byte."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _read_json(path: Path):
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: malformed JSON ({exc})") from None


def _read_barcodes(image: Path) -> dict | None:
    path = image.with_name(f"{image.stem}.barcodes.json")
    if not path.is_file():
        return None
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("codes"), list):
        raise DatasetError(f'{path}: expected a JSON object with a "codes" list')
    return data


def _read_fields(path: Path) -> dict[str, str]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object of field name to value")
    fields = {}
    for key, value in data.items():
        if isinstance(value, (dict, list)):
            raise DatasetError(f"{path}: field {key!r} must be a plain value, "
                                 f"not {type(value).__name__}")
        fields[str(key)] = "" if value is None else str(value)
    return fields


_READERS = {"funsd": _read_funsd, "sroie": _read_sroie, "plain": _read_plain}
_DEFAULT_DOC_TYPE = {"funsd": "generic", "sroie": "receipt", "plain": "generic"}
_BOXED_LAYOUTS = ("funsd", "sroie")  # truth as boxes without a reading order
