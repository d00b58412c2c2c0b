#include "controller/controller_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tandem::controller {

std::string DefaultControllerStateDir() {
  if (geteuid() == 0) return "/var/lib/tandem-ctl";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/tandem";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/state/tandem";
  return "/tmp/tandem-ctl";
}

std::string ControllerStatePath(const std::string& dir, const std::string& cluster) {
  return dir + "/" + (cluster.empty() ? std::string("cluster") : cluster) + ".json";
}

absl::StatusOr<ControllerState> LoadControllerState(const std::string& dir, const std::string& cluster) {
  std::string path = ControllerStatePath(dir, cluster);
  std::ifstream in(path);
  ControllerState st;
  if (!in) return st;
  std::stringstream ss;
  ss << in.rdbuf();
  // nlohmann throws: this is the one place that parses the file.
  try {
    nlohmann::json j = nlohmann::json::parse(ss.str());
    st.last_generation = j.value("last_generation", uint64_t{0});
    st.golden_generation = j.value("golden_generation", uint64_t{0});
    st.golden_ids = j.value("golden_ids", std::vector<int32_t>{});
    if (j.contains("last_probe") && j["last_probe"].is_object()) {
      const auto& p = j["last_probe"];
      ProbeRecord r;
      r.ok = p.value("ok", false);
      r.generation = p.value("generation", uint64_t{0});
      r.at_unix_ms = p.value("at_unix_ms", int64_t{0});
      r.latency_s = p.value("latency_s", 0.0);
      r.detail = p.value("detail", std::string());
      st.last_probe = r;
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt controller state (", e.what(), "); delete it to start over"));
  }
  return st;
}

absl::Status SaveControllerState(const std::string& dir, const std::string& cluster, const ControllerState& state) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create the state directory: ", ec.message()));
  nlohmann::json j;
  j["last_generation"] = state.last_generation;
  j["golden_generation"] = state.golden_generation;
  j["golden_ids"] = state.golden_ids;
  if (state.last_probe) {
    const ProbeRecord& p = *state.last_probe;
    j["last_probe"] = {{"ok", p.ok},
                       {"generation", p.generation},
                       {"at_unix_ms", p.at_unix_ms},
                       {"latency_s", p.latency_s},
                       {"detail", p.detail}};
  }
  std::string text = j.dump(2) + "\n";
  std::string path = ControllerStatePath(dir, cluster);
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat(tmp, ": cannot write the controller state"));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": cannot write the controller state"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::controller
