"""Barcodes on a page (QR and Micro QR, Code 128, Code 39, Code 93, PDF417, Data Matrix,
Aztec, EAN and UPC, ITF, Codabar, DataBar): zxing-cpp, from its wheel, on the image the
engine read, so that a code's corners are in the pixels of the page's lines.

Every Chinese VAT invoice (fapiao) carries a QR code with its code, number, date and
amount: the surest reading of them there is (``fields.qr``). The Document
Intelligence API returns the codes as the service's ``barcodes``.
"""

from __future__ import annotations

import cv2
import numpy as np
import zxingcpp
from PIL import Image

from appliance.errors import EngineError

# A page that should carry a QR code (a fapiao) and gave none is read again, for QR codes
# alone, on a copy enlarged, smoothed and thresholded against each pixel's neighbourhood:
# a photocopy's blur and speckle defeat zxing-cpp's own binarizer there. On
# make-eval-set's photocopied fapiaos (seed 7, developed on) 2 of 14 codes read -> 5.
CLEANED_SCALE = 2
CLEANED_SIGMA = 2.0  # the smoothing, in pixels of the enlarged copy
CLEANED_BLOCK = 61  # the neighbourhood's side, in pixels of the enlarged copy (odd)
CLEANED_OFFSET = 10  # how much darker than its neighbourhood a pixel is ink


def read_barcodes(image: Image.Image, *, qr_expected: bool = False) -> list[dict]:
    """Every code zxing-cpp decodes on ``image``, as found: its format (zxing-cpp's
    name: "QRCode", "Code128", ...), its text, and its corners ``[x, y]`` clockwise
    from its own top left (a code printed turned keeps its corners in its order).
    ``qr_expected``: the page's kind of document carries a QR code, looked for harder
    where none was read."""
    gray = np.asarray(image.convert("L"))
    codes = _decode(gray)
    if qr_expected and not any(code["format"] == zxingcpp.BarcodeFormat.QRCode.name
                               for code in codes):
        codes += _decode(_cleaned(gray), formats=zxingcpp.BarcodeFormat.QRCode,
                         scale=1 / CLEANED_SCALE)
    return codes


def _decode(gray: np.ndarray, *, scale: float = 1.0, **options) -> list[dict]:
    """The codes zxing-cpp decodes on ``gray``, their corners times ``scale``."""
    try:
        codes = zxingcpp.read_barcodes(gray, **options)
    except Exception as exc:  # a native failure on this page is the page's failure
        raise EngineError(f"reading the page's barcodes failed: {exc}") from exc
    return [{"format": code.format.name, "value": code.text,
             "polygon": [[float(point.x) * scale, float(point.y) * scale]
                         for point in (code.position.top_left, code.position.top_right,
                                       code.position.bottom_right, code.position.bottom_left)]}
            for code in codes if code.valid and code.text]


def _cleaned(gray: np.ndarray) -> np.ndarray:
    """``gray`` enlarged, smoothed and made black and white against each pixel's
    neighbourhood."""
    large = cv2.resize(gray, None, fx=CLEANED_SCALE, fy=CLEANED_SCALE,
                       interpolation=cv2.INTER_CUBIC)
    return cv2.adaptiveThreshold(cv2.GaussianBlur(large, (0, 0), CLEANED_SIGMA), 255,
                                 cv2.ADAPTIVE_THRESH_GAUSSIAN_C, cv2.THRESH_BINARY,
                                 CLEANED_BLOCK, CLEANED_OFFSET)
