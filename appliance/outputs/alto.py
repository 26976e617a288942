"""ALTO v4 (schema 4.4, https://www.loc.gov/standards/alto/) written from a document's
page trees, with the standard library only.

Structure::

    alto (ns-v4#, SCHEMAVERSION 4.4)
      Description: MeasurementUnit pixel; sourceImageInformation/fileName (the title);
                   OCRProcessing/ocrProcessingStep/processingSoftware (ocr-appliance)
      Layout
        Page         one per page: ID page_N, PHYSICAL_IMG_NR N, WIDTH, HEIGHT, and
                     ROTATION (90, 180, 270) where its text runs turned
          TopMargin    the running header's blocks (``reading.furniture``): TextBlocks
          BottomMargin the footer's, and a page number's on its own below the middle
          PrintSpace the whole page (0, 0, WIDTH, HEIGHT)
            TextBlock  one per block of the body, ID block_N_B
              TextLine one per line, ID line_N_B_L
                String one per word, ID word_N_B_L_W, CONTENT, WC (0-1) where known
                       (not None, not NaN),
                SP     between two words, over the gap between them

IDs are the hOCR writer's, so an element is the same in both files. Positions are in
the rendered page's pixels, as integers (the schema's xsd:float takes them): the same
enclosing, page-clipped integer box the hOCR writer gives (``PageTree.pixels``), so
HPOS = x0, VPOS = y0, WIDTH = x1 - x0, HEIGHT = y1 - y0.

``OCRProcessing`` is what Tesseract writes and ALTO readers look for; schema 4.x marks
it deprecated in favour of ``Processing`` but still accepts it.

What the format cannot say, and how it is left:

* A failed page is a ``Page`` with an empty ``PrintSpace`` (the schema allows a
  PrintSpace without blocks), whatever blocks its tree holds. ALTO's QUALITY and
  QUALITY_DETAIL describe the paper, not the OCR, so nothing on the page says it
  failed: it looks like a blank page.
* A page's ``unplaced_text`` (text without positions) is left out: every String sits in
  a TextLine in a positioned TextBlock, and giving unplaced text a box would invent a
  position. A page with unplaced text is incomplete in ALTO (and in hOCR); the caller
  has to say so where it hands the file out.
* A line without words is left out (the schema needs a String in every TextLine); a
  block without lines is an empty TextBlock.

Text goes into attributes escaped by ElementTree; any Unicode survives except code
points XML 1.0 cannot carry, which become U+FFFD (``hocr.xml_text``).
"""

from __future__ import annotations

import importlib.metadata
import xml.etree.ElementTree as ET

from appliance.outputs.hocr import (
    SOFTWARE_NAME,
    check_pages,
    known_confidence,
    xml_text,
)
from appliance.outputs.tree import PageTree, TextBlock
from appliance.page import Furniture

ALTO_NS = "http://www.loc.gov/standards/alto/ns-v4#"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA_VERSION = "4.4"
SCHEMA_LOCATION = "http://www.loc.gov/standards/alto/v4/alto-4-4.xsd"


def word_confidence(confidence: float) -> str:
    """A 0-1 confidence as ALTO's WC (xsd:float 0-1), to four decimals."""
    return f"{round(confidence, 4):g}"


def _position(box: tuple[int, int, int, int]) -> dict[str, str]:
    x0, y0, x1, y1 = box
    return {"HPOS": str(x0), "VPOS": str(y0), "WIDTH": str(x1 - x0),
            "HEIGHT": str(y1 - y0)}


def _description(alto: ET.Element, title: str) -> None:
    description = ET.SubElement(alto, "Description")
    ET.SubElement(description, "MeasurementUnit").text = "pixel"
    source = ET.SubElement(description, "sourceImageInformation")
    ET.SubElement(source, "fileName").text = xml_text(title)
    processing = ET.SubElement(description, "OCRProcessing", {"ID": "processing_1"})
    step = ET.SubElement(processing, "ocrProcessingStep")
    software = ET.SubElement(step, "processingSoftware")
    ET.SubElement(software, "softwareName").text = SOFTWARE_NAME
    try:
        version = importlib.metadata.version(SOFTWARE_NAME)
    except importlib.metadata.PackageNotFoundError:
        return
    ET.SubElement(software, "softwareVersion").text = version


def _page(layout: ET.Element, page: PageTree) -> None:
    n, width, height = page.number, page.width, page.height
    element = ET.SubElement(layout, "Page", {
        "ID": f"page_{n}", "PHYSICAL_IMG_NR": str(n),
        "WIDTH": str(width), "HEIGHT": str(height),
        # the text's turn on the page (a page submitted on its side)
        **({"ROTATION": str(page.text_angle)} if page.text_angle else {})})
    done = page.status == "done"
    spaces = {}
    for name in ("TopMargin", "BottomMargin"):  # the schema wants them before PrintSpace
        if done and any(_space(page, block) == name for block in page.blocks):
            spaces[name] = ET.SubElement(element, name)
    spaces["PrintSpace"] = ET.SubElement(element, "PrintSpace", _position((0, 0, width, height)))
    if not done:
        return
    for b, block in enumerate(page.blocks, start=1):
        text_block = ET.SubElement(spaces[_space(page, block)], "TextBlock", {
            "ID": f"block_{n}_{b}", **_position(page.pixels(block.box))})
        for li, line in enumerate(block.lines, start=1):
            if not line.words:
                continue
            line_box = page.pixels(line.box)
            text_line = ET.SubElement(text_block, "TextLine", {
                "ID": f"line_{n}_{b}_{li}", **_position(line_box)})
            previous = None
            for w, word in enumerate(line.words, start=1):
                box = page.pixels(word.box)
                if previous is not None:
                    gap = max(box[0] - previous[2], 0)
                    ET.SubElement(text_line, "SP", {
                        "HPOS": str(previous[2]), "VPOS": str(line_box[1]),
                        "WIDTH": str(gap)})
                attributes = {"ID": f"word_{n}_{b}_{li}_{w}",
                              "CONTENT": xml_text(word.text), **_position(box)}
                confidence = known_confidence(word.score)
                if confidence is not None:
                    attributes["WC"] = word_confidence(confidence)
                ET.SubElement(text_line, "String", attributes)
                previous = box


def _space(page: PageTree, block: TextBlock) -> str:
    """Where on the ALTO page a block stands: a margin for furniture, else PrintSpace."""
    if block.role == Furniture.HEADER:
        return "TopMargin"
    if block.role == Furniture.FOOTER:
        return "BottomMargin"
    if block.role == Furniture.PAGE_NUMBER:
        top, bottom = page.pixels(block.box)[1::2]
        return "TopMargin" if top + bottom < page.height else "BottomMargin"
    return "PrintSpace"


def to_alto(title: str, pages: list[PageTree]) -> bytes:
    """The pages as one ALTO v4 document, UTF-8 (see the module docstring).

    Raises ValueError for no pages (Layout needs a Page) or repeated page numbers.
    """
    check_pages(pages)
    # plain tags under a literal default xmlns: no ET.register_namespace, which
    # would change how every other ElementTree user in the process writes
    alto = ET.Element("alto", {
        "xmlns": ALTO_NS, "xmlns:xsi": XSI_NS,
        "xsi:schemaLocation": f"{ALTO_NS} {SCHEMA_LOCATION}",
        "SCHEMAVERSION": SCHEMA_VERSION})
    _description(alto, title)
    layout = ET.SubElement(alto, "Layout")
    for page in pages:
        _page(layout, page)
    ET.indent(alto, space=" ")
    return (b'<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(alto, encoding="utf-8", xml_declaration=False) + b"\n")
