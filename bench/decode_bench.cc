#include "bench/decode_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bench/decode_bytes.h"
#include "bench/synthetic_configs.h"
#include "common/status.h"
#include "engine/comm/store.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_collectives.h"
#include "engine/cuda/gated_deltanet.h"
#include "engine/cuda/nccl_comm.h"
#include "engine/cuda/random_fill.h"
#include "engine/model/tp_shard.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/gated_deltanet.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"

namespace tandem::bench {

using namespace engine;  // the model, step and comm types
using namespace engine::cuda;

namespace {

absl::Status CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string("bench: ") + what + ": " + cudaGetErrorString(e));
}

struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Spread s;
  s.min = v.front();
  s.max = v.back();
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

std::string Fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

// Device-to-device copy bandwidth (bytes read + bytes written per second), median of 10 copies of
// 2 GiB after a warm-up: the ceiling a memory-bound decode step is compared with.
Spread CopyBandwidthGBs() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> gbs;
  for (int i = 0; i < 13; ++i) {
    CUDA_CHECK(cudaEventRecord(e0));
    CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 3) gbs.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return Summarize(gbs);
}

// B sequences, one decode token each at position ctx (+ step), with disjoint block tables.
StepBatch DecodeBatch(int B, int ctx, int step, int block_size, int blocks_per_seq) {
  StepBatch batch;
  for (int s = 0; s < B; ++s) {
    SeqChunk c;
    c.seq_id = s;
    c.tokens = {(s * 7919 + step * 104729) % 150000};
    c.start_pos = ctx + step;
    for (int b = 0; b < blocks_per_seq; ++b) c.block_table.push_back(s * blocks_per_seq + b);
    c.want_logits = true;
    c.state_slot = s;  // a hybrid's DeltaNet state (ignored by models without one)
    batch.seqs.push_back(std::move(c));
  }
  (void)block_size;
  return batch;
}

// One decode kernel alone at batch 1, over enough copies of its inputs (> 256 MB in all) that each
// launch reads device memory, not L2: median microseconds per launch and GB/s of its bytes.
struct KernelTiming {
  std::string name;
  double bytes = 0, us = 0;
};

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
  return {name, bytes, Summarize(us).median};
}

std::string Dims(int64_t rows, int64_t cols) { return std::to_string(rows) + " x " + std::to_string(cols); }

