"""llama.cpp's libraries load first, and every other native library a page may need
before any model runs, in every process that may load a model
(``appliance.engines.native``): on a CUDA host llama.cpp's model load segfaulted in a
process that imported cv2 first, and onnxruntime's import segfaulted once the model
ran. Each entry point runs in a fresh interpreter as its users start it, on the tiny
model; the order is read from ``sys.modules`` (insertion order) there, and from
``-X importtime``'s lines in the engine workers it spawns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from appliance.config import dump_toml
from appliance.engines.native import FIRST_LOADED
from appliance.raster.synthetic import render_text_page

ORDERED = FIRST_LOADED
ENTRY = textwrap.dedent("""
    import json, os, runpy, sys

    os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # the workers it spawns list their imports
    entry, *args = sys.argv[1:]
    sys.argv = [entry, *args]
    try:
        runpy.run_module(entry, run_name="__main__")  # the console script: appliance.cli
    except SystemExit:
        pass
    loaded = list(sys.modules)
    print("LOADED " + json.dumps({name: loaded.index(name) for name in {ORDERED}
                                  if name in loaded}))
""").replace("{ORDERED}", repr(ORDERED))


@pytest.fixture(scope="module")
def setup(tiny_model, tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("order")
    model, mmproj = tiny_model
    config = where / "config.toml"
    config.write_text(dump_toml({
        "paths": {"data_dir": str(where / "data"), "output_dir": str(where / "output")},
        "engine": {"name": "llama", "model": str(model), "mmproj": str(mmproj), "threads": 1,
                   "n_ctx": 1024, "parallel": 1},
        "output": {"formats": ["md"]}}))
    page = where / "page.png"
    render_text_page(["Invoice 2024", "Total 118.50"], width=400, height=300,
                     font_size=28).save(page)
    return {"config": str(config), "model": str(model), "mmproj": str(mmproj),
            "page": str(page)}


def run_entry(module: str, *args: str) -> tuple[dict, list[str]]:
    """Where the entry point's own modules of ORDERED came in its ``sys.modules``, and
    the modules its workers imported, in the order their imports ended."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    done = subprocess.run([sys.executable, "-c", ENTRY, module, *args], capture_output=True,
                          text=True, timeout=300, env=env)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    workers = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:") and "|" in line]
    return json.loads(line.removeprefix("LOADED ")), workers


def assert_llama_first(loaded: dict, workers: list[str]) -> None:
    assert set(loaded) == set(ORDERED), loaded  # all loaded: the order is a real one
    assert sorted(loaded, key=loaded.get) == list(ORDERED), loaded
    assert "appliance.engines.host" in workers, "no engine worker was started"
    ended = [workers.index(module) for module in ORDERED]
    assert ended == sorted(ended), dict(zip(ORDERED, ended))
    # all of them before the worker's own code, so before its model
    assert ended[-1] < workers.index("appliance.engines.host")


@pytest.mark.parametrize("command", [
    pytest.param(["ocr", "{page}"], id="ocr"),
    pytest.param(["doctor"], id="doctor"),
    pytest.param(["bench", "--parallel", "1", "--tokens", "4"], id="bench"),
])
def test_appliance_commands_load_llama_cpp_before_opencv(setup, command):
    args = [arg.format(**setup) for arg in command]
    assert_llama_first(*run_entry("appliance.cli", args[0], "--config", setup["config"],
                                  *args[1:]))


def test_the_parallel_bench_loads_llama_cpp_before_opencv(setup):
    assert_llama_first(*run_entry("appliance.engines.llama.parallel_bench", "--config",
                                  setup["config"], "--model", setup["model"], "--mmproj",
                                  setup["mmproj"], "--parallel", "1", "--tokens", "4"))


REFUSED = textwrap.dedent("""
    import sys
    import cv2  # before the appliance, as a script of someone else's might
    import llama_cpp
    llama_cpp.llama_supports_gpu_offload = lambda: True  # a CUDA build, as on a GPU host
    from appliance.engines.llama.batched import load_model
    from appliance.errors import EngineUnavailable
    try:
        load_model(sys.argv[1], 0)
    except EngineUnavailable as exc:
        print("refused:", exc.message)
""")


def test_a_gpu_model_load_after_opencv_is_refused_not_crashed(tiny_model):
    done = subprocess.run([sys.executable, "-c", REFUSED, str(tiny_model[0])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: OpenCV (cv2) was imported before llama.cpp" in done.stdout
