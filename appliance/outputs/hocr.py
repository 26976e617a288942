"""hOCR 1.2 (http://kba.github.io/hocr-spec/1.2/) written from a document's page trees.

The document is XHTML, well-formed XML (standard library only). Its structure is the
one Tesseract writes and hOCR readers (OCRmyPDF's ``HocrParser``, hocr-tools) expect::

    div.ocr_page           one per page, id page_N
      div.ocr_carea        one per block, id block_N_B; a running header's block is
                           div.ocr_header, a footer's div.ocr_footer, a page number's
                           on its own div.ocr_pageno (``reading.furniture``)
        p.ocr_par          one per block (readers find lines through it), id par_N_B
          span.ocr_line    one per line, id line_N_B_L
            span.ocrx_word one per word, id word_N_B_L_W

N, B, L, W count from 1 (N is the page's own number). Every element's ``title`` carries
a ``bbox`` of four unsigned integers in the rendered page's pixels: the smallest integer
box that holds the tree's float box (x0 and y0 floored, x1 and y1 ceiled), clipped to
the page. A line on a page whose text runs turned (submitted on its side, turned
upright by preprocessing) has ``textangle`` 90, 180 or 270. A word whose confidence is known (not None, not NaN) has ``x_wconf`` 0-100
(an integer, as Tesseract writes it and OCRmyPDF reads it). A page's title has
``image`` (the document's title, percent-encoded where it is not printable ASCII or is
one of ``" % ; \\``, since the property's grammar is a quoted ASCII string; left out
for an empty title), ``bbox 0 0 W H``, ``ppageno`` (0-based) and ``scan_res``.

Empty ``div``/``p``/``span`` elements are written ``<div ...></div>``, never
``<div .../>``, so that the file reads the same through an HTML parser.

What the format cannot say, and how it is left:

* A failed page is an ``ocr_page`` with its properties and no content (whatever blocks
  its tree holds): hOCR has no way to say "this page could not be read", so a failed
  page looks like a blank one.
* A page's ``unplaced_text`` (text without positions) is left out. hOCR has no class for
  text that lies nowhere on the page, and putting it in an ``ocr_carea``/``ocr_line``
  would mean inventing boxes; a non-standard class would be dropped or misread by
  readers. A page that has unplaced text is incomplete in hOCR (and in ALTO), and the
  caller has to say so where it hands the file out.
* A line without words has no text and is left out; a block without lines is an empty
  ``ocr_carea``.

Text is escaped by ElementTree; any Unicode survives, except code points XML 1.0 cannot
carry (C0 controls other than tab/newline/CR, lone surrogates, U+FFFE/U+FFFF), which
become U+FFFD.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
import urllib.parse
import xml.etree.ElementTree as ET

from appliance.outputs.tree import PageTree
from appliance.page import Furniture

XHTML_NS = "http://www.w3.org/1999/xhtml"
SOFTWARE_NAME = "ocr-appliance"
# every class this writer can produce (the spec: list what the system can generate,
# even where a document has none of it)
CAPABILITIES = ("ocr_page", "ocr_carea", "ocr_header", "ocr_footer", "ocr_pageno", "ocr_par",
                "ocr_line", "ocrx_word")
# the class of a block of page furniture, by its role
FURNITURE_CLASS = {Furniture.HEADER: "ocr_header", Furniture.FOOTER: "ocr_footer",
                   Furniture.PAGE_NUMBER: "ocr_pageno"}

_DOCTYPE = ('<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"\n'
            '    "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n')

# "<meta ...></meta>" (ElementTree escapes ">" in attribute values)
_META_END = re.compile(r"(<meta [^>]*)></meta>")
# code points XML 1.0 does not allow (tab, newline and CR are allowed)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def software_version() -> str:
    """The name and version ("ocr-appliance 0.1.0"); the name alone where the package
    is not installed."""
    try:
        return f"{SOFTWARE_NAME} {importlib.metadata.version(SOFTWARE_NAME)}"
    except importlib.metadata.PackageNotFoundError:
        return SOFTWARE_NAME


def xml_text(text: str) -> str:
    """The text with what XML 1.0 cannot carry replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def known_confidence(confidence: float | None) -> float | None:
    """The confidence clipped to 0-1, or None where there is none (or it is NaN)."""
    if confidence is None or not math.isfinite(confidence):
        return None
    return min(max(confidence, 0.0), 1.0)


