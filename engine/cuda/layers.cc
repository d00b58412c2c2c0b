#include "engine/cuda/layers.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "common/status.h"
#include "engine/cuda/random_fill.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/attention_prefill.h"
#include "kernels/matmul.h"
#include "kernels/gemm.h"
#include "kernels/matmul_batched.h"
#include "kernels/moe_batched.h"
#include "kernels/moe.h"
#include "kernels/moe_gemm.h"
#include "kernels/norm_matmul.h"
#include "kernels/qk_norm_rope.h"
#include "kernels/quant_moe.h"
#include "kernels/rmsnorm.h"
#include "kernels/router_topk.h"
#include "kernels/sigmoid_gate.h"
#include "kernels/silu_mul.h"

namespace tandem::engine::cuda {

// ---------------------------------------------------------------------------------------------
// Weights

absl::Status WeightSource::ReadLinear(const WeightSpec& spec, LinearWeight& dst, bool random_quantized) {
  if (spec.shape.size() != 2 && spec.shape.size() != 3) {
    return absl::InternalError("a linear's weight is a matrix or a stack of them, not " +
                               std::to_string(spec.shape.size()) + "-D");
  }
  const int64_t count = spec.shape.size() == 3 ? spec.shape[0] : 1;
  const int64_t rows = spec.shape[spec.shape.size() - 2], cols = spec.shape.back();
  ASSIGN_OR_RETURN(const kernels::WeightFormat format, LinearFormat(spec, random_quantized));
  if (format == kernels::WeightFormat::kBf16) return Read(spec, dst.SetBf16(count, rows, cols));
  if (absl::Status st = ReadQuantized(spec, format, dst); !st.ok()) {
    // Name the weight where the reader did not (a per-rank shape the kernels do not take).
    const std::string name = spec.slices.empty() ? std::string() : spec.slices[0].name;
    if (name.empty() || st.message().find(name) != absl::string_view::npos) return st;
    return absl::Status(st.code(), "weight '" + name + "': " + std::string(st.message()));
  }
  largest_quantized_ = std::max(largest_quantized_, dst.dequant_elems());
  return absl::OkStatus();
}

absl::StatusOr<kernels::WeightFormat> CheckpointWeights::LinearFormat(const WeightSpec& spec, bool random_quantized) {
  (void)random_quantized;  // the tensors decide
  return SpecFormat(ckpt_, spec);
}

absl::Status CheckpointWeights::ReadQuantized(const WeightSpec& spec, kernels::WeightFormat format, LinearWeight& dst) {
  ASSIGN_OR_RETURN(const QuantPack pack, PackQuantWeight(ckpt_, spec));
  if (pack.format != format) return absl::InternalError("quantized weight changed format between reads");
  return dst.Upload(pack);
}

absl::Status CheckpointWeights::Read(const WeightSpec& spec, DeviceArray<bf16_bits>& dst) {
  RETURN_IF_ERROR(dst.Allocate(spec.numel()));
  int64_t at = 0;
  for (const WeightSlice& s : spec.slices) at += s.numel();
  if (at > spec.numel()) return absl::InternalError("weight slices exceed their packed shape");
  if (at < spec.numel()) {  // zero padding (a last rank's lm_head rows past the vocabulary)
    RETURN_IF_ERROR(CudaStatus(cudaMemset(dst.get(), 0, spec.numel() * sizeof(bf16_bits)), "zero padding"));
  }
  at = 0;
  for (const WeightSlice& s : spec.slices) {
    RETURN_IF_ERROR(Upload(s, dst.get() + at));
    at += s.numel();
  }
  return absl::OkStatus();
}

absl::Status CheckpointWeights::Upload(const WeightSlice& s, bf16_bits* dst) {
  const std::string& name = s.name;
  // A slice of entry s.index of a stacked tensor (fused experts) is a slice of that 2-D entry.
  const bool indexed = s.index >= 0;
  const std::vector<int64_t> shape = indexed && !s.shape.empty()
                                         ? std::vector<int64_t>(s.shape.begin() + 1, s.shape.end())
                                         : s.shape;
  const int dim = indexed ? s.dim - 1 : s.dim;
  const int64_t start = s.start, len = s.len;
  ASSIGN_OR_RETURN(TensorView v, ckpt_.View(name));
  if (indexed && (v.shape != s.shape || s.shape.empty() || s.index >= s.shape[0])) {
    return absl::InvalidArgumentError("tensor '" + name + "' in " + v.file + ": entry " + std::to_string(s.index) +
                                      " of a stack of the wrong shape or out of range");
  }
  if (indexed) {
    int64_t sub = 1;
    for (int64_t d : shape) sub *= d;
    v.data += static_cast<size_t>(s.index * sub) * DTypeSize(v.dtype);
    v.shape.erase(v.shape.begin());
  }
  if (v.shape != shape) {
    std::string want, got;
    for (int64_t d : shape) want += std::to_string(d) + ",";
    for (int64_t d : v.shape) got += std::to_string(d) + ",";
    return absl::InvalidArgumentError("tensor '" + name + "' in " + v.file + ": expected shape [" + want +
                                      "], found [" + got + "]");
  }
  // Rows of any tensor (a 3-D one, conv1d [C, 1, K], is rows of its trailing dims), columns of a
  // matrix.
  if (shape.empty() || (dim == 1 && shape.size() != 2) || dim < 0 || dim >= static_cast<int>(shape.size()) ||
      start < 0 || len < 0 || start + len > shape[dim]) {
    return absl::InvalidArgumentError("tensor '" + name + "': slice [" + std::to_string(start) + ", +" +
                                      std::to_string(len) + ") of dim " + std::to_string(dim) + " of a " +
                                      std::to_string(shape.size()) + "-D tensor is out of range");
  }
  int64_t cols = 1;
  for (size_t d = 1; d < shape.size(); ++d) cols *= shape[d];
  const int64_t rows = shape[0];
  if (v.dtype == DType::kBF16) {
    const auto* src = reinterpret_cast<const bf16_bits*>(v.data);
    if (dim == 0) {
      return CudaStatus(cudaMemcpy(dst, src + start * cols, len * cols * sizeof(bf16_bits), cudaMemcpyHostToDevice),
                        "upload " + name);
    }
    // Columns: a pitched copy of `rows` rows of `len` values each.
    return CudaStatus(cudaMemcpy2D(dst, len * sizeof(bf16_bits), src + start, cols * sizeof(bf16_bits),
                                   len * sizeof(bf16_bits), rows, cudaMemcpyHostToDevice),
                      "upload " + name);
  }
  ASSIGN_OR_RETURN(Tensor t, ReadWeightSlice(ckpt_, s));
  std::vector<bf16_bits> b(t.data.size());
  for (size_t i = 0; i < b.size(); ++i) b[i] = kernels::FloatToBf16(t.data[i]);
  return CudaStatus(cudaMemcpy(dst, b.data(), b.size() * sizeof(bf16_bits), cudaMemcpyHostToDevice), "upload " + name);
}

absl::Status RandomWeights::Read(const WeightSpec& spec, DeviceArray<bf16_bits>& dst) {
  if (spec.shape.size() == 1) {
    RETURN_IF_ERROR(dst.Allocate(spec.numel()));
    fill_constant_bf16(dst.get(), spec.numel(), 1.0f, stream_);
    return absl::OkStatus();
  }
  // The full input size (o_proj's and down's slices are columns of a wider matrix).
  const int64_t fan_in = spec.slices.empty() ? spec.shape.back() : spec.slices[0].shape.back();
  return Fill(dst, spec.numel(), fan_in);
}

absl::StatusOr<kernels::WeightFormat> RandomWeights::LinearFormat(const WeightSpec& spec, bool random_quantized) {
  (void)spec;
  return random_quantized ? linears_ : kernels::WeightFormat::kBf16;
}

absl::Status RandomWeights::ReadQuantized(const WeightSpec& spec, kernels::WeightFormat format, LinearWeight& dst) {
  const int64_t count = spec.shape.size() == 3 ? spec.shape[0] : 1;
  const int64_t rows = spec.shape[spec.shape.size() - 2], cols = spec.shape.back();
  const int64_t fan_in = spec.slices.empty() ? cols : spec.slices[0].shape.back();
  const float s = std::sqrt(3.0f / static_cast<float>(fan_in));  // as the bf16 weights: uniform in [-s, s]
  if (format == kernels::WeightFormat::kFp8Block) {
    // Qwen's FP8 releases' blocks; codes spread evenly over [-448, 448], scaled back to [-s, s].
    constexpr int64_t kBlock = 128;
    RETURN_IF_ERROR(dst.AllocateQuant(format, count, rows, cols, kBlock, kBlock));
    const kernels::QuantMatrix& q = dst.quant();
    fill_random_e4m3(dst.data(), count * q.data_bytes(), -kE4m3Max, kE4m3Max, seed_++, stream_);
    fill_constant_f32(dst.scales(), count * q.scale_stride(), s / kE4m3Max, stream_);
    return absl::OkStatus();
  }
  // NVFP4: every e2m1 code alike (mean square 8.5625), group scales uniform in [1, 2) (mean square
  // 7/3); the row scale brings the mean square to s^2 / 3, the uniform bf16 weights' own.
  RETURN_IF_ERROR(dst.AllocateQuant(format, count, rows, cols));
  const kernels::QuantMatrix& q = dst.quant();
  fill_random_bytes(dst.data(), count * q.data_bytes(), seed_++, stream_);
  fill_random_e4m3(dst.group_scales(), count * q.group_scale_stride(), 1.0f, 2.0f, seed_++, stream_);
  fill_constant_f32(dst.row_scale2(), count * q.row_scale2_stride(), s / std::sqrt(3.0f * 8.5625f * 7.0f / 3.0f),
                    stream_);
  return absl::OkStatus();
}

absl::Status RandomWeights::ReadNorm(const WeightSpec& spec, DeviceArray<bf16_bits>& dst, bool zero_centered) {
  RETURN_IF_ERROR(dst.Allocate(spec.numel()));
  fill_constant_bf16(dst.get(), spec.numel(), zero_centered ? 0.0f : 1.0f, stream_);
  return absl::OkStatus();
}

absl::Status RandomWeights::Fill(DeviceArray<bf16_bits>& dst, int64_t n, int64_t fan_in) {
  RETURN_IF_ERROR(dst.Allocate(n));
  fill_random_bf16(dst.get(), n, std::sqrt(3.0f / static_cast<float>(fan_in)), seed_++, stream_);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The step

bool StepContext::NormMatmul(float* y, const float* delta, const bf16_bits* norm_w, const bf16_bits* w, int64_t out,
                             bool keep_xn, bool float_input, float* xn_split) {
  const int64_t T = m.T;
  // From kMatmulBatchedMinTokens the product takes the tensor cores (matmul_bf16 -> matmul_batched),
  // which have no fused norm: the norm runs first, in place, as on prefill steps.
  const bool batched = !float_input && T >= kernels::kMatmulBatchedMinTokens &&
                       kernels::MatmulBatchedSupported(hidden, out) && !GemmPath(T);
  if (fuse && !batched) {
    const bool split = xn_split != nullptr && T == 1 && hidden % 32 == 0;
    kernels::add_rmsnorm_matmul(y, x_next, keep_xn ? a->xn.get() : nullptr, x, delta, norm_w, w, T, hidden, out, eps,
                                stream, norm_offset, split ? xn_split : nullptr);
    std::swap(x, x_next);
    return split;
  } else {
    kernels::add_rmsnorm(a->xn.get(), x, delta, norm_w, T, hidden, eps, stream, norm_offset);
    if (float_input) {
      kernels::matmul_bf16_float_input(y, a->xn.get(), w, T, hidden, out, stream, gemm_min_tokens);
    } else {
      kernels::matmul_bf16(y, a->xn.get(), w, T, hidden, out, stream, gemm_min_tokens);
    }
    return false;
  }
}

absl::Status StepContext::NormMatmul(float* y, const float* delta, const bf16_bits* norm_w, const LinearWeight& w,
                                     bool keep_xn) {
  if (!w.quantized()) {
    NormMatmul(y, delta, norm_w, w.bf16(), w.rows(), keep_xn);
    return absl::OkStatus();
  }
  // No fused form: the residual is updated in place (x stays the residual, as on unfused steps;
  // x_next is only the fused kernels' second buffer), xn always kept, then the product.
  Norm(delta, norm_w);
  return Matmul(y, a->xn.get(), w);
}

absl::Status StepContext::Matmul(float* y, const float* x_in, const LinearWeight& w) const {
  return LinearMatmul(y, x_in, w, m.T, dequant, stream, gemm_min_tokens);
}

void StepContext::Norm(const float* delta, const bf16_bits* norm_w) {
  kernels::add_rmsnorm(a->xn.get(), x, delta, norm_w, m.T, hidden, eps, stream, norm_offset);
}

// ---------------------------------------------------------------------------------------------
// Attention

absl::StatusOr<std::unique_ptr<Attention>> Attention::Load(WeightSource& src, const AttentionWeightSpec& spec,
                                                           const ModelConfig& cfg, const TpShard& shard,
                                                           int64_t kv_layer) {
  auto a = std::make_unique<Attention>();
  a->L_ = kernels::QkvLayout{shard.n_heads, shard.n_kv_heads, cfg.head_dim, cfg.RotaryDim()};
  a->kv_layer_ = kv_layer;
  WeightSpec wqkv = spec.wqkv;
  if (cfg.attention_output_gate) {  // the gate rows after v's: one product gives [q | k | v | gate]
    if (spec.gate.numel() != a->L_.q_dim() * cfg.hidden_size) {
      return absl::InternalError("attention output gate has " + std::to_string(spec.gate.numel()) + " values, want " +
                                 std::to_string(a->L_.q_dim() * cfg.hidden_size));
    }
    a->L_.gate_dim = a->L_.q_dim();
    wqkv = AppendSpec(std::move(wqkv), spec.gate);
  }
  RETURN_IF_ERROR(src.ReadLinear(wqkv, a->wqkv_));
  RETURN_IF_ERROR(src.ReadLinear(spec.wo, a->wo_));
  RETURN_IF_ERROR(src.ReadNorm(spec.q_norm, a->q_norm_, cfg.zero_centered_norms));
  RETURN_IF_ERROR(src.ReadNorm(spec.k_norm, a->k_norm_, cfg.zero_centered_norms));
  return a;
}

// The split tensor-core kernel (kernels/attention_decode.h) reads each K/V tile once for a kv head's
// group of q heads, where paged_attention reads it once per q head, and spreads a sequence's
// positions over several blocks. Same-run A/Bs on the H200 (docs/bench/decode-h200.md):
//  - batch 8 / 32 (session 19, against the unsplit tiled kernel): ctx 4k 12.37 / 31.66 ms per step
//    against 15.31 / 32.44-32.75; ctx 1k within the spread at 8, 1% slower at 32.
//  - batch 2-7 (session 22, with the cluster merge, against paged_attention): batch 4 at ctx 4k
//    8.28-8.43 ms against 11.43-11.52, at 1k 7.96-8.07 against 8.36-8.48; batch 2 at 4k 5.29-5.36
//    against 6.51-6.58, at 1k within the spread.
//  - batch 1 (session 22): with the cluster merge and every kernel of the step asking for the
//    largest shared memory (CudaModel::RunLayers), ctx 4k 3.17-3.22 ms against 3.65-3.69 (FP8
//    weights 2.73-2.80 against 3.21-3.29), but ctx 1k 2.99-3.02 against 2.96-3.00 (FP8 2.53-2.57
//    against 2.44-2.48); without that carveout 3.13-3.20 at 1k. Over an fp8 cache: ctx 1k 3.04-3.05
//    ms against paged_attention's 3.51-3.56.
//  - batch 1 (session 32, one H100): with a split that holds one attention block an SM and leaves
//    the rest to L1 (kernels/carveout.h kFitDecodeAttention) instead of the largest shared memory,
//    ctx 1k bf16 3.237 ms against paged_attention's 3.388 (FP8 weights 2.305 against 2.441, NVFP4
//    2.508 against 2.631), ctx 4k 3.450 against the max-shared split's 3.616. So batch 1 takes it
//    at every width too (until session 32 only past a 2048-position table over a bf16 cache).
// A float32 cache keeps paged_attention (the tensor cores would round its K and V to bf16, which a
// bf16 cache measured above the float32 golden bound: docs/cuda.md).
bool DecodeTakesSplitAttention(const StepContext& ctx, const kernels::AttentionShape& A) {
  return !ctx.paged_decode_attention && ctx.Decode() && ctx.kv_dtype != KvDtype::kF32 &&
         kernels::attention_decode_supported(A);
}

template <typename KV>
void Attention::Attend(StepContext& ctx, KV* k_cache, KV* v_cache) {
  const StepMeta& m = ctx.m;
  Activations& a = *ctx.a;
  const kernels::AttentionShape A = AttentionShapeOf(L_, ctx.block_size, m.max_blocks);
  const float scale = 1.0f / std::sqrt(static_cast<float>(L_.head_dim));
  const kernels::KvScale kv_scale = ctx.kv_scales != nullptr ? ctx.kv_scales[kv_layer_] : kernels::KvScale{};
  kernels::qk_norm_rope_store_kv(a.qkv.get(), k_cache, v_cache, q_norm_.get(), k_norm_.get(), ctx.inv_freq,
                                 ctx.meta + m.pos(), ctx.meta + m.slot(), m.T, L_, ctx.eps, ctx.stream,
                                 ctx.norm_offset, kv_scale);
  // Prefill-sized steps (never captured): tiled attention on the tensor cores, one pass over each
  // sequence's K/V per tile of tokens and kv head, where the shape allows (kernels/attention_prefill.h).
  // The first S tokens go through paged_attention before it: the sequences lying wholly among them
  // (a mixed step puts its decodes first) keep its split of a long context across blocks, which the
  // tiled kernel would walk in one block per kv head, and the tiled kernel leaves them alone. Only
  // where the scratch reserved for T tokens holds that launch's partitions (it always does unless
  // a rank has very few heads). A float32 cache keeps paged_attention: the tensor cores would round
  // its K and V to bf16, which a bf16 cache measured above the float32 golden bound (docs/cuda.md).
  constexpr bool kRoundsCache = std::is_same_v<KV, float>;
  // Decode steps (one token per sequence) take the split tensor-core kernel where
  // DecodeTakesSplitAttention says so (its comment has the A/Bs); the others paged_attention.
  // Other small multi-token steps (several tokens of a sequence, below the prefill threshold) of
  // kTiledDecodeMinTokens or more take the unsplit tiled kernel, every sequence of them (no paged
  // head); before the split kernel it took the decode batches too: batch 8 / 24 / 32 at ctx 1k
  // 11.39 / 24.88 / 28.25 ms against paged_attention's 12.31 / 30.35 / 36.40.
  constexpr int64_t kTiledDecodeMinTokens = 8;
  const bool prefill = ctx.GemmPath(m.T);
  if constexpr (!kRoundsCache) {
    if (DecodeTakesSplitAttention(ctx, A)) {
      kernels::attention_decode(a.att.get(), a.attn_scratch.get(), a.attn_counters.get(), a.qkv.get(), k_cache,
                                v_cache, ctx.meta + m.tables(), ctx.meta + m.pos(), m.T, A, ctx.max_positions, scale,
                                ctx.stream, kv_scale, ctx.decode_attention_buffers);
      return;
    }
  }
  if (!kRoundsCache && (prefill || m.T >= kTiledDecodeMinTokens) && kernels::attention_prefill_supported(A)) {
    int64_t head = prefill && m.S > 1 ? std::min(m.T, m.S) : 0;
    if (kernels::attention_scratch_floats(head, A, ctx.max_positions) >
        kernels::attention_scratch_floats(m.T, A, ctx.max_positions)) {
      head = 0;
    }
    if (head > 0) {
      kernels::paged_attention(a.att.get(), a.attn_scratch.get(), a.attn_counters.get(), a.qkv.get(), k_cache, v_cache,
                               ctx.meta + m.tables(), ctx.meta + m.token_seq(), ctx.meta + m.pos(), head, A,
                               ctx.max_positions, scale, ctx.stream, kv_scale);
    }
    kernels::attention_prefill(a.att.get(), a.qkv.get(), k_cache, v_cache, ctx.meta + m.tables(), ctx.meta + m.pos(),
                               ctx.meta + m.seq_starts(), m.T, m.S, A, scale, ctx.stream, kv_scale, head);
    return;
  }
  // A decode step lets its blocks load the K/V of earlier steps before waiting for
  // qk_norm_rope_store_kv (kernels/attention.h).
  kernels::paged_attention(a.att.get(), a.attn_scratch.get(), a.attn_counters.get(), a.qkv.get(), k_cache, v_cache,
                           ctx.meta + m.tables(), ctx.meta + m.token_seq(), ctx.meta + m.pos(), m.T, A,
                           ctx.max_positions, scale, ctx.stream, kv_scale, /*one_token_per_sequence=*/ctx.Decode());
}

absl::Status Attention::Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) {
  Activations& a = *ctx.a;
  // h = x + o_proj(attn(norm(x))); the previous sublayer's output is added to x here.
  RETURN_IF_ERROR(ctx.NormMatmul(a.qkv.get(), delta, norm_w, wqkv_, /*keep_xn=*/false));
  const int64_t layer_bytes = kv_layer_ * ctx.kv_slots * L_.kv_dim() * KvDtypeBytes(ctx.kv_dtype);
  uint8_t* kc = ctx.k_cache + layer_bytes;
  uint8_t* vc = ctx.v_cache + layer_bytes;
  switch (ctx.kv_dtype) {
    case KvDtype::kF32: Attend(ctx, reinterpret_cast<float*>(kc), reinterpret_cast<float*>(vc)); break;
    case KvDtype::kBf16: Attend(ctx, reinterpret_cast<bf16_bits*>(kc), reinterpret_cast<bf16_bits*>(vc)); break;
    case KvDtype::kFp8:
      Attend(ctx, reinterpret_cast<kernels::fp8_e4m3*>(kc), reinterpret_cast<kernels::fp8_e4m3*>(vc));
      break;
  }
  if (L_.gate_dim > 0) {  // gated: each head's output times sigmoid(its gate), read from the qkv rows
    kernels::sigmoid_gate(a.att.get(), a.qkv.get() + L_.gate_offset(), ctx.m.T, L_.q_dim(), L_.row(), ctx.stream);
  }
  // o_proj is row-parallel: this rank's heads give a partial sum, all-reduced by the model.
  return ctx.Matmul(a.delta.get(), a.att.get(), wo_);
}

// ---------------------------------------------------------------------------------------------
// Dense MLP and routed experts

absl::StatusOr<std::unique_ptr<DenseMlp>> DenseMlp::Load(WeightSource& src, const MlpWeightSpec& spec,
                                                         const ModelConfig& cfg, const TpShard& shard) {
  auto m = std::make_unique<DenseMlp>();
  m->inter_ = shard.inter;
  RETURN_IF_ERROR(src.ReadLinear(spec.gate_up, m->gate_up_));
  RETURN_IF_ERROR(src.ReadLinear(spec.down, m->down_));
  return m;
}

absl::Status DenseMlp::Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) {
  Activations& a = *ctx.a;
  const int64_t T = ctx.m.T, I = inter_;
  ctx.Norm(delta, norm_w);
  float* gate_up = a.act.get();        // (T, 2 I)
  float* act = gate_up + 2 * T * I;    // (T, I)
  RETURN_IF_ERROR(ctx.Matmul(gate_up, a.xn.get(), gate_up_));
  kernels::silu_mul(act, gate_up, T, I, ctx.stream);
  return ctx.Matmul(a.delta.get(), act, down_);
}

