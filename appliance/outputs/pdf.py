"""A searchable PDF (PDF/A-2b by default) written from a document's page trees: the
original's pages as they are, each with an invisible text layer under its content,
every word at its box.

How it is built, from public pieces of OCRmyPDF, pikepdf and img2pdf (used as
libraries; nothing of theirs is copied here):

* The base. A PDF is opened with pikepdf and kept as it is: pages, images and
  content streams are not rewritten (saving Flate-compresses a stream stored
  uncompressed, and a PDF/A save re-encodes the streams whose filters PDF/A forbids,
  such as LZW; neither changes what they hold). An image file becomes a PDF with
  ``img2pdf``, a page per frame: JPEG passes through as it is, PNG, TIFF (CCITT
  too), GIF, BMP and WebP pixels are embedded losslessly, and /Rotate turns the page
  as its EXIF orientation says; the page is the image at the resolution the
  appliance read it at. An image img2pdf cannot take as it is (a mirroring EXIF
  orientation, a frame count it reads differently) is embedded as the appliance
  rendered it, as lossless PNG data.
* The text. Each page with placed words becomes an ``ocr_page > ocr_line >
  ocrx_word`` tree of ``OcrElement``\\ s in the pixels of the page as the engine
  read it (where a straightened page's lines run straight across), drawn as
  invisible text (render mode 3) by OCRmyPDF's fpdf2 renderer, all pages into one
  PDF so that a font subset is embedded once. The fonts are OCRmyPDF's bundled ones
  only (Noto Sans, and the glyphless Occulta for every other script), so the output
  does not depend on the fonts of the host.
* The graft. Each text page is added to its page as a Form XObject, drawn *before*
  the page's own content (under it), with one transform from the engine's pixels
  to the page's user space: the tree's ``to_page`` (undoing preprocessing's turn,
  straightening, crop and scaling), then from the rendered page's pixels to the
  page as pdfium displays it (the CropBox, clipped to the MediaBox, turned by
  /Rotate), which is the page the appliance rendered and read, whatever the boxes
  and rotation. The transform is computed
  here from the page dictionary (pdfium is not thread-safe and is not used).
* PDF/A. ``pikepdf.pdfa.save`` repairs what it can (output intent sRGB, XMP,
  hidden annotations), writes, and validates what it wrote (no Ghostscript, no
  veraPDF: pikepdf's own validator of veraPDF's rules). Where the result does not
  pass, a plain PDF is written instead and the report says why: never silently.
  Scans pass; born-digital PDFs often do not (a font that is not embedded, or a
  construct the validator does not check: forms, optional content, patterns,
  shadings...), nor does a CMYK JPEG (the output intent is sRGB). A catalog
  /OpenAction that only sets the opening page and zoom is removed from a PDF/A, as
  the validator would refuse it.

Words are separated by a space in the text layer wherever the tree separates them,
except between two words of CJK characters, which OCRmyPDF's renderer joins (those
scripts put no spaces between words; Tesseract, its usual engine, makes each CJK
character a word). The characters of a word are never separated.

Licences: OCRmyPDF is MPL-2.0, used as a library through its public API only
(``OcrElement``, ``BoundingBox``, ``Fpdf2MultiPageRenderer``, ``MultiFontManager``,
``BuiltinFontProvider``): nothing of it is copied or changed here. Its
``OcrEngine.generate_ocr()`` plugin hook is not used: it is called from OCRmyPDF's
own pipeline, which rasterises every page again to hand it to the engine, and the
appliance has already read them (the tree is built from the stored results). pikepdf is MPL-2.0,
img2pdf LGPL-3.0, fpdf2 LGPL-3.0, all used as libraries.

Pages without a text layer: a failed page, a page whose text has no positions
(``unplaced_text``), a page on which nothing was found, and a page of the original
for which no tree was given. The report lists them; the document's metadata says so
too: the DocInfo key ``/OCRPagesWithoutText`` (always written; empty when every
page has its text) and, where there are such pages, a sentence in ``dc:description``
(PDF/A permits no custom XMP property without an extension schema).

A PDF page that shows text of its own (a born-digital page, a scanner's OCR layer, a
searchable PDF made before) keeps it and gets no text layer, so that its text does
not extract twice (OCRmyPDF's ``--skip-text``); the report gives "own text" as the
reason. Its recognised text is still in the other formats. Except where the page was
read by OCR (``PageTree.own_text`` false: its text layer was distrusted, or ignored)
and all the text it shows is invisible (render mode 3: an earlier OCR's layer): that
text is taken off the page and the appliance's reading put in its place (OCRmyPDF's
``--redo-ocr``); the report lists such pages as ``replaced_text``. Visible text is
never taken off a page.

An encrypted PDF is opened with the password given; the output is NOT encrypted
(PDF/A forbids encryption; a plain PDF is written without it too).

Thread-safe: nothing is shared between calls (one font manager and one fpdf2
document per call); everything is held in memory or in temporary files that are
removed.
"""

