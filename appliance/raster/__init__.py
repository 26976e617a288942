"""PDF and image decoding to RGB page images.

Every input failure becomes the matching ``appliance.errors`` class so the document
ends ``failed`` with a reason the user can act on. Pixel limits are checked against
the declared size before any pixel is decoded, so a hostile header cannot make the
daemon allocate gigabytes.
"""

from __future__ import annotations

import io
import logging
import math
import os
import tempfile
import threading
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from PIL import Image, ImageOps

from appliance.errors import (ApplianceError, CorruptFile, EncryptedPdf, TooManyPixels,
                              TruncatedFile)

if TYPE_CHECKING:
    import pypdfium2 as pdfium

log = logging.getLogger(__name__)

# Restricting Pillow to the sniffed format keeps a file from being decoded by a
# plugin other than the one its magic bytes promised.
_PIL_FORMATS = {
    "png": "PNG",
    "jpeg": "JPEG",
    "tiff": "TIFF",
    "bmp": "BMP",
    "webp": "WEBP",
    "gif": "GIF",
}

# How Pillow words "the data stopped before the image did" (ImageFile.load, _safe_read,
# PngImagePlugin's chunk reader); compared in lower case.
_TRUNCATION_MARKERS = ("truncated", "incomplete checksum")
_TAIL_BYTES = 4096  # how far from the end an end marker is looked for (trailing junk exists)


def count_pages(path: Path, kind: str, max_pixels: int, password: str | None = None) -> int:
    """Number of pages, read from the structure only (no page is rendered or decoded)."""
    if kind == "pdf":
        with open_pdf(path, password) as pdf:
            return len(pdf)
    with _open_image(path, kind, max_pixels) as image:
        return getattr(image, "n_frames", 1)


# A JPEG checked at intake is decoded this many times smaller on each side: libjpeg still
# reads every scan of the file (a cut one fails), and skips most of the work of pixels.
JPEG_CHECK_SCALE = 8
INK_LEVEL = 128  # a pixel this dark (0-255 grey) is ink: a glyph's, a dot's


def check_image_data(path: Path, kind: str, max_pixels: int) -> None:
    """Decode an image's first frame once, so that a file cut short is refused when it is
    submitted rather than accepted and failed by the worker. Its header alone (what
    ``count_pages`` reads) does not show that the data stops early. A PDF is not checked."""
    if kind == "pdf":
        return
    with _open_image(path, kind, max_pixels) as image:
        if kind == "jpeg":  # a 1-pixel side scales to 1, not to 0 (which draft divides by)
            image.draft("RGB", (max(1, image.width // JPEG_CHECK_SCALE),
                                max(1, image.height // JPEG_CHECK_SCALE)))
        try:
            image.load()
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise _decode_error(exc, path, kind, "image_undecoded") from exc


def born_digital_pages(path: Path, scan_min_area: float, password: str | None = None
                       ) -> set[int]:
    """The pages of a PDF that are born digital: text of their own and no picture over
    ``scan_min_area`` of the page (a scan, with an OCR layer or without, is read as an
    image). From the pages' objects alone, about a quarter of a millisecond a page."""
    import pypdfium2.raw as pdfium_c

    found = set()
    with open_pdf(path, password) as pdf:
        for index in range(len(pdf)):
            with _pdf_page(pdf, index) as page:
                area = (page.get_width() * page.get_height()) or 1.0
                texts = page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_TEXT,), max_depth=1)
                if next(texts, None) is None:
                    continue
                pictures = page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,))
                if not any(_box_area(picture.get_bounds()) >= scan_min_area * area
                           for picture in pictures):
                    found.add(index)
    return found


def _box_area(bounds: tuple[float, float, float, float]) -> float:
    left, bottom, right, top = bounds
    return max(0.0, right - left) * max(0.0, top - bottom)


# A reviewer's rerun at higher resolution renders PDF pages this much finer per step.
# a resolution a file states outside this is its mistake (Pillow reads a TIFF without
# resolution tags as 1 dpi)
PLAUSIBLE_DPI = (20.0, 10000.0)


def plausible_dpi(dpi: float) -> bool:
    return PLAUSIBLE_DPI[0] <= dpi <= PLAUSIBLE_DPI[1]


BOOST_DPI_FACTOR = 1.5


def render_dpi(pdf_dpi: int, resolution_boost: int = 0) -> int:
    """The resolution PDF pages are rendered at, after any reviewer's boost."""
    return round(pdf_dpi * BOOST_DPI_FACTOR ** resolution_boost)


