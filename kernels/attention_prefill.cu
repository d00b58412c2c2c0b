#include "kernels/attention_prefill.h"

#include <cmath>
#include <type_traits>

#include "kernels/attention_tile.cuh"
#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

using namespace tile;  // NOLINT: the tensor-core pieces shared with attention_decode.cu

// The block's shape for a head_dim. Up to 128: 8 warps (128 packed (token, q head) rows, one m16
// tile per warp) and K/V tiles of 64 positions. At 256 a warp's 16x256 output alone takes 128
// registers a thread and its Q fragments 64, so the scores get a 32-position tile (16 registers),
// and 4 warps (64 rows) keep two K/V buffers within the GB10's 99 KB of shared memory.
template <int HD>
struct Tile {
  static constexpr int kWarps = HD == 256 ? 4 : 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRows = kWarps * 16;
  static constexpr int kBN = HD == 256 ? 32 : 64;  // KV positions per tile
  // bf16 row stride in shared memory: 16 bytes past the row, so the 8 rows one ldmatrix reads
  // start in 8 different 16-byte bank groups (no conflicts), each 16-byte aligned for cp.async.
  static constexpr int kLd = HD + 8;
  static constexpr int kTileElems = kBN * kLd;
  // K0, V0, K1, V1. The Q tile (kRows rows) is staged in K1/V1 before the loop needs them.
  static constexpr int kSmemBytes = 4 * kTileElems * 2;
  static_assert(kRows == 2 * kBN, "the Q tile fills exactly the second K/V buffer");
  static_assert(kSmemBytes <= 99 * 1024, "the GB10 (sm_121) gives a block at most 99 KB");
};
constexpr int kMaxWarps = 8;

// Which (sequence, tile) block `b` takes: sequences' tiles are numbered in order, and inside a
// sequence the last tile (the one with the most K/V to read) comes first, so the long blocks start in
// the first wave and the short ones fill the tail. False past the step's last tile. Block-uniform.
__device__ __forceinline__ bool FindTile(const int32_t* seq_starts, int S, int done_below, int tq, int b, int* s_out,
                                         int* j_out) {
  __shared__ int red[kMaxWarps];
  const int threads = static_cast<int>(blockDim.x);
  __shared__ int found_s, found_j;
  if (threadIdx.x == 0) found_s = -1;
  int before = 0;  // tiles of the sequences already scanned
  for (int s0 = 0; s0 < S; s0 += threads) {
    const int s = s0 + static_cast<int>(threadIdx.x);
    // A sequence whose tokens all lie below done_below has no tiles: the caller computed it.
    const int n = s < S && seq_starts[s + 1] > done_below ? (seq_starts[s + 1] - seq_starts[s] + tq - 1) / tq : 0;
    int total = 0;
    const int first = before + BlockExclusiveScan(n, red, &total);  // its barriers order found_s = -1
    if (b >= first && b < first + n) found_s = s, found_j = n - 1 - (b - first);
    before += total;
    __syncthreads();
    if (found_s >= 0) break;
  }
  *s_out = found_s;
  *j_out = found_j;
  return found_s >= 0;
}