from __future__ import annotations

import io
import logging
import math
import re
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from appliance.errors import CorruptFile, EncryptedPdf
from appliance.outputs.tree import UNKNOWN_DPI, PageTree
from appliance.page import is_column
from appliance.raster import plausible_dpi
from appliance.raster.pdf_content import (INVISIBLE, drawn_forms, inherited, shows_text,
                                          text_modes)

if TYPE_CHECKING:
    import pikepdf

log = logging.getLogger(__name__)

OUTPUT_TYPES = ("pdfa-2", "pdfa-3", "pdf")
_FLAVOURS = {"pdfa-2": "2b", "pdfa-3": "3b"}

# why a page has no text layer (the report's and the metadata's words)
FAILED = "failed"
NO_POSITIONS = "no positions"
NO_TEXT = "no text"  # read, and nothing was found on it
NOT_READ = "not read"  # the original has the page; no tree was given for it
OWN_TEXT = "own text"  # the page shows text of its own (born-digital, or OCRed before)

PAGES_WITHOUT_TEXT_KEY = "/OCRPagesWithoutText"  # DocInfo
_XOBJECT_NAME = "OCRTextLayer"
# the text layer is drawn in the engine's pixels (one unit a pixel; positions
# written to 0.01 of one); one transform puts it on the page
_TEXT_DPI = 72.0

# fontTools logs every table it subsets at INFO and fpdf2 its font handling; OCRmyPDF
# warns, for text no bundled font covers, to install a font, which does not apply
# here (the glyphless font is chosen on purpose: the text is invisible). Where the
# operator has set a level, it stands.
_QUIET_LOGGERS = {"fontTools": logging.WARNING, "fpdf": logging.WARNING,
                  "ocrmypdf.font.multi_font_manager": logging.ERROR,
                  # it warns of every image with an alpha channel it keeps as a mask
                  "img2pdf": logging.ERROR}
for _name, _level in _QUIET_LOGGERS.items():
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(_level)

# EXIF orientations that mirror the image: a PDF page's /Rotate cannot say them
_MIRRORING = frozenset({2, 4, 5, 7})
# characters a text layer cannot carry (controls, lone surrogates)
_UNCARRIED = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# where an image is embedded as rendered, no pixel limit applies: the original was
# read under the limit when it came in
_NO_PIXEL_LIMIT = 2**62


