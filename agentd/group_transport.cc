#include "agentd/group_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "engine/comm/gloo_comm.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/cuda/nccl_comm.h"
#endif

namespace tandem::agentd {

bool BuildHasCuda() {
#ifdef TANDEM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string CudaVisibleDevices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v == nullptr ? "" : v;
}

#ifdef TANDEM_HAVE_CUDA
namespace {

std::string VisibleText() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v == nullptr ? "CUDA_VISIBLE_DEVICES unset" : absl::StrCat("CUDA_VISIBLE_DEVICES=", v);
}

}  // namespace
#endif

absl::StatusOr<std::string> PrepareRankDevice(const std::string& backend) {
  if (backend != "cuda") return std::string();
#ifdef TANDEM_HAVE_CUDA
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    const std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "0 devices";
    return absl::FailedPreconditionError(absl::StrCat("backend cuda: no CUDA device visible (", VisibleText(),
                                                      "): ", why));
  }
  if (cudaError_t err = cudaSetDevice(kCudaRankDevice); err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("backend cuda: cudaSetDevice(", kCudaRankDevice, ") (",
                                                      VisibleText(), "): ", cudaGetErrorString(err)));
  }
  cudaDeviceProp prop{};
  if (cudaError_t err = cudaGetDeviceProperties(&prop, kCudaRankDevice); err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("backend cuda: cudaGetDeviceProperties: ", cudaGetErrorString(err)));
  }
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return absl::StrCat("CUDA device ", kCudaRankDevice, " of ", count, " visible (", VisibleText(), "): ", prop.name,
                      ", ", gib, " GiB, bus ", prop.pciBusID);
#else
  return absl::FailedPreconditionError(
      "backend cuda: this build has no CUDA (tandem-agentd was built without TANDEM_CUDA); use engine.backend: cpu "
      "or a CUDA build");
#endif
}

absl::StatusOr<std::unique_ptr<engine::Comm>> CreateGroupComm(const GroupCommOptions& o) {
  if (o.backend == "cuda") {
#ifdef TANDEM_HAVE_CUDA
    engine::cuda::NcclCommOptions no;
    no.rank = o.rank;
    no.world_size = o.world_size;
    no.device = kCudaRankDevice;
    no.store = o.store;
    no.timeout = o.timeout;
    no.connect_timeout = o.connect_timeout;
    return engine::cuda::CreateNcclComm(no);
#else
    return absl::FailedPreconditionError("backend cuda: this build has no CUDA, so no NCCL comm");
#endif
  }
  engine::GlooCommOptions co;
  co.store = o.store;
  co.rank = o.rank;
  co.world_size = o.world_size;
  co.hostname_or_iface = o.comm_host.empty() ? "127.0.0.1" : o.comm_host;
  co.connect_timeout = o.connect_timeout;
  co.timeout = o.timeout;
  return engine::CreateGlooComm(co);
}

bool IsCommEnvName(const std::string& name) {
  const bool prefix = name.rfind("NCCL_", 0) == 0 || name.rfind("GLOO_", 0) == 0;
  if (!prefix || name.size() == 5) return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

absl::Status CheckCommEnv(const v1::CommEnv& env) {
  for (const auto& [k, v] : env.env()) {
    if (!IsCommEnvName(k)) return absl::InvalidArgumentError("comm_env: " + k + " is not an NCCL_* or GLOO_* variable");
  }
  return absl::OkStatus();
}

void SetCommEnv(const v1::CommEnv& env) {
  for (const auto& [k, v] : env.env()) setenv(k.c_str(), v.c_str(), 1);
}

std::string HeartbeatKey(uint64_t generation, int rank) {
  return absl::StrCat(engine::GenerationPrefix(generation), "/alive/", rank);
}

PeerWatch::PeerWatch(int world_size, std::chrono::milliseconds lost_after, Clock::time_point start)
    : lost_after_(lost_after),
      last_value_(static_cast<size_t>(std::max(world_size, 1))),
      last_change_(static_cast<size_t>(std::max(world_size, 1)), start) {}

void PeerWatch::Observe(int rank, const std::optional<std::string>& value, Clock::time_point now) {
  if (rank < 1 || rank >= static_cast<int>(last_value_.size())) return;
  if (value.has_value() && value != last_value_[rank]) {
    last_value_[rank] = value;
    last_change_[rank] = now;
  }
}

std::optional<std::pair<int, std::chrono::milliseconds>> PeerWatch::Lost(Clock::time_point now) const {
  if (lost_after_.count() <= 0) return std::nullopt;
  for (size_t r = 1; r < last_change_.size(); ++r) {
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_change_[r]);
    if (silent >= lost_after_) return std::make_pair(static_cast<int>(r), silent);
  }
  return std::nullopt;
}

}  // namespace tandem::agentd
