"""Small pages: plotly.js is embedded once, gzipped and packed 7 bits per character
(tracekit/reports/html_pack.py), and unpacked in the browser by templates/loader.js.

The demo pages stay under 2 MB, the packed block is exactly plotly.js (its sha256 is the CSP's
entry), the CSP allows only the three scripts by hash (no 'unsafe-*'), and in Chromium the
page draws, still honours the CSP for the inserted plotly.js, and says so when it cannot unpack.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser import launched, open_offline
from tests.conftest import run_cli
from tracekit.demo import demo_paths
from tracekit.reports import html_pack
from tracekit.reports.html import _asset
from tracekit.reports.html_pack import UNSAFE, pack7, plotly_js, unpack7

MAX_DEMO_PAGE = 2_000_000
APP_START = "tracekitStart(function () {\n"
BLOCK = re.compile(r'<script type="application/octet-stream" id="tk-plotly">(.*?)</script>', re.S)


def sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp_rules(page: str) -> dict[str, str]:
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert csp is not None
    return dict(r.strip().split(" ", 1) for r in csp.group(1).split(";"))


def check_scripts(page: str) -> str:
    """The page's scripts: the loader and the page script inline, plotly.js packed in a data
    block; script-src is exactly their three hashes and nothing else. Returns the block."""
    rules = csp_rules(page)
    assert rules["default-src"] == "'none'" and rules["connect-src"] == "'none'"
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    assert len(scripts) == 2 and scripts[0] == _asset("loader.js")
    assert scripts[1].startswith(APP_START) and scripts[1].endswith("});\n")
    block = BLOCK.search(page)
    assert block is not None
    plotly = gzip.decompress(unpack7(block.group(1))).decode("utf-8")
    assert plotly == plotly_js()
    assert set(rules["script-src"].split()) == {sha256(s) for s in (*scripts, plotly)}
    assert "unsafe" not in rules["script-src"] and "strict-dynamic" not in rules["script-src"]
    # the payload, the packed block, the loader and the page script; nothing loaded
    assert len(re.findall(r"<script\b", page)) == 4
    assert not re.search(r"<script[^>]*\bsrc=", page)
    return block.group(1)


@pytest.fixture(scope="module")
def demo_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pages")
    report, demo = out / "report.html", out / "demo.html"
    done = run_cli("report", str(demo_paths()[0]), "-o", str(report))
    assert done.returncode == 0, done.stderr
    done = run_cli("demo", "-o", str(demo))
    assert done.returncode == 0, done.stderr
    return {"report": report, "demo": demo}


def test_pack7_known_values() -> None:
    # 0xFF = 1111111|1 -> 127, then 1000000 (zero-padded) = 64 ("@")
    assert pack7(b"\xff") == "\x7f@"
    # NUL, CR and "<" as 7-bit values are written shifted by 0x100 (two UTF-8 bytes)
    assert pack7(b"\x00") == "\u0100\u0100"
    assert pack7(b"\x1a") == "\u010d\u0100"  # 0001101|0 -> 13 (CR), 0
    assert pack7(b"\x78") == "\u013c\u0100"  # 0111100|0 -> 60 ("<"), 0
    # 7 bytes are exactly 8 characters: 56 one bits are 8 times 127
    assert pack7(b"\xff" * 7) == "\x7f" * 8
    assert pack7(b"") == "" and unpack7("") == b""
    data = bytes(range(256)) * 3 + b"\x00\r<\n" * 9
    for n in range(len(data) + 1):
        packed = pack7(data[:n])
        assert len(packed) == -(-8 * n // 7) and unpack7(packed) == data[:n]


def test_demo_pages_are_small(demo_pages: dict[str, Path]) -> None:
    plotly = len(plotly_js().encode())
    sizes = {name: path.stat().st_size for name, path in demo_pages.items()}
    print(f"plotly.js {plotly:,} B; pages {sizes}")
    assert all(size <= MAX_DEMO_PAGE for size in sizes.values()), sizes
    for path in demo_pages.values():
        page = path.read_text("utf-8")
        block = check_scripts(page)
        # gzip -9 of plotly.js 7.1 is 30.5% of it, 8/7 of that as characters, ~2% shifted
        assert len(block.encode()) < 0.36 * plotly, len(block.encode())
        assert not set(block) & {chr(v) for v in UNSAFE}
        assert max(map(ord, block)) < 0x100 + 0x80


@pytest.fixture(scope="module")
def browser() -> Any:
    yield from launched()


def test_demo_page_draws_under_the_csp(browser: Any, demo_pages: dict[str, Path]) -> None:
    start = time.perf_counter()
    opened = open_offline(browser, demo_pages["demo"])
    took = time.perf_counter() - start
    print(f"demo page ({demo_pages['demo'].stat().st_size:,} B): data-ready in {took:.2f} s")
    page = opened.page
    assert opened.errors == [] and opened.outside == []
    assert page.evaluate("() => typeof Plotly.newPlot") == "function"
    assert page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length") > 0
    # the packed block and the inserted plotly.js script are gone once run
    assert page.evaluate("() => document.querySelectorAll('script').length") == 3
    assert page.evaluate("() => document.getElementById('tk-no-charts')") is None
    page.context.close()


def _open_broken(browser: Any, path: Path, init: str | None = None) -> tuple[Any, list[str]]:
    context = browser.new_context(offline=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    if init:
        page.add_init_script(init)
    page.goto(path.as_uri())
    page.wait_for_selector("#tk-no-charts", timeout=30_000)
    return page, errors


def test_a_wrong_plotly_hash_blocks_it(
    browser: Any, demo_pages: dict[str, Path], tmp_path: Path
) -> None:
    """The CSP governs the inserted plotly.js: with its hash removed the browser refuses it,
    the page says the charts are missing, and nothing is drawn."""
    page_text = demo_pages["report"].read_text("utf-8")
    wanted = sha256(plotly_js())
    assert page_text.count(wanted) == 1
    broken = tmp_path / "broken.html"
    broken.write_text(page_text.replace(wanted, "'sha256-" + "A" * 43 + "='"), "utf-8")
    page, errors = _open_broken(browser, broken)
    note = page.inner_text("#tk-no-charts")
    assert note.startswith("The page's charting library could not be unpacked"), note
    assert any("Content Security Policy" in e for e in errors), errors
    assert page.evaluate("() => typeof Plotly") == "undefined"
    assert page.evaluate("() => document.body.dataset.ready") is None
    page.context.close()


def test_no_decompression_stream_says_so(browser: Any, demo_pages: dict[str, Path]) -> None:
    page, errors = _open_broken(browser, demo_pages["report"], "delete window.DecompressionStream;")
    note = page.inner_text("#tk-no-charts")
    assert note.startswith("This browser cannot unpack the page's charting library"), note
    assert page.evaluate("() => document.querySelector('main').firstElementChild.id") == (
        "tk-no-charts"
    )
    assert page.evaluate("() => document.body.dataset.ready") is None and errors == []
    page.context.close()


def test_packed_plotly_is_kept_in_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packed once per installation: written whole with the sha256 of the text first, read
    back without packing, packed again when the file does not match, and still served when
    the folder cannot be written."""
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    html_pack.packed_plotly.cache_clear()
    text = html_pack.packed_plotly()
    (kept,) = (tmp_path / "cache").glob("plotly-*.txt")
    digest, _, body = kept.read_text("utf-8").partition("\n")
    assert body == text and digest == hashlib.sha256(text.encode()).hexdigest()
    assert gzip.decompress(unpack7(text)).decode("utf-8") == plotly_js()

    def refuse(data: bytes) -> str:
        raise AssertionError("packed again")

    monkeypatch.setattr(html_pack, "pack7", refuse)
    html_pack.packed_plotly.cache_clear()
    assert html_pack.packed_plotly() == text  # read back, not packed
    kept.write_text(f"{digest}\n{text[:-1]}", "utf-8")  # cut short: no longer matches
    html_pack.packed_plotly.cache_clear()
    with pytest.raises(AssertionError, match="packed again"):
        html_pack.packed_plotly()
    monkeypatch.undo()
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(kept))  # a file where the folder would be
    html_pack.packed_plotly.cache_clear()
    assert html_pack.packed_plotly() == text
    html_pack.packed_plotly.cache_clear()