def searchable_pdf(original: Path, kind: str, pages: list[PageTree], *,
                   output_type: str = "pdfa-2",
                   password: str | None = None) -> tuple[bytes, dict]:
    """The original document with an invisible text layer on every page that has
    placed words, as PDF bytes, and a report::

        {"output_type": "pdfa-2" | "pdfa-3" | "pdf",   # what was produced
         "pdfa_error": None | "why PDF/A could not be produced",
         "pages_with_text": [1, 2],
         "pages_without_text": [{"page": 3, "reason": "failed"}, ...]}

    ``kind`` is the stored document kind ("pdf", or an image kind: "png", "jpeg",
    "tiff", "bmp", "webp", "gif"); ``pages`` the document's page trees (numbers
    1-based, at most the original's page count). ``output_type`` is "pdfa-2"
    (PDF/A-2b, the default), "pdfa-3" (PDF/A-3b) or "pdf". Where PDF/A is asked for
    and the document cannot pass, a plain PDF is written, ``output_type`` says
    "pdf" and ``pdfa_error`` the reason.

    A "pdf" output never claims PDF/A: a claim the original made is removed, since
    it is not verified after the text layer is added.

    ``password`` opens an encrypted PDF; the output is not encrypted. A PDF that
    needs a password it was not given (or a wrong one) raises ``EncryptedPdf``; a
    PDF pikepdf cannot open raises ``CorruptFile``. ``ValueError`` for an unknown
    ``output_type``, a repeated page number or a page the original does not have.
    """
    if output_type not in OUTPUT_TYPES:
        raise ValueError(f"output_type must be one of {OUTPUT_TYPES}, not {output_type!r}")
    numbers = [tree.number for tree in pages]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"page numbers repeat: {numbers}")
    parts = _Parts(Path(original), kind, {tree.number: tree for tree in pages}, password)
    flavour = _FLAVOURS.get(output_type)
    pdfa_error = None
    if flavour is not None:
        import pikepdf.pdfa

        with ExitStack() as stack:
            base = parts.build(stack)
            _drop_open_action(base)
            out = io.BytesIO()
            try:
                done = pikepdf.pdfa.save(base, out, flavour, output_intent="sRGB",
                                         deterministic_id=True)
                _log_repairs(done)
                return out.getvalue(), parts.plan.report(output_type, None)
            except pikepdf.pdfa.PdfaError as exc:
                pdfa_error = _pdfa_reason(flavour, exc.report)
                log.warning("event=pdfa_failed flavour=%s reason=%r", flavour, pdfa_error)
            except Exception as exc:  # noqa: BLE001 - a plain PDF is still worth having
                pdfa_error = f"PDF/A-{flavour}: {type(exc).__name__}: {exc}"[:500]
                log.warning("event=pdfa_failed flavour=%s", flavour, exc_info=True)
    # a failed attempt changed the document in memory (it declared PDF/A, for one):
    # the plain PDF is built again, from the parts already made
    with ExitStack() as stack:
        base = parts.build(stack)
        _remove_pdfa_claim(base)
        out = io.BytesIO()
        base.save(out, encryption=False, deterministic_id=True)
        return out.getvalue(), parts.plan.report("pdf", pdfa_error)


# --- the parts: the base, which page gets which text, the text layers ----------------


@dataclass
class _Plan:
    with_text: list[int]
    without_text: list[tuple[int, str]]
    replaced_text: list[int]  # of with_text: their invisible text taken off first

    def report(self, output_type: str, pdfa_error: str | None) -> dict:
        return {"output_type": output_type, "pdfa_error": pdfa_error,
                "pages_with_text": list(self.with_text),
                "pages_without_text": [{"page": number, "reason": reason}
                                       for number, reason in self.without_text],
                "replaced_text": list(self.replaced_text)}

    def description(self) -> str:
        return ", ".join(f"{number} ({reason})" for number, reason in self.without_text)


class _Parts:
    """What a searchable PDF is assembled from, each made once: the image file made
    a PDF, the plan, the text layers."""

    def __init__(self, original: Path, kind: str, by_number: dict[int, PageTree],
                 password: str | None):
        self.original, self.kind, self.by_number = original, kind, by_number
        self.password = password
        self.image_pdf: bytes | None = None
        self.plan: _Plan | None = None
        self.lines: dict[int, list] = {}
        self.text_pdf: bytes | None = None

    def build(self, stack: ExitStack) -> pikepdf.Pdf:
        """The base document with its text layers grafted and the metadata saying
        which pages have none. The Pdfs it opens stay open (``stack``) until the
        document is written: pikepdf copies foreign streams' data when it writes."""
        import pikepdf

        base = stack.enter_context(self._open_base())
        if self.plan is None:
            self._plan(base)
        if self.lines:
            if self.text_pdf is None:
                self.text_pdf = _text_layers(self.by_number, self.lines)
            text = stack.enter_context(pikepdf.open(io.BytesIO(self.text_pdf)))
            for text_page, number in zip(text.pages, sorted(self.lines)):
                tree = self.by_number[number]
                page = base.pages[number - 1]
                if number in self.plan.replaced_text:
                    _take_off_invisible_text(base, page)
                _graft(base, page, text_page, _text_to_user(page.obj, tree))
        _write_metadata(base, self.plan)
        return base

    def _open_base(self) -> pikepdf.Pdf:
        import pikepdf

        if self.kind == "pdf":
            return _open_pdf(self.original, self.password)
        if self.image_pdf is None:
            self.image_pdf = _image_pdf(self.original, self.kind, self.by_number)
        return pikepdf.open(io.BytesIO(self.image_pdf))

    def _plan(self, base: pikepdf.Pdf) -> None:
        count = len(base.pages)
        beyond = sorted(number for number in self.by_number if not 1 <= number <= count)
        if beyond:
            raise ValueError(f"page trees {beyond} are beyond the original's {count} pages")
        without: list[tuple[int, str]] = []
        replaced: list[int] = []
        for number in range(1, count + 1):
            tree = self.by_number.get(number)
            placed = _placed_lines(tree) if tree is not None else []
            page = base.pages[number - 1].obj
            if placed and self.kind == "pdf" and shows_text(page):
                if tree.own_text or not _shows_invisible_text_only(page):
                    without.append((number, OWN_TEXT))
                    continue
                replaced.append(number)
            if placed:
                self.lines[number] = placed
            else:
                without.append((number, _why_no_text(tree)))
        self.plan = _Plan(sorted(self.lines), without, replaced)


