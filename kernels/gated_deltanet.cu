#include "kernels/gated_deltanet.h"

#include "kernels/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/launch.cuh"

namespace tandem::kernels {

namespace {

// The sequence of token t: the last s with seq_starts[s] <= t (empty sequences share a start
// with the next one, which is the one holding t).
__device__ __forceinline__ int SeqOf(const int32_t* seq_starts, int64_t S, int64_t t) {
  int lo = 0, hi = static_cast<int>(S);
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (seq_starts[mid] <= t) lo = mid; else hi = mid;
  }
  return lo;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); `red` holds 32 floats.
__device__ __forceinline__ float BlockSum(float v, float* red) {
  v = WarpSum(v);
  __syncthreads();  // red's last readers are done
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += red[w];
  return total;
}

int RoundUp32(int64_t n) { return static_cast<int>((n + 31) / 32 * 32); }

// ---- prepare: the conv + SiLU, the L2 norms and the gates --------------------------------------

// Grid (T, 2 n_k + n_v + 1): blocks [0, n_k) are q heads, [n_k, 2 n_k) k heads, then v heads
// (dk or dv channels, one per thread), the last block the gates of all value heads.
// one_token_chunks (a decode step: every sequence brings one token): the thread of (token, channel)
// is then the only reader of that sequence's conv state of the channel, so it shifts the state
// itself and ConvStateKernel is not launched (one launch fewer per DeltaNet layer).
__global__ void ConvPrepareKernel(float* qkv, float* g, float* beta, float* conv_states, const float* proj,
                                  const uint16_t* conv_w, const uint16_t* A_log, const uint16_t* dt_bias,
                                  DeltaNetStep st, DeltaNetLayout L, bool one_token_chunks) {
  GridDepLaunchDependents();
  GridDepWait();
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const int head = blockIdx.y, d = threadIdx.x;
  const int64_t row = L.proj_row(), C = L.conv_dim();
  const float* p = proj + t * row;
  if (head == 2 * L.n_k + L.n_v) {  // the gates
    for (int64_t h = d; h < L.n_v; h += blockDim.x) {
      const float b = p[C + L.value_dim() + h], a = p[C + L.value_dim() + L.n_v + h];
      beta[t * L.n_v + h] = 1.0f / (1.0f + expf(-b));
      const float x = a + Bf16At(dt_bias, h);
      const float sp = x > 20.0f ? x : log1pf(expf(x));
      g[t * L.n_v + h] = -expf(Bf16At(A_log, h)) * sp;
    }
    return;
  }
  const bool is_qk = head < 2 * L.n_k;
  const int64_t width = is_qk ? L.dk : L.dv;
  const int64_t c = is_qk ? head * L.dk + d : 2 * L.key_dim() + (head - 2 * L.n_k) * L.dv + d;
  const int s = SeqOf(st.seq_starts, st.S, t);
  const int64_t t0 = st.seq_starts[s], i = t - t0, K = L.conv_kernel;
  const bool fresh = st.pos[t0] == 0;
  float y = 0;
  if (d < width) {
    float* cs = conv_states + st.state_slots[s] * L.conv_state_size() + c * (K - 1);
    float acc = 0;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t off = i - (K - 1) + j;  // the input j taps back, relative to the chunk's first token
      const float x = off >= 0 ? proj[(t0 + off) * row + c] : (fresh ? 0.0f : cs[K - 1 + off]);
      acc = fmaf(Bf16At(conv_w, c * K + j), x, acc);
    }
    y = acc / (1.0f + expf(-acc));
    if (one_token_chunks && K > 1) {  // the state's entries in ascending order, each read before overwritten
      for (int64_t j = 0; j + 2 < K; ++j) cs[j] = fresh ? 0.0f : cs[j + 1];
      cs[K - 2] = proj[t * row + c];
    }
  }
  if (is_qk) {
    const float ss = BlockSum(y * y, red);
    float scale = rsqrtf(ss + 1e-6f);
    if (head < L.n_k) scale *= rsqrtf(static_cast<float>(L.dk));
    y *= scale;
  }
  if (d < width) qkv[t * C + c] = y;
}

