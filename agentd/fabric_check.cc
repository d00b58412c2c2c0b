#include "agentd/fabric_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agentd/group_transport.h"
#include "agentd/grpc_store.h"
#include "common/log.h"
#include "common/status.h"
#include "engine/comm/store.h"
#include "proto/rank_state.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/cuda/device_collectives.h"
#endif

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kFabricFailurePayload[] = "tandem.agentd/fabric-check-failure";

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One rank's all-reduce buffer of `n` floats and a complete all-reduce on it.
class AllReduceBuffer {
 public:
  virtual ~AllReduceBuffer() = default;
  virtual absl::Status Fill(float value) = 0;
  // Where the buffer differs from `expect` ("element 17 is 2", "" when it does not).
  virtual absl::StatusOr<std::string> Mismatch(float expect) = 0;
  // Returns when every rank's contribution is summed into this buffer.
  virtual absl::Status AllReduce() = 0;
};

std::string FirstMismatch(const std::vector<float>& v, float expect) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != expect) return absl::StrCat("element ", i, " of ", v.size(), " is ", v[i], ", expected ", expect);
  }
  return "";
}

// Gloo (and any host Comm): the buffer lives in this process.
class HostBuffer final : public AllReduceBuffer {
 public:
  HostBuffer(engine::Comm& comm, size_t n) : comm_(comm), data_(n) {}
  absl::Status Fill(float value) override {
    std::fill(data_.begin(), data_.end(), value);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Mismatch(float expect) override { return FirstMismatch(data_, expect); }
  absl::Status AllReduce() override { return comm_.AllReduceSum(data_.data(), data_.size()); }

 private:
  engine::Comm& comm_;
  std::vector<float> data_;
};

#ifdef TANDEM_HAVE_CUDA
absl::Status CudaError(const char* what, cudaError_t err) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

// NCCL: the buffer is on the rank's GPU and each all-reduce is enqueued on a stream of our own,
// then waited for with the comm's deadline, as a cuda model's all-reduces are.
class DeviceBuffer final : public AllReduceBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Create(engine::cuda::DeviceCollectives* dc, size_t n) {
    auto b = std::unique_ptr<DeviceBuffer>(new DeviceBuffer(dc, n));
    if (cudaError_t err = cudaMalloc(&b->dev_, n * sizeof(float)); err != cudaSuccess) {
      b->dev_ = nullptr;
      return CudaError("cudaMalloc of the all-reduce buffer", err);
    }
    if (cudaError_t err = cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking); err != cudaSuccess) {
      b->stream_ = nullptr;
      return CudaError("cudaStreamCreate", err);
    }
    return b;
  }
  ~DeviceBuffer() override {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (dev_ != nullptr) cudaFree(dev_);
  }
  absl::Status Fill(float value) override {
    cudaError_t err;
    if (value == 0.0f) {
      err = cudaMemsetAsync(dev_, 0, n_ * sizeof(float), stream_);
    } else {
      std::vector<float> host(n_, value);
      err = cudaMemcpyAsync(dev_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice, stream_);
      if (err == cudaSuccess) err = cudaStreamSynchronize(stream_);  // `host` goes out of scope
    }
    return err == cudaSuccess ? absl::OkStatus() : CudaError("filling the all-reduce buffer", err);
  }
  absl::StatusOr<std::string> Mismatch(float expect) override {
    std::vector<float> host(n_);
    cudaError_t err = cudaMemcpyAsync(host.data(), dev_, n_ * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream_);
    if (err != cudaSuccess) return CudaError("reading the all-reduce result back", err);
    return FirstMismatch(host, expect);
  }
  absl::Status AllReduce() override {
    RETURN_IF_ERROR(dc_->AllReduceSum(dev_, n_, stream_));
    return dc_->Wait(stream_);
  }

 private:
  DeviceBuffer(engine::cuda::DeviceCollectives* dc, size_t n) : dc_(dc), n_(n) {}
  engine::cuda::DeviceCollectives* dc_;
  size_t n_;
  float* dev_ = nullptr;
  cudaStream_t stream_ = nullptr;
};
#endif

absl::StatusOr<std::unique_ptr<AllReduceBuffer>> MakeBuffer(engine::Comm& comm, size_t n) {
#ifdef TANDEM_HAVE_CUDA
  if (auto* dc = dynamic_cast<engine::cuda::DeviceCollectives*>(&comm)) {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> b, DeviceBuffer::Create(dc, n));
    return std::unique_ptr<AllReduceBuffer>(std::move(b));
  }
