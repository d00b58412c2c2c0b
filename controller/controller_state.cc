#include "controller/controller_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "common/json_integer.h"

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
  // nlohmann throws, and so does JsonIntegerField: this is the one place that parses the file. Its
  // integers are JSON integers in range; anything else (a float such as 1e30, which nlohmann would
  // cast into the integer: undefined behaviour) makes it corrupt.
  try {
    nlohmann::json j = nlohmann::json::parse(ss.str());
    st.last_generation = static_cast<uint64_t>(JsonIntegerField(j, "last_generation", 0, 0, kJsonInt64Max));
    st.golden_generation =
        static_cast<uint64_t>(JsonIntegerField(j, "golden_generation", 0, 0, kJsonInt64Max));
    if (j.contains("golden_ids")) {
      if (!j["golden_ids"].is_array()) throw std::invalid_argument("golden_ids: expected an array");
      for (const auto& id : j["golden_ids"]) {
        const std::optional<int64_t> v = JsonInteger(id, kJsonInt32Min, kJsonInt32Max);
        if (!v) throw std::invalid_argument("golden_ids: expected 32-bit integers");
        st.golden_ids.push_back(static_cast<int32_t>(*v));
      }
    }
    if (j.contains("last_probe") && j["last_probe"].is_object()) {
      const auto& p = j["last_probe"];
      ProbeRecord r;
      r.ok = p.value("ok", false);
      r.generation = static_cast<uint64_t>(JsonIntegerField(p, "generation", 0, 0, kJsonInt64Max));
      r.at_unix_ms = JsonIntegerField(p, "at_unix_ms", 0, kJsonInt64Min, kJsonInt64Max);
      r.latency_s = p.value("latency_s", 0.0);
      r.detail = p.value("detail", std::string());
      st.last_probe = r;
    }
    if (j.contains("serve") && j["serve"].is_object()) {
      const auto& v = j["serve"];
      ServeRecord r;
      for (const auto& a : v.value("restarts", nlohmann::json::array())) {
        if (!a.is_object()) throw std::invalid_argument("restarts: expected objects");
        r.restarts.push_back({JsonIntegerField(a, "at_unix_ms", 0, kJsonInt64Min, kJsonInt64Max), a.value("ok", false),
                              a.value("detail", std::string())});
      }
      r.consecutive_failures =
          static_cast<int>(JsonIntegerField(v, "consecutive_failures", 0, kJsonInt32Min, kJsonInt32Max));
      r.next_restart_unix_ms = JsonIntegerField(v, "next_restart_unix_ms", 0, kJsonInt64Min, kJsonInt64Max);
      r.preflight_failures =
          static_cast<int>(JsonIntegerField(v, "preflight_failures", 0, kJsonInt32Min, kJsonInt32Max));
      r.next_preflight_unix_ms = JsonIntegerField(v, "next_preflight_unix_ms", 0, kJsonInt64Min, kJsonInt64Max);
      r.last_preflight_error = v.value("last_preflight_error", std::string());
      r.operator_needed = v.value("operator_needed", false);
      r.waiting = v.value("waiting", std::string("none"));
      r.waiting_detail = v.value("waiting_detail", std::string());
      r.waiting_since_unix_ms = JsonIntegerField(v, "waiting_since_unix_ms", 0, kJsonInt64Min, kJsonInt64Max);
      st.serve = std::move(r);
    }
  } catch (const std::exception& e) {  // nlohmann's exceptions and JsonIntegerField's invalid_argument
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
  if (state.serve) {
    const ServeRecord& r = *state.serve;
    nlohmann::json restarts = nlohmann::json::array();
    for (const auto& a : r.restarts) restarts.push_back({{"at_unix_ms", a.at_unix_ms}, {"ok", a.ok}, {"detail", a.detail}});
    j["serve"] = {{"restarts", restarts},
                  {"consecutive_failures", r.consecutive_failures},
                  {"next_restart_unix_ms", r.next_restart_unix_ms},
                  {"preflight_failures", r.preflight_failures},
                  {"next_preflight_unix_ms", r.next_preflight_unix_ms},
                  {"last_preflight_error", r.last_preflight_error},
                  {"operator_needed", r.operator_needed},
                  {"waiting", r.waiting},
                  {"waiting_detail", r.waiting_detail},
                  {"waiting_since_unix_ms", r.waiting_since_unix_ms}};
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