// Grid (ceil(conv_dim / 256), S): each sequence's new conv state, its last K-1 inputs (from this
// step's tokens, or the old state for a chunk shorter than K-1). One thread per channel shifts in
// ascending order, so it reads each old entry before overwriting it.
__global__ void ConvStateKernel(float* conv_states, const float* proj, DeltaNetStep st, DeltaNetLayout L) {
  GridDepLaunchDependents();
  GridDepWait();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  const int64_t t0 = st.seq_starts[s], n = st.seq_starts[s + 1] - t0, K = L.conv_kernel;
  if (c >= L.conv_dim() || n == 0) return;
  const bool fresh = st.pos[t0] == 0;
  float* cs = conv_states + st.state_slots[s] * L.conv_state_size() + c * (K - 1);
  for (int64_t j = 0; j + 1 < K; ++j) {
    const int64_t src = n - (K - 1) + j;
    cs[j] = src >= 0 ? proj[(t0 + src) * L.proj_row() + c] : (fresh ? 0.0f : cs[j + n]);
  }
}

// ---- the recurrence, token by token ----------------------------------------------------------

// A block holds a dk x 32 slice of one value head's state in registers: thread tid owns column
// tid / 4 of the slice and rows tid % 4 + 4 m (m < M); the four threads of a column reduce over
// rows with two shuffles.
constexpr int kCols = 32, kRowThreads = 4, kStateThreads = kCols * kRowThreads;

template <int M>
__device__ __forceinline__ void LoadState(float (&S)[M], const float* src, bool fresh, int64_t j, DeltaNetLayout L) {
  const int r4 = threadIdx.x % kRowThreads;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int64_t a = r4 + kRowThreads * m;
    S[m] = (!fresh && a < L.dk && j < L.dv) ? src[a * L.dv + j] : 0.0f;
  }
}

template <int M>
__device__ __forceinline__ void StoreState(const float (&S)[M], float* dst, int64_t j, DeltaNetLayout L) {
  const int r4 = threadIdx.x % kRowThreads;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int64_t a = r4 + kRowThreads * m;
    if (a < L.dk && j < L.dv) dst[a * L.dv + j] = S[m];
  }
}

// What one block of the recurrence works on: sequence blockIdx.x's tokens [t0, t1), value head
// blockIdx.y (reading key head kh), and this thread's state column j (jl within the slice) and rows.
struct HeadSlice {
  int64_t t0, t1, h, kh, j;
  int jl, r4;
  float* state;  // the head's (dk, dv) state in the sequence's slot
  bool fresh;    // the sequence's chunk starts at position 0: its state starts from zeros
};

__device__ __forceinline__ HeadSlice LocateSlice(float* states, const DeltaNetStep& st, const DeltaNetLayout& L) {
  HeadSlice b;
  const int s = blockIdx.x;
  b.t0 = st.seq_starts[s];
  b.t1 = st.seq_starts[s + 1];
  b.h = blockIdx.y;
  b.kh = b.h / (L.n_v / L.n_k);
  b.jl = threadIdx.x / kRowThreads;
  b.r4 = threadIdx.x % kRowThreads;
  b.j = static_cast<int64_t>(blockIdx.z) * kCols + b.jl;
  b.state = states + st.state_slots[s] * L.state_size() + b.h * L.dk * L.dv;
  b.fresh = b.t0 < b.t1 && st.pos[b.t0] == 0;
  return b;
}

__device__ __forceinline__ float ColumnSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Grid (S, n_v, ceil(dv / 32)), kStateThreads threads; dk <= 4 M.
template <int M>
__global__ void __launch_bounds__(kStateThreads) RecurrentKernel(float* o, float* states, const float* qkv,
                                                                 const float* g, const float* beta, DeltaNetStep st,
                                                                 DeltaNetLayout L) {
  GridDepLaunchDependents();
  GridDepWait();
  __shared__ float qs[4 * M], ks[4 * M];
  const HeadSlice b = LocateSlice(states, st, L);
  if (b.t0 == b.t1) return;
  const int64_t h = b.h, kh = b.kh, j = b.j, C = L.conv_dim(), V = L.value_dim();
  const int r4 = b.r4;
  float S[M];
  LoadState<M>(S, b.state, b.fresh, j, L);
  for (int64_t t = b.t0; t < b.t1; ++t) {
    const float* x = qkv + t * C;
    __syncthreads();  // the previous token's readers of qs, ks are done
    for (int64_t a = threadIdx.x; a < L.dk; a += blockDim.x) {
      qs[a] = x[kh * L.dk + a];
      ks[a] = x[L.key_dim() + kh * L.dk + a];
    }
    __syncthreads();
    const float decay = expf(g[t * L.n_v + h]), bt = beta[t * L.n_v + h];
    const float v = j < L.dv ? x[2 * L.key_dim() + h * L.dv + j] : 0.0f;
    float u = 0;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int a = r4 + kRowThreads * m;
      if (a < L.dk) {
        S[m] *= decay;
        u = fmaf(S[m], ks[a], u);
      }
    }
    const float delta = bt * (v - ColumnSum(u));
    float acc = 0;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int a = r4 + kRowThreads * m;
      if (a < L.dk) {
        S[m] = fmaf(ks[a], delta, S[m]);
        acc = fmaf(S[m], qs[a], acc);
      }
    }
    acc = ColumnSum(acc);
    if (r4 == 0 && j < L.dv) o[t * V + h * L.dv + j] = acc;
  }
  StoreState<M>(S, b.state, j, L);
}

