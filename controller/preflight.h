// The preflight comparison: PURE. Given the spec and what each agent reported (facts and the
// weights manifest, or the error that stopped us from getting them), decide every check and
// derive the NCCL environment per node. No I/O here, so it is tested with hand-built protos.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/cluster_spec.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

// What the controller observed on one node. `manifest` is nullopt when hashing was not asked
// for (e.g. the model folder was missing, or --skip-weights).
struct NodeObservation {
  absl::StatusOr<v1::NodeFacts> facts = absl::UnknownError("not contacted");
  std::optional<absl::StatusOr<v1::WeightsManifest>> manifest;
  std::string manifest_skipped_reason;  // why manifest is nullopt
};

enum class CheckStatus { kPass, kWarn, kFail };
const char* CheckStatusName(CheckStatus s);  // "pass" | "warn" | "fail"

// Check identifiers (the CHECK column and the "check" key in --json).
inline constexpr char kCheckAgentReachable[] = "agent-reachable";
inline constexpr char kCheckDriverParity[] = "driver-parity";
inline constexpr char kCheckKernelParity[] = "kernel-parity";
inline constexpr char kCheckBuildParity[] = "agent-build-parity";
inline constexpr char kCheckModelPresent[] = "model-present";
inline constexpr char kCheckWeightsParity[] = "weights-parity";
inline constexpr char kCheckRoceGid[] = "roce-gid-index";
inline constexpr char kCheckHcaNetdevs[] = "hca-netdevs";
inline constexpr char kCheckSocketIfname[] = "socket-ifname";
inline constexpr char kCheckMemory[] = "memory-admission";
inline constexpr char kCheckSwap[] = "swap";
inline constexpr char kCheckAgentSecurity[] = "agent-security";
inline constexpr char kCheckApiAuth[] = "api-auth";

struct CheckResult {
  std::string check;
  std::string node;
  CheckStatus status = CheckStatus::kPass;
  std::string found;
  std::string expected;
  std::string fix;  // "" when nothing to do
};

struct PreflightReport {
  std::vector<CheckResult> checks;
  // Per node: NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME (and
  // NCCL_IB_DISABLE=1 when no HCA is used). Nodes that could not be observed have no entry.
  std::map<std::string, std::map<std::string, std::string>> nccl_env;
  bool ok() const;  // no kFail
  int Count(CheckStatus s) const;
};

// `observations[i]` belongs to `spec.nodes[i]`. `now_unix` (seconds) judges certificate expiry;
// 0 = the current time.
PreflightReport ComparePreflight(const ClusterSpec& spec, const std::vector<NodeObservation>& observations,
                                 int64_t now_unix = 0);

// --- Named pieces, exposed for tests ---

// True for a GID of the form ::ffff:a.b.c.d; sets *ipv4 when given.
bool IsIpv4MappedGid(const std::string& gid, std::string* ipv4 = nullptr);

// The RoCE v2 GID entry whose address is IPv4-mapped on the device's first ACTIVE port (or
// its first port when none is active): the entry NCCL_IB_GID_INDEX must name. Index 3 on a
// DGX Spark (0/1: link-local v1/v2, 2/3: IPv4 v1/v2); IPv6 addresses shift it. nullopt: none.
std::optional<v1::GidEntry> FindRoceV2Ipv4Gid(const v1::RdmaDevice& device);

// The GID entry at `index` on the device's chosen port, if present.
std::optional<v1::GidEntry> FindGidByIndex(const v1::RdmaDevice& device, uint32_t index);

// HCAs to use on a node: `nccl.hca` when given, else every HCA with an ACTIVE Ethernet port.
std::vector<std::string> SelectHcas(const NcclSpec& nccl, const v1::NodeFacts& facts);

}  // namespace tandem::controller