def render_page(path: Path, kind: str, index: int, dpi: int, max_pixels: int,
                password: str | None = None) -> Image.Image:
    """Page ``index`` (0-based) as an RGB image: PDFs at ``dpi``, images at their own resolution."""
    if kind == "pdf":
        return _render_pdf_page(path, index, dpi, max_pixels, password)
    return _render_image_frame(path, kind, index, max_pixels)


# a page's result provenance: PAGE_IMAGE is ON_DEMAND where the worker did not keep the
# page's image (a page read from its own text), which ``write_page_image`` makes on demand
PAGE_IMAGE, ON_DEMAND = "page_image", "on_demand"


class PageRendering:
    """Page ``index`` (0-based) of a document as a worker reads it at ``dpi``: its pixels
    (``image``) rendered once, when first asked for. A PDF page also gives its size in
    those pixels and a light rendering of itself (``preview``) without them: a page
    read from its own text needs no more."""

    def __init__(self, path: Path, kind: str, index: int, dpi: int, max_pixels: int,
                 password: str | None = None):
        self.path, self.kind, self.index = path, kind, index
        self.dpi_asked, self.max_pixels, self.password = dpi, max_pixels, password
        self._previews: dict[int, Image.Image] = {}

    @cached_property
    def image(self) -> Image.Image:
        return render_page(self.path, self.kind, self.index, self.dpi_asked, self.max_pixels,
                           self.password)

    @cached_property
    def _measured(self) -> tuple[tuple[int, int], float]:
        """(size, dpi) of ``image``, as pdfium sizes a rendering (ceil of each side)."""
        if self.kind != "pdf" or "image" in self.__dict__:
            return self.image.size, float(self.image.info.get("dpi", (0, 0))[0])
        with open_pdf(self.path, self.password) as pdf, _pdf_page(pdf, self.index) as page:
            scale = _page_scale(page, self.index, self.dpi_asked, self.max_pixels)
            width_pt, height_pt = page.get_size()
        return (math.ceil(width_pt * scale), math.ceil(height_pt * scale)), scale * 72

    @property
    def size(self) -> tuple[int, int]:
        return self._measured[0]

    @property
    def dpi(self) -> float:
        """The resolution of ``image`` (a PDF's after any pixel cap; an image's own)."""
        return self._measured[1]

    def preview(self, dpi: int) -> Image.Image:
        """The PDF page rendered at about ``dpi`` (never finer than ``image``), once."""
        if dpi not in self._previews:
            self._previews[dpi] = _render_pdf_page(self.path, self.index,
                                                   min(dpi, self.dpi_asked), self.max_pixels,
                                                   self.password)
        return self._previews[dpi]


