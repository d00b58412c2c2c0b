#include "agentd/model_roots.h"

#include <filesystem>

namespace tandem::agentd {
namespace fs = std::filesystem;

namespace {

// `path` equals `root` or lies below it (both lexically normal, absolute, no trailing '/').
bool Under(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

std::string Normal(const fs::path& p) {
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

absl::StatusOr<ModelRoots> ModelRoots::Create(const std::vector<std::string>& roots) {
  ModelRoots r;
  for (const std::string& root : roots) {
    if (root.empty() || root[0] != '/') {
      return absl::InvalidArgumentError("--model-root " + root + ": give an absolute path");
    }
    std::error_code ec;
    const fs::path canonical = fs::canonical(root, ec);
    if (ec || !fs::is_directory(canonical, ec)) {
      return absl::InvalidArgumentError("--model-root " + root + " is not an existing directory");
    }
    r.roots_.push_back(Normal(canonical));
  }
  return r;
}

bool ModelRoots::Contains(const std::string& canonical) const {
  for (const std::string& root : roots_) {
    if (Under(canonical, root)) return true;
  }
  return false;
}

absl::Status ModelRoots::Denied(const std::string& path, const std::string& why) const {
  if (roots_.empty()) {
    return absl::PermissionDeniedError(path + ": this agent has no model root, so it opens no model folder "
                                              "(start it with --model-root DIR)");
  }
  return absl::PermissionDeniedError(path + " " + why + " (this agent's model roots: " + Join(roots_) +
                                     "; add one with --model-root DIR)");
}

absl::StatusOr<std::string> ModelRoots::Resolve(const std::string& path) const {
  if (path.empty()) return absl::InvalidArgumentError("the model path is empty");
  if (path[0] != '/') return absl::InvalidArgumentError("the model path " + path + " is not absolute");
  // Lexical check first: outside every root means no file system access at all.
  if (!Contains(Normal(fs::path(path)))) return Denied(path, "is outside the model roots");
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  if (ec) return absl::NotFoundError("model folder " + path + ": " + ec.message());
  const std::string c = Normal(canonical);
  if (!Contains(c)) return Denied(path, "resolves to " + c + ", outside the model roots");
  return c;
}

absl::StatusOr<std::string> ModelRoots::ResolveTree(const std::string& path) const {
  absl::StatusOr<std::string> folder = Resolve(path);
  if (!folder.ok()) return folder;
  if (absl::Status tree = CheckTree(*folder); !tree.ok()) return tree;
  return folder;
}

absl::Status ModelRoots::CheckTree(const std::string& canonical_dir) const {
  if (!Contains(canonical_dir)) return Denied(canonical_dir, "is outside the model roots");
  std::error_code ec;
  fs::recursive_directory_iterator it(canonical_dir, fs::directory_options::follow_directory_symlink |
                                                         fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 16) {
      it.disable_recursion_pending();  // a symlink loop: the walk stops descending, nothing is read
      continue;
    }
    if (!it->is_symlink(ec)) continue;  // a plain entry under a contained folder stays contained
    std::error_code e2;
    const fs::path target = fs::canonical(it->path(), e2);
    if (e2) continue;  // dangling: nothing to open
    const std::string t = Normal(target);
    if (!Contains(t)) return Denied(it->path().string(), "is a symlink to " + t + ", outside the model roots");
  }
  return absl::OkStatus();
}

}  // namespace tandem::agentd