def _shows_invisible_text_only(page: pikepdf.Dictionary) -> bool:
    """Whether every string the page shows, in its content or the forms it draws, is
    invisible (an earlier OCR's layer), and where ``_take_off_invisible_text`` can
    take it off: in the page's content or a form the page itself draws."""
    import pikepdf

    try:
        for container in (page, *(form for _name, form in drawn_forms(page, page))):
            if any(mode not in (None, INVISIBLE) for _ins, mode in text_modes(container)):
                return False
            if container is not page and any(shows_text(inner) for _name, inner
                                             in drawn_forms(container, page)):
                return False  # a form within a form: not taken apart here
    except pikepdf.PdfError:  # content that cannot be parsed is left as it is
        return False
    return True


def _take_off_invisible_text(pdf: pikepdf.Pdf, page: pikepdf.Page) -> None:
    """The page without its invisible text (``_shows_invisible_text_only`` holds): its
    content is written anew, and each form it draws that shows text is replaced, in
    resource dictionaries of the page's own, by a copy without it; what other pages
    share is not touched."""
    import pikepdf
    from pikepdf import Dictionary, Name

    def without(container) -> bytes:
        return pikepdf.unparse_content_stream(
            [instruction for instruction, mode in text_modes(container) if mode is None])

    page.obj[Name.Contents] = pdf.make_stream(without(page.obj))
    forms = {name: form for name, form in drawn_forms(page.obj, page.obj)
             if shows_text(form)}
    if not forms:
        return
    resources = Dictionary(dict(inherited(page.obj, "/Resources").items()))
    xobjects = Dictionary(dict(resources[Name.XObject].items()))
    for name, form in forms.items():
        copy = pdf.make_stream(without(form))
        for key, value in form.stream_dict.items():
            if key not in ("/Length", "/Filter", "/DecodeParms"):
                copy[key] = value
        xobjects[name] = copy
    resources[Name.XObject] = xobjects
    page.obj[Name.Resources] = resources


def _why_no_text(tree: PageTree | None) -> str:
    if tree is None:
        return NOT_READ
    if tree.status != "done":
        return FAILED
    if tree.unplaced_text.strip():
        return NO_POSITIONS
    if any(word.text.strip() for block in tree.blocks for line in block.lines
           for word in line.words):
        return NO_POSITIONS  # words, but the page's size is unknown: nowhere to put them
    return NO_TEXT


def _placed_lines(tree: PageTree) -> list[list[tuple[str, tuple[float, float, float, float],
                                                     float | None]]]:
    """The tree's lines as lists of (text, box, confidence), boxes in the page's text
    frame, clipped to it and ordered; empty for a page that gets no text layer."""
    if tree.status != "done" or tree.width <= 0 or tree.height <= 0:
        return []
    (left, top), width, height = _text_frame(tree)
    placed = []
    for block in tree.blocks:
        for line in block.lines:
            words = []
            for word in line.words:
                text = _UNCARRIED.sub("", word.text).strip()
                if text:
                    x0, y0, x1, y1 = word.box
                    box = (x0 - left, y0 - top, x1 - left, y1 - top)
                    words.append((text, _clipped(box, width, height),
                                  word.score))
            if words and is_column(line.box, "".join(text for text, _box, _c in words)):
                placed.extend([word] for word in words)  # each character where it stands
            elif words:
                placed.append(_spaced(words))
    return placed


