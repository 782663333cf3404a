"""JSON text repaired so that a strict decoder accepts it: invalid UTF-8, and lone UTF-16
surrogate escapes.

JSON allows ``\\ud800`` on its own, and Python's ``json.dumps`` writes one for a string that
holds an undecodable byte (``surrogateescape``), but such a string is not valid Unicode, and
msgspec rejects the whole document. A high surrogate escape followed by a low one is a
character and is kept; any other surrogate escape becomes ``\\ufffd``.
"""

from __future__ import annotations

import re

# A run of backslashes, then "u" and a surrogate code unit: it is an escape when the run is
# odd (an even run is escaped backslashes followed by the letter u).
_UNIT = re.compile(rb"\\+u[dD][89a-fA-F][0-9a-fA-F]{2}")
_REPLACEMENT = rb"\ufffd"


def without_lone_surrogates(data: bytes | bytearray | memoryview) -> bytes | None:
    """``data`` with every lone surrogate escape replaced by ``\\ufffd``; None when it has
    none."""
    units = []  # (start, end, is_high) of each surrogate escape
    for found in _UNIT.finditer(data):
        if (len(found.group()) - 5) % 2:
            units.append((found.end() - 6, found.end(), found.group()[-3:-2] in b"89abAB"))
    lone, i = [], 0
    while i < len(units):
        start, end, high = units[i]
        if high and i + 1 < len(units) and units[i + 1][0] == end and not units[i + 1][2]:
            i += 2  # a pair: one character
            continue
        lone.append((start, end))
        i += 1
    if not lone:
        return None
    pieces, pos = [], 0
    for start, end in lone:
        pieces += [data[pos:start], _REPLACEMENT]
        pos = end
    pieces.append(data[pos:])
    return b"".join(pieces)


def utf8_replaced(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` with every invalid UTF-8 sequence replaced by U+FFFD."""
    return bytes(data).decode("utf-8", errors="replace").encode("utf-8")
