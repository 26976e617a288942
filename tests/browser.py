"""Chromium for the browser tests: Debian's binary (``make chromium`` installs it;
Playwright's own browser downloads are not used), driven by Playwright's Python API."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.daemon import Daemon

CHROMIUM = os.environ.get("APPLIANCE_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
UI_TIMEOUT_MS = 60_000


@contextmanager
def launched_chromium() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make chromium` "
                    "(apt-get install chromium) or set APPLIANCE_TEST_CHROMIUM")
    with sync_playwright() as playwright:
        # launch() gives every browser a fresh temporary profile (--user-data-dir)
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextmanager
def screenshot_on_failure(page: Page, folder: Path, daemon: Daemon):
    """On failure, keep what the browser showed (and the daemon log) in ``folder``."""
    try:
        yield
    except BaseException:
        try:
            page.screenshot(path=str(folder / "failure.png"), full_page=True)
            (folder / "failure.html").write_text(page.content())
            (folder / "daemon.log").write_text(daemon.log())
            print(f"browser state saved: {folder / 'failure.png'}, failure.html, daemon.log")
        except Exception as exc:  # the original failure matters more
            print(f"could not save the browser state: {exc}")
        raise