def _spaced(words: list) -> list:
    """The line's words with room between them: an engine's word boxes may touch (they
    split a line's box at its spaces), and extractors that place spaces by the gaps
    (pdftotext) would then join the words. A word that runs into the next ends a
    fifth of the line's height before it."""
    height = max(box[3] - box[1] for _, box, _ in words)
    spaced = []
    for (text, box, confidence), following in zip(words, [*words[1:], None]):
        x0, y0, x1, y1 = box
        if following is not None and following[1][0] >= x0:
            x1 = max(min(x1, following[1][0] - height / 5), x0 + (x1 - x0) / 2)
        spaced.append((text, (x0, y0, x1, y1), confidence))
    return spaced


def _text_frame(tree: PageTree) -> tuple[tuple[float, float], float, float]:
    """The frame a page's text layer is drawn in: the tree's own (the page as the
    engine read it, where lines run straight across, so a text line of a page that
    was straightened follows its ink), moved so that the rendered page's extent in
    it starts at 0, 0. Its origin in the tree's frame, its width and its height."""
    corners = np.array([[0, 0, 1], [tree.width, 0, 1], [0, tree.height, 1],
                        [tree.width, tree.height, 1]]) @ np.linalg.inv(tree.matrix).T
    (x0, y0), (x1, y1) = corners[:, :2].min(axis=0), corners[:, :2].max(axis=0)
    return (float(x0), float(y0)), float(x1 - x0), float(y1 - y0)


def _clipped(box, width: float, height: float) -> tuple[float, float, float, float]:
    x0, x1 = sorted(min(max(float(v), 0.0), width) for v in (box[0], box[2]))
    y0, y1 = sorted(min(max(float(v), 0.0), height) for v in (box[1], box[3]))
    return x0, y0, x1, y1


# --- the text layers ---------------------------------------------------------------


def _text_layers(by_number: dict[int, PageTree], lines: dict[int, list]) -> bytes:
    """One PDF, a page per page with text (in page order), each the page's text frame
    (``_text_frame``, a unit a pixel) with its words as invisible text, drawn by
    OCRmyPDF's public multi-page fpdf2 renderer (one font registration for all pages)."""
    from ocrmypdf.font import BuiltinFontProvider, MultiFontManager
    from ocrmypdf.fpdf_renderer import Fpdf2MultiPageRenderer
    from ocrmypdf.models.ocr_element import BoundingBox, OcrClass, OcrElement

    pages = []
    for number in sorted(lines):
        _origin, width, height = _text_frame(by_number[number])
        page = OcrElement(ocr_class=OcrClass.PAGE, bbox=BoundingBox(0, 0, width, height),
                          dpi=_TEXT_DPI, page_number=number - 1)
        for words in lines[number]:
            line = OcrElement(ocr_class=OcrClass.LINE, bbox=_line_box(words))
            line.children = [OcrElement(ocr_class=OcrClass.WORD, text=text, bbox=BoundingBox(*box),
                                        confidence=confidence)
                             for text, box, confidence in words]
            page.children.append(line)
        pages.append((number - 1, page, _TEXT_DPI))
    # one font manager per call: it caches font choices and is not made for sharing
    # between threads
    renderer = Fpdf2MultiPageRenderer(pages, MultiFontManager(font_provider=BuiltinFontProvider()),
                                      invisible_text=True)
    with tempfile.TemporaryDirectory(prefix="appliance-text-layer-") as folder:
        path = Path(folder) / "text.pdf"
        renderer.render(path)
        return path.read_bytes()


def _line_box(words):
    from ocrmypdf.models.ocr_element import BoundingBox

    x0 = min(box[0] for _, box, _ in words)
    y0 = min(box[1] for _, box, _ in words)
    x1 = max(box[2] for _, box, _ in words)
    y1 = max(box[3] for _, box, _ in words)
    if y1 - y0 < 1.0:  # the renderer drops a line without height; give it a pixel
        middle = (y0 + y1) / 2
        y0, y1 = middle - 0.5, middle + 0.5
    return BoundingBox(x0, y0, x1, y1)


