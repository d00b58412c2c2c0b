// Node facts read from files under a sysfs root and a procfs root (defaults /sys and /proc), so
// tests point the agent at fake trees. Every reader tolerates missing or malformed files: the
// fact carries an error text instead of failing the whole request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::agentd {

struct FactsRoots {
  std::string sysfs_root = "/sys";
  std::string procfs_root = "/proc";
};

// Everything in NodeFacts, read fresh. `model_path` empty: no model folder fact.
v1::NodeFacts CollectNodeFacts(const FactsRoots& roots, const std::string& node_name,
                               const std::string& model_path);

// The pieces, one per fact (exposed for tests and for the metrics collector).
v1::DriverFact ReadDriverFact(const FactsRoots& roots);
v1::KernelFact ReadKernelFact(const FactsRoots& roots);
v1::MemoryFact ReadMemoryFact(const FactsRoots& roots);
std::vector<v1::GpuFact> ReadGpuFacts(const FactsRoots& roots, std::string* error);
std::vector<v1::RdmaDevice> ReadRdmaDevices(const FactsRoots& roots, std::string* error);
std::vector<v1::NetDev> ReadNetDevs(const FactsRoots& roots, std::string* error);
v1::ModelFolderFact ReadModelFolderFact(const std::string& model_path);
// sha256 of /proc/self/exe, computed once per process (the running image cannot change under
// us: /proc/self/exe names the inode we run even when the file on disk is replaced).
v1::AgentBuild ReadAgentBuild();

// Parsers, pure and separately testable.
// The version from "NVRM version: NVIDIA UNIX ... Kernel Module ...  580.95.05  Release Build ...".
absl::StatusOr<std::string> ParseNvrmVersion(std::string_view procfs_version_text);
// MemTotal/MemAvailable/SwapTotal in bytes; error text when a key is missing.
v1::MemoryFact ParseMeminfo(std::string_view meminfo_text);
// "0000:0000:0000:0000:0000:ffff:c0a8:6401" -> "192.168.100.1"; "" when not IPv4-mapped.
std::string GidToIpv4(std::string_view gid);
// True for "0000:0000:...:0000" (an unused GID table slot).
bool IsZeroGid(std::string_view gid);
// Per-direction ceiling of a PCIe link in Gbit/s: GT/s x lanes x line-code efficiency
// (128b/130b from 8 GT/s (gen3) on, 8b/10b below). 0 when the speed cannot be parsed.
double PcieGbpsCeiling(std::string_view link_speed, std::string_view link_width);

// The whole file with surrounding whitespace removed, or an error naming the path.
absl::StatusOr<std::string> ReadTrimmedFile(const std::string& path);

}  // namespace tandem::agentd
