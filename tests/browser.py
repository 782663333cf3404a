"""What the browser tests share: Debian's ``chromium`` driven by Playwright, pages opened
offline from a file with what they did while loading.

``.ci/run`` sets ``TRACEKIT_REQUIRE_BROWSER=1``: there a missing browser fails instead of
skipping. Elsewhere the tests skip without Playwright or Chromium.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("TRACEKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
REQUIRED = os.environ.get("TRACEKIT_REQUIRE_BROWSER") == "1"


def playwright() -> Any:
    """``playwright.sync_api``; skips the caller (fails where required) without a browser."""
    if REQUIRED:
        import playwright.sync_api as sync_api

        assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}"
        return sync_api
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs it)")
    return sync_api


def launched() -> Iterator[Any]:
    """A headless Chromium that resolves no host name (body of a module-scoped fixture)."""
    with playwright().sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND"],
        )
        yield browser
        browser.close()


@dataclass
class Opened:
    """A page and what it did while loading: console errors, dialogs, requests outside."""

    page: Any
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)


def open_offline(browser: Any, path: Path, reduced_motion: bool = True) -> Opened:
    """Open ``path`` in a fresh context with networking off (every non-file request aborted
    and recorded) and wait until the page says it is drawn (``body[data-ready='1']``)."""
    context = browser.new_context(
        offline=True,
        viewport={"width": 1400, "height": 900},
        reduced_motion="reduce" if reduced_motion else "no-preference",
    )
    opened = Opened(page=context.new_page())

    def route(r: Any) -> None:
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            opened.outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = opened.page
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: opened.errors.append(str(e)))
    page.on("dialog", lambda d: (opened.dialogs.append(d.message), d.dismiss()))
    page.on(
        "request", lambda r: None if r.url.startswith("file:") else opened.outside.append(r.url)
    )
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    return opened