def confidence_percent(confidence: float) -> int:
    """A 0-1 confidence as hOCR's x_wconf, an integer 0-100."""
    return round(confidence * 100)


def check_pages(pages: list[PageTree]) -> None:
    """Both formats need at least one page, and page numbers make the IDs."""
    if not pages:
        raise ValueError("a document needs at least one page")
    numbers = [page.number for page in pages]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"page numbers repeat: {numbers}")


def _image_name(title: str) -> str:
    # delimited-string = '"' printable ASCII without '"' '"'; ';' would end the
    # property for the simple readers that split titles on it, '%' starts an escape
    # and a backslash would read as a Windows path, which the spec rules out
    return urllib.parse.quote(title, safe=" !#$&'()*+,-./:<=>?@[]^_`{|}~")


def _title(*props: str) -> str:
    return "; ".join(props)


def _bbox(box: tuple[int, int, int, int]) -> str:
    return "bbox {} {} {} {}".format(*box)


def _el(parent: ET.Element, tag: str, cls: str, ident: str, title: str) -> ET.Element:
    return ET.SubElement(parent, tag, {"class": cls, "id": ident, "title": title})


def _page(body: ET.Element, page: PageTree, image: str) -> None:
    n = page.number
    props = [f'image "{image}"'] if image else []
    props += [_bbox((0, 0, page.width, page.height)), f"ppageno {n - 1}",
              f"scan_res {page.dpi} {page.dpi}"]
    div = _el(body, "div", "ocr_page", f"page_{n}", _title(*props))
    if page.status != "done":
        return
    for b, block in enumerate(page.blocks, start=1):
        block_box = _bbox(page.pixels(block.box))
        carea = _el(div, "div", FURNITURE_CLASS.get(block.role, "ocr_carea"), f"block_{n}_{b}",
                    block_box)
        par = _el(carea, "p", "ocr_par", f"par_{n}_{b}", block_box)
        for li, line in enumerate(block.lines, start=1):
            if not line.words:
                continue
            line_props = [_bbox(page.pixels(line.box))]
            if page.text_angle:
                line_props.append(f"textangle {page.text_angle}")
            span = _el(par, "span", "ocr_line", f"line_{n}_{b}_{li}", _title(*line_props))
            for w, word in enumerate(line.words, start=1):
                props = [_bbox(page.pixels(word.box))]
                confidence = known_confidence(word.score)
                if confidence is not None:
                    props.append(f"x_wconf {confidence_percent(confidence)}")
                _el(span, "span", "ocrx_word", f"word_{n}_{b}_{li}_{w}",
                    _title(*props)).text = xml_text(word.text)


def to_hocr(title: str, pages: list[PageTree]) -> str:
    """The pages as one hOCR 1.2 XHTML document (see the module docstring).

    Raises ValueError for no pages (hOCR needs an ocr_page) or repeated page numbers.
    """
    check_pages(pages)
    # plain tags under a literal default xmlns: no ET.register_namespace, which
    # would change how every other ElementTree user in the process writes XHTML
    html = ET.Element("html", {"xmlns": XHTML_NS})
    head = ET.SubElement(html, "head")
    ET.SubElement(head, "title").text = xml_text(title)
    ET.SubElement(head, "meta",
                  {"http-equiv": "Content-Type", "content": "text/html;charset=utf-8"})
    ET.SubElement(head, "meta", {"name": "ocr-system", "content": software_version()})
    ET.SubElement(head, "meta",
                  {"name": "ocr-capabilities", "content": " ".join(CAPABILITIES)})
    ET.SubElement(head, "meta",
                  {"name": "ocr-number-of-pages", "content": str(len(pages))})
    body = ET.SubElement(html, "body")
    image = _image_name(xml_text(title))
    for page in pages:
        _page(body, page, image)
    # indenting also puts whitespace between a line's words (it rewrites only
    # whitespace, never a word's own text), so the words read apart as text
    ET.indent(html, space=" ")
    # an empty div/p/span must not be written "<div ... />": an HTML parser (hOCR is
    # read as HTML as often as XML) takes that for an open tag, and a failed page's
    # empty div would swallow the pages after it. Only meta, HTML's one void element
    # here, is written short (XHTML 1.0 appendix C).
    text = ET.tostring(html, encoding="unicode", short_empty_elements=False)
    text = _META_END.sub(r"\1 />", text)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + _DOCTYPE + text + "\n"
