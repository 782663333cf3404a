"""Attention formulas. Per query head, ``S = Q K^T`` and ``O = P V`` cost ``2*d_qk`` and
``2*d_v`` FLOPs per (query, key) score pair: FLOPs = ``2 * b * h_q * pairs * (d_qk + d_v)``
(= ``4*b*h*sq*sk*d`` when d_qk = d_v), the count of the FlashAttention papers (Dao 2022/2023,
``benchmark_flash_attention.py``: softmax not counted). Causal masking keeps only the unmasked
pairs: top-left aligned (PyTorch SDPA: row i sees keys 0..i) ``sum_i min(i+1, sk)``, or
bottom-right aligned (FlashAttention >= 2.1, vLLM: row i sees keys up to ``i + sk - sq``);
both give ``sq*(sq+1)/2`` when sq = sk (TraceLens uses ``sq*sk/2``: 0.5/sq relatively lower).
Bytes: Q, K, V read once, O written once (+ masks, block tables). Where K/V live in a paged
cache or lengths are only bounded (``max_seqlen``, a block table's capacity), FLOPs and the
KV bytes are upper bounds (``exact`` False).

Schemas: PyTorch ``native_functions.yaml``; flash-attn ``flash_attn_interface.py``;
vllm-project/flash-attention ``csrc/flash_attn/flash_api_torch_lib.cpp`` (``varlen_fwd``)
and ``hopper/flash_api_torch_lib.cpp`` (``fwd``); vLLM ``csrc/torch_bindings.cpp``
(``paged_attention_v1/v2``); FlashMLA ``fwd_kvcache_mla``; CANN aclnnFlashAttentionScore,
aclnnPromptFlashAttention, aclnnIncreFlashAttention, aclnnFusedInferAttentionScore."""

from __future__ import annotations

from tracekit.metrics.roofline.formulas.base import (
    Shape,
    Shapes,
    Work,
    all_bytes,
    dtype,
    input_bytes,
    nbytes,
    numel,
    scalar_bool,
    scalar_int,
    shape,
)


def causal_pairs(sq: int, sk: int, bottom_right: bool) -> int:
    """Unmasked (query, key) pairs of a causal mask of sq rows and sk columns."""
    if bottom_right:
        if sk >= sq:
            return sq * (sk - sq) + sq * (sq + 1) // 2
        return sk * (sk + 1) // 2
    if sq <= sk:
        return sq * (sq + 1) // 2
    return sk * (sk + 1) // 2 + (sq - sk) * sk


def _flops(b: int, hq: int, pairs: int, dqk: int, dv: int) -> float:
    """``2 * b * h_q * pairs * (d_qk + d_v)``."""
    return 2.0 * b * hq * pairs * (dqk + dv)


def _dense(
    s: Shapes, q: Shape, k: Shape, v: Shape, causal: bool | None, bhsd: bool, br: bool
) -> Work | None:
    """Dense attention of 4-D q/k/v, layout [b,h,s,d] (``bhsd``) or [b,s,h,d]."""
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or k[:3] != v[:3] or q[3] != k[3]:
        return None
    hq, sq = (q[1], q[2]) if bhsd else (q[2], q[1])
    sk = k[2] if bhsd else k[1]
    b, dqk, dv = q[0], q[3], v[3]
    if causal is None:
        return None
    pairs = causal_pairs(sq, sk, br) if causal else sq * sk
    out = nbytes((b, hq, sq, dv), dtype(s, 0)) or 0.0
    total = input_bytes(s, 0) + input_bytes(s, 1) + input_bytes(s, 2) + out
    dt = dtype(s, 0)
    if dt is None:
        return None
    note = "causal: unmasked pairs only" if causal else ""
    return Work("attention", _flops(b, hq, pairs, dqk, dv), total, dt, True, True, note)