def _graft(base: pikepdf.Pdf, page: pikepdf.Page, text_page: pikepdf.Page,
           ctm: np.ndarray) -> None:
    """Put the text page's content on ``page`` as a Form XObject drawn under the
    page's own content. The page's content streams are not touched (a stream is
    prepended to its /Contents), nor are resource dictionaries it may share with
    other pages (its /Resources and /XObject get copies of their own)."""
    import pikepdf
    from pikepdf import Dictionary, Name

    contents = text_page.obj.get(Name.Contents)
    parts = contents if isinstance(contents, pikepdf.Array) else [contents]
    form = base.make_stream(b"\n".join(part.read_bytes() for part in parts))
    form.Type, form.Subtype = Name.XObject, Name.Form
    form.BBox = pikepdf.Array([float(v) for v in text_page.mediabox])
    form.Resources = base.copy_foreign(text_page.obj.get(Name.Resources, Dictionary()))

    resources = page.obj.get(Name.Resources)
    resources = Dictionary({key: value for key, value in resources.items()}) \
        if isinstance(resources, Dictionary) else Dictionary()
    xobjects = resources.get(Name.XObject)
    xobjects = Dictionary({key: value for key, value in xobjects.items()}) \
        if isinstance(xobjects, Dictionary) else Dictionary()
    name, suffix = _XOBJECT_NAME, 1
    while Name("/" + name) in xobjects:
        suffix += 1
        name = f"{_XOBJECT_NAME}{suffix}"
    xobjects[Name("/" + name)] = base.make_indirect(form)
    resources[Name.XObject] = xobjects
    page.obj[Name.Resources] = resources
    matrix = pikepdf.Matrix(ctm[0, 0], ctm[1, 0], ctm[0, 1], ctm[1, 1], ctm[0, 2], ctm[1, 2])
    page.contents_add(pikepdf.Stream(base, b"q %s cm /%s Do Q\n"
                                     % (matrix.encode(), name.encode())), prepend=True)


# --- where the rendered page lies in the page's user space ---------------------------


def _text_to_user(page: pikepdf.Dictionary, tree: PageTree) -> np.ndarray:
    """The 3x3 affine from the tree's text page (its text frame, one unit a pixel, y
    up) to the page's user space."""
    (left, top), _width, height = _text_frame(tree)
    text_to_tree = np.array([[1.0, 0.0, left], [0.0, -1.0, top + height], [0.0, 0.0, 1.0]])
    return device_to_user(page, tree.width, tree.height) @ tree.matrix @ text_to_tree


def device_to_user(page: pikepdf.Dictionary, width_px: float, height_px: float) -> np.ndarray:
    """The 3x3 affine from a pixel of the page rendered by pdfium into a
    ``width_px`` x ``height_px`` bitmap (what ``page.render(scale=...)`` makes: the
    displayed page, turned by /Rotate, stretched over the bitmap) to user space.

    As pdfium does (``CPDF_Page``): the displayed box is the CropBox clipped to the
    MediaBox (the MediaBox where there is no CropBox or it is empty; US Letter where
    the MediaBox is missing or empty), both inherited through the page tree;
    /Rotate is taken in whole quarter turns clockwise (``Rotate / 90 % 4``, C
    integer arithmetic)."""
    left, bottom, right, top = _displayed_box(page)
    turns = _quarter_turns(page)
    w, h = float(width_px), float(height_px)
    # where the box's (left, bottom), (left, top) and (right, bottom) are displayed
    corners = {0: ((0, h), (0, 0), (w, h)),
               1: ((0, 0), (w, 0), (0, h)),
               2: ((w, 0), (w, h), (0, 0)),
               3: ((w, h), (0, h), (w, 0))}[turns]
    origin, up, across = (np.array(p, dtype=float) for p in corners)
    device_axes = np.column_stack([up - origin, across - origin])  # for (0, T-B), (R-L, 0)
    user_axes = np.array([[0.0, right - left], [top - bottom, 0.0]])
    linear = user_axes @ np.linalg.inv(device_axes)
    shift = np.array([left, bottom]) - linear @ origin
    return np.array([[linear[0, 0], linear[0, 1], shift[0]],
                     [linear[1, 0], linear[1, 1], shift[1]],
                     [0.0, 0.0, 1.0]])


