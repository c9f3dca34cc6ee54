// C entry points to FlashMLA's Hopper dense decode kernel (csrc/sm90/decode/dense), its scheduler and
// its combine, so that the benchmark (flashmla_peer.py) calls FlashMLA's own kernel through ctypes
// on torch's tensors. FlashMLA's Python package would need its torch extension built against the GPU
// runner's CUDA torch, which a machine without a GPU cannot build; this file needs FlashMLA's and
// CUTLASS's headers only (tools/gpu/build_flashmla_peer.sh builds it with FlashMLA's
// sources). The parameters are filled as FlashMLA's csrc/api/dense_decode.h fills them for one query
// token per sequence and one KV head (DeepSeek's decode). Error codes: 0 ok, 1 bad argument, 2 a CUDA
// error (cudaGetLastError after a launch).
#include <cuda_runtime_api.h>
#include <cutlass/numeric_types.h>

#include "params.h"
#include "sm90/decode/dense/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

#ifndef FLASHMLA_PEER_SOURCES
#define FLASHMLA_PEER_SOURCES "unknown sources"
#endif

extern "C" {

// what was built: FlashMLA's and CUTLASS's commits (set by the build script)
const char *flashmla_peer_sources() { return FLASHMLA_PEER_SOURCES; }

// ints per scheduler entry (the metadata buffer holds num_sm_parts of them)
int flashmla_sched_meta_ints() { return sizeof(DecodingSchedMeta) / sizeof(int); }

// what FlashMLA's interface computes for s_q = 1, h_k = 1: one 64-row tile of heads per part
int flashmla_num_sm_parts(int num_sms, int h_q) { return num_sms / ((h_q + 63) / 64) > 1 ? num_sms / ((h_q + 63) / 64) : 1; }

// once per batch of sequence lengths (FlashMLA's get_mla_metadata)
int flashmla_schedule(int b, int *seqlens, void *meta, int *num_splits, int num_sm_parts, cudaStream_t stream) {
    if (b <= 0 || num_sm_parts <= 0) return 1;
    GetDecodeSchedMetaParams p = {b, 1, 64, 5, -1, -1, nullptr, nullptr, seqlens,
                                  (DecodingSchedMeta *)meta, num_splits, num_sm_parts, stream};
    smxx::decode::run_get_decoding_sched_meta_kernel(p);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

// one decode step: q [b, h_q, 576], kcache [num_pages, 64, 576] (pages of 64 tokens), block_table
// [b, max_pages] int32, out [b, h_q, 512], lse [b, h_q] fp32; lse_accum [b + parts, h_q] and
// o_accum [b + parts, h_q, 512] fp32 workspaces. bf16 = 1 for bfloat16, 0 for float16.
int flashmla_decode(int bf16, int b, int h_q, int num_pages, int max_pages, float scale,
                    void *q, void *kcache, int *block_table, int *seqlens, void *meta, int *num_splits,
                    int num_sm_parts, void *out, float *lse, float *lse_accum, float *o_accum,
                    cudaStream_t stream) {
    if (b <= 0 || h_q <= 0 || h_q > 128 || num_pages <= 0 || max_pages <= 0) return 1;
    DenseAttnDecodeParams p = {};
    p.b = b; p.s_q = 1; p.q_seq_per_hk = h_q; p.seqlens_k_ptr = seqlens;
    p.h_q = h_q; p.h_k = 1; p.num_blocks = num_pages; p.q_head_per_hk = h_q; p.is_causal = false;
    p.d = 576; p.d_v = 512; p.scale_softmax = scale; p.scale_softmax_log2 = float(scale * 1.4426950408889634);
    p.q_ptr = q; p.k_ptr = kcache; p.o_ptr = out; p.softmax_lse_ptr = lse;
    // strides in elements, as the interface reads them off q viewed [b, h_q, 1, 576] and the cache
    // [pages, 64, 1, 576]; out [b, 1, h_q, 512]
    p.q_batch_stride = (int64_t)h_q * 576; p.q_row_stride = 576; p.q_head_stride = 576;
    p.k_batch_stride = 64 * 576; p.k_row_stride = 576; p.k_head_stride = 576;
    p.o_batch_stride = (int64_t)h_q * 512; p.o_row_stride = 512; p.o_head_stride = (int64_t)h_q * 512;
    p.block_table = block_table; p.block_table_batch_stride = max_pages; p.page_block_size = 64;
    p.tile_scheduler_metadata_ptr = (DecodingSchedMeta *)meta; p.num_sm_parts = num_sm_parts;
    p.num_splits_ptr = num_splits; p.total_num_splits = b + num_sm_parts;
    p.softmax_lseaccum_ptr = lse_accum; p.oaccum_ptr = o_accum; p.stream = stream;
    if (bf16) sm90::run_flash_splitkv_mla_kernel<cutlass::bfloat16_t>(p);
    else sm90::run_flash_splitkv_mla_kernel<cutlass::half_t>(p);
    if (cudaGetLastError() != cudaSuccess) return 2;
    CombineParams c = {b, 1, h_q, 512,
                       lse, out, h_q, h_q, h_q * 512, h_q * 512, 512,
                       lse_accum, o_accum, h_q, h_q, h_q * 512, h_q * 512, 512,
                       (DecodingSchedMeta *)meta, num_splits, num_sm_parts, nullptr, stream};
    if (bf16) smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(c);
    else smxx::decode::run_flash_mla_combine_kernel<cutlass::half_t>(c);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

}  // extern "C"