// One block: the tile of TQ = kRows / G tokens j of sequence s (G = n_heads / n_kv_heads) and kv
// head kvh. Row r of the block's packed matrix is token r / G, q head kvh * G + r % G; warp w owns
// rows 16w .. 16w + 15. The block walks K/V tiles 0 .. (last position) / kBN; each warp keeps its Q
// fragments, its 16x64 scores and its 16xHD output in registers. See attention_prefill.h.
template <int HD, typename KV>
__global__ void __launch_bounds__(Tile<HD>::kThreads, 1)
    AttentionPrefillKernel(float* out, const float* q, const KV* kc, const KV* vc, const int32_t* block_tables,
                           const int32_t* pos, const int32_t* seq_starts, int S, int done_below, AttentionShape A,
                           float q_scale, float v_scale) {
  using C = Tile<HD>;
  constexpr int kThreads = C::kThreads, kRows = C::kRows, kBN = C::kBN, kLd = C::kLd;
  using Stager = KvTileStager<HD, KV, kThreads, kBN>;
  static_assert(Stager::kLd == kLd && Stager::kTileElems == C::kTileElems, "one shared-memory layout");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);

  GridDepLaunchDependents();
  GridDepWait();
  const int G = static_cast<int>(A.n_heads / A.n_kv_heads), tq = kRows / G;
  const int n_kv_heads = static_cast<int>(A.n_kv_heads);
  const int kvh = static_cast<int>(blockIdx.x) % n_kv_heads;
  int s = 0, j = 0;
  if (!FindTile(seq_starts, S, done_below, tq, static_cast<int>(blockIdx.x) / n_kv_heads, &s, &j)) return;
  const int t0 = seq_starts[s] + j * tq, ntok = min(tq, seq_starts[s + 1] - t0);
  const int p_first = pos[t0], p_last = pos[t0 + ntok - 1];
  const int n_pos = p_last + 1, n_tiles = (n_pos + kBN - 1) / kBN;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;

  // ---- K/V staging (kernels/attention_tile.cuh): slots looked up a tile ahead, double-buffered.
  __shared__ int32_t sm_slot[2][64];
  Stager kv(smem, sm_slot, block_tables + static_cast<int64_t>(s) * A.max_blocks, kc, vc, A.block_size, n_pos,
            A.n_kv_heads * HD, kvh);

  kv.load_slots(0, 0);
  __syncthreads();
  kv.fetch(0);
  kv.put_held(0);
  if (n_tiles > 1) kv.load_slots(1, kBN);  // read after the barriers below

  // ---- Q: the block's kRows packed rows, scaled (softmax scale, k scale, log2 e) and rounded to
  // bf16, staged in buffer 1 (free until tile 1 is fetched), then held as A fragments.
  {
    __nv_bfloat16* qs = smem + 2 * C::kTileElems;
    for (int idx = tid; idx < kRows * (HD / 4); idx += kThreads) {
      const int r = idx / (HD / 4), c = (idx % (HD / 4)) * 4, tok = r / G;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (tok < ntok) {
        const int64_t h = static_cast<int64_t>(kvh) * G + r % G;
        v = *reinterpret_cast<const float4*>(q + (t0 + tok) * A.q_stride + h * HD + c);
      }
      *reinterpret_cast<uint2*>(qs + r * kLd + c) =
          make_uint2(PackFloatsBf16(v.x * q_scale, v.y * q_scale), PackFloatsBf16(v.z * q_scale, v.w * q_scale));
    }
  }
  __syncthreads();
  uint32_t qf[HD / 16][4];
  {
    const __nv_bfloat16* qs = smem + 2 * C::kTileElems + (warp * 16 + lane % 16) * kLd + (lane / 16) * 8;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) LdMatrixX4(qf[kk], SmemAddr(qs + kk * 16));
  }
  __syncthreads();  // every warp has its Q: buffer 1 may take tile 1

  // This thread's two rows (g and g + 8 of its warp's 16) and their positions; rows past the tile's
  // tokens (padding) take the last position: they compute but are never stored.
  const int g = lane / 4, c2 = (lane % 4) * 2;
  // Whether the warp has a row of the tile's tokens (see the loop); taken as true at head_dim 256,
  // whose registers are exactly full: a branch around the products spilled there.
  const bool warp_has_rows = HD == 256 || warp * 16 < ntok * G;
  int row_pos[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int tok = (warp * 16 + g + 8 * half) / G;
    row_pos[half] = tok < ntok ? pos[t0 + tok] : p_last;
  }
  float o[HD / 8][4];
