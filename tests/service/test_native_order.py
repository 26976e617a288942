"""llama.cpp's libraries load first in every process that may load a model, and an
engine worker loads every other native library a page may need before its model
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
from appliance.engines.native import LLAMA_CPP, OPENCV, PAGE_LIBRARIES
from appliance.raster.synthetic import render_text_page
from tests.fixtures.documents import write_pdf

PAGE_MODULES = [module for module, _attribute in PAGE_LIBRARIES]
ORDERED = (LLAMA_CPP, OPENCV)
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
# where a worker starts its model's code: every native library must be loaded by then
MODEL_CODE = "appliance.engines.llama.engine"


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
    assert set(loaded) == set(ORDERED), loaded  # both loaded: the order is a real one
    assert loaded[LLAMA_CPP] < loaded[OPENCV], loaded
    assert MODEL_CODE in workers, "no engine worker loaded a model"
    first = {module: workers.index(module) for module in (LLAMA_CPP, *PAGE_MODULES)}
    assert min(first, key=first.get) == LLAMA_CPP, first
    assert max(first.values()) < workers.index(MODEL_CODE), first


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


LATE = textwrap.dedent("""
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from appliance.engines import create_engine, native
    from appliance.engines.messages import Job, PageDone
    from appliance.pipeline.stages import PagePipeline, PageSettings, run_job

    def shared_objects():
        return {line.split()[-1] for line in open("/proc/self/maps")
                if ".so" in line.split()[-1]}

    native.load_page_libraries()  # what a worker does before its model
    before = shared_objects()
    # the worker's own pipeline: its orientation and table models
    pipeline = PagePipeline.load(create_engine("classic", {"threads": 1}), PageSettings())
    with ThreadPoolExecutor(1) as background:
        for number, page in enumerate(sys.argv[1:]):
            job = Job(job_id=number, original=Path(page), kind=Path(page).suffix[1:],
                      page_index=0, dpi=100, max_pixels=10**8,
                      page_image=Path(page).with_suffix(".seen.png"), doc_type="generic",
                      engine=None, attempt=1, pdf_password=None, deadline_s=120)
            assert isinstance(run_job(pipeline, job, background), PageDone), page
    print("LATE", *sorted(shared_objects() - before))
""")


def test_a_worker_loads_no_native_library_once_its_model_could_run(tmp_path):
    """Everything a page needs after the worker's model is loaded (the classic reader, the
    orientation check, the table model; PNG, JPEG, TIFF, GIF, BMP, WebP and a PDF read
    from its own text) loads no shared library that the worker had not loaded before its
    model: on a GPU, one loaded beside the running model crashed the worker. Tesseract's
    second opinion runs in a process of its own (``engines.tesseract``)."""
    page = render_text_page(["Invoice 2024", "Total 118.50"], width=400, height=300,
                            font_size=28).convert("RGB")
    pages = []
    for kind, format_name in (("png", "PNG"), ("jpeg", "JPEG"), ("tiff", "TIFF"),
                              ("gif", "GIF"), ("bmp", "BMP"), ("webp", "WEBP")):
        pages.append(tmp_path / f"page.{kind}")
        page.save(pages[-1], format=format_name)
    pages.append(write_pdf(tmp_path / "page.pdf", [["Invoice 2024", "Total 118.50"]]))
    done = subprocess.run([sys.executable, "-c", LATE, *map(str, pages)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("LATE")]
    assert line == "LATE", line


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
