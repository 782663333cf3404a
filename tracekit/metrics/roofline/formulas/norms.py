"""Norms and activations: memory-bound vector work. Bytes are exact (each tensor read or
written once); FLOPs are a documented per-element count, small next to the bytes' cost:

- RMSNorm ``y = x * rsqrt(mean(x^2) + eps) * w``: square, sum, scale, weight = 4 per element
  (+1 for a fused residual add);
- LayerNorm ``(x - mean) * rstd * w + b``: sum, subtract, square, sum, scale, weight, bias =
  7 per element;
- SiLU ``x / (1 + exp(-x))``: negate, exp, add, divide = 4; ``silu_and_mul`` adds the
  multiply: 5 per output element; GELU (erf or tanh form) about 8, ``gelu_and_mul`` 9;
  FastGelu (``x / (1 + exp(-1.702|x|))``) 5; Swish as SiLU.

Schemas: PyTorch ``native_functions.yaml`` (``rms_norm``, ``_fused_rms_norm``,
``layer_norm``, ``native_layer_norm``, ``silu``, ``gelu``); vLLM ``csrc/torch_bindings.cpp``
(``rms_norm(result!, input, weight, eps)``, ``fused_add_rms_norm(input!, residual!, weight,
eps)``, ``silu_and_mul(result!, input)``, ``gelu_and_mul(out!, input)``); SGLang sgl-kernel
(``rmsnorm``, ``fused_add_rmsnorm``); CANN RmsNorm, AddRmsNorm, LayerNorm(V3/V4), SwiGlu,
Swish, Gelu, FastGelu."""

from __future__ import annotations

from tracekit.metrics.roofline.formulas.base import (
    Shapes,
    Work,
    all_bytes,
    dtype,
    input_bytes,
    nbytes,
    numel,
    shape,
    tensors,
)


def rms_norm(s: Shapes) -> Work | None:
    """Any PyTorch-side RMSNorm (``aten::rms_norm``, ``aten::_fused_rms_norm``, vLLM
    ``_C::rms_norm`` / ``_C::fused_add_rms_norm`` and their quant variants, sgl-kernel,
    aiter): x = the first tensor input, the activations = the inputs of x's shape. Without
    a residual add: one of x's size read, one written (a ``result`` among the inputs is that
    write, at its own dtype). Fused add (name has "add"): x and the residual are read and both
    written (in place: 2 tensors x 2; with separate outputs each once). Other inputs (the
    weight, scales) read once. FLOPs 4 per element (+1 with the add)."""
    idx = tensors(s)
    if not idx:
        return None
    x = shape(s, idx[0])
    if not x:
        return None
    big = [i for i in idx if shape(s, i) == x]
    rest = sum(input_bytes(s, i) for i in idx if i not in big)
    fused = "add" in s.op.split("::")[-1]
    acts = sum(input_bytes(s, i) for i in big)
    if fused:
        acts *= 2 if len(big) == 2 else 1
    elif len(big) == 1:
        acts *= 2
    elif len(big) > 2:
        return None
    per = 5 if fused else 4
    return Work("norm", float(per * numel(x)), acts + rest, dtype(s, big[-1]) or "", False)


