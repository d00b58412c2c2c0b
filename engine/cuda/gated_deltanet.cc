#include "engine/cuda/gated_deltanet.h"

#include <string>
#include <utility>

#include "common/status.h"
#include "engine/model/quant_pack.h"

namespace tandem::engine::cuda {

namespace {

// Steps of at least this many tokens run the chunked form of the recurrence (a prefill chunk);
// smaller ones (decode batches, short chunks) step token by token, which is graph-capturable too.
constexpr int64_t kChunkedMinTokens = 64;

// Activations::linear per token, each region a multiple of 4 floats (16-byte aligned for the
// products): proj (proj_row) | qkv (conv_dim) | g (n_v) | beta (n_v) | o (value_dim).
int64_t Aligned(int64_t n) { return (n + 3) / 4 * 4; }

struct Scratch {
  float *proj, *qkv, *g, *beta, *o;
};

Scratch Carve(float* base, const kernels::DeltaNetLayout& L, int64_t T) {
  Scratch s;
  s.proj = base;
  s.qkv = s.proj + Aligned(T * L.proj_row());
  s.g = s.qkv + Aligned(T * L.conv_dim());
  s.beta = s.g + Aligned(T * L.n_v);
  s.o = s.beta + Aligned(T * L.n_v);
  return s;
}

}  // namespace

kernels::DeltaNetLayout GatedDeltaNet::Layout(const ModelConfig& cfg, const TpShard& shard) {
  return {shard.n_linear_k_heads, shard.n_linear_v_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim,
          cfg.linear_conv_kernel_dim};
}

int64_t GatedDeltaNet::ScratchFloats(const kernels::DeltaNetLayout& L, int64_t T) {
  if (L.n_v == 0) return 0;
  return Aligned(T * L.proj_row()) + Aligned(T * L.conv_dim()) + 2 * Aligned(T * L.n_v) + Aligned(T * L.value_dim());
}

absl::StatusOr<std::unique_ptr<GatedDeltaNet>> GatedDeltaNet::Load(WeightSource& src,
                                                                    const LinearAttentionWeightSpec& spec,
                                                                    const ModelConfig& cfg, const TpShard& shard) {
  auto m = std::make_unique<GatedDeltaNet>();
  const kernels::DeltaNetLayout L = Layout(cfg, shard);
  if (!kernels::DeltaNetSupported(L)) {
    return absl::UnimplementedError(
        "cuda gated deltanet: unsupported heads (n_k " + std::to_string(L.n_k) + ", n_v " + std::to_string(L.n_v) +
        ", dk " + std::to_string(L.dk) + ", dv " + std::to_string(L.dv) + ", conv kernel " +
        std::to_string(L.conv_kernel) + "; the kernels take dk, dv <= 256, conv kernel <= 8)");
  }
  m->L_ = L;
  m->hidden_ = cfg.hidden_size;
  m->eps_ = static_cast<float>(cfg.rms_norm_eps);
  const int64_t H = cfg.hidden_size;
  // One product for the four input projections: their slices packed as one weight, rows
  // qkv | z | b | a; two (qkv | z, then b | a) when b | a are in another format.
  const WeightSpec qkvz = AppendSpec(spec.in_qkv, spec.in_z), ba = AppendSpec(spec.in_b, spec.in_a);
  const WeightSpec* got[] = {&spec.in_qkv, &spec.in_z,    &spec.in_b, &spec.in_a, &spec.conv,
                             &spec.a_log,  &spec.dt_bias, &spec.norm, &spec.out};
  const auto want = kernels::DeltaNetWeightSizes(L, H);
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i]->numel() != want[i].size) {
      return absl::InternalError("cuda gated deltanet: weight " + std::string(want[i].name) + " has " +
                                 std::to_string(got[i]->numel()) + " values, want " + std::to_string(want[i].size));
    }
  }
  ASSIGN_OR_RETURN(const kernels::WeightFormat qkvz_format, src.LinearFormat(qkvz, /*random_quantized=*/true));
  ASSIGN_OR_RETURN(const kernels::WeightFormat ba_format, src.LinearFormat(ba, /*random_quantized=*/false));
  m->split_in_ = qkvz_format != ba_format;
  if (m->split_in_) {
    RETURN_IF_ERROR(src.ReadLinear(qkvz, m->w_in_, /*random_quantized=*/true));
    RETURN_IF_ERROR(src.ReadLinear(ba, m->w_ba_, /*random_quantized=*/false));
  } else {
    RETURN_IF_ERROR(src.ReadLinear(AppendSpec(qkvz, ba), m->w_in_, /*random_quantized=*/true));
  }
  RETURN_IF_ERROR(src.Read(spec.conv, m->conv_));
  RETURN_IF_ERROR(src.Read(spec.a_log, m->a_log_));
  RETURN_IF_ERROR(src.Read(spec.dt_bias, m->dt_bias_));
  RETURN_IF_ERROR(src.Read(spec.norm, m->norm_));  // plain w (not zero-centred), as the cpu backend reads it
  RETURN_IF_ERROR(src.ReadLinear(spec.out, m->out_));
  return m;
}

int64_t GatedDeltaNet::state_bytes_per_slot() const {
  return static_cast<int64_t>(sizeof(float)) * (L_.conv_state_size() + L_.state_size());
}

