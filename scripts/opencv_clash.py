"""Which native library crashes llama.cpp's CUDA model load when it was loaded first,
and which crashes a process when it is loaded after the model ran (scripts/gpu-check.sh,
step 8; README, "GPU hosts").

Each case runs in a fresh interpreter that imports nothing of the appliance (whose
package root loads the libraries in a safe order: that is the fix, and it would hide
the crash). A case loads its library (locally, as a dependency of an extension module
is loaded, or globally), or imports a module, or nothing; then imports llama_cpp and
loads the gemma3-mini shaped model with every layer offloaded; a "late" case imports
its module only after the model generated a few tokens. The cases: nothing, cv2 before
and after llama.cpp, cv2's own library and each one its wheel bundles, libstdc++ alone,
onnxruntime before and late. Its exit status is the answer (0 loaded, -11 SIGSEGV), one
JSON line per case on stdout and in --jsonl.

    python scripts/opencv_clash.py --cache-dir DIR [--jsonl FILE] [--cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

CASE = """
import ctypes, sys
kind, target, model, layers = sys.argv[1:5]
if kind == "import":
    __import__(target)
elif kind == "library":
    ctypes.CDLL(target)  # local scope, as a dependency of a module Python imports
elif kind == "global":
    ctypes.CDLL(target, mode=ctypes.RTLD_GLOBAL)
import llama_cpp as L
if kind == "after":
    __import__(target)
if kind == "late":
    llm = L.Llama(model_path=model, n_gpu_layers=int(layers), n_ctx=256, verbose=False)
    llm("Hello", max_tokens=4)
    __import__(target)
    sys.exit(0)
L.llama_backend_init()
params = L.llama_model_default_params()
params.n_gpu_layers = int(layers)
sys.exit(0 if L.llama_model_load_from_file(model.encode(), params) else 3)
"""
CASE_TIMEOUT_S = 60


def cases() -> list[tuple[str, str]]:
    """See the module: (kind, target) of each case."""
    package = Path(importlib.util.find_spec("cv2").origin).parent
    bundled = sorted((package.parent / "opencv_python_headless.libs").glob("*.so*"))
    own = sorted(package.rglob("cv2*.so"))
    return [("none", ""), ("import", "cv2"), ("after", "cv2"),
            *(("library", str(path)) for path in [*own, *bundled]),
            ("library", "libstdc++.so.6"), ("global", "libstdc++.so.6"),
            ("import", "onnxruntime"), ("late", "onnxruntime"), ("late", "cv2")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, required=True, help="where the model is built")
    parser.add_argument("--jsonl", type=Path)
    parser.add_argument("--cpu", action="store_true", help="no offload (a rehearsal)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from appliance.engines.llama.parallel_bench import append_line, shaped_model

    model, _mmproj = shaped_model("gemma3-mini", args.cache_dir)
    layers = "0" if args.cpu else "999"
    for kind, target in cases():
        started = time.monotonic()
        try:
            status = subprocess.run([sys.executable, "-c", CASE, kind, target, str(model), layers],
                                    capture_output=True, timeout=CASE_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            status = None
        record = {"case": kind, "target": Path(target).name, "exit": status,
                  "seconds": round(time.monotonic() - started, 1)}
        print(json.dumps(record), flush=True)
        if args.jsonl:
            append_line(args.jsonl, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