def _box(page: pikepdf.Dictionary, key: str) -> tuple[float, float, float, float] | None:
    """The named box, normalised; None where it is missing, malformed or empty."""
    import pikepdf

    value = inherited(page, key)
    if not isinstance(value, pikepdf.Array) or len(value) != 4:
        return None
    try:
        x0, y0, x1, y1 = (float(v) for v in value)
    except (TypeError, ValueError):
        return None
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def _displayed_box(page: pikepdf.Dictionary) -> tuple[float, float, float, float]:
    media = _box(page, "/MediaBox") or (0.0, 0.0, 612.0, 792.0)
    crop = _box(page, "/CropBox")
    if crop is None:
        return media
    shown = (max(crop[0], media[0]), max(crop[1], media[1]),
             min(crop[2], media[2]), min(crop[3], media[3]))
    # boxes that do not meet: pdfium cannot render the page (nor did the appliance)
    return shown if shown[2] > shown[0] and shown[3] > shown[1] else media


def _quarter_turns(page: pikepdf.Dictionary) -> int:
    value = inherited(page, "/Rotate")
    try:
        degrees = int(float(value)) if value is not None else 0
    except (TypeError, ValueError):
        degrees = 0
    turns = math.trunc(degrees / 90)
    turns = int(math.fmod(turns, 4))
    return turns + 4 if turns < 0 else turns


# --- the base document --------------------------------------------------------------


def _open_pdf(original: Path, password: str | None) -> pikepdf.Pdf:
    import pikepdf

    try:
        return pikepdf.open(original, password=password or "")
    except pikepdf.PasswordError as exc:
        raise EncryptedPdf(
            ("The PDF's password does not open it." if password else
             "The PDF is protected by a password, and none was given.")
            + " The searchable PDF cannot be written without it.") from exc
    except pikepdf.PdfError as exc:
        raise CorruptFile(f"The PDF cannot be opened to add its text layer "
                          f"({str(exc).replace(str(original), 'the file')}).") from exc


def _image_pdf(original: Path, kind: str, by_number: dict[int, PageTree]) -> bytes:
    """The image file as a PDF, a page per frame. A page's size is its pixels at the
    resolution the appliance read it at (the image's own, or 300 dpi where it states
    none), else at img2pdf's reading of the file's."""
    import img2pdf

    with Image.open(original) as image:
        frames = getattr(image, "n_frames", 1)
        mirrored = False
        for index in range(frames):
            image.seek(index)
            mirrored |= image.getexif().get(0x0112) in _MIRRORING
    if not mirrored:
        try:
            data = img2pdf.convert(original.read_bytes(), engine=img2pdf.Engine.pikepdf,
                                   rotation=img2pdf.Rotation.ifvalid,
                                   layout_fun=_layout([_read_dpi(by_number.get(n))
                                                       for n in range(1, frames + 1)]))
            if _page_count(data) == frames:
                return data
            log.info("event=image_pdf_fallback reason=page_count kind=%s", kind)
        except Exception as exc:  # img2pdf raises its own and Pillow's errors alike
            log.info("event=image_pdf_fallback reason=%r kind=%s", str(exc)[:200], kind)
    return _rendered_image_pdf(original, kind, frames, by_number)


PDF_MIN_SIDE_PT, PDF_MAX_SIDE_PT = 3, 14400  # what PDF readers (and pikepdf) accept


def _layout(dpis: list[float | None]):
    """img2pdf's layout function (it is called once per page, in order): the page's
    pixels at ``dpis[page]``, or where that is None at img2pdf's reading of the
    file's resolution."""
    import img2pdf

    pages = iter(dpis)

    def layout(width_px, height_px, stated):
        dpi = next(pages, None)
        x_dpi, y_dpi = stated if dpi is None else (dpi, dpi)
        return img2pdf.default_layout_fun(width_px, height_px,
                                          (_fitting(width_px, x_dpi), _fitting(height_px, y_dpi)))

    return layout


def _fitting(pixels: int, dpi: float) -> float:
    """The resolution at which a side of this many pixels is a side PDF allows (3 to
    14,400 points): a tiny image gets a lower one, a huge one a higher one."""
    return min(max(dpi, pixels * 72 / PDF_MAX_SIDE_PT), pixels * 72 / PDF_MIN_SIDE_PT)


