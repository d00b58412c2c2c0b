// Path confinement: the agent opens model files only under the folders the operator gave it
// (`--model-root`, repeatable). A request naming any other path — `/etc`, `../` tricks, or a
// symlink inside a root that points out of it — is refused with PERMISSION_DENIED naming the path,
// before anything is read. Without a root every model path is refused (and the message names the
// flag): an agent that was not told where the models are touches none.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::agentd {

class ModelRoots {
 public:
  ModelRoots() = default;  // no roots: everything is refused
  // Each root must be an existing directory; they are kept canonical (symlinks resolved).
  // InvalidArgument naming the root otherwise.
  static absl::StatusOr<ModelRoots> Create(const std::vector<std::string>& roots);

  const std::vector<std::string>& roots() const { return roots_; }
  bool empty() const { return roots_.empty(); }

  // The canonical form of `path` when it lies inside a root after every symlink is resolved.
  // The path must be absolute. A path that is not lexically inside a root is refused without
  // touching the file system (so the answer does not reveal whether it exists). A path inside
  // a root that does not exist is NotFound.
  absl::StatusOr<std::string> Resolve(const std::string& path) const;

  // True when the canonical path `canonical` is a root or lies under one.
  bool Contains(const std::string& canonical) const;

  // Resolve, then CheckTree: the folder a loader or hasher may open, with everything it links to.
  absl::StatusOr<std::string> ResolveTree(const std::string& path) const;

  // Every entry of the folder `canonical_dir`, followed through symlinks and subfolders
  // (depth-limited), resolves inside a root: what a loader may open stays confined.
  // PermissionDenied naming the first entry that leaves.
  absl::Status CheckTree(const std::string& canonical_dir) const;

  // "PERMISSION_DENIED"-coded error for `path` with the roots (or the missing flag) named.
  absl::Status Denied(const std::string& path, const std::string& why) const;

 private:
  std::vector<std::string> roots_;
};

}  // namespace tandem::agentd