absl::StatusOr<std::unique_ptr<MoeFfn>> MoeFfn::Load(WeightSource& src, const MoeWeightSpec& spec,
                                                     const ModelConfig& cfg, const TpShard& shard) {
  auto m = std::make_unique<MoeFfn>();
  m->num_experts_ = cfg.num_experts;
  m->top_k_ = cfg.num_experts_per_tok;
  m->inter_ = shard.moe_inter;
  m->norm_topk_prob_ = cfg.norm_topk_prob;
  // The shared expert runs as one more expert of the MoE kernels (expert E, always chosen, weight
  // sigmoid(gate . xn)): its gate row goes under the router's rows, its gate_up and down after the
  // experts', so the router product, top-k and the two expert kernels do its work in launches they
  // make anyway. (Its own four kernels per layer measured 11% slower at batch 1 on Qwen3.5-35B-A3B
  // shapes: docs/bench/hybrid-decode-h200.md.) CheckSupported requires its slice as wide as an expert's.
  m->shared_as_expert_ = spec.shared;
  // (E, ...) + one expert; the router's (E, H) + the gate's one row.
  auto with_shared = [&](const WeightSpec& experts, const WeightSpec& shared) {
    return spec.shared ? AppendSpec(experts, shared) : experts;
  };
  RETURN_IF_ERROR(src.Read(with_shared(spec.router, spec.shared_expert.gate), m->router_));
  for (auto [experts, shared, dst] : {std::tuple{&spec.gate_up, &spec.shared_expert.gate_up, &m->gate_up_},
                                      std::tuple{&spec.down, &spec.shared_expert.down, &m->down_}}) {
    const absl::Status st = src.ReadLinear(with_shared(*experts, *shared), *dst);
    if (!st.ok() && spec.shared) {  // a mixed format names an expert's tensor and the shared expert's
      return absl::Status(st.code(), std::string(st.message()) +
                                         " (the shared expert runs as one more expert: its weights must be in the "
                                         "experts' format)");
    }
    RETURN_IF_ERROR(st);
  }
  // One path per layer: the quantized kernels (or the dequantized stacks) for both products.
  if (m->gate_up_.format() != m->down_.format()) {
    return absl::UnimplementedError("cuda backend: experts' gate/up and down projections in different formats");
  }
  return m;
}