#endif
  return std::unique_ptr<AllReduceBuffer>(std::make_unique<HostBuffer>(comm, n));
}

// How many warm-ups and timed iterations fit `budget` when one all-reduce took `one_s` (at least
// one timed; warm-ups give way first).
std::pair<int32_t, int32_t> FitBudget(int warmup, int iters, double one_s, std::chrono::milliseconds budget) {
  const double fit = std::chrono::duration<double>(budget).count() / std::max(one_s, 1e-9);
  const int32_t fits = static_cast<int32_t>(std::min<double>(fit, 1e9));
  const int32_t w = std::clamp(fits - 1, 0, warmup);
  return {w, std::clamp(fits - w, 1, std::max(iters, 1))};
}

// One loop: a checked all-reduce, `warmup` untimed ones, then `iters` timed ones (seconds each),
// both cut to what fits `budget` going by the checked one. A count every rank must share (one
// more all-reduce on one rank would wait out its deadline), so rank 0's is broadcast.
absl::StatusOr<std::vector<double>> TimeLoop(engine::Comm& comm, size_t bytes, int warmup, int iters,
                                             std::chrono::milliseconds budget, const char* name) {
  const size_t n = bytes / sizeof(float);
  ASSIGN_OR_RETURN(std::unique_ptr<AllReduceBuffer> buf, MakeBuffer(comm, n));
  const int world = comm.world_size();
  auto fail = [&](const absl::Status& st, const char* step) {
    return absl::Status(st.code(), absl::StrCat(name, " all-reduce of ", bytes, " bytes (", step, "): ", st.message()));
  };
  // Small integers sum exactly in float, in any order, so every rank must see exactly this.
  if (absl::Status st = buf->Fill(static_cast<float>(comm.rank() + 1)); !st.ok()) return fail(st, "check");
  const auto c0 = Clock::now();
  if (absl::Status st = buf->AllReduce(); !st.ok()) return fail(st, "check");
  const double check_s = SecondsSince(c0);
  ASSIGN_OR_RETURN(std::string wrong, buf->Mismatch(static_cast<float>(world * (world + 1) / 2)));
  if (!wrong.empty()) {
    return absl::DataLossError(absl::StrCat(name, " all-reduce of ", bytes, " bytes returned a wrong sum: ", wrong));
  }
  // Zeros stay zeros: the timed all-reduces never overflow or reach slow (denormal) values.
  if (absl::Status st = buf->Fill(0.0f); !st.ok()) return fail(st, "reset");
  const auto [w, k] = FitBudget(warmup, iters, check_s, budget);
  int32_t counts[2] = {w, k};
  if (absl::Status st = comm.Broadcast(counts, sizeof counts, 0); !st.ok()) return fail(st, "counts");
  warmup = counts[0];
  iters = counts[1];
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status st = buf->AllReduce(); !st.ok()) return fail(st, "warm-up");
  }
  // Every rank starts timing together, so no rank's first sample includes waiting for a peer.
  if (absl::Status st = comm.Barrier(); !st.ok()) return fail(st, "barrier");
  std::vector<double> seconds;
  seconds.reserve(iters);
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    if (absl::Status st = buf->AllReduce(); !st.ok()) return fail(st, "timed");
    seconds.push_back(SecondsSince(t0));
  }
  return seconds;
}

// "did not join": which of the ranks' "here" keys are missing, each checked with the time left.
absl::Status AwaitRanks(engine::Store& store, int world, Clock::time_point deadline, milliseconds timeout) {
  std::vector<std::string> missing;
  absl::Status store_error;
  for (int r = 0; r < world; ++r) {
    const auto left = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
    absl::StatusOr<std::string> v = store.Get(absl::StrCat("here/", r), left);
    if (v.ok()) continue;
    if (!absl::IsDeadlineExceeded(v.status())) {
      store_error = v.status();
      break;
    }
    missing.push_back(absl::StrCat(r));
  }
  if (!store_error.ok()) return store_error;
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrFormat(
      "rank%s %s of %d did not join the fabric check within %.1f s (its agent was not called, is unreachable, or "
      "cannot reach the head's store)",
      missing.size() > 1 ? "s" : "", absl::StrJoin(missing, ", "), world, timeout.count() / 1000.0));
}

}  // namespace

