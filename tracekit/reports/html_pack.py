"""plotly.js packed small for the HTML pages: gzip (level 9), then 7 bits per character.

A page embeds plotly.js once, in a data block (``<script type="application/octet-stream">``,
which never runs and which the Content-Security-Policy does not govern). The page's loader
(``templates/loader.js``) unpacks the characters to bytes, gunzips them with the browser's
``DecompressionStream`` and inserts plotly.js as an inline script, which the CSP allows by
the sha256 hash of plotly.js itself.

Why 7 bits per character rather than base64 (6): in a UTF-8 page every ASCII character is one
byte, so 7 bits is the densest one-byte text; base64 would leave the demo page over 2 MB. The
three values the HTML parser would change or that could end the element (NUL, CR and ``<``)
are written as U+0100 plus the value instead (two bytes in UTF-8, about 2% of the characters).

Packing takes ~0.25 s, so the packed text is kept in a cache folder (``$TRACEKIT_CACHE_DIR``,
else ``$XDG_CACHE_HOME/tracekit``, else ``~/.cache/tracekit``), one file per plotly.js
bundle (named by its hash) that starts with the sha256 of the packed text: a file that does
not match is packed again; a folder that cannot be written is only skipped.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from functools import cache
from pathlib import Path

import numpy as np

SHIFTED = 0x100
UNSAFE = (0x00, 0x0D, 0x3C)  # NUL and CR are rewritten by the HTML parser; "<" could end it
_BYTE_SHIFTS = np.arange(48, -1, -8, dtype=np.uint64)  # 7 bytes into a 56-bit word
_CHAR_SHIFTS = np.arange(49, -1, -7, dtype=np.uint64)  # the word into 8 characters


def gzip9(data: bytes) -> bytes:
    """``data`` gzipped at level 9 with a zero timestamp (the same bytes on every run)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31, 8)
    return packer.compress(data) + packer.flush()


def pack7(data: bytes) -> str:
    """``data`` as text of 7 bits per character, most significant bit first, zero-padded;
    the values in :data:`UNSAFE` are written as ``SHIFTED + value``. Each 7 bytes (56 bits)
    are 8 characters."""
    padded = np.zeros(-(-len(data) // 7) * 7, dtype=np.uint64)
    padded[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    words = padded.reshape(-1, 7) << _BYTE_SHIFTS
    words = np.bitwise_or.reduce(words, axis=1)
    values = ((words[:, None] >> _CHAR_SHIFTS) & np.uint64(0x7F)).ravel()
    values = values[: -(-8 * len(data) // 7)].astype("<u4")
    values = np.where(np.isin(values, UNSAFE), values + SHIFTED, values).astype("<u4")
    return values.tobytes().decode("utf-32-le")


def unpack7(text: str) -> bytes:
    """The bytes of :func:`pack7` (what ``templates/loader.js`` does in the browser)."""
    values = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    values = np.where(values >= SHIFTED, values - SHIFTED, values).astype(np.uint8)
    bits = np.unpackbits(values[:, None], axis=1)[:, 1:].ravel()
    return np.packbits(bits[: len(bits) // 8 * 8]).tobytes()


@cache
def plotly_js() -> str:
    """The installed plotly package's plotly.js bundle."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@cache
def packed_plotly() -> str:
    """plotly.js gzipped and packed by :func:`pack7`: read from the cache folder, else
    computed (once per process) and kept there."""
    bundle = plotly_js().encode("utf-8")
    path = cache_dir() / f"plotly-{hashlib.sha256(bundle).hexdigest()[:24]}.txt"
    try:
        digest, _, text = path.read_text("utf-8").partition("\n")
        if digest == _digest(text):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    text = pack7(gzip9(bundle))
    try:  # written whole under a temporary name, then renamed: never read half written
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(f"{_digest(text)}\n{text}", "utf-8")
        partial.replace(path)
    except OSError:
        pass
    return text


def cache_dir() -> Path:
    """Where tracekit keeps what it computes once per installation."""
    chosen = os.environ.get("TRACEKIT_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tracekit"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
