"""Screenshot a tracekit report page with headless Chromium: the README's docs/report.png
(per-step figures to the drill-down) and docs/findings.png (the ranked findings).

    tracekit demo && python docs/screenshot.py tracekit-demo.html docs/report.png
    python docs/screenshot.py tracekit-demo.html docs/findings.png findings kernels

Needs Playwright (the ``test`` extra) and Debian's ``chromium`` (``.ci/run`` installs it). The
page is opened offline; the picture runs from the per-step breakdown to the step drill-down.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

WIDTH = 1280


def screenshot(
    page_path: Path,
    out: Path,
    first: str = "steps",
    after: str = "overlap",
    chromium: str = "/usr/bin/chromium",
) -> None:
    """Write a PNG of the report's sections from ``first`` up to ``after`` to ``out``."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context(offline=True, viewport={"width": WIDTH, "height": 900})
        page = context.new_page()
        page.goto(page_path.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=60_000)
        page.evaluate("() => { document.querySelector('header').style.position = 'static'; }")
        top = page.evaluate(f"() => document.getElementById('{first}').offsetTop")
        bottom = page.evaluate(f"() => document.getElementById('{after}').offsetTop")
        clip = {"x": 0, "y": top, "width": WIDTH, "height": bottom - top}
        page.screenshot(path=str(out), full_page=True, clip=clip)
        browser.close()


if __name__ == "__main__":
    if len(sys.argv) not in (3, 5):
        sys.exit("usage: python docs/screenshot.py REPORT.html OUT.png [FIRST AFTER]")
    screenshot(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:5])
