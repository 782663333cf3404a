"""``--max-memory``: a command past the limit stops with one line (exit 2), never a traceback
and never a swapping machine; sizes and shares parse, bad ones are one-line errors."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tracekit import memory
from tracekit.errors import TraceError

DEMO = "tracekit/data/demo.sqlite"


def test_sizes_and_shares() -> None:
    assert memory.parse_limit("512M") == 512 * 2**20
    assert memory.parse_limit("1.5g") == int(1.5 * 2**30)
    assert memory.parse_limit("6GB") == 6 * 2**30
    assert memory.parse_limit("50%") == int(memory.total_memory() * 0.5)
    assert memory.parse_limit(None) == int(memory.total_memory() * memory.DEFAULT_SHARE)
    for bad in ("lots", "0%", "150%", "-3G"):
        with pytest.raises(TraceError, match="--max-memory"):
            memory.parse_limit(bad)


def test_a_command_past_the_limit_stops_in_one_line() -> None:
    done = run_cli("--max-memory", "40M", "summary", DEMO)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "over --max-memory 40 MB" in lines[0] and "does not fit" in lines[0]


def test_a_bad_limit_is_one_line() -> None:
    done = run_cli("--max-memory", "lots", "info", DEMO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --max-memory 'lots': give a size such as 6G, 512M, or a share, 80%"
    ]


def test_the_default_limit_lets_a_command_run() -> None:
    done = run_cli("info", DEMO)
    assert done.returncode == 0, done.stderr
