"""Type detection from magic bytes.

The type comes from the content only, never from the file name: scanners and mail
gateways name files carelessly, and a renamed file must not reach the wrong decoder.
"""

from __future__ import annotations

from appliance.errors import EmptyFile, UnsupportedType

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
    (b"BM", "bmp"),
)


def sniff_kind(head: bytes) -> str:
    """The document kind of a file whose first bytes are ``head`` (read HEAD_BYTES).

    Raises EmptyFile for no bytes and UnsupportedType for anything not in ALL_KINDS.
    """
    if not head:
        raise EmptyFile("The file is empty (0 bytes). Check the scanner or upload and send it again.")
    for prefix, kind in _PREFIXES:
        if head.startswith(prefix):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if b"%PDF-" in head[:HEAD_BYTES]:
        return "pdf"
    raise UnsupportedType(
        "This file type is not supported. Supported types: PDF, PNG, JPEG, TIFF, BMP, "
        "WebP and GIF. Convert the file to PDF or PNG and submit it again."
    )