# op -> (index of is_causal in Concrete Inputs, layout [b,h,s,d]?, bottom-right causal?,
#        index of an attention mask / bias input or -1)
_DENSE = {
    "aten::scaled_dot_product_attention": (5, True, False, 3),
    "aten::_scaled_dot_product_flash_attention": (4, True, False, -1),
    "aten::_scaled_dot_product_efficient_attention": (6, True, False, 3),
    "aten::_scaled_dot_product_cudnn_attention": (6, True, False, 3),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (4, True, False, 5),
    "aten::_flash_attention_forward": (8, False, False, -1),
    "flash_attn::_flash_attn_forward": (5, False, True, -1),
}


def sdpa(s: Shapes) -> Work | None:
    """PyTorch SDPA and its backends (q [b,h_q,sq,d], k/v [b,h_kv,sk,d]; the flash forward
    ``aten::_flash_attention_forward`` and ``flash_attn::_flash_attn_forward``: [b,s,h,d]),
    ``is_causal`` from Concrete Inputs; a given attention mask / bias adds its bytes (its
    pattern is unknown: all pairs counted, ``exact`` False)."""
    causal_at, bhsd, br, mask_at = _DENSE[s.op]
    q, k, v = shape(s, 0), shape(s, 1), shape(s, 2)
    if q is None or k is None or v is None:
        return None
    work = _dense(s, q, k, v, scalar_bool(s, causal_at), bhsd, br)
    mask = shape(s, mask_at) if mask_at >= 0 else None
    if work is None or mask is None:
        return work
    extra = input_bytes(s, mask_at)
    return Work(
        work.family, work.flops, work.bytes + extra, work.dtype, True, False,
        "mask pattern unknown: all score pairs counted",
    )  # fmt: skip


def _paged_kv_bytes(cache: Shape, dt: str | None, seqs: int, blocks: int) -> float | None:
    """KV bytes read from one paged cache tensor [num_blocks, …]: at most ``seqs*blocks``
    blocks (each sequence's block-table row), never more than the whole cache."""
    per_block = nbytes(cache[1:], dt)
    return None if per_block is None else per_block * min(seqs * blocks, cache[0])


