#include "agentd/assignment.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/json_integer.h"

namespace tandem::agentd {
namespace {

// The saved assignment's integers go through common/json_integer.h (a float would be cast: undefined).
constexpr int64_t kU32Max = std::numeric_limits<uint32_t>::max();

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

std::string AssignmentPath(const std::string& state_dir) { return state_dir + "/assignment.json"; }

absl::Status SaveAssignment(const std::string& state_dir, const v1::PersistedAssignment& a) {
  nlohmann::json j;
  j["version"] = 1;
  j["model_path"] = a.model_path();
  j["backend"] = a.backend();
  j["served_model_name"] = a.served_model_name();
  j["rank"] = a.rank();
  j["world_size"] = a.world_size();
  j["generation"] = a.generation();
  j["store_endpoint"] = a.store_endpoint();
  j["comm_host"] = a.comm_host();
  j["api_listen"] = a.api_listen();
  j["saved_unix_ms"] = a.saved_unix_ms();
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : a.comm_env().env()) env[k] = v;
  j["comm_env"] = env;
  const std::string text = j.dump(2) + "\n";

  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  const std::string path = AssignmentPath(state_dir);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", tmp);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status st = IoError("cannot write", tmp);
      ::close(fd);
      return st;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status st = IoError("cannot fsync", tmp);
    ::close(fd);
    return st;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError("cannot rename to", path);
  // The rename itself must reach the disk too.
  const int dfd = ::open(state_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::PersistedAssignment>> LoadAssignment(const std::string& state_dir) {
  const std::string path = AssignmentPath(state_dir);
  std::ifstream in(path);
  if (!in) return std::optional<v1::PersistedAssignment>();
  std::stringstream ss;
  ss << in.rdbuf();
  v1::PersistedAssignment a;
  try {
    const nlohmann::json j = nlohmann::json::parse(ss.str());
    a.set_present(true);
    a.set_model_path(j.value("model_path", ""));
    a.set_backend(j.value("backend", ""));
    a.set_served_model_name(j.value("served_model_name", ""));
    a.set_rank(static_cast<uint32_t>(JsonIntegerField(j, "rank", 0, 0, kU32Max)));
    a.set_world_size(static_cast<uint32_t>(JsonIntegerField(j, "world_size", 0, 0, kU32Max)));
    a.set_generation(static_cast<uint64_t>(JsonIntegerField(j, "generation", 0, 0, kJsonInt64Max)));
    a.set_store_endpoint(j.value("store_endpoint", ""));
    a.set_comm_host(j.value("comm_host", ""));
    a.set_api_listen(j.value("api_listen", ""));
    a.set_saved_unix_ms(JsonIntegerField(j, "saved_unix_ms", 0, kJsonInt64Min, kJsonInt64Max));
    if (j.contains("comm_env") && j["comm_env"].is_object()) {
      for (const auto& [k, v] : j["comm_env"].items()) (*a.mutable_comm_env()->mutable_env())[k] = v.get<std::string>();
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(path + ": not a valid assignment: " + e.what());
  }
  return std::optional<v1::PersistedAssignment>(std::move(a));
}

absl::Status ClearAssignment(const std::string& state_dir) {
  const std::string path = AssignmentPath(state_dir);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return IoError("cannot remove", path);
  return absl::OkStatus();
}

}  // namespace tandem::agentd
