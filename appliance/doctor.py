"""`appliance doctor`: is this host ready to run the appliance?

One line per check, ``ok`` / ``warn`` / ``FAIL`` and what was found. A FAIL is
something that stops the daemon or the configured engine; a warn is something that
works, but worse than it could (no GPU: the classic engine runs on the CPU, and so
would the vision model, slowly). The checks only look: nothing is created except a
temporary file in each directory the daemon writes to, and each [[engine.remote]]
endpoint that pages go to reads one small test page (its API key is sent, never shown).
A configured vision model is loaded in a worker process started as the daemon starts
one, which reads its warm-up page and exits: a native crash there is reported as a
failed check, not suffered.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from appliance.config import Settings
from appliance.engines import registry
from appliance.engines.tesseract import languages_by_script, tesseract_languages
from appliance.errors import ModelError
from appliance.gguf.files import human_size
from appliance.gguf.pair import inspect_model, ModelInfo
from appliance.gpu import MemoryDevice, NvmlDevice, open_device
from appliance.memory_plan import MemoryPlan, plan_for

Status = Literal["ok", "warn", "FAIL"]

DISK_WARN_BYTES = 2 << 30
DISK_FAIL_BYTES = 100 << 20


@dataclass(frozen=True)
class Check:
    status: Status
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4} {self.name}: {self.detail}"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total: int
    free: int


def render(checks: list[Check]) -> str:
    return "".join(check.line() + "\n" for check in checks)


def exit_code(checks: list[Check]) -> int:
    return 1 if any(check.status == "FAIL" for check in checks) else 0


def doctor(settings: Settings, model: Path | None = None, mmproj: Path | None = None,
           device: MemoryDevice | None = None, load: bool = True) -> list[Check]:
    """Every check, in order. ``model`` / ``mmproj`` override ``engine.model`` / ``.mmproj``;
    ``device`` is the memory the plan is made against (default: the daemon's, the card
    memory.device_index or host memory); ``load`` False leaves the model unloaded."""
    engine = settings.engine
    settings = replace(settings, engine=replace(
        engine, model=model if model is not None else engine.model,
        mmproj=mmproj if mmproj is not None else engine.mmproj))
    engine = settings.engine
    wanted = registry.configured(engine.name)
    uses_vlm = wanted.model_files and (registry.strict(engine.name) or engine.model is not None)
    checks = [Check("ok", "config", f"{settings.source or 'built-in defaults'}, "
                                    f"engine.name = {engine.name}")]
    gpu_checks, gpus = _gpus()
    checks += gpu_checks
    checks.append(_llama_build(bool(gpus), uses_vlm))
    checks += _model(settings, wanted, device, load)
    checks += _remote(settings)
    checks.append(_classic(registry.may_run_fallback(engine.name)))
    checks.append(_second_opinion(settings))
    checks.append(_directory("data_dir", settings.paths.data_dir))
    checks.append(_directory("output_dir", settings.paths.output_dir))
    return checks


def _gpus() -> tuple[list[Check], list[Gpu]]:
    no_gpu = "the classic engine runs on the CPU; a vision model would too (slowly)"
    try:
        import pynvml
    except ImportError:
        return [Check("warn", "gpu", f"nvidia-ml-py is not installed, GPUs cannot be "
                                     f"listed; {no_gpu}")], []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [Check("warn", "gpu", f"no NVIDIA GPU / driver found (NVML: {exc}); "
                                     f"{no_gpu}")], []
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(Gpu(index, _text(pynvml.nvmlDeviceGetName(handle)),
                            int(memory.total), int(memory.free)))
    except pynvml.NVMLError as exc:
        return [Check("warn", "gpu", f"the NVIDIA driver answered with an error "
                                     f"({exc}); {no_gpu}")], []
    finally:
        pynvml.nvmlShutdown()
    if not gpus:
        return [Check("warn", "gpu", f"the NVIDIA driver {driver} sees no GPU; {no_gpu}")], []
    return [Check("ok", f"gpu{g.index}", f"{g.name}, {human_size(g.free)} free of "
                                         f"{human_size(g.total)}, driver {driver}")
            for g in gpus], gpus


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _llama_build(have_gpu: bool, uses_vlm: bool) -> Check:
    try:
        import llama_cpp
    except Exception as exc:  # a broken native library raises OSError, not ImportError
        status = "FAIL" if uses_vlm else "warn"
        return Check(status, "llama.cpp", f"llama-cpp-python cannot be loaded ({exc}); "
                                          f"the vision model cannot run: reinstall it")
    version = getattr(llama_cpp, "__version__", "?")
    backends = " and ".join(_backends(llama_cpp.llama_print_system_info()))
    if llama_cpp.llama_supports_gpu_offload():
        return Check("ok", "llama.cpp", f"llama-cpp-python {version} ({backends}) can offload "
                                        f"to a GPU")
    if have_gpu:
        return Check("warn", "llama.cpp",
                     f"llama-cpp-python {version} ({backends}) is a CPU-only build although a GPU is "
                     f"present: reinstall it with CUDA (CMAKE_ARGS=\"-DGGML_CUDA=on\" pip "
                     f"install --force-reinstall --no-cache-dir llama-cpp-python=={version})")
    return Check("warn" if uses_vlm else "ok", "llama.cpp",
                 f"llama-cpp-python {version} ({backends}) is a CPU-only build"
                 + ("; the vision model runs on the CPU (slow)" if uses_vlm else ""))


def _backends(system_info: bytes) -> list[str]:
    """The ggml backends a llama.cpp build was made with, from its system line
    (``CUDA : ARCHS = 900 | ... | CPU : SSE3 = 1 | ...``)."""
    return re.findall(r"(\w+) : ", system_info.decode(errors="replace")) or ["no backend"]


def _model(settings: Settings, wanted: registry.EngineEntry, device: MemoryDevice | None,
           load: bool) -> list[Check]:
    name = settings.engine.name
    model, mmproj = settings.engine.model, settings.engine.mmproj
    if not wanted.model_files:
        return [Check("ok", "model", f"engine.name = {name}: the vision model is not used")]
    if model is None:
        if registry.strict(name):
            return [Check("FAIL", "model", f"engine.name = {name} but engine.model is not "
                                           f"set: set engine.model and engine.mmproj (see "
                                           f"models/README.md), or use engine.name = "
                                           f"{registry.AUTO}")]
        if registry.reads_remote(name) and settings.engine.remote:
            return [Check("ok", "model", "no local vision model (engine.model): the "
                                         "[[engine.remote]] endpoints read every page")]
        return [Check("warn", "model", f"no vision model configured (engine.model, "
                                       f"engine.mmproj): engine={name} runs the "
                                       f"{registry.FALLBACK} engine; see models/README.md to "
                                       f"add one")]
    try:
        info = inspect_model(model, mmproj)
    except ModelError as exc:
        return [Check("FAIL", "model", f"({exc.code}) {exc.message}")]
    opened = device is None
    device = device or open_device(settings.memory.device_index)
    try:
        memory, plan = _memory(settings, wanted, info, device)
        checks = [Check("ok", "model", f"{info.summary()}; checksums: `appliance models verify`"),
                  memory]
        if load and memory.status != "FAIL":
            checks.append(_load(settings, plan, device))
        return checks
    finally:
        if opened and isinstance(device, NvmlDevice):
            device.close()


def _memory(settings: Settings, wanted: registry.EngineEntry, info: ModelInfo,
            device: MemoryDevice) -> tuple[Check, MemoryPlan]:
    """The daemon's memory plan: workers, pages read at once, what they take."""
    plan = plan_for(settings, info, device.sample(), parallel_slots=wanted.parallel_slots)
    status = "FAIL" if plan.refused else "warn" if plan.short else "ok"
    return Check(status, "memory", f"{device.name}: {plan.message}"), plan


