#include "bench/decode_kernel_table.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bench/decode_bench_flags.h"
#include "bench/decode_bytes.h"
#include "engine/cuda/gated_deltanet.h"
#include "engine/cuda/random_fill.h"
#include "engine/model/tp_shard.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/gated_deltanet.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/quant_matmul.h"
#include "kernels/quant_moe.h"

namespace tandem::bench {

using engine::ModelConfig;
using kernels::QuantMatrix;
using kernels::WeightFormat;

namespace {

// Launches `launch(i)` 3 times to warm up, then 30 times between events, i cycling over `copies`
// copies of the inputs; the median.
template <typename Launch>
KernelTiming TimeKernel(const std::string& name, double bytes, int copies, Launch&& launch) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch(i % copies);
  std::vector<double> us;
  for (int i = 0; i < 30; ++i) {
    CUDA_CHECK(cudaEventRecord(e0));
    launch(i % copies);
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    us.push_back(ms * 1e3);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return {name, bytes, us[us.size() / 2]};
}

std::string Dims(int64_t rows, int64_t cols) { return std::to_string(rows) + " x " + std::to_string(cols); }

void* RandomBf16(int64_t elems) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, elems * 2));
  engine::cuda::fill_random_bf16(static_cast<kernels::bf16_bits*>(p), elems, 0.05f, 7, nullptr);
  return p;
}

int64_t Aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// A stack of `count` (rows x cols) matrices in a quantized format (FP8 in 128 x 128 blocks), no
// arrays yet.
QuantMatrix Layout(WeightFormat format, int64_t count, int64_t rows, int64_t cols) {
  return QuantMatrix::Layout(format, count, rows, cols, kFp8Block, kFp8Block);
}

// `copies` copies of a stack of Layout(format, count, rows, cols), each array 256-byte aligned:
// random codes (a kernel that decodes codes by lookup would be flattered by a constant pattern;
// FP8 codes never NaN) and scales that keep the weights within about +-0.05.
struct QuantCopies {
  void* base = nullptr;
  std::vector<QuantMatrix> m;

  QuantCopies(WeightFormat format, int64_t count, int64_t rows, int64_t cols, int copies) {
    using namespace engine::cuda;  // the random fills
    QuantMatrix q = Layout(format, count, rows, cols);
    const int64_t n_data = count * q.data_bytes(), n_scales = count * q.scale_stride();
    const int64_t n_groups = count * q.group_scale_stride(), n_rows2 = count * q.row_scale2_stride();
    const int64_t data = Aligned(n_data), scales = Aligned(4 * n_scales), groups = Aligned(n_groups);
    const int64_t per_copy = data + scales + groups + Aligned(4 * n_rows2);
    CUDA_CHECK(cudaMalloc(&base, per_copy * copies));
    for (int c = 0; c < copies; ++c) {
      auto* p = static_cast<uint8_t*>(base) + c * per_copy;
      q.data = p;
      if (format == WeightFormat::kFp8Block) {
        auto* block_scales = reinterpret_cast<float*>(p + data);
        fill_random_e4m3(p, n_data, -kE4m3Max, kE4m3Max, 11 + c, nullptr);
        fill_constant_f32(block_scales, n_scales, 0.05f / kE4m3Max, nullptr);
        q.scales = block_scales;
      } else {
        uint8_t* group_scales = p + data + scales;
        auto* row_scales = reinterpret_cast<float*>(p + data + scales + groups);
        fill_random_bytes(p, n_data, 11 + c, nullptr);  // e2m1 pairs, up to +-6
        fill_random_e4m3(group_scales, n_groups, 0.5f, 1.0f, 13 + c, nullptr);
        fill_constant_f32(row_scales, n_rows2, 0.05f / 6, nullptr);
        q.group_scales = group_scales;
        q.row_scale2 = row_scales;
      }
      m.push_back(q);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~QuantCopies() { cudaFree(base); }
  QuantCopies(const QuantCopies&) = delete;
  QuantCopies& operator=(const QuantCopies&) = delete;
  // The bytes a launch over one matrix (or `k` matrices of the stack) reads.
  double Bytes(int64_t k = 1) const { return static_cast<double>(k * m.front().matrix_bytes()); }
};

// Copies of one matrix that together exceed 256 MB (more than L2), at least one.
int CopiesBeyondL2(int64_t bytes) { return static_cast<int>(std::max<int64_t>(1, (256 << 20) / bytes + 1)); }

}  // namespace

// The decode products of the whole model at batch 1 (TP 1 shapes), each kernel alone: the mixers'
// projections (gated full attention's q rows include the gate rows; a Gated DeltaNet layer's
// in_proj is qkv | z | b | a, one product in bf16; quantized, qkv | z is the quantized product and
// b | a stay bf16), router, routed experts (with the shared expert as one more, as MoeFfn runs
// it), lm_head, attention.
std::vector<KernelTiming> DecodeKernelTimings(const ModelConfig& c, const std::vector<WeightFormat>& quantized) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.num_experts, K = c.num_experts_per_tok;
  const int64_t qd = c.num_attention_heads * c.head_dim, kvd = c.num_key_value_heads * c.head_dim;
  const int64_t q_rows = c.attention_output_gate ? 2 * qd : qd;
  // The Gated DeltaNet's heads at TP 1, as the engine lays them out (no heads: not a hybrid).
  const kernels::DeltaNetLayout L = engine::cuda::GatedDeltaNet::Layout(c, engine::ComputeTpShard(c, 0, 1));
  const bool hybrid = L.n_v > 0;
  const int64_t lin_v = L.value_dim(), lin_proj = L.proj_row();
  const int64_t S = c.shared_expert_intermediate_size;
  // The shared expert (as wide as an expert: cuda::CheckSupported) is expert E, picked by every token.
  const int64_t shared = S > 0 ? 1 : 0, Es = E + shared, Ks = K + shared;
  std::vector<KernelTiming> out;
  // Inputs: the widest of x (hidden, q heads, DeltaNet values, shared expert), the experts'
  // activations (K x 2 I) and the routing weights; outputs up to the vocabulary.
  const int64_t in_floats = std::max({4 * 8 * I + 4 * H, 2 * Ks * I + H + Ks, 2 * qd + 2 * kvd, lin_v});
  float* x = static_cast<float*>(RandomBf16(2 * in_floats));  // floats as bf16 pairs
  float* y = static_cast<float*>(RandomBf16(2 * std::max<int64_t>(c.vocab_size, 2 * Ks * I + lin_proj)));
  auto matvec = [&](const std::string& what, int64_t rows, int64_t in) {
    const int64_t elems = rows * in;
    const int copies = CopiesBeyondL2(2 * elems);
    auto* w = static_cast<kernels::bf16_bits*>(RandomBf16(elems * copies));
    out.push_back(TimeKernel("matmul " + what + " (" + Dims(rows, in) + ")", 2.0 * elems, copies, [&](int i) {
      kernels::matmul_bf16(y, x, w + i * elems, 1, in, rows, nullptr);
    }));
    cudaFree(w);
  };
  const std::string qkv = c.attention_output_gate ? "q+gate, k, v" : "qkv";
  matvec(qkv, q_rows + 2 * kvd, H);
  matvec("o_proj", H, qd);
  if (hybrid) {
    matvec("DeltaNet in_proj qkv|z|b|a", lin_proj, H);
    matvec("DeltaNet out_proj", H, lin_v);
  }
  matvec(shared ? "router + shared expert gate" : "router", Es, H);
  matvec("lm_head", c.vocab_size, H);

