"""Terminal renderings: trace text stays text (no markup, no control characters)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from tests.conftest import run_cli
from tracekit import stats
from tracekit.export import save
from tracekit.names import distinct_short_names, printable
from tracekit.reports import terminal
from tracekit.timeline import Timeline, build_table

ESC_NAME = "evil\x1b[2J\x1b]8;;http://x.example\x1b\\kern\x9b31m\x07"


def _render(renderable: Any) -> str:
    out = io.StringIO()
    terminal.print_renderable(renderable, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def _timeline(name: str, **meta: Any) -> Timeline:
    table = build_table(
        {
            "ts": [0, 50],
            "dur": [100, 10],
            "kind": ["kernel", "kernel"],
            "name": [name, "gemm"],
            "device": [0, 0],
            "stream": [7, 7],
            "pid": [4242, 4242],
        }
    )
    return Timeline(table, {"format": "test", **meta})


def test_printable_replaces_c0_and_c1_controls_only() -> None:
    assert printable("a\x00\x1b[1m\t\n\x7f\x80\x9fé中\u00a0z") == (
        "a\ufffd\ufffd[1m\ufffd\ufffd\ufffd\ufffd\ufffdé中\u00a0z"
    )
    assert printable(None) == "None" and printable(132) == "132"


def test_control_characters_from_the_trace_never_reach_the_terminal() -> None:
    tl = _timeline(
        ESC_NAME,
        source="s\x1b[31m.sqlite",
        devices=[{"index": 0, "name": "H\x1b[5m"}],
        producer={"name": "nsys\x1b]0;t\x07"},
        warnings=["w\x1bc"],
    )
    text = _render(terminal.render_summary(stats.summary(tl))) + _render(
        terminal.render_info(stats.info(tl))
    )
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
    shown = (
        "evil\ufffd[2J\ufffd]8;;http://x.example\ufffd\\kern\ufffd31m\ufffd",
        "s\ufffd[31m.sqlite",
        "H\ufffd[5m",
        "nsys\ufffd]0;t\ufffd",
        "warning: w\ufffdc",
    )
    assert [s for s in shown if s not in text] == []


def test_summary_command_prints_no_escape_sequence(tmp_path: Path) -> None:
    path = save(_timeline(ESC_NAME), tmp_path / "ansi.parquet")
    done = run_cli("summary", str(path), "--top", "40", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "evil\ufffd[2J" in done.stdout


def test_info_renders_markup_and_text_fields_literally() -> None:
    data = {
        "source": "[/x].sqlite",
        "format": "[/x]",
        "events": 2,
        "span_ns": 10,
        "ranks": [0],
        "producer": {"name": "[red]nsys", "version": "[/x] [red]v", "export_schema": "[/s]"},
        "devices": [
            {"index": 0, "name": "[/n]", "cores": "[/bogus]", "memory": "lots"},
            {"index": 1, "name": "H200", "cores": 132, "memory": 150137864192},
        ],
        "events_per_kind": {"[red]kernel[/red]": 1, "kernel": 1},
        "streams_per_device": {"0": [7, 13]},
        "warnings": ["[/w] odd"],
    }
    lines = [line.rstrip() for line in _render(terminal.render_info(data)).splitlines()]
    assert lines[:6] == [
        "source    [/x].sqlite",
        "format    [/x]",
        "producer  [red]nsys [/x] [red]v (export schema [/s])",
        "events    2",
        "span      10 ns",
        "ranks     0",
    ]
    assert " 0  [/n]  [/bogus]     lots  7, 13" in lines
    assert " 1  H200       132  140 GiB  -" in lines
    assert " [red]kernel[/red]      1" in lines and "warning: [/w] odd" in lines


def test_by_stream_table_shows_the_process() -> None:
    text = _render(terminal.render_summary(stats.summary(_timeline("k"))))
    assert " device   pid  stream  events    busy \n      0  4242       7       2  100 ns " in text


def test_distinct_labels_mark_only_colliding_names() -> None:
    names = [f"void kern<{i}>(int)" for i in range(3)] + ["gemm"]
    assert distinct_short_names(names, 40) == ["kern #1", "kern #2", "kern #3", "gemm"]
    tensile = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_{}_MI16x16x1_SN_LDSB1" + "_X1" * 40
    labels = distinct_short_names([tensile.format("MT64x16x256"), tensile.format("MT32x16x256")])
    assert [label[-14:] for label in labels] == [" [MT64x16x256]", " [MT32x16x256]"]
    assert all(len(label) <= 60 for label in labels)