def _read_dpi(tree: PageTree | None) -> float | None:
    """The resolution a page was read at, where its tree records one (a failed page's
    tree does not)."""
    if tree is None or tree.status != "done" or not plausible_dpi(tree.dpi):
        return None
    return float(tree.dpi)


def _rendered_image_pdf(original: Path, kind: str, frames: int,
                        by_number: dict[int, PageTree]) -> bytes:
    """Each frame as the appliance rendered it (EXIF-turned, flattened to RGB),
    embedded as lossless PNG data at the resolution it was read at."""
    import img2pdf

    from appliance.raster import render_page

    pngs, dpis = [], []
    for index in range(frames):
        frame = render_page(original, kind, index, round(UNKNOWN_DPI), _NO_PIXEL_LIMIT)
        dpi = _read_dpi(by_number.get(index + 1))
        if dpi is None:
            stated = frame.info.get("dpi") or (0, 0)
            dpi = float(stated[0]) if plausible_dpi(float(stated[0])) else float(UNKNOWN_DPI)
        buffer = io.BytesIO()
        frame.save(buffer, format="PNG")
        pngs.append(buffer.getvalue())
        dpis.append(dpi)
    return img2pdf.convert(pngs, engine=img2pdf.Engine.pikepdf,
                           rotation=img2pdf.Rotation.none, layout_fun=_layout(dpis))


def _page_count(data: bytes) -> int:
    import pikepdf

    with pikepdf.open(io.BytesIO(data)) as pdf:
        return len(pdf.pages)


# --- metadata and PDF/A --------------------------------------------------------------


def _write_metadata(base: pikepdf.Pdf, plan: _Plan) -> None:
    """Which pages have no text layer: a DocInfo key, always; a sentence in
    dc:description (kept after the original's own) where there are such pages."""
    import pikepdf

    base.docinfo[pikepdf.Name(PAGES_WITHOUT_TEXT_KEY)] = plan.description()
    if not plan.without_text:
        return
    sentence = f"No OCR text layer on page(s) {plan.description()}."
    with base.open_metadata(set_pikepdf_as_editor=False) as meta:
        existing = meta.get("dc:description")
        meta["dc:description"] = f"{existing}\n{sentence}" if existing else sentence


def _drop_open_action(base: pikepdf.Pdf) -> None:
    """Remove a catalog /OpenAction that only says where a viewer opens the document
    (a destination, or a GoTo action): PDF/A permits it, but pikepdf's validator
    checks no /OpenAction and would refuse the document for it. Any other action is
    left for the validator to refuse."""
    import pikepdf

    action = base.Root.get("/OpenAction")
    if isinstance(action, pikepdf.Array) or (
            isinstance(action, pikepdf.Dictionary) and action.get("/S") == pikepdf.Name.GoTo
            and "/Next" not in action):
        del base.Root["/OpenAction"]
        log.info("event=pdfa_repair removed the /OpenAction (the page and zoom a viewer "
                 "opens at), which the PDF/A validator does not check")


def _remove_pdfa_claim(base: pikepdf.Pdf) -> None:
    if "/Metadata" not in base.Root:
        return
    with base.open_metadata(set_pikepdf_as_editor=False) as meta:
        for key in ("pdfaid:part", "pdfaid:conformance", "pdfaid:amd", "pdfaid:rev"):
            if key in meta:
                del meta[key]


def _pdfa_reason(flavour: str, report) -> str:
    """A short reason: the first violation (or finding), and how many more."""
    findings = list(report.violations) or list(report.findings)
    if not findings:
        return f"PDF/A-{flavour} validation did not pass"
    first = findings[0]
    reason = f"PDF/A-{flavour}: {first.message} ({first.rule} at {first.where})"
    if len(findings) > 1:
        reason += f" and {len(findings) - 1} more"
    return reason[:500]


def _log_repairs(report) -> None:
    """What the PDF/A repairs changed beyond metadata (hidden annotations removed,
    document JavaScript removed, ...), at the level pikepdf gives each."""
    if report.prepared is None:
        return
    for level, sentence in report.prepared.messages():
        if level in ("warning", "info"):
            log.log(logging.getLevelName(level.upper()), "event=pdfa_repair %s", sentence)