def _load(settings: Settings, plan: MemoryPlan, device: MemoryDevice) -> Check:
    """The model loaded and its warm-up page read in a worker process started as the
    daemon starts one, reading as many pages at once as the plan gives it."""
    from appliance.engine_choice import resolve_engine
    from appliance.pipeline.host import WorkerHandle
    from appliance.engines.messages import StartFailed

    # no result cache: the doctor only looks, and the cache would make the data directory
    spec, _notice = resolve_engine(replace(settings, engine=replace(
        settings.engine, parallel=plan.slots, result_cache=False)))
    before = device.sample()
    worker = WorkerHandle(0, spec)
    started = time.monotonic()
    worker.start()
    try:
        ready = worker.wait_ready(settings.workers.warmup_timeout_s)
        after = device.sample()
    finally:
        worker.stop()
    if isinstance(ready, StartFailed):
        return Check("FAIL", "load", f"({ready.code}) {ready.message}; the daemon's workers "
                                     f"would fail the same way: check the llama.cpp build "
                                     f"(above) and the model files")
    grown = human_size(max(0, after.used_bytes - before.used_bytes))
    return Check("ok", "load", f"{ready.model_id} loaded and read its warm-up page in "
                               f"{time.monotonic() - started:.1f} s, {ready.slots} page(s) at "
                               f"once; {after.label} in use grew by {grown}")