// ---- the chunked form ------------------------------------------------------------------------

// Per chunk of n <= kChunk tokens from state S0, G the cumulative sum of g over the chunk:
//   A_ir = -beta_i exp(G_i - G_r) k_i.k_r (r < i);  Tm = (I - A)^-1 (unit lower triangular);
//   W = Tm (beta v - beta exp(G) K S0)   (each token's delta-rule update beta (v - u));
//   o_i = exp(G_i) S0^T q_i + sum_{r<=i} exp(G_i - G_r) (q_i.k_r) W_r;
//   S = exp(G_n-1) S0 + sum_r exp(G_n-1 - G_r) k_r W_r^T.
// The same block layout as RecurrentKernel (state slice in registers); the chunk's q and k rows,
// the two C x C matrices and the C x 32 slices of the right-hand side, W and exp(G) S0^T q in
// shared memory.
constexpr int kChunk = static_cast<int>(kDeltaNetChunk);
static_assert(kChunk == 32, "the forward substitution runs on one warp, a lane per column");

size_t ChunkedSmemBytes(const DeltaNetLayout& L) {
  const int64_t ks = L.dk + 1;  // padded rows: the C x C products read k_r[a] across r without bank conflicts
  return sizeof(float) * (2 * kChunk * ks + 2 * kChunk * kChunk + 3 * kChunk * kCols + 3 * kChunk);
}

