#include "controller/cluster_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tandem::controller {
namespace {

// What may appear where. Paths use "nodes[]" for any element of the nodes list. Keys that later
// issues use are listed now, so files written for them are not rejected.
enum class KeyKind { kScalar, kList, kMap, kNodeList, kScalarOrMap };
struct KnownKey {
  const char* path;
  KeyKind kind;
};
constexpr KnownKey kKnownKeys[] = {
    {"cluster", KeyKind::kScalar},
    {"model", KeyKind::kMap},
    {"model.path", KeyKind::kScalar},
    {"model.served_name", KeyKind::kScalar},
    {"parallel", KeyKind::kMap},
    {"parallel.tensor", KeyKind::kScalar},
    {"engine", KeyKind::kMap},
    {"engine.memory_fraction", KeyKind::kScalar},
    {"engine.backend", KeyKind::kScalar},
    {"engine.kv_tokens", KeyKind::kScalar},
    {"engine.kv_cache_dtype", KeyKind::kScalar},
    {"engine.max_num_seqs", KeyKind::kScalar},
    {"engine.max_model_len", KeyKind::kScalar},
    {"api", KeyKind::kMap},
    {"api.listen", KeyKind::kScalar},
    {"api.key_file", KeyKind::kScalar},
    {"api.max_body_bytes", KeyKind::kScalar},
    {"auth", KeyKind::kMap},
    {"auth.token_file", KeyKind::kScalar},
    {"tls", KeyKind::kMap},
    {"tls.ca", KeyKind::kScalar},
    {"tls.cert", KeyKind::kScalar},
    {"tls.key", KeyKind::kScalar},
    {"preflight", KeyKind::kMap},
    {"preflight.verify", KeyKind::kScalar},
    {"probe", KeyKind::kMap},
    {"probe.prompt", KeyKind::kScalar},
    {"probe.expect", KeyKind::kScalar},
    {"probe.prompt_ids", KeyKind::kList},
    {"probe.interval", KeyKind::kScalar},
    {"probe.timeout", KeyKind::kScalar},
    {"probe.max_tokens", KeyKind::kScalar},
    {"fabric_check", KeyKind::kScalarOrMap},
    {"fabric_check.min_busbw_gbps", KeyKind::kScalar},
    {"fabric_check.max_latency_us", KeyKind::kScalar},
    {"fabric_check.timeout", KeyKind::kScalar},
    {"serve", KeyKind::kMap},
    {"serve.restart_budget", KeyKind::kScalar},
    {"serve.metrics_listen", KeyKind::kScalar},
    {"serve.stuck_after", KeyKind::kScalar},
    {"timeouts", KeyKind::kMap},
    {"timeouts.preflight", KeyKind::kScalar},
    {"timeouts.load", KeyKind::kScalar},
    {"timeouts.join", KeyKind::kScalar},
    {"timeouts.probe", KeyKind::kScalar},
    {"timeouts.leave", KeyKind::kScalar},
    {"timeouts.status", KeyKind::kScalar},
    {"nccl", KeyKind::kMap},
    {"nccl.hca", KeyKind::kList},
    {"nccl.socket_ifname", KeyKind::kScalar},
    {"nccl.gid_index", KeyKind::kScalar},
    {"nodes", KeyKind::kNodeList},
    {"nodes[].name", KeyKind::kScalar},
    {"nodes[].agent", KeyKind::kScalar},
    {"nodes[].model_path", KeyKind::kScalar},
    {"nodes[].nccl", KeyKind::kMap},
    {"nodes[].nccl.hca", KeyKind::kList},
    {"nodes[].nccl.socket_ifname", KeyKind::kScalar},
    {"nodes[].nccl.gid_index", KeyKind::kScalar},
    {"nodes[].linktest", KeyKind::kMap},
    {"nodes[].linktest.interfaces", KeyKind::kList},
};

const KnownKey* FindKnownKey(const std::string& pattern) {
  for (const auto& k : kKnownKeys) {
    if (pattern == k.path) return &k;
  }
  return nullptr;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The known keys that live in the same map as `parent_pattern`, e.g. for "nodes[]": name, agent...
std::vector<std::string> SiblingKeys(const std::string& parent_pattern) {
  std::vector<std::string> out;
  std::string prefix = parent_pattern.empty() ? "" : parent_pattern + ".";
  for (const auto& k : kKnownKeys) {
    std::string p = k.path;
    if (p.rfind(prefix, 0) != 0) continue;
    std::string rest = p.substr(prefix.size());
    if (rest.find('.') == std::string::npos) out.push_back(rest);
  }
  return out;
}

class SpecParser {
 public:
  explicit SpecParser(std::string file) : file_(std::move(file)) {}

  absl::Status Error(const YAML::Node& at, const std::string& key, const std::string& what) const {
    int line = at.IsDefined() ? at.Mark().line + 1 : 0;
    return Error(line, key, what);
  }
  absl::Status Error(int line, const std::string& key, const std::string& what) const {
    std::string where = line > 0 ? absl::StrCat(file_, ":", line) : file_;
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", key.empty() ? "" : key + ": ", what));
  }

  // Rejects unknown and duplicate keys everywhere, and checks the shape (map/list/scalar).
  absl::Status CheckKeys(const YAML::Node& map, const std::string& pattern, const std::string& display) const {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      // yaml-cpp iterators hand out temporaries: copy the (reference-counted) nodes.
      const YAML::Node key_node = it->first;
      const YAML::Node v = it->second;
      if (!key_node.IsScalar()) return Error(key_node, display, "keys must be plain words");
      std::string key = key_node.Scalar();
      std::string child_pattern = pattern.empty() ? key : pattern + "." + key;
      std::string child_display = display.empty() ? key : display + "." + key;
      if (!seen.insert(key).second) return Error(key_node, child_display, "duplicate key");
      const KnownKey* known = FindKnownKey(child_pattern);
      if (known == nullptr) {
        std::string msg = "unknown key";
        std::string best;
        size_t best_d = 3;  // suggest only close matches
        std::vector<std::string> siblings = SiblingKeys(pattern);
        for (const auto& s : siblings) {
          size_t d = EditDistance(key, s);
          if (d < best_d) best_d = d, best = s;
        }
        if (!best.empty()) {
          msg += absl::StrCat(" (did you mean \"", best, "\"?)");
        } else {
          std::string list;
          for (const auto& s : siblings) list += (list.empty() ? "" : ", ") + s;
          msg += absl::StrCat(" (known here: ", list, ")");
        }
        return Error(key_node, child_display, msg);
      }
      switch (known->kind) {
        case KeyKind::kScalar:
          if (!v.IsScalar()) return Error(v.IsNull() ? key_node : v, child_display, "expected a value");
          break;
        case KeyKind::kList:
          if (!v.IsSequence()) return Error(v.IsNull() ? key_node : v, child_display, "expected a list");
          for (size_t i = 0; i < v.size(); ++i) {
            if (!v[i].IsScalar()) return Error(v[i], absl::StrCat(child_display, "[", i, "]"), "expected a value");
          }
          break;
        case KeyKind::kScalarOrMap:
          if (v.IsScalar()) break;
          if (!v.IsMap()) return Error(v.IsNull() ? key_node : v, child_display, "expected a value or a mapping");
          RETURN_IF_ERROR(CheckKeys(v, child_pattern, child_display));
          break;
        case KeyKind::kMap:
          if (!v.IsMap()) return Error(v.IsNull() ? key_node : v, child_display, "expected a mapping (key: value lines)");
          RETURN_IF_ERROR(CheckKeys(v, child_pattern, child_display));
          break;
        case KeyKind::kNodeList:
          if (!v.IsSequence()) return Error(v.IsNull() ? key_node : v, child_display, "expected a list of nodes");
          for (size_t i = 0; i < v.size(); ++i) {
            std::string elem = absl::StrCat(child_display, "[", i, "]");
            if (!v[i].IsMap()) return Error(v[i], elem, "expected a mapping with name and agent");
            RETURN_IF_ERROR(CheckKeys(v[i], child_pattern + "[]", elem));
          }
          break;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const YAML::Node& parent, const char* key, const std::string& display,
                                     bool required) const {
    YAML::Node v = parent[key];
    if (!v.IsDefined() || v.IsNull()) {
      if (required) return Error(parent, display, "required key is missing");
      return std::string();
    }
    return v.Scalar();
  }

  absl::StatusOr<std::optional<int>> Int(const YAML::Node& parent, const char* key, const std::string& display) const {
    YAML::Node v = parent[key];
    if (!v.IsDefined() || v.IsNull()) return std::optional<int>();
    try {
      return std::optional<int>(v.as<int>());
    } catch (const YAML::Exception&) {
      return Error(v, display, absl::StrCat("expected a whole number, got \"", v.Scalar(), "\""));
    }
  }

  // A whole number in [lo, hi]; absent keys leave *out as it is.
  absl::Status IntIn(const YAML::Node& parent, const char* key, const std::string& display, int64_t lo, int64_t hi,
                     int64_t* out) const {
    YAML::Node v = parent[key];
    if (!v.IsDefined() || v.IsNull()) return absl::OkStatus();
    int64_t x = 0;
    try {
      x = v.as<int64_t>();
    } catch (const YAML::Exception&) {
      return Error(v, display, absl::StrCat("expected a whole number, got \"", v.Scalar(), "\""));
    }
    if (x < lo || x > hi) return Error(v, display, absl::StrCat("expected ", lo, "..", hi, ", got ", x));
    *out = x;
    return absl::OkStatus();
  }

  absl::Status DurationKey(const YAML::Node& parent, const char* key, const std::string& display,
                           std::chrono::milliseconds* out) const {
    YAML::Node v = parent[key];
    if (!v.IsDefined() || v.IsNull()) return absl::OkStatus();
    if (!ParseDuration(v.Scalar(), out)) {
      return Error(v, display, absl::StrCat("expected a duration like 500ms, 30s, 10m or 1h, got \"", v.Scalar(), "\""));
    }
    return absl::OkStatus();
  }

  // A number > 0 at parent[key] into *out; absent keeps it unset.
  absl::Status PositiveNumber(const YAML::Node& parent, const char* key, const std::string& display,
                              std::optional<double>* out) const {
    YAML::Node v = parent[key];
    if (!v.IsDefined() || v.IsNull()) return absl::OkStatus();
    double x = 0;
    try {
      x = v.as<double>();
    } catch (const YAML::Exception&) {
      return Error(v, display, absl::StrCat("expected a number > 0, got \"", v.Scalar(), "\""));
    }
    if (!(x > 0)) return Error(v, display, absl::StrCat("expected a number > 0, got ", v.Scalar()));
    *out = x;
    return absl::OkStatus();
  }

  absl::Status FabricCheck(const YAML::Node& f, FabricCheckSpec* out) const {
    if (f.IsScalar()) {
      try {
        out->enabled = f.as<bool>();
      } catch (const YAML::Exception&) {
        return Error(f, "fabric_check", absl::StrCat("expected true, false or a mapping, got \"", f.Scalar(), "\""));
      }
      return absl::OkStatus();
    }
    out->enabled = true;
    RETURN_IF_ERROR(PositiveNumber(f, "min_busbw_gbps", "fabric_check.min_busbw_gbps", &out->min_busbw_gbps));
    RETURN_IF_ERROR(PositiveNumber(f, "max_latency_us", "fabric_check.max_latency_us", &out->max_latency_us));
    return DurationKey(f, "timeout", "fabric_check.timeout", &out->timeout);
  }

  absl::Status HostPortKey(const YAML::Node& parent, const char* key, const std::string& display,
                           std::string* out) const {
    ASSIGN_OR_RETURN(*out, String(parent, key, display, false));
    std::string h;
    int p = 0;
    // Listen addresses may use port 0 (the OS picks; the process prints the port it got).
    std::string check = *out;
    if (check.size() > 2 && check.compare(check.size() - 2, 2, ":0") == 0) check.back() = '1';
    if (!out->empty() && !SplitHostPort(check, &h, &p)) {
      return Error(parent[key], display, absl::StrCat("expected HOST:PORT, got \"", *out, "\""));
    }
    return absl::OkStatus();
  }

  // "3 per 10m": at most 3 restarts in any 10-minute window.
  absl::Status RestartBudget(const YAML::Node& serve, ServeSpec* out) const {
    YAML::Node v = serve["restart_budget"];
    if (!v.IsDefined() || v.IsNull()) return absl::OkStatus();
    std::string text = v.Scalar();
    std::istringstream in(text);
    std::string count, per, window, extra;
    in >> count >> per >> window >> extra;
    std::chrono::milliseconds w{0};
    bool digits = !count.empty() && count.size() < 6 &&
                  std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || per != "per" || !ParseDuration(window, &w) || !extra.empty()) {
      return Error(v, "serve.restart_budget", absl::StrCat("expected \"N per DURATION\" (e.g. \"3 per 10m\"), got \"", text, "\""));
    }
    out->restart_budget = std::stoi(count);
    out->restart_window = w;
    return absl::OkStatus();
  }

  // A list of distinct, non-empty names (nccl.hca, nodes[].linktest.interfaces); `what` names
  // one in the message about an empty entry ("empty device name").
  absl::StatusOr<std::vector<std::string>> NameList(const YAML::Node& list, const std::string& display,
                                                    const char* what) const {
    std::vector<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string n = list[i].Scalar();
      const std::string d = absl::StrCat(display, "[", i, "]");
      if (n.empty()) return Error(list[i], d, absl::StrCat("empty ", what, " name"));
      if (std::find(names.begin(), names.end(), n) != names.end()) {
        return Error(list[i], d, absl::StrCat("\"", n, "\" listed twice"));
      }
      names.push_back(n);
    }
    return names;
  }

  absl::StatusOr<NcclSpec> Nccl(const YAML::Node& nccl, const std::string& display, NcclSpec base) const {
    if (!nccl.IsDefined() || nccl.IsNull()) return base;
    if (YAML::Node hca = nccl["hca"]; hca.IsDefined()) {
      ASSIGN_OR_RETURN(base.hca, NameList(hca, display + ".hca", "device"));
    }
    ASSIGN_OR_RETURN(std::string ifname, String(nccl, "socket_ifname", display + ".socket_ifname", false));
    if (!ifname.empty()) base.socket_ifname = ifname;
    ASSIGN_OR_RETURN(std::optional<int> gid, Int(nccl, "gid_index", display + ".gid_index"));
    if (gid) {
      if (*gid < 0 || *gid > 255) {
        return Error(nccl["gid_index"], display + ".gid_index", absl::StrCat("expected 0..255, got ", *gid));
      }
      base.gid_index = gid;
    }
    return base;
  }

  absl::StatusOr<ClusterSpec> Parse(const YAML::Node& root) const {
    ClusterSpec spec;
    spec.file = file_;
    if (!root.IsDefined() || root.IsNull()) return Error(1, "", "empty file: expected a mapping with cluster, model and nodes");
    if (!root.IsMap()) return Error(root, "", "expected a mapping with cluster, model and nodes at the top level");
    RETURN_IF_ERROR(CheckKeys(root, "", ""));

    ASSIGN_OR_RETURN(spec.name, String(root, "cluster", "cluster", false));
    YAML::Node model = root["model"];
    if (model.IsDefined()) {
      ASSIGN_OR_RETURN(spec.model_path, String(model, "path", "model.path", false));
      ASSIGN_OR_RETURN(spec.model_served_name, String(model, "served_name", "model.served_name", false));
    }
    if (YAML::Node engine = root["engine"]; engine.IsDefined()) {
      if (YAML::Node f = engine["memory_fraction"]; f.IsDefined()) {
        double v = 0;
        try {
          v = f.as<double>();
        } catch (const YAML::Exception&) {
          return Error(f, "engine.memory_fraction", absl::StrCat("expected a number in (0, 1], got \"", f.Scalar(), "\""));
        }
        if (!(v > 0.0 && v <= 1.0)) {
          return Error(f, "engine.memory_fraction", absl::StrCat("expected a number in (0, 1], got ", f.Scalar()));
        }
        spec.memory_fraction = v;
        spec.memory_fraction_set = true;
      }
      ASSIGN_OR_RETURN(spec.engine_backend, String(engine, "backend", "engine.backend", false));
      if (!spec.engine_backend.empty() && spec.engine_backend != "cpu" && spec.engine_backend != "cuda") {
        return Error(engine["backend"], "engine.backend", absl::StrCat("expected cpu or cuda, got \"", spec.engine_backend, "\""));
      }
      // The KV cache's element type, as the engine's ParseKvDtype takes it (checked here too, so a
      // typo fails `up` before any agent loads anything).
      ASSIGN_OR_RETURN(spec.engine_kv_cache_dtype, String(engine, "kv_cache_dtype", "engine.kv_cache_dtype", false));
      if (const std::string& d = spec.engine_kv_cache_dtype;
          !d.empty() && d != "auto" && d != "f32" && d != "bf16" && d != "fp8" && d != "fp8_e4m3") {
        return Error(engine["kv_cache_dtype"], "engine.kv_cache_dtype",
                     absl::StrCat("expected auto, f32, bf16 or fp8, got \"", d, "\""));
      }
      // A GPU process owns its device: the default leaves 10% for the CUDA context and NCCL.
      if (!spec.memory_fraction_set && spec.engine_backend == "cuda") spec.memory_fraction = 0.90;
    }
    if (YAML::Node engine = root["engine"]; engine.IsDefined()) {
      RETURN_IF_ERROR(IntIn(engine, "kv_tokens", "engine.kv_tokens", 0, int64_t{1} << 40, &spec.engine_kv_tokens));
      int64_t v = spec.engine_max_num_seqs;
      RETURN_IF_ERROR(IntIn(engine, "max_num_seqs", "engine.max_num_seqs", 1, 65536, &v));
      spec.engine_max_num_seqs = static_cast<int>(v);
      v = spec.engine_max_model_len;
      RETURN_IF_ERROR(IntIn(engine, "max_model_len", "engine.max_model_len", 0, 1 << 24, &v));
      spec.engine_max_model_len = static_cast<int>(v);
    }
    if (YAML::Node api = root["api"]; api.IsDefined()) {
      RETURN_IF_ERROR(HostPortKey(api, "listen", "api.listen", &spec.api_listen));
      ASSIGN_OR_RETURN(spec.api_key_file, String(api, "key_file", "api.key_file", false));
      RETURN_IF_ERROR(IntIn(api, "max_body_bytes", "api.max_body_bytes", 0, int64_t{1} << 30, &spec.api_max_body_bytes));
    }
    if (YAML::Node auth = root["auth"]; auth.IsDefined()) {
      ASSIGN_OR_RETURN(spec.auth_token_file, String(auth, "token_file", "auth.token_file", false));
    }
    if (YAML::Node tls = root["tls"]; tls.IsDefined()) {
      ASSIGN_OR_RETURN(spec.tls_ca, String(tls, "ca", "tls.ca", true));
      ASSIGN_OR_RETURN(spec.tls_cert, String(tls, "cert", "tls.cert", true));
      ASSIGN_OR_RETURN(spec.tls_key, String(tls, "key", "tls.key", true));
    }
    if (YAML::Node pf = root["preflight"]; pf.IsDefined()) {
      ASSIGN_OR_RETURN(std::string verify, String(pf, "verify", "preflight.verify", false));
      if (!verify.empty() && verify != "cache" && verify != "full") {
        return Error(pf["verify"], "preflight.verify", absl::StrCat("expected cache or full, got \"", verify, "\""));
      }
      spec.preflight_verify_full = verify == "full";
    }
    if (YAML::Node probe = root["probe"]; probe.IsDefined()) {
      if (probe["prompt"].IsDefined()) {
        ASSIGN_OR_RETURN(spec.probe.prompt, String(probe, "prompt", "probe.prompt", false));
        if (spec.probe.prompt.empty()) return Error(probe["prompt"], "probe.prompt", "expected a non-empty prompt");
      }
      if (YAML::Node ids = probe["prompt_ids"]; ids.IsDefined()) {
        if (ids.size() == 0) return Error(ids, "probe.prompt_ids", "expected at least one token id");
        for (size_t i = 0; i < ids.size(); ++i) {
          int64_t id = -1;
          try {
            id = ids[i].as<int64_t>();
          } catch (const YAML::Exception&) {
            id = -1;
          }
          if (id < 0 || id > (int64_t{1} << 31) - 1) {
            return Error(ids[i], absl::StrCat("probe.prompt_ids[", i, "]"),
                         absl::StrCat("expected a token id (a whole number >= 0), got \"", ids[i].Scalar(), "\""));
          }
          spec.probe.prompt_ids.push_back(static_cast<int32_t>(id));
        }
      }
      ASSIGN_OR_RETURN(spec.probe.expect, String(probe, "expect", "probe.expect", false));
      int64_t v = spec.probe.max_tokens;
      RETURN_IF_ERROR(IntIn(probe, "max_tokens", "probe.max_tokens", 1, 4096, &v));
      spec.probe.max_tokens = static_cast<int>(v);
      RETURN_IF_ERROR(DurationKey(probe, "interval", "probe.interval", &spec.probe.interval));
      RETURN_IF_ERROR(DurationKey(probe, "timeout", "probe.timeout", &spec.probe.timeout));
    }
    if (YAML::Node f = root["fabric_check"]; f.IsDefined()) RETURN_IF_ERROR(FabricCheck(f, &spec.fabric_check));
    if (YAML::Node serve = root["serve"]; serve.IsDefined()) {
      RETURN_IF_ERROR(RestartBudget(serve, &spec.serve));
      RETURN_IF_ERROR(HostPortKey(serve, "metrics_listen", "serve.metrics_listen", &spec.serve.metrics_listen));
      RETURN_IF_ERROR(DurationKey(serve, "stuck_after", "serve.stuck_after", &spec.serve.stuck_after));
    }
    if (YAML::Node t = root["timeouts"]; t.IsDefined()) {
      RETURN_IF_ERROR(DurationKey(t, "preflight", "timeouts.preflight", &spec.timeouts.preflight));
      RETURN_IF_ERROR(DurationKey(t, "load", "timeouts.load", &spec.timeouts.load));
      RETURN_IF_ERROR(DurationKey(t, "join", "timeouts.join", &spec.timeouts.join));
      RETURN_IF_ERROR(DurationKey(t, "probe", "timeouts.probe", &spec.timeouts.probe));
      RETURN_IF_ERROR(DurationKey(t, "leave", "timeouts.leave", &spec.timeouts.leave));
      RETURN_IF_ERROR(DurationKey(t, "status", "timeouts.status", &spec.timeouts.status));
    }
    ASSIGN_OR_RETURN(NcclSpec nccl_defaults, Nccl(root["nccl"], "nccl", NcclSpec{}));

    YAML::Node nodes = root["nodes"];
    if (!nodes.IsDefined()) return Error(root, "nodes", "required key is missing: list every node with name and agent");
    if (nodes.size() == 0) return Error(nodes, "nodes", "the list is empty: a cluster needs at least one node");
    std::set<std::string> names, agents;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const YAML::Node n = nodes[i];
      std::string d = absl::StrCat("nodes[", i, "]");
      NodeSpec node;
      node.line = n.Mark().line + 1;
      ASSIGN_OR_RETURN(node.name, String(n, "name", d + ".name", true));
      if (node.name.empty() || node.name.find_first_of(" \t/=,") != std::string::npos) {
        return Error(n["name"], d + ".name", absl::StrCat("expected a name without spaces, '/', '=' or ',', got \"", node.name, "\""));
      }
      if (!names.insert(node.name).second) {
        return Error(n["name"], d + ".name", absl::StrCat("duplicate node name \"", node.name, "\""));
      }
      ASSIGN_OR_RETURN(node.agent, String(n, "agent", d + ".agent", true));
      std::string host;
      int port = 0;
      if (!SplitHostPort(node.agent, &host, &port)) {
        return Error(n["agent"], d + ".agent", absl::StrCat("expected HOST:PORT, got \"", node.agent, "\""));
      }
      if (!agents.insert(node.agent).second) {
        return Error(n["agent"], d + ".agent", absl::StrCat("agent \"", node.agent, "\" is already used by another node"));
      }
      ASSIGN_OR_RETURN(std::string own_model, String(n, "model_path", d + ".model_path", false));
      node.model_path = own_model.empty() ? spec.model_path : own_model;
      if (node.model_path.empty()) {
        return Error(n, d + ".model_path", "no model folder: set model.path (or model_path on every node)");
      }
      ASSIGN_OR_RETURN(node.nccl, Nccl(n["nccl"], d + ".nccl", nccl_defaults));
      if (YAML::Node lt = n["linktest"]; lt.IsDefined() && lt["interfaces"].IsDefined()) {
        ASSIGN_OR_RETURN(node.linktest_interfaces, NameList(lt["interfaces"], d + ".linktest.interfaces", "interface"));
      }
      spec.nodes.push_back(std::move(node));
    }

    int n_nodes = static_cast<int>(spec.nodes.size());
    spec.tensor_parallel = n_nodes;
    if (YAML::Node parallel = root["parallel"]; parallel.IsDefined()) {
      ASSIGN_OR_RETURN(std::optional<int> tp, Int(parallel, "tensor", "parallel.tensor"));
      if (tp) {
        // One GPU per node (DGX Spark): a tensor-parallel group spans `tensor` nodes, and the
        // nodes are split into nodes/tensor replicas. Uneven splits would strand nodes.
        if (*tp < 1 || *tp > n_nodes || n_nodes % *tp != 0) {
          return Error(parallel["tensor"], "parallel.tensor",
                       absl::StrCat("expected a divisor of the node count (", n_nodes, "), got ", *tp));
        }
        spec.tensor_parallel = *tp;
      }
    }
    return spec;
  }

