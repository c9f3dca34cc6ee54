"""Reference solution for notebook 04's combine-kernel exercise (try it yourself first).

One CTA per (head, sequence). Every thread computes the row's largest lse and the total
``sum_s 2^(lse_s - lse_max)`` in scalars (the loops are short: ``num_split`` <= 64), then the 128
threads share the ``dim`` output columns: ``out = sum_s 2^(lse_s - lse_max) / total * o_s``. An
empty split (``lse = -inf``) gets ``2^-inf = 0``.
"""
# NOTE: no `from __future__ import annotations` here: T.prim_func evaluates the annotations.


def combine_program(num_split: int, dim: int = 512):
    import tilelang.language as T

    batch, heads = T.dynamic("batch"), T.dynamic("heads")

    @T.prim_func
    def combine(lse: T.Tensor([batch, heads, num_split], "float32"),
                o_partial: T.Tensor([batch, heads, num_split, dim], "float32"),
                Output: T.Tensor([batch, heads, dim], "float32")):
        with T.Kernel(heads, batch, threads=128) as (hx, bx):
            lse_max = T.alloc_var("float32")
            total = T.alloc_var("float32")
            o = T.alloc_fragment([dim], "float32")
            lse_max = -T.infinity("float32")
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, lse[bx, hx, s])
            total = 0
            for s in T.serial(num_split):
                total += T.exp2(lse[bx, hx, s] - lse_max)
            T.clear(o)
            for s in T.serial(num_split):
                for j in T.Parallel(dim):
                    o[j] += T.exp2(lse[bx, hx, s] - lse_max) / total * o_partial[bx, hx, s, j]
            T.copy(o, Output[bx, hx, :])

    return combine