#pragma unroll
  for (int nb = 0; nb < HD / 8; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  // ldmatrix lane offsets: K (non-transposed) gives B fragments of two 8-position column blocks,
  // V (transposed) of two 8-dim column blocks; see the fragment layouts of mma.m16n8k16.
  const int k_lane = ((lane / 16) * 8 + lane % 8) * kLd + ((lane / 8) % 2) * 8;
  const int v_lane = (((lane / 8) % 2) * 8 + lane % 8) * kLd + (lane / 16) * 8;

  for (int kt = 0; kt < n_tiles; ++kt) {
    const int cur = kt & 1, kv0 = kt * kBN;
    const bool more = kt + 1 < n_tiles;
    if (more) {
      // The other buffer's last readers passed the barrier ending kt - 1.
      if constexpr (!Stager::kFetchLate) kv.fetch(cur ^ 1);
      // Tile kt's slots were last read by its fetch, before that barrier too.
      if (kt + 2 < n_tiles) kv.load_slots(cur, kv0 + 2 * kBN);
    }
    if constexpr (Stager::kAsync) {
      Stager::wait_copies(more);
      __syncthreads();
    }
    // A warp whose 16 rows are all padding (a short last tile, a decode-style sequence) only helps
    // stage the tiles: its products would be thrown away.
    if (warp_has_rows) {
      const __nv_bfloat16* ks = kv.k_tile(cur);
      const __nv_bfloat16* vs = kv.v_tile(cur);

      // S = Q K^T: 16 rows x 64 positions per warp.
      float sc[kBN / 8][4];
  #pragma unroll
      for (int nb = 0; nb < kBN / 8; ++nb) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
  #pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
  #pragma unroll
        for (int np = 0; np < kBN / 16; ++np) {
          uint32_t b[4];
          LdMatrixX4(b, SmemAddr(ks + np * 16 * kLd + kk * 16 + k_lane));
          Mma(sc[2 * np], qf[kk], b[0], b[1]);
          Mma(sc[2 * np + 1], qf[kk], b[2], b[3]);
        }
      }
      // Causal mask where the tile reaches past the block's first position (the diagonal tiles).
      if (kv0 + kBN - 1 > p_first) {
  #pragma unroll
        for (int nb = 0; nb < kBN / 8; ++nb) {
  #pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (kv0 + nb * 8 + c2 + (e & 1) > row_pos[e / 2]) sc[nb][e] = -INFINITY;
          }
        }
      }
      // Online softmax per row (kernels/attention_tile.cuh). Tile 0 has position 0 unmasked for
      // every row, so the running maximum is finite from then on.
      OnlineSoftmaxTile<false>(sc, m_run, l_run, o);
      // O += P V: the scores' accumulator layout is the A fragment layout of the next product.
  #pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        const uint32_t pa[4] = {PackFloatsBf16(sc[2 * kk][0], sc[2 * kk][1]),
                                PackFloatsBf16(sc[2 * kk][2], sc[2 * kk][3]),
                                PackFloatsBf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                                PackFloatsBf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
  #pragma unroll
        for (int dp = 0; dp < HD / 16; ++dp) {
          uint32_t b[4];
          LdMatrixX4Trans(b, SmemAddr(vs + kk * 16 * kLd + dp * 16 + v_lane));
          Mma(o[2 * dp], pa, b[0], b[1]);
          Mma(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    if (more) {
      if constexpr (Stager::kFetchLate) {
        kv.fetch(cur ^ 1);
      } else {
        kv.put_held(cur ^ 1);
      }
    }
    __syncthreads();  // this buffer's readers are done: iteration kt + 1 fetches tile kt + 2 into it
  }

  // out = O / l (times the cache's v scale), rows of the tile's tokens only.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float l = l_run[half];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = warp * 16 + g + 8 * half, tok = r / G;
    if (tok >= ntok) continue;
    const int64_t h = static_cast<int64_t>(kvh) * G + r % G;
    float* dst = out + (static_cast<int64_t>(t0) + tok) * A.n_heads * HD + h * HD + c2;
    const float inv = v_scale / l;
#pragma unroll
    for (int nb = 0; nb < HD / 8; ++nb) {
      *reinterpret_cast<float2*>(dst + nb * 8) = make_float2(o[nb][2 * half] * inv, o[nb][2 * half + 1] * inv);
    }
  }
}

template <int HD, typename KV>
void LaunchHd(float* out, const float* q, const KV* k_cache, const KV* v_cache, const int32_t* block_tables,
              const int32_t* pos, const int32_t* seq_starts, int64_t T, int64_t S, int64_t done_below,
              const AttentionShape& A, float q_scale, float v_scale, cudaStream_t stream) {
  using C = Tile<HD>;
  const auto kernel = AttentionPrefillKernel<HD, KV>;
  // Above 48 KB a block's dynamic shared memory must be allowed per kernel (and per device: set on
  // every launch, which costs a driver call, not a sync).
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
  // Tiles per sequence <= len / tq + 1, so T / tq + S bounds the step's tiles.
  const int64_t tq = C::kRows / (A.n_heads / A.n_kv_heads);
  const int64_t blocks = ((T + tq - 1) / tq + S) * A.n_kv_heads;
  KERNEL_REQUIRE(blocks <= INT32_MAX);
  Launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(C::kThreads), C::kSmemBytes, stream, out, q, k_cache,
         v_cache, block_tables, pos, seq_starts, static_cast<int>(S), static_cast<int>(done_below), A, q_scale,
         v_scale);
  KERNEL_CHECK();
}

