"""What each part brings in with it: the library never its UI, intake never the
metrics server. Checked in a fresh interpreter, where nothing else was imported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

KIT_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make-gpu-kit.sh"
# imported inside a try by httpx (its command line, brotli) and omegaconf (attrs), which
# do without them
IMPORTED_WHEN_PRESENT = {"brotli", "click", "pygments", "rich", "attrs"}
# carried as the sdist its build comes from, and the appliance itself as the repository
CARRIED_OTHERWISE = {"llama-cpp-python", "ocr-appliance"}


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


def _package(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _kit_list(name: str) -> set[str]:
    """A bash array of make-gpu-kit.sh, comments left out."""
    body = re.search(rf"^{name}=\((.*?)\)", KIT_SCRIPT.read_text(), re.M | re.S).group(1)
    return {_package(word) for line in body.splitlines()
            for word in line.split("#")[0].split()}


def test_a_gpu_hosts_kit_holds_every_package_the_worker_and_its_checks_import():
    """The kit made from an earlier list failed on the GPU host's image at the barcode
    stage's `import zxingcpp`: what the entry points and a worker's page libraries
    import must be carried, be in the image, or be left behind knowingly."""
    code = ("import sys, json, importlib.metadata as md; before = set(sys.modules); "
            "import appliance.oneshot, appliance.doctor, appliance.pipeline.host, "
            "appliance.engines.llama.parallel_bench; "
            "from appliance.engines.native import load_page_libraries; load_page_libraries(); "
            "owners = md.packages_distributions(); "
            "print(json.dumps(sorted({d for m in set(sys.modules) - before "
            "for d in owners.get(m.split('.')[0], [])})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    imported = {_package(name) for name in json.loads(out.stdout)}
    accounted = (_kit_list("WHEELS") | _kit_list("IMAGE_HAS") | _kit_list("LEFT_BEHIND")
                 | IMPORTED_WHEN_PRESENT | CARRIED_OTHERWISE)
    assert "zxing-cpp" in imported and imported - accounted == set()
