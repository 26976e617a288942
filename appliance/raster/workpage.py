"""The page a preprocessing run works on (``preprocess``): its pixels, the one layout
analysis every step shares, the geometry the steps applied, and each step's record."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from appliance.raster.layout import Layout, analyze


@dataclass
class StepRecord:
    step: str  # "orientation" | "deskew" | "crop" | "contrast" | "denoise" | "resolution"
    ms: float
    detail: dict  # what it did, or {"skipped": why}

    def to_dict(self) -> dict:
        return asdict(self)


class WorkPage:
    """The working image and the one layout analysis, carried through each step."""

    def __init__(self, pixels: np.ndarray):
        self.pixels = pixels  # RGB (H x W x 3) or grayscale (H x W), uint8
        self.changed = False
        self._layout: Layout | None = None
        # maps the analysed image's coordinates to the current image's
        self._to_current = np.eye(3)
        self.scale = 1.0  # current pixels per analysed pixel
        self.moved = np.eye(3)  # what the running step did to the coordinates

    def layout(self, detail: dict) -> Layout:
        """The analysis, made on first use (the step that makes it reports its time)."""
        if self._layout is None:
            start = time.perf_counter()
            self._layout = analyze(self.pixels)
            self._to_current = np.eye(3)
            self.scale = 1.0
            detail["layout_ms"] = round((time.perf_counter() - start) * 1000, 1)
        return self._layout

    def update(self, pixels: np.ndarray, transform: np.ndarray, scale: float = 1.0) -> None:
        """Replace the pixels by ``pixels``, made from the old ones by the 2x3 or 3x3
        affine ``transform`` (old coordinates to new)."""
        matrix = np.vstack([transform, [0, 0, 1]]) if transform.shape == (2, 3) else transform
        self._to_current = matrix @ self._to_current
        self.moved = matrix @ self.moved
        self.scale *= scale
        self.pixels = pixels
        self.changed = True

    def char_height(self) -> float | None:
        if self._layout is None or self._layout.char_height_px is None:
            return None
        return self._layout.char_height_px * self.scale

    def line_boxes(self) -> list[tuple[int, int, int, int]]:
        """The layout's line boxes in current pixels (the bounding box of each
        transformed box; a little generous after a deskew)."""
        if self._layout is None or not self._layout.line_boxes:
            return []
        boxes = np.asarray(self._layout.line_boxes, dtype=np.float64)
        corners = np.stack([boxes[:, [0, 1]], boxes[:, [2, 1]], boxes[:, [0, 3]],
                            boxes[:, [2, 3]]], axis=1)  # n x 4 x 2
        moved = corners @ self._to_current[:2, :2].T + self._to_current[:2, 2]
        low, high = moved.min(axis=1), moved.max(axis=1)
        return [(math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1))
                for (x0, y0), (x1, y1) in zip(low, high)]
