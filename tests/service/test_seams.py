"""What each part brings in with it: the library never its UI, intake never the
metrics server. Checked in a fresh interpreter, where nothing else was imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def imported_after(module: str, watched: tuple[str, ...]) -> list[str]:
    code = (f"import sys, json, {module}; "
            f"print(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.parametrize("module", ["appliance.daemon", "appliance.api", "appliance.cli",
                                    "appliance.oneshot"])
def test_the_library_does_not_import_its_ui(module):
    assert imported_after(module, ("gradio", "ui")) == []


def test_intake_does_not_bring_in_the_metrics_server():
    assert imported_after("appliance.intake", ("prometheus_client", "fastapi")) == []


@pytest.mark.parametrize("module", ["appliance.daemon", "appliance.oneshot", "appliance.doctor",
                                    "appliance.pipeline.host",
                                    "appliance.engines.llama.parallel_bench"])
def test_the_daemon_and_its_workers_run_without_the_web_stack(module):
    """What a GPU host's check carries (scripts/make-gpu-kit.sh) has no web stack."""
    assert imported_after(module, ("fastapi", "starlette", "uvicorn", "gradio")) == []