absl::Status GatedDeltaNet::AllocateStates(int32_t slots) {
  conv_states_.Free();
  states_.Free();
  if (slots <= 0) return absl::OkStatus();
  RETURN_IF_ERROR(conv_states_.Allocate(slots * L_.conv_state_size()));
  RETURN_IF_ERROR(states_.Allocate(slots * L_.state_size()));
  // Zeroed, although a sequence starting at position 0 never reads its slot's old contents.
  // cudaMemset runs on the legacy stream, which the model's non-blocking stream does not wait for.
  RETURN_IF_ERROR(CudaStatus(cudaMemset(conv_states_.get(), 0, conv_states_.size() * sizeof(float)), "conv states"));
  RETURN_IF_ERROR(CudaStatus(cudaMemset(states_.get(), 0, states_.size() * sizeof(float)), "recurrent states"));
  return CudaStatus(cudaDeviceSynchronize(), "zero states");
}

absl::Status GatedDeltaNet::CopyState(int32_t src, int32_t dst, cudaStream_t stream) {
  if (states_.get() == nullptr) return absl::FailedPreconditionError("gated deltanet: CopyState before AllocateStates");
  const int64_t c = L_.conv_state_size(), n = L_.state_size();
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(conv_states_.get() + dst * c, conv_states_.get() + src * c,
                                             c * sizeof(float), cudaMemcpyDeviceToDevice, stream),
                             "copy conv state"));
  return CudaStatus(cudaMemcpyAsync(states_.get() + dst * n, states_.get() + src * n, n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream),
                    "copy recurrent state");
}

absl::Status GatedDeltaNet::Forward(StepContext& ctx, const float* delta, const bf16_bits* norm_w) {
  const StepMeta& m = ctx.m;
  const int64_t T = m.T;
  if (states_.get() == nullptr) return absl::FailedPreconditionError("gated deltanet: Forward before AllocateStates");
  if (ctx.a->linear.size() < ScratchFloats(L_, T)) {
    return absl::InternalError("gated deltanet: the step's scratch was not reserved");
  }
  const Scratch s = Carve(ctx.a->linear.get(), L_, T);
  if (split_in_) {
    RETURN_IF_ERROR(SplitInProj(ctx, s.proj, s.qkv, ctx.a->linear.get() + ctx.a->linear.size(), delta, norm_w));
  } else {
    RETURN_IF_ERROR(ctx.NormMatmul(s.proj, delta, norm_w, w_in_, /*keep_xn=*/false));
  }
  const kernels::DeltaNetStep st{ctx.meta + m.pos(), ctx.meta + m.state_slots(), ctx.meta + m.seq_starts(), T, m.S};
  kernels::gated_deltanet_prepare(s.qkv, s.g, s.beta, conv_states_.get(), s.proj, conv_.get(), a_log_.get(),
                                  dt_bias_.get(), st, L_, ctx.stream);
  if (T >= kChunkedMinTokens && kernels::DeltaNetChunkedSupported(L_)) {
    kernels::gated_deltanet_chunked(s.o, states_.get(), s.qkv, s.g, s.beta, st, L_, ctx.stream);
  } else {
    kernels::gated_deltanet_recurrent(s.o, states_.get(), s.qkv, s.g, s.beta, st, L_, ctx.stream);
  }
  // The output norm per value head, gated by silu(z) (z: the proj rows' second part), in place.
  kernels::gated_deltanet_norm(s.o, s.o, norm_.get(), s.proj + L_.conv_dim(), L_.proj_row(), T, L_, eps_,
                               ctx.stream);
  // out_proj is row-parallel: this rank's value heads give a partial sum, all-reduced by the model.
  return ctx.Matmul(ctx.a->delta.get(), s.o, out_);
}

absl::Status GatedDeltaNet::SplitInProj(StepContext& ctx, float* proj, float* free_begin, float* free_end,
                                        const float* delta, const bf16_bits* norm_w) {
  // The two products go to the scratch after proj (prepare writes it only later), then their rows
  // are interleaved into proj's [qkv | z | b | a] by two pitched copies: exact, and graph-capturable.
  const int64_t T = ctx.m.T, qkvz_rows = w_in_.rows(), ba_rows = w_ba_.rows();
  float* qkvz = free_begin;
  float* ba = qkvz + Aligned(T * qkvz_rows);
  if (ba + T * ba_rows > free_end) return absl::InternalError("gated deltanet: scratch too small for the split in_proj");
  RETURN_IF_ERROR(ctx.NormMatmul(qkvz, delta, norm_w, w_in_, /*keep_xn=*/true));
  RETURN_IF_ERROR(ctx.Matmul(ba, ctx.a->xn.get(), w_ba_));
  const size_t pitch = L_.proj_row() * sizeof(float);
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy2DAsync(proj, pitch, qkvz, qkvz_rows * sizeof(float), qkvz_rows * sizeof(float),
                                               T, cudaMemcpyDeviceToDevice, ctx.stream),
                             "in_proj qkv|z rows"));
  return CudaStatus(cudaMemcpy2DAsync(proj + qkvz_rows, pitch, ba, ba_rows * sizeof(float), ba_rows * sizeof(float), T,
                                      cudaMemcpyDeviceToDevice, ctx.stream),
                    "in_proj b|a rows");
}

}  // namespace tandem::engine::cuda
