"""A transient spinner on stderr for phases that take a while (reading, analysing, writing).

It is drawn only when the console is a terminal and the phase outlasts ``delay`` seconds, so
quick commands, pipes, ``--format json`` and ``--format md`` never see it; stdout is untouched.
"""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.status import Status

DELAY_S = 0.4


class Spinner:
    """``with Spinner(console, "reading x") as s: ... s.update("reading x: kernels")``."""

    def __init__(self, console: Console, message: str, delay: float = DELAY_S) -> None:
        self.console, self.message, self.delay = console, message, delay
        self._status: Status | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._done = False

    def _start(self) -> None:
        with self._lock:
            if not self._done and self._status is not None:
                self._status.start()

    def __enter__(self) -> Spinner:
        if self.console.is_terminal:
            self._status = Status(self.message, console=self.console, spinner="dots")
            self._timer = threading.Timer(self.delay, self._start)
            self._timer.daemon = True
            self._timer.start()
        return self

    def update(self, message: str) -> None:
        """Change the text (shown now or once the spinner appears)."""
        self.message = message
        if self._status is not None:
            self._status.update(message)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._status is not None:
                self._status.stop()
