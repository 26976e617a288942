"""Type detection from magic bytes.

The type comes from the content only, never from the file name: scanners and mail
gateways name files carelessly, and a renamed file must not reach the wrong decoder.

Three outcomes besides a kind: ``EmptyFile`` for no bytes; ``UnsupportedType`` for a
file we can name but do not read (plain text, an Office document, HTML, ...), whose
message says what it is; ``UnrecognizedFile`` for bytes with no known signature at
all, which are usually a damaged file.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePath

from appliance.errors import EmptyFile, TruncatedFile, UnrecognizedFile, UnsupportedType

IMAGE_KINDS: tuple[str, ...] = ("png", "jpeg", "tiff", "bmp", "webp", "gif")
ALL_KINDS: tuple[str, ...] = ("pdf", *IMAGE_KINDS)

# How many leading bytes a caller should read; also how far "%PDF-" is searched,
# because some producers write a little junk (a BOM, a mail header) before it.
HEAD_BYTES = 1024


_PREFIXES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"II+\x00", "tiff"),  # BigTIFF
    (b"MM\x00+", "tiff"),  # BigTIFF
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
)

# What a refusal calls each kind of file it names, by key (ui.i18n says each in Chinese:
# kind_<key>).
KIND_WORDS = {
    # what a file's name promises, where its content is none of these
    "pdf": "a PDF", "png": "a PNG image", "jpeg": "a JPEG image", "tiff": "a TIFF image",
    "bmp": "a BMP image", "webp": "a WebP image", "gif": "a GIF image",
    # formats people send by mistake
    "rtf": "an RTF document",
    "ole": "a legacy Microsoft Office document (.doc, .xls or .ppt)",
    "postscript": "a PostScript file", "jpeg2000": "a JPEG 2000 image",
    "djvu": "a DjVu document", "gzip": "a gzip archive", "7z": "a 7-Zip archive",
    "rar": "a RAR archive", "docx": "a Word document (.docx)",
    "xlsx": "an Excel workbook (.xlsx)", "pptx": "a PowerPoint presentation (.pptx)",
    "opendocument": "an OpenDocument file (.odt, .ods or .odp)", "epub": "an EPUB e-book",
    "office": "a Microsoft Office document",
    "zip": "a ZIP archive (unpack it and submit the scans inside)",
    "heic": "a HEIC image", "heif": "a HEIF image", "avif": "an AVIF image",
    "svg": "an SVG drawing", "html": "an HTML page", "xml": "an XML file",
    "text": "a plain text file",
}

# What a file's name says it is, for the message on a file whose content is none of
# these: its name promises a kind the content does not have.
_NAMED_KINDS = {".pdf": "pdf", ".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".tif": "tiff",
                ".tiff": "tiff", ".bmp": "bmp", ".webp": "webp", ".gif": "gif"}

# Sizes of the BMP info header that follows the 14-byte file header (core, v1..v5).
_BMP_INFO_SIZES = frozenset({12, 16, 40, 52, 56, 64, 108, 124})

# Formats people send by mistake, named so the message can say what the file is.
_OTHER_PREFIXES: tuple[tuple[bytes, str], ...] = (
    (b"{\\rtf", "rtf"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole"),
    (b"%!PS", "postscript"),
    (b"\x00\x00\x00\x0cjP  ", "jpeg2000"),
    (b"\xff\x4f\xff\x51", "jpeg2000"),
    (b"AT&TFORM", "djvu"),
    (b"\x1f\x8b", "gzip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "rar"),
)

# Markers inside the first ZIP entries (names, or the stored "mimetype" of ODF/EPUB).
_ZIP_MEMBERS: tuple[tuple[bytes, str], ...] = (
    (b"word/", "docx"),
    (b"xl/", "xlsx"),
    (b"ppt/", "pptx"),
    (b"application/vnd.oasis.opendocument", "opendocument"),
    (b"application/epub+zip", "epub"),
    (b"[Content_Types].xml", "office"),
)

_ISO_BMFF_BRANDS = {b"heic": "heic", b"heix": "heic", b"mif1": "heif", b"avif": "avif"}

_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)

# Control characters that ordinary text files contain.
_TEXT_CONTROLS = frozenset("\t\n\r\f\v\x1b")
_MIN_PRINTABLE = 0.95  # share of printable characters for a legacy 8-bit text


def sniff_kind(head: bytes, name: str = "") -> str:
    """The document kind of a file whose first bytes are ``head`` (read HEAD_BYTES).

    Raises EmptyFile for no bytes, UnsupportedType for a file recognised as something
    other than a scan or an image we read, and UnrecognizedFile for anything else (whose
    message says when the file's ``name`` promised a kind its content is not).
    """
    if not head:
        raise EmptyFile.said("empty")
    for prefix, kind in _PREFIXES:
        if head.startswith(prefix):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:2] == b"BM" and int.from_bytes(head[14:18], "little") in _BMP_INFO_SIZES:
        return "bmp"  # "BM" alone also starts many a text file
    if b"%PDF-" in head[:HEAD_BYTES]:
        return "pdf"
    if len(head) >= 2 and any(len(head) < len(prefix) and prefix.startswith(head)
                              for prefix, _kind in _PREFIXES):
        raise TruncatedFile.said("signature_cut", size=len(head))
    what = _other_format(head[:HEAD_BYTES])
    if what is not None:
        raise UnsupportedType.said("other_format", what=KIND_WORDS[what])
    named = _NAMED_KINDS.get(PurePath(name).suffix.lower())
    if named is not None:
        raise UnrecognizedFile.said("misnamed", named=KIND_WORDS[named])
    raise UnrecognizedFile.said("no_signature")


def _other_format(head: bytes) -> str | None:
    """The key (of KIND_WORDS) of a format we recognise but do not read, or None."""
    for prefix, what in _OTHER_PREFIXES:
        if head.startswith(prefix):
            return what
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"):
        for marker, what in _ZIP_MEMBERS:
            if marker in head:
                return what
        return "zip"
    if head[4:8] == b"ftyp" and head[8:12] in _ISO_BMFF_BRANDS:
        return _ISO_BMFF_BRANDS[head[8:12]]
    text = _as_text(head)
    if text is None:
        return None
    return _markup(text) or "text"


def _markup(text: str) -> str | None:
    start = text.lstrip().lower()
    if start.startswith("{\\rtf"):
        return "rtf"
    if start.startswith(("<!doctype html", "<html", "<head", "<body")):
        return "html"
    if start.startswith("<?xml") or start.startswith("<!doctype") or start.startswith("<svg"):
        if re.search(r"<svg[\s>]", start):
            return "svg"
        if re.search(r"<html[\s>]", start):
            return "html"
        return "xml"
    return None


def _as_text(head: bytes) -> str | None:
    """The head decoded as text if it looks like text (printable, no NULs), else None.

    UTF-16 is accepted only with its byte order mark; otherwise a NUL means binary.
    UTF-8 (and so ASCII) must decode cleanly, except for a character cut at the end of
    the head; a legacy 8-bit text (Latin-1) must be almost all printable.
    """
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            body = head[len(bom):]
            if encoding.startswith("utf-16"):
                body = body[: len(body) // 2 * 2]
            text = body.decode(encoding, errors="replace")
            return text if _printable_share(text) >= _MIN_PRINTABLE else None
    if b"\x00" in head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.start >= len(head) - 3:
            text = head[: exc.start].decode("utf-8")  # a multi-byte character cut by the head
        else:
            try:
                text = head.decode("cp1252")  # Windows' Latin-1 with its curly quotes
            except UnicodeDecodeError:
                text = head.decode("latin-1")
            return text if _printable_share(text) >= _MIN_PRINTABLE else None
    return text if text and _printable_share(text) >= _MIN_PRINTABLE else None


def _printable_share(text: str) -> float:
    if not text:
        return 0.0
    printable = sum(1 for ch in text
                    if ch in _TEXT_CONTROLS or unicodedata.category(ch)[0] != "C")
    return printable / len(text)
