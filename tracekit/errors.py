"""The one exception type that carries a user-facing message for bad input."""

from __future__ import annotations


class TraceError(Exception):
    """A trace could not be read: the message is one line saying what, where and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
