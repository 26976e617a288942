"""One Tesseract kept loaded in a process of its own: ``engines.tesseract`` runs this file
as a script (``python -I``), so that the process loads nothing but the standard library
and libtesseract, and imports it only for the constants of their messages.

It talks over the connection whose descriptor is its first argument, in byte messages:
it answers ``OK`` once its languages (the second argument, Tesseract's form: ``eng``,
``eng+deu``) are loaded, or ``FAILED`` and why and ends; then for each page (a
``HEADER`` of width and height, then the 8-bit grey pixels row by row) ``OK`` and the
text in UTF-8, until the connection closes.
"""

import ctypes
import ctypes.util
import struct
import sys
from multiprocessing.connection import Connection

OK, FAILED = b"\0", b"\1"
HEADER = struct.Struct("<II")
# Page segmentation 3: find the page's blocks and columns itself, as for a scan.
PAGE_SEGMENTATION = 3


def _library() -> ctypes.CDLL:
    path = ctypes.util.find_library("tesseract")
    if path is None:
        raise OSError("libtesseract is not installed (apt-get install tesseract-ocr)")
    lib = ctypes.CDLL(path)
    lib.TessBaseAPICreate.restype = ctypes.c_void_p
    lib.TessBaseAPIInit3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.TessBaseAPISetPageSegMode.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.TessBaseAPISetImage.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_int, ctypes.c_int]
    # a pointer, not c_char_p: the text must be handed back to TessDeleteText
    lib.TessBaseAPIGetUTF8Text.argtypes = [ctypes.c_void_p]
    lib.TessBaseAPIGetUTF8Text.restype = ctypes.POINTER(ctypes.c_char)
    lib.TessDeleteText.argtypes = [ctypes.POINTER(ctypes.c_char)]
    for name in ("TessBaseAPIClear", "TessBaseAPIEnd", "TessBaseAPIDelete"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    return lib


def _text(lib: ctypes.CDLL, api: int, page: bytes) -> bytes:
    width, height = HEADER.unpack_from(page)
    lib.TessBaseAPISetImage(api, page[HEADER.size:], width, height, 1, width)
    text = lib.TessBaseAPIGetUTF8Text(api)
    lib.TessBaseAPIClear(api)  # the page's results; the languages stay loaded
    if not text:
        raise RuntimeError("tesseract found no text layout on the page")
    try:
        return ctypes.string_at(text)
    finally:
        lib.TessDeleteText(text)


def serve(connection: Connection, languages: str) -> None:
    try:
        lib = _library()
    except OSError as exc:
        connection.send_bytes(FAILED + str(exc).encode())
        return
    api = lib.TessBaseAPICreate()
    try:
        if lib.TessBaseAPIInit3(api, None, languages.encode()) != 0:
            connection.send_bytes(FAILED + f"tesseract could not load {languages}".encode())
            return
        lib.TessBaseAPISetPageSegMode(api, PAGE_SEGMENTATION)
        connection.send_bytes(OK)
        while True:
            try:
                page = connection.recv_bytes()
            except EOFError:  # the reader closed it, or its process ended
                return
            try:
                connection.send_bytes(OK + _text(lib, api, page))
            except (RuntimeError, struct.error) as exc:
                connection.send_bytes(FAILED + str(exc).encode())
    finally:
        lib.TessBaseAPIEnd(api)
        lib.TessBaseAPIDelete(api)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])), sys.argv[2])
