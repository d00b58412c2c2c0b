#include "bench/decode_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bench/decode_bench_prefill.h"
#include "bench/decode_bytes.h"
#include "bench/decode_kernel_table.h"
#include "bench/format_compare.h"
#include "bench/synthetic_configs.h"
#include "common/status.h"
#include "engine/comm/store.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_collectives.h"
#include "engine/cuda/nccl_comm.h"
#include "kernels/cuda_check.h"

namespace tandem::bench {

using namespace engine;  // the model, step and comm types
using namespace engine::cuda;
using kernels::WeightFormat;

namespace {

absl::Status CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string("bench: ") + what + ": " + cudaGetErrorString(e));
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

// B sequences, one decode token each at position ctx (+ step), with disjoint block tables: sequence
// s owns blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq), and its table lists the first
// table_blocks of them.
StepBatch DecodeBatch(int B, int ctx, int step, int table_blocks, int blocks_per_seq) {
  StepBatch batch;
  for (int s = 0; s < B; ++s) {
    SeqChunk c;
    c.seq_id = s;
    c.tokens = {(s * 7919 + step * 104729) % 150000};
    c.start_pos = ctx + step;
    for (int b = 0; b < table_blocks; ++b) c.block_table.push_back(s * blocks_per_seq + b);
    c.want_logits = true;
    c.state_slot = s;  // a hybrid's DeltaNet state (ignored by models without one)
    batch.seqs.push_back(std::move(c));
  }
  return batch;
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

// The weights this rank holds in each listed format must fit in the GPU's free memory (an 80B
// model in bf16 does not fit one H200): FailedPrecondition naming the bytes and the smallest --tp
// that fits, before the copy and kernel timings and a long upload that would fail halfway. The
// formats are loaded one at a time, each freed before the next, so each alone must fit.
absl::Status CheckWeightsFit(const ModelConfig& cfg, const DecodeBenchOptions& o, int rank, int world) {
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(CudaOk(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  // Room for the KV pool, the state slots and the activations besides the weights.
  const double usable = 0.92 * static_cast<double>(free_bytes);
  for (WeightFormat f : o.weights) {
    ASSIGN_OR_RETURN(DecodeReadModel reads, DescribeDecodeReads(cfg, rank, world, f));
    const double need = static_cast<double>(reads.TotalBytes());
    if (need <= usable) continue;
    std::string hint = "more GPUs";
    for (int w = world * 2; w <= 8; w *= 2) {
      auto r = DescribeDecodeReads(cfg, 0, w, f);
      if (r.ok() && static_cast<double>(r->TotalBytes()) <= usable) {
        hint = "--tp " + std::to_string(w) + " (one GPU per rank)";
        break;
      }
    }
    return absl::FailedPreconditionError(
        o.synthetic + Fmt(": rank %.0f of %.0f holds %.1f GB of ", rank, world, need / 1e9) + WeightFormatName(f) +
        Fmt(" weights, but its GPU has %.1f GB free; use ", free_bytes / 1e9) + hint);
  }
  return absl::OkStatus();
}

// The parts a decode step reads on this GPU, for the report.
std::string ReadsSummary(const DecodeReadModel& m, const KvCacheSpec& kv, double state_bytes, int rank, int world) {
  const WeightParts& b = m.bytes;
  std::string s = Fmt("\nbytes a decode step reads on GPU %.0f of %.0f (", rank, world) + WeightFormatName(m.format) +
                  " weights, data and scales):\n";
  s += Fmt("- every step: %.0f MB = full attention %.0f + Gated DeltaNet %.0f", b.Fixed() / 1e6, b.attention / 1e6,
           b.deltanet / 1e6) +
       Fmt(" + shared experts %.0f + routers %.0f", b.shared_experts / 1e6, b.routers / 1e6) +
       Fmt(" + norms %.1f + dense MLP %.0f", b.norms / 1e6, b.dense_mlps / 1e6) + Fmt(" + lm_head %.0f\n", b.lm_head / 1e6);
  s += Fmt("- routed experts: %.2f MB per expert per layer, %.0f MoE layers, the distinct experts of the step\n",
           b.expert / 1e6, static_cast<double>(m.moe_layers));
  s += Fmt("- per sequence: one embedding row (%.0f B); KV %.0f KB per position of context (%.0f full-attention layers)",
           kBf16Bytes * m.hidden, kv.bytes_per_token() / 1e3, static_cast<double>(m.full_attention_layers));
  s += Fmt("; recurrent state %.2f MB (conv + S of %.0f DeltaNet layers, float32), read and written every step\n",
           state_bytes / 1e6, static_cast<double>(m.linear_attention_layers));
  if (kv.has_state() && std::abs(state_bytes - m.StateBytesPerSeq()) > 0.5) {
    s += Fmt("  (the shapes count %.2f MB of state: the engine's slot is used)\n", m.StateBytesPerSeq() / 1e6);
  }
  return s;
}

// The decode and prefill tables of one weight format: its model loaded, timed, and freed on return
// (before the next format loads). Appends the smallest batch's points (with graphs) to `points`.
absl::StatusOr<std::string> RunFormat(const DecodeBenchOptions& o, const ModelConfig& cfg, WeightFormat format,
                                      int rank, int world, Comm* comm, const Spread& copy,
                                      std::vector<DecodePoint>& points) {
  // What a decode step reads on this GPU, by part (bench/decode_bytes.h).
  ASSIGN_OR_RETURN(DecodeReadModel reads, DescribeDecodeReads(cfg, rank, world, format));
  std::string out = "\n## weights: " + WeightFormatName(format) + "\n\nweights: " + WeightsDescription(format) + "\n";
  ModelLoadOptions tp;
  tp.backend = "cuda";
  tp.rank = rank;
  tp.world = world;
  tp.comm = comm;
  tp.cuda_quant_prefill_split = o.quant_prefill_split;
  tp.cuda_decode_attention = o.decode_attention;
  tp.cuda_decode_attention_buffers = o.decode_attention_buffers;
  ASSIGN_OR_RETURN(auto model, CreateSyntheticCudaModel(cfg, o.seed, tp, format));
  RETURN_IF_ERROR(SetKvDtype(*model, o.kv_dtype));
  // Rank 0 spent a while on the copy and kernel timings (or the previous format): meet before the
  // first step.
  if (comm != nullptr) RETURN_IF_ERROR(comm->Barrier());
  out += "KV cache: " + o.kv_dtype + "\n";
  if (o.quant_prefill_split && format != WeightFormat::kBf16) {
    out += "prefill products: split bf16 hi + lo (--quant-prefill-split, float32-grade)\n";
  }
  if (o.decode_attention != "split") out += "decode attention: " + o.decode_attention + " (--decode-attention)\n";
  if (o.decode_attention_buffers != 3) {
    out += "decode attention buffers: up to " + std::to_string(o.decode_attention_buffers) +
           " (--decode-attention-buffers)\n";
  }
  const int min_b = *std::min_element(o.batches.begin(), o.batches.end());
  const int blocks_per_seq = DecodeBlocksPerSeq(o);
  // One pool for the decode points and the prefill rows (bench/decode_bench_prefill.h), refused
  // naming the flag that asks too much before it is allocated.
  const KvCacheSpec kv = model->kv_spec();
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(CudaOk(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  RETURN_IF_ERROR(CheckKvPoolFits(o, static_cast<double>(kv.bytes_per_token()),
                                  static_cast<double>(kv.state_bytes_per_slot), static_cast<double>(free_bytes)));
  const KvPool pool = PlanKvPool(o);
  RETURN_IF_ERROR(model->AllocateKvCache(static_cast<int32_t>(pool.blocks), o.block_size, pool.state_slots));
  RETURN_IF_ERROR(FillKvRandom(*model, o.seed + 99));

  // Bytes a decode step must read ON THIS GPU (this rank's shard at TP > 1): the weights every
  // step reads, the distinct experts the router picked (measured), the embedding rows, each
  // sequence's KV (the engine's bytes per token: full-attention layers only) and each sequence's
  // recurrent state, read and written (the engine's slot size; the shapes' count when it has none).
  const double kv_token_bytes = static_cast<double>(kv.bytes_per_token());
  const double state_bytes = kv.has_state() ? static_cast<double>(kv.state_bytes_per_slot) : reads.StateBytesPerSeq();
  if (rank == 0) out += ReadsSummary(reads, kv, state_bytes, rank, world);

  out += "\n| batch | context | graphs | step ms (median, min-max) | tokens/s | distinct experts/layer | KV GB | "
         "state GB (read + written) | GB/step (weights + KV + state) | GB/s | of copy BW |\n";
  out += "| ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  auto bench_point = [&](int B, int ctx, bool graphs) -> absl::Status {
    SetUseGraphs(*model, graphs);
    const int table = DecodeTableBlocks(o, ctx);
    ASSIGN_OR_RETURN(CudaStepStats st, MeasureStepStats(*model, DecodeBatch(B, ctx, 0, table, blocks_per_seq)));
    int step = 0;
    for (int w = 0; w < 3; ++w) {
      RETURN_IF_ERROR(model->Forward(DecodeBatch(B, ctx, step++, table, blocks_per_seq)).status());
    }
    std::vector<double> ms;
    for (int r = 0; r < o.runs; ++r) {
      std::vector<StepBatch> batches;
      for (int s = 0; s < o.steps; ++s) batches.push_back(DecodeBatch(B, ctx, step++, table, blocks_per_seq));
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
    if (graphs && B == min_b) points.push_back({format, B, ctx, ms, bytes.total()});
    return absl::OkStatus();
  };
  for (int ctx : o.contexts) {
    for (int B : o.batches) RETURN_IF_ERROR(bench_point(B, ctx, true));
  }
  // The same step without graphs: the launch gaps the graph removes.
  RETURN_IF_ERROR(bench_point(o.batches.front(), o.contexts.front(), false));

  // Prefill: one step per run holding a row's N prompts (N = 1 for --prefill), after a warm-up
  // step that grows the activations to its size; timed like the decode points, over --runs.
  std::vector<PrefillTiming> prefill;
  for (const PrefillRow& row : PrefillRows(o)) {
    const StepBatch b = PrefillStep(row.shape, o.block_size);
    RETURN_IF_ERROR(model->Forward(b).status());
    PrefillTiming t{row, {}};
    for (int r = 0; r < o.runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(model->Forward(b).status());
      t.ms.push_back(1e3 * Seconds(t0, std::chrono::steady_clock::now()));
    }
    prefill.push_back(std::move(t));
  }
  if (rank == 0) out += PrefillTable(prefill);
  // Every rank's model is freed before any rank loads the next format.
  model.reset();
  if (comm != nullptr) RETURN_IF_ERROR(comm->Barrier());
  return rank == 0 ? out : std::string();
}

// The benchmark on one rank of `world` (the current device is the rank's); `comm` is null at TP=1.
// Every rank runs the same steps; rank 0 times them and returns the report, the others "". Rank 0
// also hands each section to `emit` as soon as it is complete.
absl::StatusOr<std::string> RunBenchRank(const DecodeBenchOptions& o, int rank, int world, Comm* comm,
                                         const ReportSink& emit) {
  ASSIGN_OR_RETURN(ModelConfig cfg, SyntheticConfig(o.synthetic));
  std::string out;
  auto section = [&](const std::string& s) {
    if (rank != 0) return;
    out += s;
    if (emit) emit(s);
  };
  int device = 0;
  RETURN_IF_ERROR(CudaOk(cudaGetDevice(&device), "cudaGetDevice"));
  // Before the copy and kernel timings, so that a model too large for this GPU fails at once.
  RETURN_IF_ERROR(CheckWeightsFit(cfg, o, rank, world));
  Spread copy;
  if (rank == 0) {
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    std::string head = "GPU: " + std::string(prop.name) + Fmt(", %.0f GiB, %.0f SMs\n", prop.totalGlobalMem / 1073741824.0,
                                                              static_cast<double>(prop.multiProcessorCount));
    ASSIGN_OR_RETURN(DecodeReadModel whole, DescribeDecodeReads(cfg, 0, 1));
    head += "model: " + o.synthetic + " (published shapes, random weights): " + LayerMix(cfg) +
            Fmt("\nparameters: %.2fB (%.2fB per token: the chosen experts, embedding included)\n",
                whole.TotalParams() / 1e9, whole.ActiveParams() / 1e9);
    for (WeightFormat f : o.weights) {
      ASSIGN_OR_RETURN(DecodeReadModel w, DescribeDecodeReads(cfg, 0, 1, f));
      head += "- " + WeightsDescription(f) + Fmt(": %.1f GB\n", w.TotalBytes() / 1e9);
    }
    // Measured once for every format of the run: the ceiling each table is compared with.
    copy = CopyBandwidthGBs();
    head += Fmt("device-to-device copy (read + write), 2 GiB x 10: median %.0f GB/s (min %.0f, max %.0f)\n",
                copy.median, copy.min, copy.max);
    section(head);
    if (o.kernel_table) {
      std::string table = "\n| kernel alone, batch 1 | bytes | us (median of 30) | GB/s | of copy BW |\n"
                          "| --- | ---: | ---: | ---: | ---: |\n";
      for (const KernelTiming& k : DecodeKernelTimings(cfg, o.weights)) {
        const double gbs = k.bytes / (k.us * 1e-6) / 1e9;
        table += "| " + k.name +
                 Fmt(" | %.1f MB | %.1f | %.0f | %.0f%% |\n", k.bytes / 1e6, k.us, gbs, 100 * gbs / copy.median);
      }
      section(table);
    }
  }
  if (comm != nullptr) {
    // Rank 0 spent a while on the copy and kernel timings above: meet first.
    RETURN_IF_ERROR(comm->Barrier());
    auto* coll = dynamic_cast<DeviceCollectives*>(comm);
    if (coll == nullptr) return absl::InternalError("bench: the comm has no device collectives");
    ASSIGN_OR_RETURN(Spread ar, AllReduceLatencyUs(*coll));
    section("\nTP=" + std::to_string(world) + " (" + comm->transport() + ", one GPU per rank)" +
            Fmt(": all-reduce of 4 KiB (1024 floats), 200 in a row on one stream: median %.1f us (min %.1f, max %.1f)\n",
                ar.median, ar.min, ar.max));
  }
  std::vector<DecodePoint> points;
  for (WeightFormat f : o.weights) {
    ASSIGN_OR_RETURN(std::string part, RunFormat(o, cfg, f, rank, world, comm, copy, points));
    section(part);
  }
  if (o.weights.size() > 1) section(CompareFormats(points));
  return out;
}

// TP=N: one thread per rank, rank r on GPU r, an NCCL group over an in-memory rendezvous. When
// one rank fails, the others' comms are aborted so that they stop waiting for it.
absl::StatusOr<std::string> RunBenchTp(const DecodeBenchOptions& o, int devices, const ReportSink& emit) {
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
      results[r] = RunBenchRank(o, r, o.tp, comm->get(), emit);
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

absl::StatusOr<std::string> RunDecodeBench(const DecodeBenchOptions& o, const ReportSink& emit) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError("bench: no usable CUDA device");
  }
  if (o.tp < 1) return absl::InvalidArgumentError("bench: --tp must be >= 1");
  if (o.tp > 1) return RunBenchTp(o, devices, emit);
  RETURN_IF_ERROR(CudaOk(cudaSetDevice(0), "cudaSetDevice"));
  return RunBenchRank(o, 0, 1, nullptr, emit);
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
  // Each section is printed when it is complete: a run of several formats takes minutes, and a
  // later failure keeps what was measured before it.
  auto report = RunDecodeBench(*opt, [](const std::string& section) {
    std::printf("%s", section.c_str());
    std::fflush(stdout);
  });
  if (!report.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace tandem::bench