absl::StatusOr<CollectiveLoops> LoopsOf(const v1::CheckFabricRequest& r) {
  CollectiveLoops l;
  if (r.small_bytes() != 0) l.small_bytes = r.small_bytes();
  if (r.small_iters() != 0) l.small_iters = static_cast<int>(r.small_iters());
  if (r.small_warmup() != 0) l.small_warmup = static_cast<int>(r.small_warmup());
  if (r.large_bytes() != 0) l.large_bytes = r.large_bytes();
  if (r.large_iters() != 0) l.large_iters = static_cast<int>(r.large_iters());
  if (r.large_warmup() != 0) l.large_warmup = static_cast<int>(r.large_warmup());
  using Field = std::pair<const char*, uint64_t>;
  for (auto [name, bytes] : {Field{"small_bytes", r.small_bytes()}, Field{"large_bytes", r.large_bytes()}}) {
    if (bytes != 0 && (bytes % 4 != 0 || bytes > (uint64_t{1} << 30))) {
      return absl::InvalidArgumentError(absl::StrCat(name, " ", bytes, ": a multiple of 4 bytes up to 1 GiB"));
    }
  }
  if (r.small_iters() > 100000 || r.large_iters() > 100000 || r.small_warmup() > 10000 || r.large_warmup() > 10000) {
    return absl::InvalidArgumentError("iterations are limited to 100000, warm-ups to 10000");
  }
  return l;
}

TimeSummary SummarizeTimes(std::vector<double> s) {
  TimeSummary t;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  t.median = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const size_t rank99 = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n)));
  t.p99 = s[std::max<size_t>(rank99, 1) - 1];
  t.min = s.front();
  t.max = s.back();
  return t;
}

double AllReduceBusBandwidth(double algbw, int world) {
  if (world < 1) return 0;
  return algbw * 2.0 * (world - 1) / world;
}

absl::Status MeasureCollectives(engine::Comm& comm, const CollectiveLoops& loops, v1::CheckFabricResponse* out) {
  out->set_transport(comm.transport());
  ASSIGN_OR_RETURN(std::vector<double> small, TimeLoop(comm, loops.small_bytes, loops.small_warmup, loops.small_iters,
                                                       loops.loop_budget, "small"));
  const TimeSummary s = SummarizeTimes(small);
  out->set_small_bytes(loops.small_bytes);
  out->set_small_iters(static_cast<uint32_t>(small.size()));
  out->set_small_median_us(s.median * 1e6);
  out->set_small_p99_us(s.p99 * 1e6);
  out->set_small_min_us(s.min * 1e6);
  out->set_small_max_us(s.max * 1e6);

  ASSIGN_OR_RETURN(std::vector<double> large, TimeLoop(comm, loops.large_bytes, loops.large_warmup, loops.large_iters,
                                                       loops.loop_budget, "large"));
  const TimeSummary l = SummarizeTimes(large);
  out->set_large_bytes(loops.large_bytes);
  out->set_large_iters(static_cast<uint32_t>(large.size()));
  out->set_large_median_seconds(l.median);
  // The median time, not the mean: one slow iteration (a scheduler hiccup) must not move it.
  const double algbw = l.median > 0 ? static_cast<double>(loops.large_bytes) / l.median / 1e9 : 0;
  out->set_large_algbw_gbps(algbw);
  out->set_large_busbw_gbps(AllReduceBusBandwidth(algbw, comm.world_size()));
  // Nobody tears the comm down while a peer still waits for its last message.
  return comm.Barrier();
}

std::string FabricCheckBusyReason(const v1::RankStatus& status) {
  if (status.state() == v1::RANK_STATE_IDLE || status.state() == v1::RANK_STATE_UNSPECIFIED) return "";
  return absl::StrCat("this rank is ", RankStateName(status.state()),
                      status.model_path().empty() ? "" : absl::StrCat(" (", status.model_path(), ")"));
}

absl::Status FabricCheckFailure(absl::Status st) {
  st.SetPayload(kFabricFailurePayload, absl::Cord());
  return st;
}

bool IsFabricCheckFailure(const absl::Status& st) { return st.GetPayload(kFabricFailurePayload).has_value(); }

std::string FabricCheckPrefix(uint64_t check_id) { return absl::StrCat("fabric/", check_id); }

FabricCheck::FabricCheck(FabricCheckOptions options) : options_(std::move(options)) {}

