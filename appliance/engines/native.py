"""Native libraries in the order they must load: llama.cpp's first, then every other one
a page may need, all before a model runs on a GPU.

Measured on an H200 with CUDA 13.0 (README, "GPU hosts"):
- llama.cpp's CUDA model load segfaults in a process that loaded OpenCV first, and
  loads in one that imported ``llama_cpp`` before ``cv2``. Of the libraries OpenCV's
  wheel brings, exactly those that link libstdc++ (libvpx, libavif, and what links them)
  crash it when loaded alone before llama.cpp; the others do not.
- ``onnxruntime`` (RapidOCR's runtime), imported once the model ran on the card, crashed
  the process in that import: the engine worker imported it after its model's warm-up.
A CPU build shows neither. ``appliance/__init__.py`` calls :func:`load_first`, so every
process of the appliance (the engine worker, `appliance ocr`, `bench`, `doctor`, the
parallel bench) loads llama.cpp before any of its modules can import another native
library, and loads the rest before any of them can load a model. :func:`require_first`
turns the crash into an error where something outside the package imported OpenCV
earlier.
"""

from __future__ import annotations

import sys

from appliance.errors import EngineUnavailable

LLAMA_CPP, OPENCV = "llama_cpp", "cv2"
# The modules whose import loads each native library a worker's page may need, in the
# order they are loaded: llama.cpp's, RapidOCR's (its runtime and geometry), pdfium's,
# OpenCV's.
FIRST_LOADED = (LLAMA_CPP, "onnxruntime", "pyclipper", "shapely", "pypdfium2", OPENCV)


def load_first() -> None:
    """Load the native libraries of FIRST_LOADED in its order, unless OpenCV is loaded
    already (something imported it before this package: too late to come first)."""
    if OPENCV in sys.modules:
        return  # require_first refuses a GPU model load in such a process
    for module in FIRST_LOADED:
        try:
            __import__(module)
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