 private:
  std::string file_;
};

}  // namespace

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  std::string h, p;
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') return false;
    h = address.substr(1, close - 1);
    p = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) return false;
    h = address.substr(0, colon);
    p = address.substr(colon + 1);
    if (h.find(':') != std::string::npos) return false;  // bare IPv6 needs brackets
  }
  if (h.empty() || p.empty() || p.size() > 5) return false;
  if (h.find_first_of(" \t/") != std::string::npos) return false;
  if (!std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  int v = std::stoi(p);
  if (v < 1 || v > 65535) return false;
  *host = h;
  *port = v;
  return true;
}

bool ParseDuration(const std::string& text, std::chrono::milliseconds* out) {
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0 || i > 12) return false;
  double v = 0;
  try {
    v = std::stod(text.substr(0, i));
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(i);
  double ms = 0;
  if (unit == "ms") ms = v;
  else if (unit == "s" || unit.empty()) ms = v * 1000;
  else if (unit == "m") ms = v * 60000;
  else if (unit == "h") ms = v * 3600000;
  else return false;
  if (!(ms >= 1) || ms > 7.0 * 24 * 3600 * 1000) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(ms));
  return true;
}

const std::vector<std::string>& KnownClusterKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& k : kKnownKeys) out.push_back(k.path);
    return out;
  }();
  return keys;
}

absl::StatusOr<ClusterSpec> ParseClusterSpec(const std::string& yaml_text, const std::string& file) {
  SpecParser parser(file);
  // yaml-cpp reports errors by throwing; this is the one place that calls it.
  try {
    YAML::Node root = YAML::Load(yaml_text);
    return parser.Parse(root);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return parser.Error(line, "", absl::StrCat("invalid YAML: ", e.msg));
  }
}

absl::StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read the cluster file (", std::strerror(errno), ")"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseClusterSpec(ss.str(), path);
}

}  // namespace tandem::controller
