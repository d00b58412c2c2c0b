// Tiled decode attention on the tensor cores, split across blocks: the same function as
// paged_attention (kernels/attention.h) for steps whose sequences each bring exactly ONE token (a
// decode batch), over a paged bf16 or fp8 KV cache.
//
// The two kernels it stands beside each miss half of what a decode step needs:
// - paged_attention splits a long context across blocks (flash-decoding), but gives each q head its
//   own blocks on CUDA cores, so the 8 q heads of a kv head (Qwen3-30B-A3B, Qwen3.5) read the same K
//   and V eight times;
// - attention_prefill (kernels/attention_prefill.h) reads each K/V tile once for the whole group on
//   the tensor cores, but walks a sequence in one block per kv head: 4 blocks for one Qwen3-30B-A3B
//   sequence on a GPU of 132 SMs, and one serial walk of 4096 positions per block at context 4k.
// Here block (sequence, kv head, partition) takes the group's q heads as the rows of one m16 tile
// (rows past the group are zeros), walks its partition's K/V in double-buffered tiles of 64 positions
// (kernels/attention_tile.cuh: cp.async for bf16, fp8 converted to bf16 as staged), and its 4 warps
// each take 16 positions of every tile: S = Q K^T and O += P V on bf16 mma.sync with fp32
// accumulation, an online softmax per warp in base 2, then the 4 warps' (max, sum, O) combined in
// shared memory. With one partition the block writes the output. With several, where the step
// wants more partitions than one thread block cluster holds (few sequences: the H200 places
// clusters of 16 of these blocks, the portable size is 8; the device is asked once), the partitions
// are cut to the cluster's size and run as one cluster per (sequence, kv head): each block leaves its
// partial in its shared memory, and after a cluster barrier the blocks split the outputs between
// them, reading every partial through distributed shared memory. Otherwise each block writes its
// partial to `scratch`, and the last partition block of each (sequence, kv head) to finish (a
// counter per (sequence, kv head), as paged_attention's fused merge) merges them. No merge launch.
//
// Partitions: as many per (sequence, kv head) as put about two blocks on every SM in one wave (the
// SM count from the device), at most one per 64-position tile of max_positions (and at most a
// cluster's, above); each launch cuts the partitions from each sequence's actual position (whole
// tiles), so a graph captured for a max_positions stays valid as positions grow up to it. Tiles that
// end before the token's own position (stored by earlier steps) are fetched before the PDL wait: a
// partition's first, and with a bf16 cache its second.
//
// Rounding: Q (with the softmax scale folded in) and the softmax weights P are bf16 operands, as in
// attention_prefill: about 1e-3 relative from paged_attention's float32 arithmetic (fp8 values
// convert to bf16 exactly). A float32 cache stays on paged_attention (rounding its K and V to bf16 is
// what took a bf16 cache over the float32 golden bound: docs/cuda.md).
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// K/V tile buffers a block may take. 2: the double-buffered walk (a partition's first two tiles in
// flight before the wait, each later tile fetched when a buffer frees, one tile ahead of its use).
// 3: the deep walk, where a launch is merged in a cluster over a bf16 cache, its partitions hold 3
// to 16 tiles at max_positions, and every block is resident at once: the slots of every tile of a
// partition are looked up before the wait and three tiles are in flight at once, a buffer refilled
// as soon as its tile is done (the double-buffered walk waits about a round trip for each tile past
// the second: batch 1 at 4k, 5 tiles a partition, is 1.1-3.1% faster a step on the H100, session 57
// in docs/bench/decode-h200.md; 4 and 5 buffers lost, and so did the same walk over an fp8 cache).
// 34 KB of shared memory a buffer at head_dim 128: a Hopper block (227 KB) holds three, a GB10
// block (99 KB) two, so the device's answer decides.
constexpr int kMaxDecodeBuffers = 3;

// Whether attention_decode takes this shape: head_dim 32, 64 or 128, a GQA group (n_heads / n_kv_heads)
// of at most 16 (one m16 tile of rows), q rows float4-aligned (q_stride % 4 == 0). head_dim 256
// (Qwen3.5 / Qwen3-Next full attention) would need 192 registers a thread for the Q fragments and
// the output alone: those shapes stay on the other kernels.
bool attention_decode_supported(const AttentionShape& A);

// Partitions per (sequence, kv head) for S sequences with positions up to max_positions.
int64_t attention_decode_parts(int64_t S, const AttentionShape& A, int64_t max_positions);
// Floats of scratch and uint32 counters attention_decode needs for S sequences (the engine sizes
// its attention scratch as the larger of this and paged_attention's).
int64_t attention_decode_scratch_floats(int64_t S, const AttentionShape& A, int64_t max_positions);
int64_t attention_decode_counter_count(int64_t S, const AttentionShape& A);
// The buffers a launch with at most max_buffers (2 .. kMaxDecodeBuffers) takes for S sequences with
// positions up to max_positions over a bf16 (or fp8) cache: 2 unless the deep walk applies and the
// device can place its cluster (then 3). A step's shared-memory split (kernels/carveout.h) follows it.
int attention_decode_buffers(int64_t S, const AttentionShape& A, int64_t max_positions, bool bf16_cache,
                             int max_buffers);

// out (S, n_heads * head_dim) = softmax(q k^T * scale) v per head, for S sequences of one token
// each: token s is sequence s (row s of block_tables) at position pos[s], and attends to positions
// 0 .. pos[s], whose K and V are already in the cache (qk_norm_rope_store_kv stored the token's
// own). q (S, q_stride) float, 16-byte aligned. `scratch` holds attention_decode_scratch_floats,
// `counters` attention_decode_counter_count entries, 0 before the call and 0 after it (both unused,
// and scratch sized 0, where the partitions merge in a cluster). `out` 16-byte aligned. kv_scale as
// in paged_attention. max_buffers: attention_decode_buffers's. Graphs capture it: the launch also
// sets the kernel's shared-memory limit (69,632 bytes at head_dim 128 with 2 buffers), a driver call
// that is not a stream operation.
void attention_decode(float* out, float* scratch, uint32_t* counters, const float* q, const bf16_bits* k_cache,
                      const bf16_bits* v_cache, const int32_t* block_tables, const int32_t* pos, int64_t S,
                      const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream,
                      KvScale kv_scale = {}, int max_buffers = kMaxDecodeBuffers);
void attention_decode(float* out, float* scratch, uint32_t* counters, const float* q, const fp8_e4m3* k_cache,
                      const fp8_e4m3* v_cache, const int32_t* block_tables, const int32_t* pos, int64_t S,
                      const AttentionShape& A, int64_t max_positions, float scale, cudaStream_t stream,
                      KvScale kv_scale = {}, int max_buffers = kMaxDecodeBuffers);

}  // namespace tandem::kernels
