"""Barcodes on a page (QR and Micro QR, Code 128, Code 39, Code 93, PDF417, Data Matrix,
Aztec, EAN and UPC, ITF, Codabar, DataBar): zxing-cpp, from its wheel, on the image the
engine read, so that a code's corners are in the pixels of the page's lines.

Every Chinese VAT invoice (fapiao) carries a QR code with its code, number, date and
amount: the surest reading of them there is (``fields.qr``). The Document
Intelligence API returns the codes as the service's ``barcodes``.
"""

from __future__ import annotations

import zxingcpp
from PIL import Image

from appliance.errors import EngineError


def read_barcodes(image: Image.Image) -> list[dict]:
    """Every code zxing-cpp decodes on ``image``, as found: its format (zxing-cpp's
    name: "QRCode", "Code128", ...), its text, and its corners ``[x, y]`` clockwise
    from its own top left (a code printed turned keeps its corners in its order)."""
    try:
        codes = zxingcpp.read_barcodes(image.convert("L"))
    except Exception as exc:  # a native failure on this page is the page's failure
        raise EngineError(f"reading the page's barcodes failed: {exc}") from exc
    return [{"format": code.format.name, "value": code.text,
             "polygon": [[float(point.x), float(point.y)]
                         for point in (code.position.top_left, code.position.top_right,
                                       code.position.bottom_right, code.position.bottom_left)]}
            for code in codes if code.valid and code.text]
