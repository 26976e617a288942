"""Which way up a page is, for ``appliance.raster.preprocess``: RapidOCR's
text-direction classifier (``UpsideDownClassifier``: upright or upside down) and its
text detector (``TextBoxDirections``: whether the text runs across the page or down it).

The model is PP-OCR's 0/180-degree line classifier (``ch_ppocr_mobile_v2.0_cls``),
shipped inside the rapidocr wheel, so it needs no download. Alone it is not reliable
enough to turn a line (see ``classic.make_rapidocr``); preprocessing asks it about a
dozen lines of a page and turns the page only on a clear majority.

Its input is 48 x 192 pixels, and a longer line is squeezed to that width, so a long
line is asked about in up to ``MAX_PIECES_PER_LINE`` pieces of about the model's
aspect ratio, and their answers are averaged.

One instance per worker process; creating it loads the ONNX model (about 0.2 s).
"""

from __future__ import annotations

import logging
import math
import threading
from importlib.metadata import version

import cv2
import numpy as np
from rapidocr.ch_ppocr_cls import TextClassifier
from rapidocr.ch_ppocr_det import TextDetector

from appliance.engines.classic import make_rapidocr

log = logging.getLogger(__name__)

MAX_PIECES_PER_LINE = 3
_MODEL_ASPECT = 192 / 48  # the classifier's input width / height (PP-OCRv4 cls shape)


class UpsideDownClassifier:
    """``__call__(crops) -> [(is_rotated_180, confidence), ...]``, one per crop.

    Crops are text-line images, RGB (H x W x 3) or grayscale (H x W) uint8, roughly
    horizontal. ``confidence`` is the averaged probability of the answer given
    (0.5: a coin toss, 1.0: certain).
    """

    def __init__(self, threads: int = 1):
        # The same onnxruntime thread settings as the classic engine; the classifier is
        # built the way RapidOCR builds its own on first use (RapidOCR._load_cls_model).
        cfg = make_rapidocr(threads).cfg
        cfg.Cls.engine_cfg = cfg.EngineConfig[cfg.Cls.engine_type.value]
        cfg.Cls.model_root_dir = cfg.Global.model_root_dir
        self._cls = TextClassifier(cfg.Cls)
        self._flip_label = "180"
        # the page threads of a parallel engine share one classifier, and RapidOCR does
        # not promise its wrappers are thread-safe
        self._lock = threading.Lock()
        self.model_id = (f"rapidocr-{version('rapidocr')}/"
                         f"{cfg.Cls.ocr_version.value}_cls_{cfg.Cls.model_type.value}")

    def __call__(self, crops: list[np.ndarray]) -> list[tuple[bool, float]]:
        pieces: list[np.ndarray] = []
        owners: list[int] = []
        for index, crop in enumerate(crops):
            for piece in _pieces(_bgr(crop)):
                pieces.append(piece)
                owners.append(index)
        if not pieces:
            return [(False, 0.5) for _ in crops]
        with self._lock:
            answers = self._cls(pieces).cls_res
        flipped = np.zeros(len(crops))
        counts = np.zeros(len(crops))
        for owner, (label, score) in zip(owners, answers):
            score = float(score)
            flipped[owner] += score if label == self._flip_label else 1.0 - score
            counts[owner] += 1
        result = []
        for total, count in zip(flipped, counts):
            p_flipped = total / count if count else 0.5
            result.append((bool(p_flipped > 0.5), round(float(max(p_flipped, 1.0 - p_flipped)), 4)))
        return result


DETECTION_LONG_SIDE = 1280  # enough to find the text boxes, at about half a second
LONG_BOX = 2.0  # a box this many times longer one way than the other runs that way


class TextBoxDirections:
    """``__call__(page) -> (across, down)``: how many of the text boxes RapidOCR's
    detector finds on the page (RGB or grayscale uint8) run across it, and how many
    run down it.

    The detector was trained on text lines, so it finds the rows of a receipt in
    monospaced print where the projections of its glyphs also see the columns its
    characters stack into: on 17 real receipts taken for pages on their side it found
    30-85 boxes running across and none down; on pages that did lie on their side,
    8-96 down and at most 6 across.
    """

    def __init__(self, threads: int = 1):
        # built the way RapidOCR builds its own on first use (RapidOCR._load_det_model)
        cfg = make_rapidocr(threads).cfg
        cfg.Det.engine_cfg = cfg.EngineConfig[cfg.Det.engine_type.value]
        cfg.Det.model_root_dir = cfg.Global.model_root_dir
        self._det = TextDetector(cfg.Det)
        self._lock = threading.Lock()  # as for the classifier

    def __call__(self, page: np.ndarray) -> tuple[int, int]:
        height, width = page.shape[:2]
        scale = min(1.0, DETECTION_LONG_SIDE / max(height, width))
        image = _bgr(page if scale == 1.0 else cv2.resize(
            page, (max(1, round(width * scale)), max(1, round(height * scale))),
            interpolation=cv2.INTER_AREA))
        with self._lock:
            boxes = self._det(image).boxes
        across = down = 0
        for box in [] if boxes is None else boxes:
            corners = np.asarray(box, dtype=np.float64)
            along, side = (np.linalg.norm(corners[1] - corners[0]),
                           np.linalg.norm(corners[3] - corners[0]))
            across += int(along > LONG_BOX * side)
            down += int(side > LONG_BOX * along)
        return across, down


def _bgr(crop: np.ndarray) -> np.ndarray:
    """The model was trained on OpenCV-loaded (BGR) images."""
    if crop.ndim == 2:
        return cv2.cvtColor(crop, cv2.COLOR_GRAY2BGR)
    return cv2.cvtColor(crop, cv2.COLOR_RGB2BGR)


def _pieces(crop: np.ndarray) -> list[np.ndarray]:
    """Up to MAX_PIECES_PER_LINE evenly spread pieces of about the model's aspect."""
    height, width = crop.shape[:2]
    if height < 4 or width < 4:
        return []
    piece_width = round(_MODEL_ASPECT * 1.25 * height)  # a little wider reads better than exact
    if width <= 1.5 * piece_width:
        return [crop]
    count = min(MAX_PIECES_PER_LINE, math.ceil(width / piece_width))
    starts = np.linspace(0, width - piece_width, count).round().astype(int)
    return [crop[:, start:start + piece_width] for start in starts]
