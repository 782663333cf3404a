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
        self._lookup = np.empty(0, dtype=np.int64)
        if ids is not None and values is not None and len(values):
            id_arr = np.asarray(ids, dtype=np.int64)
            self._lookup = np.full(int(id_arr.max()) + 1, -1, dtype=np.int64)
            self._lookup[id_arr] = np.arange(len(id_arr))
            self._values.append(pa.array(values, pa.string()))
            self._size = len(values)

    def value_of_id(self, string_id: int) -> str | None:
        """The string stored under ``string_id`` in the id table, if any."""
        if 0 <= string_id < len(self._lookup) and self._lookup[string_id] >= 0:
            return self._values[0][int(self._lookup[string_id])].as_py()
        return None

    def from_ids(self, ids: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
        """Indices for string-table ids; unknown or null ids give -1 (a null name)."""
        arr = _to_numpy(ids, fill=-1)
        out = np.full(len(arr), -1, dtype=np.int64)
        ok = (arr >= 0) & (arr < len(self._lookup))
        out[ok] = self._lookup[arr[ok]]
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