def varlen(s: Shapes) -> Work | None:
    """Variable-length forward: ``flash_attn::_flash_attn_varlen_forward`` (q, k, v, cu_q,
    cu_k, max_q, max_k, dropout, scale, causal, …, block_table at 15), vLLM
    ``_vllm_fa2_C::varlen_fwd`` (q, k, v, out, cu_q, cu_k, seqused_k, leftpad_k, block_table,
    alibi, max_q, max_k, …) and ``_vllm_fa3_C::fwd`` (q, k, v, k_new, v_new, q_v, out, cu_q,
    cu_k, cu_k_new, seqused_q, seqused_k, max_q, max_k, page_table, …). q [Tq,h_q,d]; each query
    row sees at most ``max_seqlen_k`` keys: FLOPs <= ``2*Tq*h_q*max_k*(d_qk+d_v)``. K/V
    [Tk,h_kv,d] are read whole; a paged cache [blocks,block,h_kv,d] at most
    ``b * min(max_k, blocks_per_seq*block)`` tokens. ``exact`` False."""
    at = {
        "flash_attn::_flash_attn_varlen_forward": (6, 15, 3),
        "_vllm_fa2_C::varlen_fwd": (11, 8, 4),
        "_vllm_fa3_C::fwd": (13, 14, 7),
    }
    max_k_at, table_at, _cu = at[s.op]
    q, k, v = shape(s, 0), shape(s, 1), shape(s, 2)
    max_k, dt = scalar_int(s, max_k_at), dtype(s, 0)
    if q is None or k is None or v is None or dt is None:
        return None
    if len(q) == 4 and s.op == "_vllm_fa3_C::fwd" and shape(s, table_at) is None:
        return _dense(s, q, k, v, scalar_bool(s, 24), False, True)
    if len(q) != 3 or max_k is None or max_k <= 0:
        return None
    tq, hq, dqk = q
    dv = v[-1]
    table = shape(s, table_at)
    out = nbytes((tq, hq, dv), dt) or 0.0
    qo = input_bytes(s, 0) + out
    if table is not None and len(table) == 2 and len(k) == 4:
        sk = min(max_k, table[1] * k[1])
        kv = (_paged_kv_bytes(k, dtype(s, 1), table[0], -(-sk // k[1])) or 0.0) + (
            _paged_kv_bytes(v, dtype(s, 2), table[0], -(-sk // k[1])) or 0.0
        )
        qo += input_bytes(s, table_at)
    elif len(k) == 3:
        sk = max_k
        kv = input_bytes(s, 1) + input_bytes(s, 2)
    else:
        return None
    flops = 2.0 * tq * hq * sk * (dqk + dv)
    return Work("attention", flops, qo + kv, dt, True, False, "bounded by max_seqlen_k")


def paged_attention(s: Shapes) -> Work | None:
    """vLLM decode ``_C::paged_attention_v1(out, query[b,h,d], key_cache[blocks,h_kv,d/x,
    block,x], value_cache[blocks,h_kv,d,block], num_kv_heads, scale, block_tables[b,max_blocks],
    seq_lens[b], block_size, max_seq_len, …)`` and ``_v2`` (3 more outputs first). Each
    sequence reads at most ``L = min(max_seq_len, max_blocks*block)`` tokens: FLOPs <=
    ``4*b*h*L*d``; bytes <= q + out + K/V of ``b*L`` tokens (capped at the cache) + tables."""
    off = 3 if s.op.endswith("_v2") else 0
    q, kc, vc = shape(s, 1 + off), shape(s, 2 + off), shape(s, 3 + off)
    table, max_len = shape(s, 6 + off), scalar_int(s, 9 + off)
    dt = dtype(s, 1 + off)
    if q is None or kc is None or vc is None or table is None or dt is None:
        return None
    if len(q) != 3 or len(vc) != 4 or len(table) != 2 or kc[0] != vc[0]:
        return None
    b, hq, d = q
    block = vc[3]
    length = table[1] * block if max_len is None else min(max_len, table[1] * block)
    blocks = -(-length // block)
    kv = (_paged_kv_bytes(kc, dtype(s, 2 + off), b, blocks) or 0.0) + (
        _paged_kv_bytes(vc, dtype(s, 3 + off), b, blocks) or 0.0
    )
    small = sum(input_bytes(s, i) for i in (6 + off, 7 + off))
    qo = 2 * input_bytes(s, 1 + off)
    flops = 2.0 * b * hq * length * (d + d)
    return Work("attention", flops, qo + kv + small, dt, True, False, "paged KV: table capacity")


def flashmla(s: Shapes) -> Work | None:
    """FlashMLA decode ``_flashmla_C::fwd_kvcache_mla(q[b,sq,h,d_qk], k_cache[blocks,block,
    h_kv,d_qk], head_dim_v, cache_seqlens[b], block_table[b,max_blocks], …)``: the latent
    cache holds K and V in one tensor (V = its first head_dim_v dims). FLOPs <=
    ``2*b*sq*h*L*(d_qk+d_v)`` with ``L = max_blocks*block``; bytes <= q + out + b*L cache
    tokens (capped at the cache) + tables. ``exact`` False."""
    q, kc, table = shape(s, 0), shape(s, 1), shape(s, 4)
    dv, dt = scalar_int(s, 2), dtype(s, 0)
    if q is None or kc is None or table is None or dv is None or dt is None:
        return None
    if len(q) != 4 or len(kc) != 4 or len(table) != 2 or kc[3] != q[3]:
        return None
    b, sq, h, dqk = q
    length = table[1] * kc[1]
    kv = _paged_kv_bytes(kc, dtype(s, 1), b, table[1]) or 0.0
    out = nbytes((b, sq, h, dv), dt) or 0.0
    small = input_bytes(s, 3) + input_bytes(s, 4)
    flops = 2.0 * b * sq * h * length * (dqk + dv)
    return Work(
        "attention", flops, input_bytes(s, 0) + out + kv + small, dt, True, False,
        "paged latent KV: table capacity",
    )  # fmt: skip


# Ascend: the positions of S and B in q for each layout
_LAYOUTS = {"BSH": (1, 0), "SBH": (0, 1), "BNSD": (2, 0), "BSND": (1, 0)}


def _ascend_seq(s: Shapes, q: Shape, k: Shape, mask: Shape | None) -> tuple[int, int] | None:
    """(sq, sk) of Ascend dense attention, the layout told from the softmax_max output
    [B,N,Sq,8] (FlashAttentionScore) and/or the attention mask [..,Sq,Sk]; None when the
    layouts that fit disagree on sk or none fits."""
    b = sq = sk_mask = None
    soft = s.outputs[0] if s.outputs else None
    if soft and len(soft) == 4 and soft[3] == 8:
        b, sq = soft[0], soft[2]
    if mask and len(mask) >= 2:
        sq = sq if sq is not None else mask[-2]
        if mask[-2] == sq:
            sk_mask = mask[-1]
    if sq is None:
        return None
    found = set()
    for name, (s_at, b_at) in _LAYOUTS.items():
        if (len(q) == 3) != (name in ("BSH", "SBH")) or len(k) != len(q):
            continue
        if q[s_at] != sq or (b is not None and q[b_at] != b) or k[b_at] != q[b_at]:
            continue
        if sk_mask is None or k[s_at] == sk_mask:
            found.add(k[s_at])
    return (sq, found.pop()) if len(found) == 1 else None


def ascend_attention(s: Shapes) -> Work | None:
    """Ascend ``FlashAttentionScore`` (q, k, v, pse, drop_mask, padding_mask, atten_mask, …),
    ``PromptFlashAttention`` (q, k, v, pse_shift, atten_mask, …), ``IncreFlashAttention``
    (q, k, v, pse_shift, atten_mask, actual_seq_lengths, …, block_table at 13) and
    ``FusedInferAttentionScore`` (…, block_table at 14). FLOPs are layout-free:
    ``2 * numel(q) * sk * (1 + d_v/d_qk)`` (numel(q) = b*sq*h_q*d). Paged (a 2-D block table
    [b,max_blocks] with a cache [blocks,block,H] or [blocks,N,block,D]): sk <= max_blocks*block,
    KV bytes <= b*max_blocks blocks (capped at the cache), ``exact`` False. Dense BSH/SBH/BNSD/
    BSND: sq and the layout from the softmax_max output [B,N,Sq,8] or the mask [..,Sq,Sk];
    with a mask present its pattern (causal or not) is unknown: all pairs counted, ``exact``
    False. TND (varlen) and layouts the shapes do not tell: None."""
    q, k, v = shape(s, 0), shape(s, 1), shape(s, 2)
    dt = dtype(s, 0)
    if not q or not k or not v or dt is None or k[-1] == 0:
        return None
    ratio = 1.0 + v[-1] / k[-1]
    table_at = {"IncreFlashAttention": 13, "FusedInferAttentionScore": 14}.get(s.op)
    table = shape(s, table_at) if table_at is not None else None
    if table is not None and len(table) == 2 and len(k) in (3, 4) and table[1] > 0:
        block = k[1] if len(k) == 3 else max(k[1], k[2])
        sk = table[1] * block
        io = sum(input_bytes(s, i) for i in (0, table_at)) + sum(
            nbytes(o, s.out_dtypes[i] if i < len(s.out_dtypes) else None) or 0.0
            for i, o in enumerate(s.outputs)
            if o
        )
        kv = (_paged_kv_bytes(k, dtype(s, 1), table[0], table[1]) or 0.0) + (
            _paged_kv_bytes(v, dtype(s, 2), table[0], table[1]) or 0.0
        )
        flops = numel(q) * sk * 2.0 * ratio
        return Work("attention", flops, io + kv, dt, True, False, "paged KV: table capacity")
    mask_at = 6 if s.op == "FlashAttentionScore" else 4
    mask = shape(s, mask_at) or None
    got = _ascend_seq(s, q, k, mask)
    if got is None:
        return None
    flops = numel(q) * got[1] * 2.0 * ratio
    exact = mask is None
    note = "" if exact else "mask pattern unknown: all score pairs counted"
    return Work("attention", flops, all_bytes(s), dt, True, exact, note)
