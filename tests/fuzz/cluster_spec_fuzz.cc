// Fuzz target: cluster.yaml text -> ClusterSpec or an error. Operators write this file by hand;
// whatever they write must give a Status, never a crash or an uncaught yaml-cpp exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "controller/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tandem::controller::ClusterSpec> spec = tandem::controller::ParseClusterSpec(text, "fuzz.yaml");
  if (spec.ok() && spec->nodes.empty()) __builtin_trap();  // the parser promises at least one node
  return 0;
}