// The decode products of the whole model at batch 1 (TP 1 shapes), each kernel alone: the mixers'
// projections (gated full attention's q rows include the gate rows; a Gated DeltaNet layer's
// in_proj is qkv | z | b | a, one product), router, routed experts (with the shared expert as one
// more, as MoeFfn runs it), lm_head, attention.
std::vector<KernelTiming> DecodeKernelTimings(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.num_experts, K = c.num_experts_per_tok;
  const int64_t qd = c.num_attention_heads * c.head_dim, kvd = c.num_key_value_heads * c.head_dim;
  const int64_t q_rows = c.attention_output_gate ? 2 * qd : qd;
  // The Gated DeltaNet's heads at TP 1, as the engine lays them out (no heads: not a hybrid).
  const kernels::DeltaNetLayout L = GatedDeltaNet::Layout(c, ComputeTpShard(c, 0, 1));
  const bool hybrid = L.n_v > 0;
  const int64_t lin_v = L.value_dim(), lin_proj = L.proj_row();
  const int64_t S = c.shared_expert_intermediate_size;
  // The shared expert (as wide as an expert: cuda::CheckSupported) is expert E, picked by every token.
  const int64_t shared = S > 0 ? 1 : 0, Es = E + shared, Ks = K + shared;
  std::vector<KernelTiming> out;
  auto buf = [](int64_t bf16_elems) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bf16_elems * 2));
    fill_random_bf16(static_cast<kernels::bf16_bits*>(p), bf16_elems, 0.05f, 7, nullptr);
    return p;
  };
  // Inputs: the widest of x (hidden, q heads, DeltaNet values, shared expert), the experts'
  // activations (K x 2 I) and the routing weights; outputs up to the vocabulary.
  const int64_t in_floats = std::max({4 * 8 * I + 4 * H, 2 * Ks * I + H + Ks, 2 * qd + 2 * kvd, lin_v});
  float* x = static_cast<float*>(buf(2 * in_floats));  // floats as bf16 pairs
  float* y = static_cast<float*>(buf(2 * std::max<int64_t>(c.vocab_size, 2 * Ks * I + lin_proj)));
  auto matvec = [&](const std::string& what, int64_t rows, int64_t in) {
    const int64_t elems = rows * in;
    const int copies = static_cast<int>(std::max<int64_t>(1, (256 << 20) / (2 * elems) + 1));
    auto* w = static_cast<kernels::bf16_bits*>(buf(elems * copies));
    out.push_back(TimeKernel("matmul " + what + " (" + Dims(rows, in) + ")", 2.0 * elems, copies, [&](int i) {
      kernels::matmul_bf16(y, x, w + i * elems, 1, in, rows, nullptr);
    }));
    cudaFree(w);
  };
  matvec(c.attention_output_gate ? "q+gate, k, v" : "qkv", q_rows + 2 * kvd, H);
  matvec("o_proj", H, qd);
  if (hybrid) {
    matvec("DeltaNet in_proj qkv|z|b|a", lin_proj, H);
    matvec("DeltaNet out_proj", H, lin_v);
  }
  matvec(shared ? "router + shared expert gate" : "router", Es, H);
  matvec("lm_head", c.vocab_size, H);
  {
    // All experts of one layer, K picked (and the shared one): each launch reads Ks experts' rows.
    auto* gu = static_cast<kernels::bf16_bits*>(buf(Es * 2 * I * H));
    auto* down = static_cast<kernels::bf16_bits*>(buf(Es * H * I));
    int32_t* ids = nullptr;
    CUDA_CHECK(cudaMalloc(&ids, 16 * Ks * sizeof(int32_t)));
    std::vector<int32_t> h;
    // 37 is odd, E a power of two: 16 K consecutive multiples are distinct when 16 K <= E.
    for (int64_t i = 0; i < 16 * K; ++i) {
      h.push_back(static_cast<int32_t>((i * 37) % E));
      if (shared && i % K == K - 1) h.push_back(static_cast<int32_t>(E));
    }
    CUDA_CHECK(cudaMemcpy(ids, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    float* wts = x + H;
    const std::string k = std::to_string(K) + (shared ? " + shared" : "") + " experts x ";
    out.push_back(TimeKernel("moe_gate_up (" + k + Dims(2 * I, H) + ")", 2.0 * Ks * 2 * I * H, 16, [&](int i) {
      kernels::moe_gate_up(y, x, ids + i * Ks, gu, 1, Ks, H, I, nullptr);
    }));
    out.push_back(TimeKernel("moe_down (" + k + Dims(H, I) + ")", 2.0 * Ks * H * I, 16, [&](int i) {
      kernels::moe_down(y, x, ids + i * Ks, wts, down, 1, Ks, H, I, nullptr);
    }));
    cudaFree(gu);
    cudaFree(down);
    cudaFree(ids);
  }
  if (hybrid) {
    // One sequence's delta-rule step of one layer: its float32 state S (n_v x dk x dv) read and
    // written back. A pool of slots larger than L2 (each launch takes the next slot), position 5
    // so that the state is continued, not started from zeros; zero inputs keep it finite.
    const int64_t state_bytes = static_cast<int64_t>(sizeof(float)) * L.state_size();
    const int copies = static_cast<int>(std::max<int64_t>(2, (256 << 20) / state_bytes + 1));
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
    const float *qkv = in, *g = in + L.conv_dim(), *beta = g + L.n_v;
    float* o = in + L.conv_dim() + 2 * L.n_v;
    const std::string what = "gated_deltanet_recurrent (1 sequence, f32 state " + std::to_string(L.n_v) + " x " +
                             Dims(L.dk, L.dv) + ", read + written)";
    out.push_back(TimeKernel(what, 2.0 * state_bytes, copies, [&](int i) {
      const kernels::DeltaNetStep st{meta, meta + 3 + i, meta + 1, 1, 1};
      kernels::gated_deltanet_recurrent(o, states, qkv, g, beta, st, L, nullptr);
    }));
    cudaFree(states);
    cudaFree(in);
    cudaFree(meta);
  }
  for (int ctx : {1024, 4096}) {
    kernels::AttentionShape A{c.num_attention_heads, c.num_key_value_heads, c.head_dim, 16, ctx / 16, qd + 2 * kvd};
    const int copies = 16;
    auto* kv = static_cast<kernels::bf16_bits*>(buf(2LL * copies * ctx * kvd));
    int32_t *meta = nullptr;
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
  cudaFree(x);
  cudaFree(y);
  return out;
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Latency of one NCCL all-reduce of 4 KiB (1024 floats; a decode step's all-reduce at batch 1 is
// 8 KiB): 200 in a row on one stream, each between two events; microseconds. Every rank calls it.
absl::StatusOr<Spread> AllReduceLatencyUs(DeviceCollectives& coll) {
  constexpr int kN = 200, kWarm = 10;
  float* buf = nullptr;
  cudaStream_t s = nullptr;
  RETURN_IF_ERROR(CudaOk(cudaMalloc(&buf, 1024 * sizeof(float)), "cudaMalloc"));
  RETURN_IF_ERROR(CudaOk(cudaMemset(buf, 0, 1024 * sizeof(float)), "cudaMemset"));
  RETURN_IF_ERROR(CudaOk(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  std::vector<cudaEvent_t> ev(2 * kN);
  for (auto& e : ev) RETURN_IF_ERROR(CudaOk(cudaEventCreate(&e), "cudaEventCreate"));
  absl::Status st;
  for (int i = 0; i < kWarm && st.ok(); ++i) st = coll.AllReduceSum(buf, 1024, s);
  if (st.ok()) st = coll.Wait(s);
  for (int i = 0; i < kN && st.ok(); ++i) {
    st = CudaOk(cudaEventRecord(ev[2 * i], s), "cudaEventRecord");
    if (st.ok()) st = coll.AllReduceSum(buf, 1024, s);
    if (st.ok()) st = CudaOk(cudaEventRecord(ev[2 * i + 1], s), "cudaEventRecord");
  }
  if (st.ok()) st = coll.Wait(s);
  std::vector<double> us;
  for (int i = 0; i < kN && st.ok(); ++i) {
    float ms = 0;
    st = CudaOk(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    us.push_back(ms * 1e3);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(s);
  cudaFree(buf);
  RETURN_IF_ERROR(st);
  return Summarize(us);
}

// The weights this rank holds must fit in the GPU's free memory (an 80B model in bf16 does not fit
// one H200): FailedPrecondition naming the bytes and the smallest --tp that fits, before a long
// upload that would fail halfway.
absl::Status CheckWeightsFit(const ModelConfig& cfg, const DecodeReadModel& reads, int rank, int world,
                             const std::string& name) {
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(CudaOk(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  const double need = kWeightBytes * static_cast<double>(reads.TotalParams());
  // Room for the KV pool, the state slots and the activations besides the weights.
  const double usable = 0.92 * static_cast<double>(free_bytes);
  if (need <= usable) return absl::OkStatus();
  std::string hint = "more GPUs";
  for (int w = world * 2; w <= 8; w *= 2) {
    auto r = DescribeDecodeReads(cfg, 0, w);
    if (r.ok() && kWeightBytes * static_cast<double>(r->TotalParams()) <= usable) {
      hint = "--tp " + std::to_string(w) + " (one GPU per rank)";
      break;
    }
  }
  return absl::FailedPreconditionError(
      name + Fmt(": rank %.0f of %.0f holds %.1f GB of bf16 weights", rank, world, need / 1e9) +
      Fmt(", but its GPU has %.1f GB free; use ", free_bytes / 1e9) + hint);
}

// The parts a decode step reads on this GPU, for the report.
std::string ReadsSummary(const DecodeReadModel& m, const KvCacheSpec& kv, double state_bytes, int rank, int world) {
  const double w = kWeightBytes / 1e6;  // MB per element
  std::string s = Fmt("\nbytes a decode step reads on GPU %.0f of %.0f (bf16 weights):\n", rank, world);
  s += Fmt("- every step: %.0f MB = full attention %.0f + Gated DeltaNet %.0f", w * m.FixedWeights(), w * m.attention,
           w * m.deltanet) +
       Fmt(" + shared experts %.0f + routers %.0f", w * m.shared_experts, w * m.routers) +
       Fmt(" + norms %.1f + dense MLP %.0f", w * m.norms, w * m.dense_mlps) + Fmt(" + lm_head %.0f\n", w * m.lm_head);
  s += Fmt("- routed experts: %.2f MB per expert per layer, %.0f MoE layers, the distinct experts of the step\n",
           w * m.expert, static_cast<double>(m.moe_layers));
  s += Fmt("- per sequence: one embedding row (%.0f B); KV %.0f KB per position of context (%.0f full-attention layers)",
           kWeightBytes * m.hidden, kv.bytes_per_token() / 1e3, static_cast<double>(m.full_attention_layers));
  s += Fmt("; recurrent state %.2f MB (conv + S of %.0f DeltaNet layers, float32), read and written every step\n",
           state_bytes / 1e6, static_cast<double>(m.linear_attention_layers));
  if (kv.has_state() && std::abs(state_bytes - m.StateBytesPerSeq()) > 0.5) {
    s += Fmt("  (the shapes count %.2f MB of state: the engine's slot is used)\n", m.StateBytesPerSeq() / 1e6);
  }
  return s;
}

// The benchmark on one rank of `world` (the current device is the rank's); `comm` is null at TP=1.
// Every rank runs the same steps; rank 0 times them and returns the report, the others "".
absl::StatusOr<std::string> RunBenchRank(const DecodeBenchOptions& o, int rank, int world, Comm* comm) {
  ASSIGN_OR_RETURN(ModelConfig cfg, SyntheticConfig(o.synthetic));
  // What a decode step reads on this GPU, by part (bench/decode_bytes.h).
  ASSIGN_OR_RETURN(DecodeReadModel reads, DescribeDecodeReads(cfg, rank, world));
  int device = 0;
  RETURN_IF_ERROR(CudaOk(cudaGetDevice(&device), "cudaGetDevice"));
  // Before the copy and kernel timings, so that a model too large for this GPU fails at once.
  RETURN_IF_ERROR(CheckWeightsFit(cfg, reads, rank, world, o.synthetic));
  std::string out;
  Spread copy;
  if (rank == 0) {
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    out = "GPU: " + std::string(prop.name) + Fmt(", %.0f GiB, %.0f SMs\n", prop.totalGlobalMem / 1073741824.0,
                                                static_cast<double>(prop.multiProcessorCount));
    ASSIGN_OR_RETURN(DecodeReadModel whole, DescribeDecodeReads(cfg, 0, 1));
    out += "model: " + o.synthetic + " (published shapes, random bf16 weights): " + LayerMix(cfg) +
           Fmt("\nparameters: %.2fB (%.2fB per token: the chosen experts, embedding included)\n",
               whole.TotalParams() / 1e9, whole.ActiveParams() / 1e9);
    copy = CopyBandwidthGBs();
    out += Fmt("device-to-device copy (read + write), 2 GiB x 10: median %.0f GB/s (min %.0f, max %.0f)\n",
               copy.median, copy.min, copy.max);

    if (o.kernel_table) out += "\n| kernel alone, batch 1 | bytes | us (median of 30) | GB/s | of copy BW |\n| --- | ---: | ---: | ---: | ---: |\n";
    for (const KernelTiming& k : o.kernel_table ? DecodeKernelTimings(cfg) : std::vector<KernelTiming>{}) {
      const double gbs = k.bytes / (k.us * 1e-6) / 1e9;
      out += "| " + k.name + Fmt(" | %.1f MB | %.1f | %.0f | %.0f%% |\n", k.bytes / 1e6, k.us, gbs, 100 * gbs / copy.median);
    }
  }
  ModelLoadOptions tp;
  tp.backend = "cuda";
  tp.rank = rank;
  tp.world = world;
  tp.comm = comm;
  ASSIGN_OR_RETURN(auto model, CreateSyntheticCudaModel(cfg, o.seed, tp));
  RETURN_IF_ERROR(SetKvDtype(*model, o.kv_dtype));
  if (comm != nullptr) {
    // Rank 0 spent a while on the copy and kernel timings above: meet before the first step.
    RETURN_IF_ERROR(comm->Barrier());
    auto* coll = dynamic_cast<DeviceCollectives*>(comm);
    if (coll == nullptr) return absl::InternalError("bench: the comm has no device collectives");
    ASSIGN_OR_RETURN(Spread ar, AllReduceLatencyUs(*coll));
    out += "\nTP=" + std::to_string(world) + " (" + comm->transport() + ", one GPU per rank)" +
           Fmt(": all-reduce of 4 KiB (1024 floats), 200 in a row on one stream: median %.1f us (min %.1f, max %.1f)\n",
               ar.median, ar.min, ar.max);
  }
  out += "KV cache: " + o.kv_dtype + "\n";
  const int max_b = *std::max_element(o.batches.begin(), o.batches.end());
  const int max_ctx = *std::max_element(o.contexts.begin(), o.contexts.end());
  const int max_pf = o.prefill_lengths.empty() ? 0 : *std::max_element(o.prefill_lengths.begin(), o.prefill_lengths.end());
  const int blocks_per_seq = (std::max(max_ctx + o.steps * (o.runs + 2) + 1, max_pf) + o.block_size - 1) / o.block_size;
  RETURN_IF_ERROR(model->AllocateKvCache(max_b * blocks_per_seq, o.block_size, max_b));
  RETURN_IF_ERROR(FillKvRandom(*model, o.seed + 99));

  // Bytes a decode step must read ON THIS GPU (this rank's shard at TP > 1): the weights every
  // step reads, the distinct experts the router picked (measured), the embedding rows, each
  // sequence's KV (the engine's bytes per token: full-attention layers only) and each sequence's
  // recurrent state, read and written (the engine's slot size; the shapes' count when it has none).
  const KvCacheSpec kv = model->kv_spec();
  const double kv_token_bytes = static_cast<double>(kv.bytes_per_token());
  const double state_bytes = kv.has_state() ? static_cast<double>(kv.state_bytes_per_slot) : reads.StateBytesPerSeq();
  if (rank == 0) out += ReadsSummary(reads, kv, state_bytes, rank, world);

  out += "\n| batch | context | graphs | step ms (median, min-max) | tokens/s | distinct experts/layer | KV GB | "
         "state GB (read + written) | GB/step (weights + KV + state) | GB/s | of copy BW |\n";
  out += "| ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  auto bench_point = [&](int B, int ctx, bool graphs) -> absl::Status {
    SetUseGraphs(*model, graphs);
    ASSIGN_OR_RETURN(CudaStepStats st, MeasureStepStats(*model, DecodeBatch(B, ctx, 0, o.block_size, blocks_per_seq)));
    int step = 0;
    for (int w = 0; w < 3; ++w) RETURN_IF_ERROR(model->Forward(DecodeBatch(B, ctx, step++, o.block_size, blocks_per_seq)).status());
    std::vector<double> ms;
    for (int r = 0; r < o.runs; ++r) {
      std::vector<StepBatch> batches;
      for (int s = 0; s < o.steps; ++s) batches.push_back(DecodeBatch(B, ctx, step++, o.block_size, blocks_per_seq));
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& b : batches) RETURN_IF_ERROR(model->Forward(b).status());
      ms.push_back(1e3 * Seconds(t0, std::chrono::steady_clock::now()) / o.steps);
    }
    if (rank != 0) return absl::OkStatus();
    const Spread s = Summarize(ms);
    const double avg_ctx = ctx + step / 2.0 + 1;
    const StepBytes bytes =
        DecodeStepBytes(reads, B, avg_ctx, st.distinct_experts_per_layer, kv_token_bytes, state_bytes);
    const double gbs = bytes.total() / (s.median * 1e-3) / 1e9;
    out += "| " + std::to_string(B) + " | " + std::to_string(ctx) + " | " + (graphs ? "yes" : "no") +
           Fmt(" | %.3f (%.3f-%.3f) | %.0f", s.median, s.min, s.max, B * 1e3 / s.median) +
           Fmt(" | %.1f | %.3f | %.3f", st.distinct_experts_per_layer, bytes.kv / 1e9, bytes.state / 1e9) +
           Fmt(" | %.2f | %.0f | %.0f%% |\n", bytes.total() / 1e9, gbs, 100.0 * gbs / copy.median);
    std::fflush(stdout);
    return absl::OkStatus();
  };
  for (int ctx : o.contexts) {
    for (int B : o.batches) RETURN_IF_ERROR(bench_point(B, ctx, true));
  }
  // The same step without graphs: the launch gaps the graph removes.
  RETURN_IF_ERROR(bench_point(o.batches.front(), o.contexts.front(), false));

  if (!o.prefill_lengths.empty()) {
    out += "\n| prefill tokens | ms (median, min-max) | tokens/s |\n| ---: | ---: | ---: |\n";
    for (int P : o.prefill_lengths) {
      StepBatch b;
      SeqChunk c;
      c.seq_id = 0;
      for (int i = 0; i < P; ++i) c.tokens.push_back((i * 7919) % 150000);
      for (int i = 0; i < (P + o.block_size - 1) / o.block_size; ++i) c.block_table.push_back(i);
      c.want_logits = true;
      c.state_slot = 0;
      b.seqs.push_back(std::move(c));
      RETURN_IF_ERROR(model->Forward(b).status());  // warm-up (allocates activations)
      std::vector<double> ms;
      for (int r = 0; r < std::max(3, o.runs / 2); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        RETURN_IF_ERROR(model->Forward(b).status());
        ms.push_back(1e3 * Seconds(t0, std::chrono::steady_clock::now()));
      }
      if (rank != 0) continue;
      const Spread s = Summarize(ms);
      out += Fmt("| %.0f | %.1f (%.1f-%.1f) |", P, s.median, s.min, s.max) + Fmt(" %.0f |\n", P * 1e3 / s.median);
    }
  }
  return rank == 0 ? out : std::string();
}

// TP=N: one thread per rank, rank r on GPU r, an NCCL group over an in-memory rendezvous. When
// one rank fails, the others' comms are aborted so that they stop waiting for it.
absl::StatusOr<std::string> RunBenchTp(const DecodeBenchOptions& o, int devices) {
  if (devices < o.tp) {
    return absl::FailedPreconditionError("--tp " + std::to_string(o.tp) + " needs " + std::to_string(o.tp) +
                                         " GPUs (one per rank, NCCL); this machine has " + std::to_string(devices));
  }
  MemoryStore store;
  std::mutex mu;
  std::vector<Comm*> live(o.tp, nullptr);
  std::vector<absl::StatusOr<std::string>> results(o.tp, std::string());
  auto fail_all = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    for (Comm* c : live) {
      if (c != nullptr) c->Abort(why);
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < o.tp; ++r) {
    threads.emplace_back([&, r] {
      NcclCommOptions n;
      n.rank = r;
      n.world_size = o.tp;
      n.device = r;  // made current on this thread: the model is created there
      n.store = &store;
      n.timeout = std::chrono::milliseconds(300000);  // rank 0 also times single kernels first
      n.connect_timeout = std::chrono::milliseconds(120000);
      auto comm = CreateNcclComm(n);
      if (!comm.ok()) {
        results[r] = comm.status();
        fail_all("rank " + std::to_string(r) + " could not join");
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        live[r] = comm->get();
      }
      results[r] = RunBenchRank(o, r, o.tp, comm->get());
      if (!results[r].ok()) fail_all("rank " + std::to_string(r) + " failed");
      std::lock_guard<std::mutex> lock(mu);
      live[r] = nullptr;
    });
  }
  for (auto& t : threads) t.join();
  // The first failure that is not only a consequence of another rank's abort.
  for (int r = 0; r < o.tp; ++r) {
    if (!results[r].ok() && results[r].status().code() != absl::StatusCode::kAborted) {
      return absl::Status(results[r].status().code(),
                          "rank " + std::to_string(r) + ": " + std::string(results[r].status().message()));
    }
  }
  for (int r = 0; r < o.tp; ++r) {
    if (!results[r].ok()) {
      return absl::Status(results[r].status().code(),
                          "rank " + std::to_string(r) + ": " + std::string(results[r].status().message()));
    }
  }
  return results[0];
}

}  // namespace

absl::StatusOr<std::string> RunDecodeBench(const DecodeBenchOptions& o) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError("bench: no usable CUDA device");
  }
  if (o.tp < 1) return absl::InvalidArgumentError("bench: --tp must be >= 1");
  if (o.tp > 1) return RunBenchTp(o, devices);
  RETURN_IF_ERROR(CudaOk(cudaSetDevice(0), "cudaSetDevice"));
  return RunBenchRank(o, 0, 1, nullptr);
}

int RunDecodeBenchCommand(const std::vector<std::string>& args) {
  auto opt = ParseDecodeBenchFlags(args);
  if (!opt.ok()) {
    std::fprintf(stderr, "bench: %s\n%s", std::string(opt.status().message()).c_str(), DecodeBenchUsage().c_str());
    return 2;
  }
  if (opt->help) {
    std::printf("%s", DecodeBenchUsage().c_str());
    return 0;
  }
  auto report = RunDecodeBench(*opt);
  if (!report.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::printf("%s", report->c_str());
  return 0;
}

}  // namespace tandem::bench