def save_page_image(image: Image.Image, dest: Path) -> None:
    """Write ``image`` as PNG so that ``dest`` is either absent or complete, even after a crash.

    Creates missing parent folders, since page images live in per-document folders.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            image.save(tmp, format="PNG", compress_level=1)  # speed over size: spool is short-lived
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # makes the rename itself durable
    finally:
        os.close(dir_fd)


def write_page_image(path: Path, kind: str, index: int, dpi: int, max_pixels: int,
                     password: str | None, dest: Path) -> bool:
    """Render page ``index`` as a worker would have and keep it at ``dest`` (for a page
    whose image was left ``ON_DEMAND``); False where the original is gone (purged, or
    deleted meanwhile) or no longer renders. A delete or purge that removed the
    original while the page was rendered finds the image written after it gone too:
    the spool removes the original before it lists the page images
    (``Spool.delete_content``), and the image is kept only if the original is still
    there once the image is."""
    if not path.exists():
        return False
    try:
        save_page_image(render_page(path, kind, index, dpi, max_pixels, password), dest)
    except (ApplianceError, OSError, IndexError) as exc:
        log.warning("event=page_image_unrendered page=%d reason=%s", index + 1, exc)
        return False
    if not path.exists():  # deleted or purged meanwhile
        dest.unlink(missing_ok=True)
        for folder in (dest.parent, dest.parent.parent):  # per DPI, per content
            try:
                folder.rmdir()
            except OSError:  # not empty: other images of content still kept
                break
        return False
    return True


def decrypted_pdf(path: Path, password: str) -> bytes | None:
    """The PDF at ``path`` without its encryption, opened with ``password``; None when it
    is not encrypted. EncryptedPdf when the password does not open it."""
    import pikepdf

    # qpdf takes a password as a C string: one with a NUL in it opens no PDF, and one
    # that does not need it is kept as sent, as with any password
    usable = "\0" not in password
    try:
        with pikepdf.open(path, password=password if usable else "") as pdf:
            if not pdf.is_encrypted:
                return None
            if not usable:
                raise EncryptedPdf.said("pdf_wrong_password")
            out = io.BytesIO()
            # without encryption (pikepdf drops it unless asked to keep it), and with an
            # /ID from the content, not the clock: the same PDF sent again (a retried
            # upload) is the same content
            pdf.save(out, deterministic_id=True)
            return out.getvalue()
    except pikepdf.PasswordError:
        raise EncryptedPdf.said("pdf_wrong_password") from None
    except pikepdf.PdfError as exc:
        raise CorruptFile.said("pdf_unopened", detail=_detail(exc, path)) from exc


# pdfium is not thread-safe: a worker reading several pages at once on threads (a
# vision engine's slots) opens one PDF at a time
_PDFIUM = threading.Lock()


@contextmanager
def open_pdf(path: Path, password: str | None = None) -> Iterator[pdfium.PdfDocument]:
    """The PDF opened by pdfium, held by this thread until the block ends."""
    with _PDFIUM:
        yield from _opened_pdf(path, password)


def _opened_pdf(path: Path, password: str | None) -> Iterator[pdfium.PdfDocument]:
    # imported here: the engines import this package's submodules on a GPU measuring
    # host that has no pypdfium2 (scripts/gpu-check.sh)
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        pdf = pdfium.PdfDocument(path, password=password or None)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise EncryptedPdf.said("pdf_watch_password" if password else "pdf_password") \
                from exc
        if _ends_early(path, "pdf"):
            raise TruncatedFile.said("pdf_cut", detail=_detail(exc, path)) from exc
        raise CorruptFile.said("pdf_unopened", detail=_detail(exc, path)) from exc
    try:
        yield pdf
    finally:
        pdf.close()


def _render_pdf_page(path: Path, index: int, dpi: int, max_pixels: int,
                     password: str | None) -> Image.Image:
    import pypdfium2 as pdfium

    with open_pdf(path, password) as pdf, _pdf_page(pdf, index) as page:
        scale = _page_scale(page, index, dpi, max_pixels)
        try:
            bitmap = page.render(scale=scale)
        except (pdfium.PdfiumError, ValueError) as exc:  # ValueError: a zero-size page
            raise CorruptFile.said("pdf_page_unrendered", page=index + 1,
                                   detail=_detail(exc, path)) from exc
        try:
            image = bitmap.to_pil().convert("RGB")
        finally:
            bitmap.close()
        image.info["dpi"] = (scale * 72, scale * 72)  # as rendered, after any cap
        return image


@contextmanager
def _pdf_page(pdf: pdfium.PdfDocument, index: int) -> Iterator[pdfium.PdfPage]:
    if not 0 <= index < len(pdf):
        raise IndexError(f"page {index} out of range: the PDF has {len(pdf)} pages")
    page = pdf[index]
    try:
        yield page
    finally:
        page.close()


def _page_scale(page: pdfium.PdfPage, index: int, dpi: int, max_pixels: int) -> float:
    width_pt, height_pt = page.get_size()
    scale = _pdf_scale(width_pt, height_pt, dpi, max_pixels)
    if scale < dpi / 72:
        log.info("event=pdf_render_capped page=%d dpi=%d effective_dpi=%.0f max_pixels=%d",
                 index, dpi, scale * 72, max_pixels)
    return scale


def _pdf_scale(width_pt: float, height_pt: float, dpi: int, max_pixels: int) -> float:
    """``dpi / 72``, lowered when needed so the rendered bitmap stays within ``max_pixels``.

    A huge page (a poster, a plan) is still read, at a resolution the host can hold.
    PDFium sizes the bitmap as ceil(side * scale), so the cap solves
    (w*s + 1) * (h*s + 1) = max_pixels for s.
    """
    scale = dpi / 72
    if math.ceil(width_pt * scale) * math.ceil(height_pt * scale) <= max_pixels:
        return scale
    area, perimeter = width_pt * height_pt, width_pt + height_pt
    return (-perimeter + math.sqrt(perimeter**2 + 4 * area * (max_pixels - 1))) / (2 * area)


def _open_image(path: Path, kind: str, max_pixels: int) -> Image.Image:
    """Open (header only) and enforce the pixel limit on the first frame.

    The caller closes the image (``with``); only ``_render_image_frame`` keeps a
    single-frame image open, whose file Pillow closes itself once it is loaded.
    """
    try:
        image = Image.open(path, formats=[_PIL_FORMATS[kind]])
    except Image.DecompressionBombError as exc:
        raise TooManyPixels.said("bomb", detail=exc) from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:  # "cannot identify", bad headers
        raise _decode_error(exc, path, kind, "image_unread") from exc
    try:
        _check_pixels(image, max_pixels)
    except TooManyPixels:
        image.close()
        raise
    return image


def _decode_error(exc: BaseException, path: Path, kind: str, said: str,
                  **values: object) -> CorruptFile:
    """TruncatedFile when the data stops early (Pillow says so, or the format's end marker
    is missing), said as ``errors.SAID[said + "_cut"]``, else CorruptFile, as ``said``."""
    values.update(kind=kind.upper(), detail=_detail(exc, path))
    if any(marker in str(exc).lower() for marker in _TRUNCATION_MARKERS) or _ends_early(path, kind):
        return TruncatedFile.said(said + "_cut", **values)
    return CorruptFile.said(said, **values)


def _detail(exc: BaseException, path: Path) -> str:
    """The library's words, without the spool path they sometimes quote: a message is
    for the person who sent the file, and the server's layout is none of their business."""
    # "... (PDFium: Data format error)." would end up as "...error).)." in our sentence
    return str(exc).replace(str(path), "the file").rstrip(". ")