absl::Status MoeFfn::Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) {
  Activations& a = *ctx.a;
  const int64_t T = ctx.m.T, H = ctx.hidden, E = num_experts_, K = top_k_, I = inter_;
  // The router product normalises (and keeps xn for the experts); its input stays float32 on prefill
  // steps too: rounded to bf16 it flips top-k near-ties (the tiny hybrids' 33-token prompt: 8% of the
  // largest logit off the golden, against 0.3% with a float32 router input). Prefill steps take the
  // tensor cores with xn split into bf16 hi + lo (kernels/matmul.h matmul_bf16_float_input).
  // With the shared expert as expert E: E + 1 logits, K + 1 experts per token.
  const int64_t Es = E + (shared_as_expert_ ? 1 : 0), Ks = K + (shared_as_expert_ ? 1 : 0);
  // One-token steps with NVFP4 experts: the router's kernel also leaves xn in split order, which
  // their gate/up reads with contiguous loads (kernels/split_order.h).
  const bool want_split = T == 1 && gate_up_.format() == kernels::WeightFormat::kNvfp4;
  const bool split = ctx.NormMatmul(a.router_logits.get(), delta, norm_w, router_.get(), Es, /*keep_xn=*/true,
                                    /*float_input=*/true, want_split ? a.xn_split.get() : nullptr);
  kernels::router_topk(a.expert_ids.get(), a.expert_w.get(), a.router_logits.get(), T, E, K, norm_topk_prob_,
                       ctx.stream, shared_as_expert_);
  // Decode batches from MoeBatchedMinTokens (by format): each chosen expert read once for all of its
  // tokens.
  const bool batched = T >= kernels::MoeBatchedMinTokens(gate_up_.format()) && T <= kernels::kMoeBatchedMaxTokens &&
                       kernels::MoeBatchedSupported(H, I) && !ctx.GemmPath(T) &&
                       a.moe_batch.size() * 4 >= static_cast<int64_t>(kernels::MoeBatchedScratchBytes(T, Ks, H, I));
  if (!gate_up_.quantized() && !down_.quantized() && batched) {
    kernels::moe_batched(a.delta.get(), a.act.get(), a.xn.get(), a.expert_ids.get(), a.expert_w.get(), gate_up_.bf16(),
                         down_.bf16(), T, Ks, H, I, Es, a.moe_batch.get(), ctx.stream);
  } else if (!gate_up_.quantized() && !down_.quantized()) {
    // Prefill: both grouped GEMMs in one call (one sort, the activations passed on in bf16) where
    // the sizes allow it; otherwise the two products, each choosing its own kernel.
    if (!ctx.GemmPath(T) || !kernels::moe_grouped(a.delta.get(), a.xn.get(), a.expert_ids.get(), a.expert_w.get(),
                                                  gate_up_.bf16(), down_.bf16(), T, Ks, H, I, ctx.stream)) {
      kernels::moe_gate_up(a.act.get(), a.xn.get(), a.expert_ids.get(), gate_up_.bf16(), T, Ks, H, I, ctx.stream,
                           ctx.gemm_min_tokens, ctx.next_weights);
      kernels::moe_down(a.delta.get(), a.act.get(), a.expert_ids.get(), a.expert_w.get(), down_.bf16(), T, Ks, H, I,
                        ctx.stream, /*follows_gate_up=*/true, ctx.gemm_min_tokens);
    }
  } else if (batched && kernels::MoeBatchedQuantSupported(gate_up_.quant(), down_.quant(), H, I)) {
    // Quantized decode batches: each chosen expert read once, widened to bf16 for the tensor cores.
    kernels::moe_batched_quant(a.delta.get(), a.act.get(), a.xn.get(), a.expert_ids.get(), a.expert_w.get(),
                               gate_up_.quant(), down_.quant(), T, Ks, H, I, a.moe_batch.get(), ctx.stream);
  } else if (!ctx.GemmPath(T)) {  // decode: the weights dequantized in registers
    // With xn in split order the NVFP4 one-token gate/up leaves act in split order too, which down reads
    // with contiguous loads.
    const bool act_split = split && kernels::moe_act_split(gate_up_.quant(), down_.quant(), T);
    kernels::moe_gate_up_quant(a.act.get(), a.xn.get(), a.expert_ids.get(), gate_up_.quant(), T, Ks, ctx.stream,
                               ctx.next_weights, split ? a.xn_split.get() : nullptr, act_split);
    kernels::moe_down_quant(a.delta.get(), a.act.get(), a.expert_ids.get(), a.expert_w.get(), down_.quant(), T, Ks,
                            ctx.stream, /*follows_gate_up=*/true, act_split);
  } else if (ctx.dequant.split) {
    // Float32-grade prefill: each stack as bf16 hi + lo in the scratch (gate_up's consumed before
    // down's overwrites it), the grouped GEMMs splitting the activations too. Where the grouped
    // kernels do not take the sizes (H or I not a multiple of 64), the quantized kernels, which are
    // exact as well.
    ASSIGN_OR_RETURN(const SplitWeight gate_up, DequantizeSplitToScratch(gate_up_, ctx.dequant, ctx.stream));
    if (!kernels::moe_gate_up_grouped(a.act.get(), a.xn.get(), a.expert_ids.get(), gate_up.hi, T, Ks, H, I,
                                      ctx.stream, gate_up.lo)) {
      kernels::moe_gate_up_quant(a.act.get(), a.xn.get(), a.expert_ids.get(), gate_up_.quant(), T, Ks, ctx.stream);
    }
    ASSIGN_OR_RETURN(const SplitWeight down, DequantizeSplitToScratch(down_, ctx.dequant, ctx.stream));
    if (!kernels::moe_down_grouped(a.delta.get(), a.act.get(), a.expert_ids.get(), a.expert_w.get(), down.hi, T, Ks,
                                   H, I, ctx.stream, down.lo)) {
      kernels::moe_down_quant(a.delta.get(), a.act.get(), a.expert_ids.get(), a.expert_w.get(), down_.quant(), T, Ks,
                              ctx.stream, /*follows_gate_up=*/false);
    }
  } else {
    // Prefill: each stack once to bf16 in the scratch (gate_up's consumed before down's overwrites
    // it: one stream), then the bf16 grouped GEMMs.
    ASSIGN_OR_RETURN(const bf16_bits* gate_up, DequantizeToScratch(gate_up_, ctx.dequant, ctx.stream));
    kernels::moe_gate_up(a.act.get(), a.xn.get(), a.expert_ids.get(), gate_up, T, Ks, H, I, ctx.stream,
                         ctx.gemm_min_tokens);
    ASSIGN_OR_RETURN(const bf16_bits* down, DequantizeToScratch(down_, ctx.dequant, ctx.stream));
    kernels::moe_down(a.delta.get(), a.act.get(), a.expert_ids.get(), a.expert_w.get(), down, T, Ks, H, I,
                      ctx.stream, /*follows_gate_up=*/false, ctx.gemm_min_tokens);
  }
  if (ctx.ids_per_layer != nullptr) {
    std::vector<int32_t> ids(T * Ks);
    RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(ids.data(), a.expert_ids.get(), T * Ks * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, ctx.stream),
                               "expert ids"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(ctx.stream), "expert ids"));
    std::set<int32_t> routed(ids.begin(), ids.end());
    routed.erase(static_cast<int32_t>(E));  // the shared expert is counted with the weights read every step
    ctx.ids_per_layer->push_back(static_cast<int32_t>(routed.size()));
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine::cuda