absl::StatusOr<v1::CheckFabricResponse> FabricCheck::Run(const v1::CheckFabricRequest& req) {
  if (req.check_id() == 0) return absl::InvalidArgumentError("check_id must not be 0");
  if (req.world_size() < 2) return absl::InvalidArgumentError("a fabric check needs world_size of at least 2");
  if (req.rank() >= req.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", req.rank(), " is not below world_size ", req.world_size()));
  }
  if (req.rank() > 0 && req.store_endpoint().empty()) {
    return absl::InvalidArgumentError("store_endpoint (the head agent's host:port) is required for rank > 0");
  }
  const std::string backend = req.backend().empty() ? "cpu" : req.backend();
  if (backend != "cpu" && backend != "cuda") {
    return absl::InvalidArgumentError("backend \"" + backend + "\": cpu or cuda");
  }
  RETURN_IF_ERROR(CheckCommEnv(req.comm_env()));
  ASSIGN_OR_RETURN(CollectiveLoops loops, LoopsOf(req));
  std::unique_lock<std::mutex> lock(running_, std::try_to_lock);
  if (!lock.owns_lock()) return absl::UnavailableError("another fabric check is running on this agent");
  if (options_.busy) {
    if (std::string why = options_.busy(); !why.empty()) {
      return absl::FailedPreconditionError("a fabric check needs a rank without a model, and " + why +
                                           ": run `tandemctl down` first");
    }
  }
  const std::string prefix = FabricCheckPrefix(req.check_id());
  absl::StatusOr<v1::CheckFabricResponse> r = RunLocked(req, backend, loops);
  // Rank 0 holds the keys; by now every rank has read them (or will never come).
  if (req.rank() == 0) options_.local_store->DropPrefix(prefix + "/");
  if (!r.ok()) {
    TLOG(WARN) << "fabric check " << req.check_id() << " (rank " << req.rank() << " of " << req.world_size()
               << ") failed: " << r.status().message();
    return FabricCheckFailure(r.status());
  }
  TLOG(INFO) << "fabric check " << req.check_id() << ": rank " << req.rank() << " of " << req.world_size() << " over "
             << r->transport() << ": small median " << r->small_median_us() << " us, busbw "
             << r->large_busbw_gbps() << " GB/s";
  return r;
}

absl::StatusOr<v1::CheckFabricResponse> FabricCheck::RunLocked(const v1::CheckFabricRequest& req,
                                                              const std::string& backend,
                                                              const CollectiveLoops& loops) {
  const auto t0 = Clock::now();
  const milliseconds timeout(req.timeout_ms() > 0 ? req.timeout_ms() : 60000);
  const auto deadline = t0 + timeout;
  v1::CheckFabricResponse out;
  out.set_rank(static_cast<int32_t>(req.rank()));
  ASSIGN_OR_RETURN(std::string device, PrepareRankDevice(backend));
  out.set_device(device);
  // Process-wide, as JoinGroup sets it: the check must see what the group's comm will see.
  SetCommEnv(req.comm_env());

  std::unique_ptr<engine::Store> remote;
  engine::Store* base = options_.local_store;
  if (req.rank() > 0) {
    remote = options_.remote_store ? options_.remote_store(req.store_endpoint())
                                   : std::make_unique<GrpcStore>(req.store_endpoint(), options_.token,
                                                                 options_.store_credentials);
    base = remote.get();
  }
  engine::PrefixStore store(*base, FabricCheckPrefix(req.check_id()));
  RETURN_IF_ERROR(store.Set(absl::StrCat("here/", req.rank()), "1"));
  RETURN_IF_ERROR(AwaitRanks(store, static_cast<int>(req.world_size()), deadline, timeout));

  GroupCommOptions co;
  co.backend = backend;
  co.store = &store;
  co.rank = static_cast<int>(req.rank());
  co.world_size = static_cast<int>(req.world_size());
  co.comm_host = req.comm_host();
  co.connect_timeout = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
  co.timeout = milliseconds(req.collective_timeout_ms() > 0 ? req.collective_timeout_ms() : 30000);
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Comm> comm, CreateGroupComm(co));
  out.set_connect_seconds(SecondsSince(t0));
  RETURN_IF_ERROR(MeasureCollectives(*comm, loops, &out));
  comm.reset();  // torn down before the answer: nothing of the check outlives the call
  out.set_seconds(SecondsSince(t0));
  return out;
}

}  // namespace tandem::agentd