template <typename KV>
void LaunchPrefill(float* out, const float* q, const KV* k_cache, const KV* v_cache, const int32_t* block_tables,
                   const int32_t* pos, const int32_t* seq_starts, int64_t T, int64_t S, const AttentionShape& A,
                   float scale, KvScale kv_scale, int64_t done_below, cudaStream_t stream) {
  KERNEL_REQUIRE(attention_prefill_supported(A));
  if (T == 0) return;
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(q) % 16 == 0 && S >= 1 && S <= T && T <= INT32_MAX);
  KERNEL_REQUIRE(done_below >= 0 && done_below <= T);
  // The scores are kept in base 2 (ex2 is the hardware's exponential): log2 e joins the scale.
  const float q_scale = scale * kv_scale.k * kLog2e;
  const auto launch = [&](auto hd) {
    LaunchHd<decltype(hd)::value>(out, q, k_cache, v_cache, block_tables, pos, seq_starts, T, S, done_below, A, q_scale,
                                  kv_scale.v, stream);
  };
  switch (A.head_dim) {
    case 32: launch(std::integral_constant<int, 32>{}); break;
    case 64: launch(std::integral_constant<int, 64>{}); break;
    case 128: launch(std::integral_constant<int, 128>{}); break;
    default: launch(std::integral_constant<int, 256>{}); break;
  }
}

}  // namespace

bool attention_prefill_supported(const AttentionShape& A) {
  if (A.n_kv_heads <= 0 || A.n_heads % A.n_kv_heads != 0 || A.block_size <= 0) return false;
  const int64_t group = A.n_heads / A.n_kv_heads;
  const int64_t hd = A.head_dim, rows = hd == 256 ? Tile<256>::kRows : Tile<128>::kRows;
  return (hd == 32 || hd == 64 || hd == 128 || hd == 256) && rows % group == 0 && A.q_stride % 4 == 0;
}

void attention_prefill(float* out, const float* q, const bf16_bits* k_cache, const bf16_bits* v_cache,
                       const int32_t* block_tables, const int32_t* pos, const int32_t* seq_starts, int64_t T,
                       int64_t S, const AttentionShape& A, float scale, cudaStream_t stream, KvScale kv_scale,
                       int64_t done_below) {
  LaunchPrefill(out, q, reinterpret_cast<const __nv_bfloat16*>(k_cache),
                reinterpret_cast<const __nv_bfloat16*>(v_cache), block_tables, pos, seq_starts, T, S, A, scale,
                kv_scale, done_below, stream);
}

void attention_prefill(float* out, const float* q, const float* k_cache, const float* v_cache,
                       const int32_t* block_tables, const int32_t* pos, const int32_t* seq_starts, int64_t T,
                       int64_t S, const AttentionShape& A, float scale, cudaStream_t stream, KvScale kv_scale,
                       int64_t done_below) {
  LaunchPrefill(out, q, k_cache, v_cache, block_tables, pos, seq_starts, T, S, A, scale, kv_scale, done_below, stream);
}

void attention_prefill(float* out, const float* q, const fp8_e4m3* k_cache, const fp8_e4m3* v_cache,
                       const int32_t* block_tables, const int32_t* pos, const int32_t* seq_starts, int64_t T,
                       int64_t S, const AttentionShape& A, float scale, cudaStream_t stream, KvScale kv_scale,
                       int64_t done_below) {
  LaunchPrefill(out, q, reinterpret_cast<const __nv_fp8_e4m3*>(k_cache),
                reinterpret_cast<const __nv_fp8_e4m3*>(v_cache), block_tables, pos, seq_starts, T, S, A, scale,
                kv_scale, done_below, stream);
}

}  // namespace tandem::kernels
