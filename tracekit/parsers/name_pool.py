"""A shared string pool that builds one compact dictionary column from several sources."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class NamePool:
    """Collects name indices from id-referenced and inline strings; emits one dictionary.

    Parsers of formats with a string table (nsys ``StringIds``, rocpd ``string``) map ids to
    indices with :meth:`from_ids`; inline strings go through :meth:`from_strings`. The final
    dictionary keeps only the strings that rows use.
    """

    def __init__(self, ids: pa.Array | np.ndarray | None = None, values: pa.Array | None = None):
        self._values: list[pa.Array] = []
        self._size = 0
        self._ids = np.empty(0, dtype=np.int64)  # sorted string-table ids
        self._rows = np.empty(0, dtype=np.int64)  # their rows in the first values array
        if ids is not None and values is not None and len(values):
            id_arr = _to_numpy(ids, fill=-1)
            order = np.argsort(id_arr, kind="stable")
            self._ids, self._rows = id_arr[order], order
            self._values.append(pa.array(values, pa.string()))
            self._size = len(values)

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        if not len(self._ids):
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(self._ids, ids), 0, len(self._ids) - 1)
        return np.where(self._ids[pos] == ids, self._rows[pos], -1)

    def value_at(self, index: int) -> str | None:
        """The string at pool index ``index`` (as returned by the ``from_*`` methods)."""
        if index < 0:
            return None
        for values in self._values:
            if index < len(values):
                return values[index].as_py()
            index -= len(values)
        return None

    def from_ids(self, ids: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
        """Indices for string-table ids; unknown or null ids give -1 (a null name)."""
        arr = _to_numpy(ids, fill=-(2**63))
        out = self._rows_of(arr)
        out[arr == -(2**63)] = -1
        return out

    def from_strings(self, strings: pa.Array | pa.ChunkedArray | list[str | None]) -> np.ndarray:
        """Indices for inline strings (null stays null)."""
        arr = strings if isinstance(strings, (pa.Array, pa.ChunkedArray)) else pa.array(strings)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks() if arr.num_chunks else pa.array([], pa.string())
        encoded = pc.dictionary_encode(arr.cast(pa.string()))
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        indices = np.where(encoded.indices.is_null().to_numpy(zero_copy_only=False), -1, indices)
        out = np.where(indices >= 0, indices + self._size, -1).astype(np.int64)
        self._values.append(encoded.dictionary)
        self._size += len(encoded.dictionary)
        return out

    def dictionary_arrays(self, parts: list[np.ndarray]) -> list[pa.DictionaryArray]:
        """One DictionaryArray per part, all sharing one compact dictionary."""
        used = np.zeros(self._size + 1, dtype=bool)
        for idx in parts:
            used[idx] = True  # -1 marks slot `size`, dropped below
        used = used[: self._size]
        new_pos = np.cumsum(used, dtype=np.int64) - 1
        values = pa.concat_arrays(self._values) if self._values else pa.array([], pa.string())
        dictionary = values.take(pa.array(np.nonzero(used)[0]))
        out = []
        for idx in parts:
            mapped = np.where(idx >= 0, new_pos[np.maximum(idx, 0)], 0).astype(np.int32)
            indices = pa.array(mapped, mask=idx < 0)
            out.append(pa.DictionaryArray.from_arrays(indices, dictionary))
        return out


def _to_numpy(values: pa.Array | pa.ChunkedArray | np.ndarray, fill: int) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values.astype(np.int64, copy=False)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.int64())
    return values.cast(pa.int64()).fill_null(fill).to_numpy(zero_copy_only=False)
