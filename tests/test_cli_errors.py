"""Bad input and bad options end in one `error:` line and exit code 2, never 'internal error'."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tracekit.errors import TraceError
from tracekit.export import save
from tracekit.timeline import Timeline, build_table


def _saved(path: Path, ts: list[int], dur: list[int], kinds: list[str] | None = None) -> Path:
    kinds = kinds or ["kernel"] * len(ts)
    columns = {
        "ts": ts,
        "dur": dur,
        "kind": kinds,
        "name": ["k"] * len(ts),
        "device": [0] * len(ts),
        "stream": [7] * len(ts),
    }
    return save(Timeline(build_table(columns), {"format": "test"}), path)


def _one_error_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode == 2, done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "internal error" not in lines[0]
    assert [n for n in needles if n not in lines[0]] == []
    return lines[0]


def test_convert_into_a_missing_folder(tmp_path: Path) -> None:
    trace = _saved(tmp_path / "t.parquet", [0], [10])
    out = tmp_path / "no" / "dir" / "x.parquet"
    done = run_cli("convert", str(trace), "-o", str(out))
    _one_error_line(done, f"{out}: folder {out.parent} does not exist")
    assert not out.parent.exists()


def test_top_must_be_positive(tmp_path: Path) -> None:
    trace = _saved(tmp_path / "t.parquet", [0], [10])
    done = run_cli("summary", str(trace), "--top", "0")
    assert done.returncode == 2 and "--top" in done.stderr and done.stdout == ""
    assert run_cli("summary", str(trace), "--top", "1").returncode == 0


def test_saved_timeline_breaking_the_schema_is_refused(tmp_path: Path) -> None:
    # save() writes what it is given: a negative duration and markup as a kind.
    path = _saved(tmp_path / "evil.parquet", [0, 5], [10, -5], ["[red]kernel[/red]", "kernel"])
    for command in ("info", "summary"):
        _one_error_line(
            run_cli(command, str(path)),
            "saved timeline breaks the schema (dur is negative in 1 rows;"
            " unknown kinds: [red]kernel[/red])",
        )
    with pytest.raises(TraceError, match="dur is negative in 1 rows"):
        Timeline.read(path)


def test_corrupt_timestamps_near_2_63(tmp_path: Path) -> None:
    trace = _saved(tmp_path / "t.arrow", [0, 9_000_000_000_000_000_000], [10, 1_000])
    done = run_cli("summary", str(trace), "--json")
    _one_error_line(done, "timestamps span 9,000,000,000,000,001,000 ns, too far apart")


def test_control_characters_in_error_messages(tmp_path: Path) -> None:
    path = tmp_path / "x\x1b]8;;e\x07y\x1b[2J.bin"
    path.write_bytes(b"not a trace")
    line = _one_error_line(run_cli("info", str(path)), "x\ufffd]8;;e\ufffdy\ufffd[2J.bin")
    assert "\x1b" not in line


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ("summary", "a.json", "b.json"),
            ("unexpected extra argument", "`tracekit summary --help`"),
        ),
        (("summary", "--bogus", "x"), ("No such option: --bogus", "`tracekit summary --help`")),
        (("diff", "base.sqlite"), ("Missing argument 'head'", "`tracekit diff --help`")),
        (("nosuchcommand",), ("No such command", "`tracekit --help`")),
    ],
)
def test_usage_errors_are_one_line(args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    _one_error_line(run_cli(*args), *needles)


def test_no_arguments_prints_the_help() -> None:
    done = run_cli()
    assert done.returncode == 0 and "Usage: tracekit" in done.stdout and done.stderr == ""
