"""The stderr spinner: drawn only on a terminal, and only once a phase outlasts its delay."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from tracekit.progress import Spinner


def _console(terminal: bool) -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, force_terminal=terminal, width=80), out


def test_no_spinner_off_a_terminal() -> None:
    console, out = _console(terminal=False)
    with Spinner(console, "reading trace", delay=0) as spinner:
        spinner.update("reading trace: kernels")
    assert out.getvalue() == ""


def test_spinner_shows_the_phase_once_the_delay_passed() -> None:
    console, out = _console(terminal=True)
    with Spinner(console, "reading trace", delay=0) as spinner:
        assert spinner._timer is not None
        spinner._timer.join()  # the delay has passed: the spinner is up
        spinner.update("reading trace: kernels")
    assert "reading trace" in out.getvalue()


def test_quick_phase_draws_nothing() -> None:
    console, out = _console(terminal=True)
    with Spinner(console, "reading trace", delay=3600) as spinner:
        spinner.update("reading trace: kernels")
    assert out.getvalue() == ""
