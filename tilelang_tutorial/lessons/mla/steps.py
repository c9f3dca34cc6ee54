"""Notebook 04 builds the MLA decode kernel in checked steps; these are the first two.

1. :func:`mla_contiguous_program`: the online-softmax loop of :mod:`.mqa` with MLA's shapes, one
   sequence's cache contiguous in memory. What the shapes force: a 64 x 512 fp32 accumulator does
   not fit one warpgroup's registers, so two warpgroups split the output columns
   (``GemmWarpPolicy.FullCol``); then each holds half of every row of scores, so P goes through
   shared memory (the exchange) before ``P V``; fewer than 64 heads are padded to wgmma's 64 rows.
2. :func:`mla_paged_program`: the same kernel reading a *paged* cache through ``block_table``.
3. :func:`.auto.mla_decode_program` then adds split-KV: each CTA takes a share of the pages and
   writes a partial output and its log-sum-exp, which a combine kernel merges.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.

import math

from .common import BLOCK_H, DIM_NOPE, DIM_PE, LOG2E, PAGE_SIZE, SUPPORTED_HEADS, default_softmax_scale


def mla_contiguous_program(h_q: int, dtype: str = "float16", *, softmax_scale: float | None = None,
                           num_stages: int = 2):
    """Step 1. ``Q (b, h_q, 512)``, ``Q_pe (b, h_q, 64)``, ``KV (b, max_len, 512)``, ``K_pe (b,
    max_len, 64)``, ``seqlens (b,) int32`` -> ``Output (b, h_q, 512)``."""
    import tilelang
    import tilelang.language as T

    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"h_q must be one of {SUPPORTED_HEADS}, got {h_q}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    # scores stay in the log2 domain: exp(x * scale) = exp2(x * scale * log2(e))
    scale = float((softmax_scale if softmax_scale is not None else default_softmax_scale()) * LOG2E)
    accum = "float32"
    dv, dpe, block_N = DIM_NOPE, DIM_PE, PAGE_SIZE
    valid_h = min(BLOCK_H, h_q)            # h_q = 16 / 32 still computes 64 rows (wgmma's M)
    batch, max_len = T.dynamic("batch"), T.dynamic("max_len")

    @T.prim_func
    def mla_contiguous(Q: T.Tensor([batch, h_q, dv], dtype), Q_pe: T.Tensor([batch, h_q, dpe], dtype),
                       KV: T.Tensor([batch, max_len, dv], dtype), K_pe: T.Tensor([batch, max_len, dpe], dtype),
                       seqlens: T.Tensor([batch], "int32"), Output: T.Tensor([batch, h_q, dv], dtype)):
        with T.Kernel(math.ceil(h_q / BLOCK_H), batch, threads=256) as (hb, bx):   # two warpgroups
            Q_shared = T.alloc_shared([BLOCK_H, dv], dtype)
            Q_pe_shared = T.alloc_shared([BLOCK_H, dpe], dtype)
            KV_shared = T.alloc_shared([block_N, dv], dtype)       # one block: keys and values
            K_pe_shared = T.alloc_shared([block_N, dpe], dtype)
            S_shared = T.alloc_shared([BLOCK_H, block_N], dtype)   # P, shared by both warpgroups
            acc_s = T.alloc_fragment([BLOCK_H, block_N], accum)
            acc_o = T.alloc_fragment([BLOCK_H, dv], accum)
            m_i = T.alloc_fragment([BLOCK_H], accum)               # running row max (raw scores)
            m_prev = T.alloc_fragment([BLOCK_H], accum)
            alpha = T.alloc_fragment([BLOCK_H], accum)             # rescale of what came before
            l_i = T.alloc_fragment([BLOCK_H], accum)               # softmax denominator
            row_sum = T.alloc_fragment([BLOCK_H], accum)
            T.annotate_layout({S_shared: tilelang.layout.make_swizzled_layout(S_shared)})

            seqlen = seqlens[bx]
            h0 = hb * valid_h
            if valid_h == BLOCK_H:
                T.copy(Q[bx, h0:h0 + BLOCK_H, :], Q_shared)
                T.copy(Q_pe[bx, h0:h0 + BLOCK_H, :], Q_pe_shared)
            else:   # fewer heads than wgmma's 64 rows: zero the padding rows
                for i, j in T.Parallel(BLOCK_H, dv):
                    Q_shared[i, j] = T.if_then_else(i < valid_h, Q[bx, T.min(i, valid_h - 1), j], 0)
                for i, j in T.Parallel(BLOCK_H, dpe):
                    Q_pe_shared[i, j] = T.if_then_else(i < valid_h, Q_pe[bx, T.min(i, valid_h - 1), j], 0)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -T.infinity(accum))

            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=num_stages):
                T.copy(KV[bx, k * block_N:(k + 1) * block_N, :], KV_shared)
                T.copy(K_pe[bx, k * block_N:(k + 1) * block_N, :], K_pe_shared)
                # S = Q_nope K^T + Q_pe K_pe^T; FullCol: each warpgroup computes 32 of the 64 columns
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol,
                       clear_accum=True)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                # tokens past the end of the sequence do not exist (the block's tail is garbage)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j], -T.infinity(accum))
                # online softmax: the new running max is the max of the old one and this page's
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for i in T.Parallel(BLOCK_H):
                    alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(BLOCK_H):
                    l_i[i] = l_i[i] * alpha[i] + row_sum[i]
                # the exchange: each warpgroup holds half of P's columns; P @ V needs all of them
                T.copy(acc_s, S_shared)
                for i, j in T.Parallel(BLOCK_H, dv):
                    acc_o[i, j] *= alpha[i]
                # O += P V; FullCol: warpgroup w owns output columns [256 w, 256 (w + 1))
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(BLOCK_H, dv):
                if i < valid_h:
                    Output[bx, h0 + i, j] = acc_o[i, j] / l_i[i]

    return mla_contiguous


def mla_paged_program(h_q: int, dtype: str = "float16", *, softmax_scale: float | None = None,
                      num_stages: int = 2):
    """Step 2. As step 1, with the cache in pages of 64 tokens: ``KV (num_pages * 64, 512)`` and
    ``K_pe (num_pages * 64, 64)`` (the paged caches viewed as rows), ``block_table (b, max_pages)
    int32``: page ``k`` of sequence ``b`` is physical page ``block_table[b, k]``."""
    import tilelang
    import tilelang.language as T

    if h_q not in SUPPORTED_HEADS:
        raise ValueError(f"h_q must be one of {SUPPORTED_HEADS}, got {h_q}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    # scores stay in the log2 domain: exp(x * scale) = exp2(x * scale * log2(e))
    scale = float((softmax_scale if softmax_scale is not None else default_softmax_scale()) * LOG2E)
    accum = "float32"
    dv, dpe, block_N = DIM_NOPE, DIM_PE, PAGE_SIZE
    valid_h = min(BLOCK_H, h_q)            # h_q = 16 / 32 still computes 64 rows (wgmma's M)
    batch, num_pages, max_pages = T.dynamic("batch"), T.dynamic("num_pages"), T.dynamic("max_pages")

    @T.prim_func
    def mla_paged(Q: T.Tensor([batch, h_q, dv], dtype), Q_pe: T.Tensor([batch, h_q, dpe], dtype),
                  KV: T.Tensor([num_pages * PAGE_SIZE, dv], dtype), K_pe: T.Tensor([num_pages * PAGE_SIZE, dpe], dtype),
                  block_table: T.Tensor([batch, max_pages], "int32"),
                  seqlens: T.Tensor([batch], "int32"), Output: T.Tensor([batch, h_q, dv], dtype)):
        with T.Kernel(math.ceil(h_q / BLOCK_H), batch, threads=256) as (hb, bx):   # two warpgroups
            Q_shared = T.alloc_shared([BLOCK_H, dv], dtype)
            Q_pe_shared = T.alloc_shared([BLOCK_H, dpe], dtype)
            KV_shared = T.alloc_shared([block_N, dv], dtype)       # one page: keys and values
            K_pe_shared = T.alloc_shared([block_N, dpe], dtype)
            S_shared = T.alloc_shared([BLOCK_H, block_N], dtype)   # P, shared by both warpgroups
            acc_s = T.alloc_fragment([BLOCK_H, block_N], accum)
            acc_o = T.alloc_fragment([BLOCK_H, dv], accum)
            m_i = T.alloc_fragment([BLOCK_H], accum)               # running row max (raw scores)
            m_prev = T.alloc_fragment([BLOCK_H], accum)
            alpha = T.alloc_fragment([BLOCK_H], accum)             # rescale of what came before
            l_i = T.alloc_fragment([BLOCK_H], accum)               # softmax denominator
            row_sum = T.alloc_fragment([BLOCK_H], accum)
            T.annotate_layout({S_shared: tilelang.layout.make_swizzled_layout(S_shared)})

            seqlen = seqlens[bx]
            h0 = hb * valid_h
            if valid_h == BLOCK_H:
                T.copy(Q[bx, h0:h0 + BLOCK_H, :], Q_shared)
                T.copy(Q_pe[bx, h0:h0 + BLOCK_H, :], Q_pe_shared)
            else:   # fewer heads than wgmma's 64 rows: zero the padding rows
                for i, j in T.Parallel(BLOCK_H, dv):
                    Q_shared[i, j] = T.if_then_else(i < valid_h, Q[bx, T.min(i, valid_h - 1), j], 0)
                for i, j in T.Parallel(BLOCK_H, dpe):
                    Q_pe_shared[i, j] = T.if_then_else(i < valid_h, Q_pe[bx, T.min(i, valid_h - 1), j], 0)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -T.infinity(accum))

            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=num_stages):
                row0 = block_table[bx, k] * PAGE_SIZE   # the first row of the k-th page
                T.copy(KV[row0:row0 + block_N, :], KV_shared)
                T.copy(K_pe[row0:row0 + block_N, :], K_pe_shared)
                # S = Q_nope K^T + Q_pe K_pe^T; FullCol: each warpgroup computes 32 of the 64 columns
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol,
                       clear_accum=True)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                # tokens past the end of the sequence do not exist (the page's tail is garbage)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j], -T.infinity(accum))
                # online softmax: the new running max is the max of the old one and this page's
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for i in T.Parallel(BLOCK_H):
                    alpha[i] = T.exp2((m_prev[i] - m_i[i]) * scale)
                for i, j in T.Parallel(BLOCK_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(BLOCK_H):
                    l_i[i] = l_i[i] * alpha[i] + row_sum[i]
                # the exchange: each warpgroup holds half of P's columns; P @ V needs all of them
                T.copy(acc_s, S_shared)
                for i, j in T.Parallel(BLOCK_H, dv):
                    acc_o[i, j] *= alpha[i]
                # O += P V; FullCol: warpgroup w owns output columns [256 w, 256 (w + 1))
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(BLOCK_H, dv):
                if i < valid_h:
                    Output[bx, h0 + i, j] = acc_o[i, j] / l_i[i]

    return mla_paged


def contiguous_view(inputs):
    """The paged inputs of :func:`.reference.make_paged_inputs` gathered into contiguous caches,
    ``(q_nope, q_pe, kv (b, max_len, 512), k_pe (b, max_len, 64), seqlens)``, for step 1 (the
    tail past each sequence's length is random, like a real cache's)."""
    b = inputs["q_nope"].shape[0]
    kv = inputs["kv_cache"].reshape(-1, PAGE_SIZE, DIM_NOPE)[inputs["block_table"].long()].reshape(b, -1, DIM_NOPE)
    pe = inputs["pe_cache"].reshape(-1, PAGE_SIZE, DIM_PE)[inputs["block_table"].long()].reshape(b, -1, DIM_PE)
    return inputs["q_nope"], inputs["q_pe"], kv.contiguous(), pe.contiguous(), inputs["cache_seqlens"]


def changes(old: tuple, new: tuple, *, renames: dict | None = None) -> str:
    """The lines that differ between two kernel definitions of the package (``(module, name)``
    pairs, e.g. ``("steps", "mla_contiguous_program")``): what a step changed. Docstrings are left
    out and comments are not changes (neither a comment line nor one after code). ``renames``
    (``{old name: new name}``) is applied to the old definition first, so a variable that only got
    another name is not a change either; the first line says which."""
    import ast
    import difflib
    import re

    from ... import kernel_cells

    def body(module, name):
        src = kernel_cells.definitions(f"tilelang_tutorial/lessons/mla/{module}.py", [name])
        node = ast.parse(src).body[0]
        doc = node.body[0]
        lines = src.splitlines()
        if isinstance(doc, ast.Expr) and isinstance(getattr(doc, "value", None), ast.Constant):
            del lines[doc.lineno - 1:doc.end_lineno]
        return lines

    def code(line):   # the line without a comment after its code
        return re.sub(r"(?<=\S)\s+#.*$", "", line)

    def code_lines(lines):
        return [line for line in lines if not line.strip().startswith("#")]

    before, after = code_lines(body(*old)), code_lines(body(*new))
    renamed = ""
    if renames:
        word = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b(?!=)")   # not a keyword argument
        before = [word.sub(lambda m: renames[m.group(1)], line) for line in before]
        renamed = " (renamed: " + ", ".join(f"{a} -> {b}" for a, b in renames.items()) + ")"
    out = [f"--- {old[0]}.{old[1]}{renamed}", f"+++ {new[0]}.{new[1]}"]
    matcher = difflib.SequenceMatcher(None, [code(l) for l in before], [code(l) for l in after], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            out += [f"-{line}" for line in before[i1:i2]] + [f"+{line}" for line in after[j1:j2]]
    return "\n".join(out)
