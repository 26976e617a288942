"""Chromium for the browser tests: Debian's binary (``make chromium`` installs it;
Playwright's own browser downloads are not used), driven by Playwright's Python API."""

from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

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


# --- the web UI's documents workspace (ui/workspace.py) -----------------------------


def open_ui(page: Page, daemon: Daemon) -> None:
    # domcontentloaded: nothing may wait on fonts or anything else off this host
    page.goto(f"http://127.0.0.1:{daemon.port}/", wait_until="domcontentloaded")
    expect(upload_input(page)).to_be_attached()


def signed_in(browser: Browser, daemon: Daemon, name: str, password: str,
              viewport: dict) -> Page:
    """A new browser context of ``viewport`` signed in at "/" as ``name`` (the login
    form's fields are labelled "username" and "password"; its button is "Login")."""
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{daemon.port}/", wait_until="domcontentloaded")
    page.get_by_label("username").fill(name)
    page.get_by_label("password").fill(password)
    page.get_by_role("button", name="Login").click()
    expect(page.locator("#workspace-user")).to_contain_text(f"Signed in as {name}")
    return page


def upload_input(page: Page) -> Locator:
    """The drop zone's file input (the tables carry hidden CSV-import inputs of their own)."""
    return page.locator("#upload-files input[type=file]")


def unfold(page: Page, accordion: str) -> None:
    """Open the accordion of that elem_id, where it is folded."""
    toggle = page.locator(f"#{accordion} > button.label-wrap")
    if not re.search(r"\bopen\b", toggle.get_attribute("class") or ""):
        toggle.click()
    expect(toggle).to_have_class(re.compile(r"\bopen\b"))


def show_filters(page: Page) -> None:
    """The documents' filters, folded unless asked for, unfolded."""
    unfold(page, "documents-filters")


def last_upload(page: Page) -> Locator:
    """After a drop, the upload panel's table of the files dropped: the panel folds once
    the drop is done, and is unfolded here."""
    expect(page.locator("#upload-panel > button.label-wrap")).not_to_have_class(
        re.compile(r"\bopen\b"))
    unfold(page, "upload-panel")
    return page.get_by_role("table", name="Last upload")


def list_row(page: Page, name: str) -> Locator:
    """A document's row in the documents list, by its exact name."""
    return page.locator("#documents-list tbody tr").filter(
        has=page.get_by_role("button", name=name, exact=True))


def search_documents(page: Page, words: str) -> None:
    page.get_by_role("tab", name="Documents", exact=True).click()
    page.get_by_label("Search", exact=True).fill(words)
    page.get_by_label("Search", exact=True).press("Enter")


def open_document(page: Page, name: str) -> None:
    """Open a document of the list (its name is a button) in the Document tab."""
    list_row(page, name).get_by_role("button", name=name, exact=True).click()
    expect(page.locator("#document-title")).to_contain_text(name)


def page_body(page: Page) -> Locator:
    """The open page's rendered Markdown (the document view's "Rendered" tab)."""
    return page.locator("#document-body")


def ask_for_downloads(page: Page) -> None:
    """"Prepare downloads" of the open document, until its files are offered."""
    page.locator("#document-prepare-downloads").click()
    expect(page.locator("#download-txt")).to_be_visible()


def downloaded(page: Page, fmt: str) -> bytes:
    """What the open document's download button of ``fmt`` (prepared) gives."""
    with page.expect_download() as download:
        page.locator(f"#download-{fmt.replace('.', '-')}").click()
    return Path(download.value.path()).read_bytes()