def layer_norm(s: Shapes) -> Work | None:
    """``aten::layer_norm(input, normalized_shape, weight?, bias?, eps, cudnn)`` and
    ``aten::native_layer_norm(input, normalized_shape, weight?, bias?, eps)``: reads input,
    weight, bias; writes the output (input's dtype) and, native, fp32 mean and rstd per row.
    FLOPs 7 per element."""
    x, dt = shape(s, 0), dtype(s, 0)
    if not x or dt is None:
        return None
    rows = 0.0
    if s.op == "aten::native_layer_norm":
        norm = shape(s, 2) or shape(s, 3)
        width = numel(norm) if norm else x[-1]
        rows = 2 * (nbytes((numel(x) // max(width, 1),), "fp32") or 0.0)
    ins = sum(input_bytes(s, i) for i in (0, 2, 3))
    out = nbytes(x, dt) or 0.0
    return Work("norm", 7.0 * numel(x), ins + out + rows, dt, False)


def _and_mul(s: Shapes, per: float) -> Work | None:
    """``out[..,I] = act(x[..,:I]) * x[..,I:]`` with input [..,2I]: the two tensors whose last
    dims are 2I and I (in either order, as vLLM and sgl-kernel differ); the output may also
    be absent (allocated by the op, in the input's dtype)."""
    idx = [i for i in tensors(s) if shape(s, i)]
    shapes = [shape(s, i) for i in idx]
    if len(idx) == 1:
        x = shapes[0]
        assert x is not None
        if x[-1] % 2:
            return None
        out = (*x[:-1], x[-1] // 2)
        total = input_bytes(s, idx[0]) + (nbytes(out, dtype(s, idx[0])) or 0.0)
        return Work("activation", per * numel(out), total, dtype(s, idx[0]) or "", False)
    if len(idx) < 2:
        return None
    a, b = shapes[0], shapes[1]
    assert a is not None and b is not None
    if a[:-1] != b[:-1] or 2 * min(a[-1], b[-1]) != max(a[-1], b[-1]):
        return None
    out = a if a[-1] < b[-1] else b
    total = sum(input_bytes(s, i) for i in idx)
    return Work("activation", per * numel(out), total, dtype(s, idx[1]) or "", False)


def silu_and_mul(s: Shapes) -> Work | None:
    """vLLM ``_C::silu_and_mul(result![T,I], input[T,2I])``, sgl-kernel ``silu_and_mul``:
    bytes = ``2I*T`` read + ``I*T`` written (each at its dtype); 5 FLOPs per output."""
    return _and_mul(s, 5.0)


def gelu_and_mul(s: Shapes) -> Work | None:
    """vLLM ``_C::gelu_and_mul`` / ``_C::gelu_tanh_and_mul`` (out!, input): as silu_and_mul,
    9 FLOPs per output."""
    return _and_mul(s, 9.0)


_UNARY = {"aten::silu": 4.0, "aten::silu_": 4.0, "aten::gelu": 8.0, "aten::gelu_": 8.0}


def unary_activation(s: Shapes) -> Work | None:
    """``aten::silu(x)`` / ``aten::gelu(x, approximate)`` (and in-place forms): read x, write
    x's size; 4 (SiLU) / 8 (GELU) FLOPs per element."""
    x, dt = shape(s, 0), dtype(s, 0)
    if x is None or dt is None:
        return None
    return Work("activation", _UNARY[s.op] * numel(x), 2 * input_bytes(s, 0), dt, False)


_ASCEND_NORM = {"RmsNorm": 4.0, "AddRmsNorm": 5.0, "LayerNorm": 7.0, "LayerNormV3": 7.0,
                "LayerNormV4": 7.0, "AddLayerNorm": 8.0}  # fmt: skip
_ASCEND_ACT = {"SwiGlu": 5.0, "Swish": 4.0, "Silu": 4.0, "Gelu": 8.0, "GeluV2": 8.0,
               "FastGelu": 5.0, "FastGeluV2": 5.0}  # fmt: skip


def ascend_norm(s: Shapes) -> Work | None:
    """Ascend RmsNorm (x, gamma -> y, rstd), AddRmsNorm (x1, x2, gamma -> y, rstd, x),
    LayerNorm/V3/V4 (x, gamma, beta -> y, mean, rstd): bytes = every input and output once;
    FLOPs per element of x as for the PyTorch forms."""
    x, dt = shape(s, 0), dtype(s, 0)
    if not x or dt is None:
        return None
    return Work("norm", _ASCEND_NORM[s.op] * numel(x), all_bytes(s), dt, False)


def ascend_activation(s: Shapes) -> Work | None:
    """Ascend SwiGlu (x[..,2I] -> y[..,I]; 5 per output), Swish/Silu (4), Gelu (8), FastGelu
    (5): bytes = inputs + outputs; FLOPs per output element (the input's when no output)."""
    x, dt = shape(s, 0), dtype(s, 0)
    if not x or dt is None:
        return None
    out = s.outputs[0] if s.outputs and s.outputs[0] else x
    return Work("activation", _ASCEND_ACT[s.op] * numel(out), all_bytes(s), dt, False)