def _remote(settings: Settings) -> list[Check]:
    """Each [[engine.remote]] endpoint that pages go to, asked as the remote engine
    asks (``appliance.engines.remote.checks``); the endpoints are asked at once."""
    engine = settings.engine
    if not engine.remote:
        return []
    if not registry.reads_remote(engine.name):
        return [Check("ok", "remote", f"engine.name = {engine.name}: the {len(engine.remote)} "
                                      f"[[engine.remote]] endpoint(s) are not used")]
    from appliance.engines.remote.checks import endpoint_checks

    with ThreadPoolExecutor(len(engine.remote)) as pool:
        found = pool.map(endpoint_checks, [asdict(endpoint) for endpoint in engine.remote])
    return [check for checks in found for check in checks]


def _classic(may_run: bool) -> Check:
    """RapidOCR, FALLBACK's library: a failure when it may be what reads the pages."""
    if importlib.util.find_spec("rapidocr") is None:
        status = "FAIL" if may_run else "warn"
        return Check(status, "classic", "rapidocr is not installed: the classic engine (and "
                                        "the vision model's fallback) cannot run; reinstall "
                                        "the appliance's dependencies")
    version = importlib.metadata.version("rapidocr")
    return Check("ok", "classic", f"rapidocr {version} (CPU, models inside the wheel)")


def _second_opinion(settings: Settings) -> Check:
    review = settings.review
    if not review.second_opinion:
        return Check("ok", "second_opinion", "off (review.second_opinion = false)")
    languages, problem = tesseract_languages(review.second_opinion_languages)
    if problem:
        pages = (f"classic pages in doubt are read again in {languages} only; those in "
                 "another script" if languages else "classic pages in doubt")
        return Check("warn", "second_opinion", f"{problem}: {pages} are not read a second "
                                               "time, so their confidence is less sure")
    read = ", ".join(f"{script} in {languages}" for script, languages
                     in languages_by_script(review.second_opinion_languages).items())
    return Check("ok", "second_opinion", f"tesseract reads classic pages in doubt a second "
                                         f"time: {read}; pages of other scripts are not read "
                                         "again")


def _directory(label: str, path: Path) -> Check:
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check("FAIL", label, f"{path} cannot be created: {existing} is not a "
                                    f"directory; set paths.{label} to a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".appliance-doctor-"):
            pass
    except OSError as exc:
        return Check("FAIL", label, f"{existing} is not writable ({exc.strerror}): let the "
                                    f"appliance's user write there, or change paths.{label}")
    free = shutil.disk_usage(existing).free
    detail = (f"{path}: writable, {human_size(free)} free"
              + ("" if existing == path else " (created at first start)"))
    if free < DISK_FAIL_BYTES:
        return Check("FAIL", label, detail + ": free some space first")
    if free < DISK_WARN_BYTES:
        return Check("warn", label, detail + ": little room for spooled documents and results")
    return Check("ok", label, detail)
