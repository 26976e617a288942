"""`appliance doctor`, run as operators run it. The GPU's absence on a test host is real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.config import dump_toml, load_settings
from appliance.doctor import doctor, exit_code
from appliance.gguf.testmodel import write_test_model
from appliance.gguf.pair import inspect_model
from tests.fixtures.gpu import FakeDevice
from appliance.memory_plan import MAX_AUTO_SLOTS, estimate_worker_bytes

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"(ok  |warn|FAIL) [\w.]+: .+")


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    return write_test_model(tmp_path_factory.mktemp("tiny"))


def write_config(tmp_path: Path, paths: dict | None = None, **engine) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(dump_toml({
        "paths": paths or {"data_dir": "var/data", "output_dir": "var/output"},
        "engine": {"name": "auto", **engine}}), encoding="utf-8")
    return config


def run_doctor(config: Path) -> tuple[int, dict[str, str], list[str]]:
    """Exit code, {check name: its whole line}, and the lines in order."""
    # ggml prints a crash's backtrace through gdb where gdb is installed; a gdb left
    # attaching to the dead worker would hold the output pipes open
    env = {**os.environ, "GGML_NO_BACKTRACE": "1"}
    done = subprocess.run([sys.executable, "-m", "appliance.cli", "doctor", "--config",
                           str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=env)
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    for line in lines:
        assert LINE.fullmatch(line), line
    return done.returncode, {line[5:].split(":", 1)[0]: line for line in lines}, lines


def test_a_configured_tiny_model_passes(tmp_path, pair):
    config = write_config(tmp_path, model=str(pair[0]), mmproj=str(pair[1]))
    code, checks, lines = run_doctor(config)
    assert code == 0, lines
    assert checks["config"].startswith("ok   config: " + str(config))
    gpu_lines = [line for name, line in checks.items() if name.startswith("gpu")]
    assert gpu_lines
    for line in gpu_lines:  # this host has no GPU; a GPU host lists each card
        assert line.startswith("ok   gpu") or "no NVIDIA GPU / driver found" in line
        assert not line.startswith("FAIL")
    assert checks["llama.cpp"].split()[0] in ("ok", "warn")
    assert checks["model"].startswith("ok   model: tiny-gemma3")
    assert "n_embd 64" in checks["model"] and "16 tokens per image" in checks["model"]
    assert checks["classic"].startswith("ok   classic: rapidocr")
    # the daemon's memory plan, on the card or (no GPU here) on host memory
    assert checks["memory"].startswith(("ok   memory: host: 1 worker(s) x",
                                        "ok   memory: gpu0 "))
    assert "slot(s)" in checks["memory"] and "per slot" in checks["memory"]
    # loaded in a worker process as the daemon's, which read its warm-up page and left
    assert checks["load"].startswith("ok   load: tiny-gemma3")
    assert "read its warm-up page in" in checks["load"]
    for name in ("data_dir", "output_dir"):
        assert checks[name].startswith(f"ok   {name}: {tmp_path / 'var'}")
        assert "writable" in checks[name] and "(created at first start)" in checks[name]
    assert not (tmp_path / "var").exists()  # doctor only looks
    assert not list(tmp_path.glob(".appliance-doctor-*"))  # its probe file is gone


def test_a_model_that_crashes_its_worker_is_a_failed_check_with_how(tmp_path, aborting_model):
    code, checks, lines = run_doctor(write_config(tmp_path, model=str(aborting_model[0]),
                                                  mmproj=str(aborting_model[1])))
    assert code == 1
    assert checks["model"].startswith("ok   model:")  # its files pass every check
    assert checks["load"].startswith("FAIL load: (engine_unavailable) the engine process "
                                     "died while starting (killed by SIGABRT)")
    assert lines[-1].startswith("ok   output_dir:")  # the doctor itself went on to the end


def test_no_model_is_a_warning_for_auto_and_a_failure_for_llama(tmp_path):
    code, checks, _ = run_doctor(write_config(tmp_path))
    assert code == 0
    assert checks["model"].startswith("warn model: no vision model configured")
    code, checks, _ = run_doctor(write_config(tmp_path, name="llama"))
    assert code == 1
    assert checks["model"].startswith("FAIL model: engine.name = llama but engine.model")


def test_a_broken_model_fails_with_its_reason(tmp_path, pair):
    junk = tmp_path / "model.gguf"
    junk.write_bytes(b"\x89PNG not a model" * 100)
    code, checks, _ = run_doctor(write_config(tmp_path, model=str(junk), mmproj=str(pair[1])))
    assert code == 1
    assert checks["model"].startswith("FAIL model: (model_not_gguf)")
    code, checks, _ = run_doctor(write_config(tmp_path, model=str(pair[0])))
    assert code == 1
    assert checks["model"].startswith("FAIL model: (model_no_mmproj)")


def test_an_output_dir_that_cannot_be_created_fails(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    config = write_config(tmp_path, paths={"data_dir": "data",
                                           "output_dir": str(blocker / "out")})
    code, checks, _ = run_doctor(config)
    assert code == 1
    assert checks["output_dir"].startswith("FAIL output_dir:")
    assert "is not a directory" in checks["output_dir"]
    assert checks["data_dir"].startswith("ok   data_dir:")


def test_doctor_takes_the_pair_as_parameters(tmp_path, pair):
    settings = load_settings(write_config(tmp_path))
    checks = doctor(settings, model=pair[0], mmproj=pair[1])
    model = next(c for c in checks if c.name == "model")
    assert model.status == "ok" and "gemma3" in model.detail
    assert exit_code(checks) == 0


def test_the_second_reader_is_checked_with_its_languages(tmp_path):
    code, checks, _ = run_doctor(write_config(tmp_path))
    assert checks["second_opinion"] == (
        "ok   second_opinion: tesseract reads classic pages in doubt a second time: LATIN in "
        "eng, CJK in chi_sim; pages of other scripts are not read again")
    config = write_config(tmp_path)
    config.write_text(config.read_text() + '\n[review]\nsecond_opinion_languages = "eng+xyz"\n')
    code, checks, _ = run_doctor(config)
    assert code == 0  # the appliance runs; its classic pages are just less sure
    assert checks["second_opinion"].startswith("warn second_opinion: tesseract lacks the "
                                               "language(s) xyz (apt-get install tesseract-ocr-xyz)")
    assert "classic pages in doubt are read again in eng only" in checks["second_opinion"]


def memory_check(settings, pair, device):
    checks = doctor(settings, model=pair[0], mmproj=pair[1], device=device, load=False)
    return next(c for c in checks if c.name == "memory"), exit_code(checks)


def test_doctor_prints_the_memory_plan(tmp_path, pair):
    settings = load_settings(write_config(tmp_path, model=str(pair[0]), mmproj=str(pair[1])))
    one = estimate_worker_bytes(inspect_model(*pair), n_ctx=settings.engine.n_ctx)

    check, code = memory_check(settings, pair, FakeDevice(8 * 2**30))
    assert (check.status, code) == ("ok", 0)
    assert check.detail.startswith(f"fake: 1 worker(s) x {MAX_AUTO_SLOTS} slot(s) fit (the "
                                   f"most auto takes)")
    assert f"KV cache {MAX_AUTO_SLOTS} x " in check.detail and "per slot" in check.detail

    settings = load_settings(write_config(tmp_path, model=str(pair[0]), mmproj=str(pair[1]),
                                          parallel=8))
    room_for_3 = int(one.at(3).total_bytes * 1.15 / 0.9) + 1
    check, code = memory_check(settings, pair, FakeDevice(room_for_3))
    assert (check.status, code) == ("warn", 0)  # the daemon starts, with fewer slots
    assert check.detail.startswith("fake: only 3 of 8 slots (engine.parallel) fit, running 3")

    check, code = memory_check(settings, pair, FakeDevice(one.total_bytes))
    assert (check.status, code) == ("FAIL", 1)  # the daemon would refuse to start
    assert "the model does not fit" in check.detail and "engine.n_ctx" in check.detail


def test_the_classic_engine_has_no_memory_plan(tmp_path, pair):
    settings = load_settings(write_config(tmp_path, name="classic"))
    checks = doctor(settings, model=pair[0], mmproj=pair[1], device=FakeDevice(2**20))
    assert "memory" not in [c.name for c in checks]
    assert next(c for c in checks if c.name == "model").detail == (
        "engine.name = classic: the vision model is not used")