template <int M>
__global__ void __launch_bounds__(kStateThreads) ChunkedKernel(float* o, float* states, const float* qkv,
                                                               const float* g, const float* beta, DeltaNetStep st,
                                                               DeltaNetLayout L) {
  GridDepLaunchDependents();
  GridDepWait();
  extern __shared__ float smem[];
  const int64_t KS = L.dk + 1;
  float* Kc = smem;                      // (kChunk, KS)
  float* Qc = Kc + kChunk * KS;          // (kChunk, KS)
  float* Tm = Qc + kChunk * KS;          // (kChunk, kChunk) A, then (I - A)^-1
  float* P = Tm + kChunk * kChunk;       // (kChunk, kChunk) exp(G_i - G_r) q_i.k_r, r <= i
  float* R = P + kChunk * kChunk;        // (kChunk, kCols) the right-hand side, then W
  float* QS = R + kChunk * kCols;        // (kChunk, kCols) exp(G_i) S0^T q_i
  float* Wt = QS + kChunk * kCols;       // (kChunk, kCols) scratch for W
  float* G = Wt + kChunk * kCols;        // (kChunk) cumulative g
  float* B = G + kChunk;                 // (kChunk) beta
  float* KD = B + kChunk;                // (kChunk) exp(G_n-1 - G_r)

  const HeadSlice b = LocateSlice(states, st, L);
  if (b.t0 == b.t1) return;
  const int64_t t1 = b.t1, h = b.h, kh = b.kh, j = b.j, C = L.conv_dim(), V = L.value_dim();
  const int jl = b.jl, r4 = b.r4;
  float S[M];
  LoadState<M>(S, b.state, b.fresh, j, L);

  for (int64_t c0 = b.t0; c0 < t1; c0 += kChunk) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kChunk), t1 - c0));
    __syncthreads();  // the previous chunk's readers are done
    for (int64_t e = threadIdx.x; e < kChunk * L.dk; e += blockDim.x) {
      const int i = static_cast<int>(e / L.dk);
      const int64_t a = e % L.dk;
      const float* x = qkv + (c0 + i) * C;
      Qc[i * KS + a] = i < n ? x[kh * L.dk + a] : 0.0f;
      Kc[i * KS + a] = i < n ? x[L.key_dim() + kh * L.dk + a] : 0.0f;
    }
    if (threadIdx.x < kChunk) {  // one warp: the cumulative sum of g by a shuffle scan
      const int i = threadIdx.x;
      float cum = i < n ? g[(c0 + i) * L.n_v + h] : 0.0f;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, cum, off);
        if (i >= off) cum += y;
      }
      G[i] = cum;
      B[i] = i < n ? beta[(c0 + i) * L.n_v + h] : 0.0f;
      const float last = __shfl_sync(0xffffffffu, cum, n - 1);
      KD[i] = i < n ? expf(last - cum) : 0.0f;
    }
    __syncthreads();
    // A (strictly lower) and P (lower with the diagonal).
    for (int e = threadIdx.x; e < kChunk * kChunk; e += blockDim.x) {
      const int i = e / kChunk, r = e % kChunk;
      float kk = 0, qk = 0;
      if (i < n && r <= i) {
        for (int64_t a = 0; a < L.dk; ++a) {
          kk = fmaf(Kc[i * KS + a], Kc[r * KS + a], kk);
          qk = fmaf(Qc[i * KS + a], Kc[r * KS + a], qk);
        }
      }
      const float decay = (i < n && r <= i) ? expf(G[i] - G[r]) : 0.0f;
      Tm[e] = r < i ? -B[i] * decay * kk : 0.0f;
      P[e] = qk * decay;
    }
    __syncthreads();
    // (I - A)^-1 by forward substitution on warp 0, lane r holding column r:
    // Tm_ir = A_ir + sum_{r<m<i} A_im Tm_mr, rows in order (row i reads the rows above it).
    if (threadIdx.x < 32) {
      const int r = threadIdx.x;
      for (int i = 1; i < n; ++i) {
        const float a_ir = Tm[i * kChunk + r];  // lane m holds A_im
        float acc = a_ir;
        for (int m = 0; m < i; ++m) {
          const float a_im = __shfl_sync(0xffffffffu, a_ir, m);
          if (r < m) acc = fmaf(a_im, Tm[m * kChunk + r], acc);
        }
        __syncwarp();
        if (r < i) Tm[i * kChunk + r] = acc;
        __syncwarp();
      }
    }
    // The right-hand side beta_i (v_i - exp(G_i) S0^T k_i) and exp(G_i) S0^T q_i for the block's columns.
    for (int i = 0; i < n; ++i) {
      float ksum = 0, qsum = 0;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int a = r4 + kRowThreads * m;
        if (a < L.dk) {
          ksum = fmaf(Kc[i * KS + a], S[m], ksum);
          qsum = fmaf(Qc[i * KS + a], S[m], qsum);
        }
      }
      ksum = ColumnSum(ksum);
      qsum = ColumnSum(qsum);
      if (r4 == 0) {
        const float eg = expf(G[i]);
        const float v = j < L.dv ? qkv[(c0 + i) * C + 2 * L.key_dim() + h * L.dv + j] : 0.0f;
        R[i * kCols + jl] = B[i] * (v - eg * ksum);
        QS[i * kCols + jl] = eg * qsum;
      }
    }
    __syncthreads();  // Tm and R complete
    for (int e = threadIdx.x; e < kChunk * kCols; e += blockDim.x) {
      const int i = e / kCols, c = e % kCols;
      float acc = 0;
      for (int r = 0; r <= i && r < n; ++r) acc = fmaf(r == i ? 1.0f : Tm[i * kChunk + r], R[r * kCols + c], acc);
      Wt[e] = i < n ? acc : 0.0f;
    }
    __syncthreads();  // W complete
    for (int e = threadIdx.x; e < kChunk * kCols; e += blockDim.x) {
      const int i = e / kCols, c = e % kCols;
      const int64_t jc = static_cast<int64_t>(blockIdx.z) * kCols + c;
      if (i >= n || jc >= L.dv) continue;
      float acc = QS[e];
      for (int r = 0; r <= i; ++r) acc = fmaf(P[i * kChunk + r], Wt[r * kCols + c], acc);
      o[(c0 + i) * V + h * L.dv + jc] = acc;
    }
    const float last = expf(G[n - 1]);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int a = r4 + kRowThreads * m;
      if (a < L.dk) {
        float acc = last * S[m];
        for (int r = 0; r < n; ++r) acc = fmaf(KD[r] * Kc[r * KS + a], Wt[r * kCols + jl], acc);
        S[m] = acc;
      }
    }
  }
  StoreState<M>(S, b.state, j, L);
}

