"""Canonical dtype names for the roofline: the texts that Kineto (``Input type``: C++ type
names such as ``c10::BFloat16``) and torch_npu / msprof (``Input Data Types``: ``BF16``,
``DT_BF16``, ``FLOAT16`` …) write, mapped to one short name ("bf16", "fp8", "int4" …), and the
bytes per element of each.

Sources: the C++ names are those ``c10::ScalarType`` prints (c10/core/ScalarType.h, as the
PyTorch profiler records them with ``record_shapes``); the Ascend names are the ``ge::DataType``
/ ``aclDataType`` names of the CANN docs (``DT_`` prefix optional). The integer codes of
:data:`SCALAR_TYPE_CODES` are ``c10::ScalarType``'s enum values, which Kineto writes in
``Concrete Inputs`` for a ``ScalarType`` argument (``aten::to(x, 15)`` = bf16).
"""

from __future__ import annotations

# name as written (lower case, "dt_" stripped) -> canonical name
_NAMES: dict[str, str] = {
    # Kineto / c10 C++ type names
    "c10::bfloat16": "bf16",
    "c10::half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "c10::float8_e8m0fnu": "e8m0",
    "c10::float4_e2m1fn_x2": "fp4",  # two fp4 per element: inputs.py doubles the last dim
    "signed char": "int8",
    "unsigned char": "uint8",
    "short int": "int16",
    "short": "int16",
    "int": "int32",
    "unsigned int": "uint32",
    "long int": "int64",
    "long": "int64",
    "long long": "int64",
    "bool": "bool",
    "c10::complex<float>": "c64",
    "c10::complex<double>": "c128",
    # Ascend (aclDataType / ge::DataType), "DT_" stripped
    "float32": "fp32",
    "float16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "int4": "int4",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "hifloat8": "fp8",
    "float8_e8m0": "e8m0",
    "float4_e2m1": "fp4",
    "float4_e1m2": "fp4",
    "complex64": "c64",
    "complex128": "c128",
}

_ITEMSIZE: dict[str, float] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "e8m0": 1, "fp4": 0.5,
    "int64": 8, "uint64": 8, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1,
    "uint8": 1, "int4": 0.5, "bool": 1, "c64": 8, "c128": 16,
}  # fmt: skip

# c10::ScalarType enum values (c10/core/ScalarType.h) -> canonical name
SCALAR_TYPE_CODES: dict[int, str] = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "fp16", 6: "fp32",
    7: "fp64", 9: "c64", 10: "c128", 11: "bool", 15: "bf16", 23: "fp8", 24: "fp8",
    25: "fp8", 26: "fp8",
}  # fmt: skip

FLOATS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


def canonical(text: str | None) -> str | None:
    """The canonical dtype of a Kineto or Ascend type text; None for non-tensors ("Scalar",
    "TensorList", "") and for names this table does not know ("UNDEFINED", "N/A")."""
    if not text:
        return None
    key = text.strip().lower()
    if key.startswith("dt_"):
        key = key[3:]
    return _NAMES.get(key)


def itemsize(dtype: str) -> float:
    """Bytes per element of a canonical dtype (fp4 and int4: 0.5). KeyError if unknown."""
    return _ITEMSIZE[dtype]


def from_code(text: str | None) -> str | None:
    """The canonical dtype of a ``c10::ScalarType`` code as Kineto writes it in ``Concrete
    Inputs`` ("15" -> "bf16"); None when the text is no known code."""
    if not text:
        return None
    try:
        return SCALAR_TYPE_CODES.get(int(text))
    except ValueError:
        return None