def _ends_early(path: Path, kind: str) -> bool:
    """Whether a file that failed to decode lacks the end its own structure promises.

    Only used to explain a failure already seen, so a heuristic is enough: a missing
    end marker (PNG IEND, JPEG EOI, GIF trailer, PDF %%EOF) or a declared size beyond
    the end of the file (BMP, WebP, the first TIFF directory).
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(16)
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return False
    if kind == "png":
        return b"IEND" not in tail
    if kind == "jpeg":
        return b"\xff\xd9" not in tail  # 0xFF is byte-stuffed in the data: only EOI matches
    if kind == "gif":
        return not tail.rstrip(b"\x00").endswith(b";")
    if kind == "pdf":
        return b"%%EOF" not in tail[-1024:]
    if kind == "bmp" and len(head) >= 6:
        return int.from_bytes(head[2:6], "little") > size
    if kind == "webp" and len(head) >= 8:
        return int.from_bytes(head[4:8], "little") + 8 > size
    if kind == "tiff" and len(head) >= 8:
        order = "little" if head[:2] == b"II" else "big"
        if head[2:4] in (b"*\x00", b"\x00*"):
            return int.from_bytes(head[4:8], order) + 2 > size
        if len(head) >= 16:  # BigTIFF: 8-byte offset at 8
            return int.from_bytes(head[8:16], order) + 8 > size
    return False


def _check_pixels(image: Image.Image, max_pixels: int) -> None:
    width, height = image.size
    if width * height > max_pixels:
        raise TooManyPixels.said("over_pixels", width=width, height=height, limit=max_pixels)


def _render_image_frame(path: Path, kind: str, index: int, max_pixels: int) -> Image.Image:
    image = _open_image(path, kind, max_pixels)
    try:
        frames = getattr(image, "n_frames", 1)
        if not 0 <= index < frames:
            raise IndexError(f"page {index} out of range: the image has {frames} frames")
        if index:
            image.seek(index)
            _check_pixels(image, max_pixels)  # frames of a TIFF can differ in size
        image.load()
        ImageOps.exif_transpose(image, in_place=True)
        page = to_rgb(image)
    except BaseException as exc:
        image.close()
        if isinstance(exc, Image.DecompressionBombError):
            raise TooManyPixels.said("frame_bomb", detail=exc) from exc
        if isinstance(exc, (OSError, SyntaxError, ValueError, EOFError)):
            raise _decode_error(exc, path, kind, "frame_undecoded", page=index + 1) from exc
        raise
    if page is image and frames == 1:
        return page  # load() closed the file; copying the pixels would cost ~10 ms a page
    if page is image:
        page = image.copy()  # a multi-frame file stays open for seeking: detach this frame
    image.close()
    return page


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB with transparency flattened onto white, the colour of paper."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16-bit grey scans: scale to 8 bits instead of clipping to white.
        image = image.convert("I").point(lambda value: value / 256).convert("L")
    has_alpha = image.mode in ("RGBA", "LA", "PA", "La", "RGBa") or (
        image.mode == "P" and "transparency" in image.info
    )
    if has_alpha:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")  # a copy costs ~10 ms/page
