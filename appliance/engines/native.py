"""Native libraries in the order they must load: llama.cpp's first in every process, and
in an engine worker every other one a page may need before its model runs.

Measured on an H200 with CUDA 13.0 (README, "GPU hosts"):
- llama.cpp's CUDA model load segfaults in a process that loaded OpenCV first, and
  loads in one that imported ``llama_cpp`` before ``cv2``. Of the libraries OpenCV's
  wheel brings, exactly those that link libstdc++ (libvpx, libavif, and what links them)
  crash it when loaded alone before llama.cpp; the others do not.
- ``onnxruntime`` (RapidOCR's runtime), imported once the model ran on the card, crashed
  the worker in that import: the worker imported it after its model's warm-up.
A CPU build shows neither. ``engines/__init__`` calls :func:`load_first` before it
imports anything else, and the package root imports ``engines``, so every process of
the appliance (the engine worker, `appliance ocr`, `bench`, `doctor`, the parallel
bench) loads llama.cpp before any of its modules can import another native library.
The worker calls :func:`load_page_libraries` before it loads its model, so that no
native library is loaded beside a running model. :func:`require_first` turns the first
crash into an error where something outside the package imported OpenCV earlier.
"""

from __future__ import annotations

import sys

from appliance.errors import EngineUnavailable

LLAMA_CPP, OPENCV = "llama_cpp", "cv2"
# What a worker's page may load (module, and the attribute whose lookup imports the
# rest where the package imports lazily): RapidOCR (the classic engine, the orientation
# check, a vision page's fallback and word boxes) with its runtime and what it imports,
# pdfium and qpdf (PDF pages), OpenCV (preprocessing), zxing-cpp (barcodes), and
# Pillow's modules that load
# libraries of their own when a page needs them (WebP's codec; ImageMath, for GIF).
# tests/service/test_native_order.py finds any other a page loads.
PAGE_LIBRARIES = (("onnxruntime", None), ("rapidocr", "RapidOCR"), ("pypdfium2", None),
                  ("pikepdf", None), (OPENCV, None), ("zxingcpp", None),
                  ("PIL.WebPImagePlugin", None), ("PIL.ImageMath", None))


def load_first() -> None:
    """Load llama.cpp's libraries now (libllama, libggml and its backends, libmtmd), by
    importing its Python package, unless OpenCV is loaded already (something imported
    it before this package: too late to come first)."""
    if OPENCV not in sys.modules:
        _load(LLAMA_CPP)


def load_page_libraries() -> None:
    """Load every native library of PAGE_LIBRARIES, for a worker before its model."""
    for module, attribute in PAGE_LIBRARIES:
        _load(module, attribute)


def _load(module: str, attribute: str | None = None) -> None:
    try:
        loaded = __import__(module)  # an import statement's: -X importtime lists it
        if attribute:
            getattr(loaded, attribute)
    except Exception:  # not installed, or a broken build: what needs it fails later
        pass  # with its own reason, and `appliance doctor` says why


def require_first() -> None:
    """Refuse to load a model onto a GPU in a process that loaded OpenCV before
    llama.cpp, where the load would segfault (EngineUnavailable)."""
    import llama_cpp

    loaded = list(sys.modules)
    if (OPENCV in loaded and loaded.index(OPENCV) < loaded.index(LLAMA_CPP)
            and llama_cpp.llama_supports_gpu_offload()):
        raise EngineUnavailable("OpenCV (cv2) was imported before llama.cpp in this process, "
                                "and llama.cpp's GPU model load crashes then: import the "
                                "appliance package before cv2")