// ---- the gated output norm -------------------------------------------------------------------

// Grid (T, n_v), one thread per dim of the head.
__global__ void GatedNormKernel(float* out, const float* o, const uint16_t* w, const float* z, int64_t z_stride,
                                DeltaNetLayout L, float eps) {
  GridDepLaunchDependents();
  GridDepWait();
  __shared__ float red[32];
  const int64_t t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const int64_t off = t * L.value_dim() + h * L.dv + d;
  const float x = d < L.dv ? o[off] : 0.0f;
  const float ss = BlockSum(x * x, red);
  const float scale = rsqrtf(ss / static_cast<float>(L.dv) + eps);
  if (d < L.dv) out[off] = Bf16At(w, d) * (x * scale) * SiluF(z[t * z_stride + h * L.dv + d]);
}

}  // namespace

void gated_deltanet_prepare(float* qkv, float* g, float* beta, float* conv_states, const float* proj,
                            const bf16_bits* conv_w, const bf16_bits* A_log, const bf16_bits* dt_bias,
                            DeltaNetStep st, DeltaNetLayout L, cudaStream_t stream) {
  KERNEL_REQUIRE(DeltaNetSupported(L));
  if (st.T == 0) return;
  const dim3 grid(static_cast<unsigned>(st.T), static_cast<unsigned>(2 * L.n_k + L.n_v + 1));
  const bool one_token_chunks = st.T == st.S;
  Launch(ConvPrepareKernel, grid, dim3(RoundUp32(L.dk > L.dv ? L.dk : L.dv)), 0, stream, qkv, g, beta, conv_states,
         proj, conv_w, A_log, dt_bias, st, L, one_token_chunks);
  KERNEL_CHECK();
  if (L.conv_kernel > 1 && !one_token_chunks) {
    const dim3 grid2(static_cast<unsigned>((L.conv_dim() + 255) / 256), static_cast<unsigned>(st.S));
    Launch(ConvStateKernel, grid2, dim3(256), 0, stream, conv_states, proj, st, L);
    KERNEL_CHECK();
  }
}

void gated_deltanet_recurrent(float* o, float* states, const float* qkv, const float* g, const float* beta,
                              DeltaNetStep st, DeltaNetLayout L, cudaStream_t stream) {
  KERNEL_REQUIRE(DeltaNetSupported(L));
  if (st.T == 0) return;
  const dim3 grid(static_cast<unsigned>(st.S), static_cast<unsigned>(L.n_v), static_cast<unsigned>((L.dv + 31) / 32));
  if (L.dk <= 128) {
    Launch(RecurrentKernel<32>, grid, dim3(kStateThreads), 0, stream, o, states, qkv, g, beta, st, L);
  } else {
    Launch(RecurrentKernel<64>, grid, dim3(kStateThreads), 0, stream, o, states, qkv, g, beta, st, L);
  }
  KERNEL_CHECK();
}

void gated_deltanet_chunked(float* o, float* states, const float* qkv, const float* g, const float* beta,
                            DeltaNetStep st, DeltaNetLayout L, cudaStream_t stream) {
  KERNEL_REQUIRE(DeltaNetChunkedSupported(L));
  if (st.T == 0) return;
  const size_t smem = ChunkedSmemBytes(L);  // 53 KB at dk 128: within GB10's 99 KB per block
  CUDA_CHECK(cudaFuncSetAttribute(ChunkedKernel<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(st.S), static_cast<unsigned>(L.n_v), static_cast<unsigned>((L.dv + 31) / 32));
  Launch(ChunkedKernel<32>, grid, dim3(kStateThreads), smem, stream, o, states, qkv, g, beta, st, L);
  KERNEL_CHECK();
}

void gated_deltanet_norm(float* out, const float* o, const bf16_bits* w, const float* z, int64_t z_stride,
                         int64_t T, DeltaNetLayout L, float eps, cudaStream_t stream) {
  KERNEL_REQUIRE(DeltaNetSupported(L));
  if (T == 0) return;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(L.n_v));
  Launch(GatedNormKernel, grid, dim3(RoundUp32(L.dv)), 0, stream, out, o, w, z, z_stride, L, eps);
  KERNEL_CHECK();
}

}  // namespace tandem::kernels