  // Expert ids of 16 steps: each launch reads Ks experts' rows of all the layer's experts.
  int32_t* ids = nullptr;
  CUDA_CHECK(cudaMalloc(&ids, 16 * Ks * sizeof(int32_t)));
  {
    std::vector<int32_t> h;
    // 37 is odd, E a power of two: 16 K consecutive multiples are distinct when 16 K <= E.
    for (int64_t i = 0; i < 16 * K; ++i) {
      h.push_back(static_cast<int32_t>((i * 37) % E));
      if (shared && i % K == K - 1) h.push_back(static_cast<int32_t>(E));
    }
    CUDA_CHECK(cudaMemcpy(ids, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  float* wts = x + H;
  const std::string k_experts = std::to_string(K) + (shared ? " + shared" : "") + " experts x ";
  {
    auto* gu = static_cast<kernels::bf16_bits*>(RandomBf16(Es * 2 * I * H));
    auto* down = static_cast<kernels::bf16_bits*>(RandomBf16(Es * H * I));
    out.push_back(TimeKernel("moe_gate_up (" + k_experts + Dims(2 * I, H) + ")", 2.0 * Ks * 2 * I * H, 16, [&](int i) {
      kernels::moe_gate_up(y, x, ids + i * Ks, gu, 1, Ks, H, I, nullptr);
    }));
    out.push_back(TimeKernel("moe_down (" + k_experts + Dims(H, I) + ")", 2.0 * Ks * H * I, 16, [&](int i) {
      kernels::moe_down(y, x, ids + i * Ks, wts, down, 1, Ks, H, I, nullptr);
    }));
    cudaFree(gu);
    cudaFree(down);
  }
  if (hybrid) {
    // One sequence's delta-rule step of one layer: its float32 state S (n_v x dk x dv) read and
    // written back. A pool of slots larger than L2 (each launch takes the next slot), position 5
    // so that the state is continued, not started from zeros; zero inputs keep it finite.
    const int64_t state_bytes = static_cast<int64_t>(sizeof(float)) * L.state_size();
    const int copies = std::max(2, CopiesBeyondL2(state_bytes));
    float *states = nullptr, *in = nullptr;
    CUDA_CHECK(cudaMalloc(&states, copies * state_bytes));
    CUDA_CHECK(cudaMemset(states, 0, copies * state_bytes));
    const int64_t in_len = L.conv_dim() + 2 * L.n_v + L.value_dim();  // qkv | g | beta | o
    CUDA_CHECK(cudaMalloc(&in, in_len * sizeof(float)));
    CUDA_CHECK(cudaMemset(in, 0, in_len * sizeof(float)));
    std::vector<int32_t> h = {5, 0, 1};  // pos, seq_starts; then the slots
    for (int i = 0; i < copies; ++i) h.push_back(i);
    int32_t* meta = nullptr;
    CUDA_CHECK(cudaMalloc(&meta, h.size() * sizeof(int32_t)));
    CUDA_CHECK(cudaMemcpy(meta, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    const float *qkv_in = in, *g = in + L.conv_dim(), *beta = g + L.n_v;
    float* o = in + L.conv_dim() + 2 * L.n_v;
    const std::string what = "gated_deltanet_recurrent (1 sequence, f32 state " + std::to_string(L.n_v) + " x " +
                             Dims(L.dk, L.dv) + ", read + written)";
    out.push_back(TimeKernel(what, 2.0 * state_bytes, copies, [&](int i) {
      const kernels::DeltaNetStep st{meta, meta + 3 + i, meta + 1, 1, 1};
      kernels::gated_deltanet_recurrent(o, states, qkv_in, g, beta, st, L, nullptr);
    }));
    cudaFree(states);
    cudaFree(in);
    cudaFree(meta);
  }
  for (int ctx : {1024, 4096}) {
    kernels::AttentionShape A{c.num_attention_heads, c.num_key_value_heads, c.head_dim, 16, ctx / 16, qd + 2 * kvd};
    const int copies = 16;
    auto* kv = static_cast<kernels::bf16_bits*>(RandomBf16(2LL * copies * ctx * kvd));
    int32_t* meta = nullptr;
    CUDA_CHECK(cudaMalloc(&meta, (ctx / 16 + 2) * sizeof(int32_t)));
    std::vector<int32_t> h(ctx / 16 + 2);
    for (int i = 0; i < ctx / 16; ++i) h[i] = i;
    h[ctx / 16] = 0;            // token_seq
    h[ctx / 16 + 1] = ctx - 1;  // pos
    CUDA_CHECK(cudaMemcpy(meta, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    float* scratch = nullptr;
    CUDA_CHECK(cudaMalloc(&scratch, kernels::attention_scratch_floats(1, A, ctx) * sizeof(float)));
    uint32_t* counters = nullptr;
    CUDA_CHECK(cudaMalloc(&counters, kernels::attention_counter_count(1, A) * sizeof(uint32_t)));
    CUDA_CHECK(cudaMemset(counters, 0, kernels::attention_counter_count(1, A) * sizeof(uint32_t)));
    out.push_back(TimeKernel("paged_attention bf16 kv, ctx " + std::to_string(ctx), 2.0 * 2 * ctx * kvd, copies,
                             [&](int i) {
      const kernels::bf16_bits* k = kv + 2LL * i * ctx * kvd;
      kernels::paged_attention(y, scratch, counters, x, k, k + ctx * kvd, meta, meta + ctx / 16, meta + ctx / 16 + 1,
                               1, A, ctx, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), nullptr);
    }));
    cudaFree(kv);
    cudaFree(meta);
    cudaFree(scratch);
    cudaFree(counters);
  }

  // The quantized products of the same shapes (router, lm_head and attention do not change).
  for (const WeightFormat f : quantized) {
    if (f == WeightFormat::kBf16) continue;
    const std::string fmt = WeightFormatName(f);
    auto qmatvec = [&](const std::string& what, int64_t rows, int64_t in) {
      const QuantCopies w(f, 1, rows, in, CopiesBeyondL2(Layout(f, 1, rows, in).matrix_bytes()));
      out.push_back(TimeKernel("matmul_quant " + fmt + " " + what + " (" + Dims(rows, in) + ")", w.Bytes(),
                               static_cast<int>(w.m.size()),
                               [&](int i) { kernels::matmul_quant(y, x, w.m[i], 1, nullptr); }));
    };
    qmatvec(qkv, q_rows + 2 * kvd, H);
    qmatvec("o_proj", H, qd);
    if (hybrid) {
      qmatvec("DeltaNet in_proj qkv|z", L.conv_dim() + lin_v, H);
      qmatvec("DeltaNet out_proj", H, lin_v);
    }
    const QuantCopies gu(f, Es, 2 * I, H, 1), down(f, Es, H, I, 1);
    out.push_back(TimeKernel("moe_gate_up_quant " + fmt + " (" + k_experts + Dims(2 * I, H) + ")", gu.Bytes(Ks), 16,
                             [&](int i) { kernels::moe_gate_up_quant(y, x, ids + i * Ks, gu.m[0], 1, Ks, nullptr); }));
    out.push_back(TimeKernel("moe_down_quant " + fmt + " (" + k_experts + Dims(H, I) + ")", down.Bytes(Ks), 16,
                             [&](int i) { kernels::moe_down_quant(y, x, ids + i * Ks, wts, down.m[0], 1, Ks, nullptr); }));
  }
  cudaFree(ids);
  cudaFree(x);
  cudaFree(y);
  return out;
}

}  // namespace tandem::bench
