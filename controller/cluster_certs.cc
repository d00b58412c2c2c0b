#include "controller/cluster_certs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/secret_file.h"
#include "common/status.h"
#include "controller/cert_authority.h"

namespace tandem::controller {
namespace {

constexpr mode_t kKeyMode = 0600;
constexpr mode_t kCertMode = 0644;
constexpr char kControllerName[] = "controller";
constexpr char kControllerCommonName[] = "tandemctl";

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

absl::Status WriteError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

// Writes all of `text` to fd, then sets `mode` (the umask must not loosen or tighten it: a
// certificate other users cannot read breaks agents run as another user) and syncs.
absl::Status FillFile(int fd, const std::string& text, mode_t mode, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return WriteError("write", path);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0) return WriteError("chmod", path);
  if (::fsync(fd) != 0) return WriteError("sync", path);
  return absl::OkStatus();
}

// Creates `path` with `mode` from the first byte. Without `replace` an existing file is an
// error (O_EXCL); with it the text goes to a mkstemp file (created 0600) in the same folder that
// is renamed over `path`, so a reader never sees a half-written or briefly world-readable key.
absl::Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode, bool replace) {
  if (!replace) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return WriteError("create", path);
    absl::Status st = FillFile(fd, text, mode, path);
    ::close(fd);
    if (!st.ok()) ::unlink(path.c_str());
    return st;
  }
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return WriteError("create a temporary file next to", path);
  absl::Status st = FillFile(fd, text, mode, tmp);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = WriteError("replace", path);
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

absl::Status EnsureDirectory(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("no output folder given");
  // 0700: the folder holds the CA key. An existing folder is left as the operator made it.
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a folder"));
    }
    return absl::OkStatus();
  }
  return WriteError("create the folder", dir);
}

// ca.pem + ca.key as they are on disk, or nullopt when neither exists (or `force`).
absl::StatusOr<std::optional<CertAuthority>> ExistingCa(const IssuedFiles& ca, bool force) {
  bool have_cert = Exists(ca.cert_path), have_key = Exists(ca.key_path);
  if (force || (!have_cert && !have_key)) return std::optional<CertAuthority>();
  if (have_cert != have_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        have_cert ? ca.cert_path : ca.key_path, " exists but ", have_cert ? ca.key_path : ca.cert_path,
        " does not: restore it, or pass --force to make a new CA (every node then needs new files)"));
  }
  SecretFileRules key_rules;
  key_rules.min_bytes = 1;
  key_rules.strip_trailing_whitespace = false;
  ASSIGN_OR_RETURN(std::string key_pem, ReadSecretFile(ca.key_path, "the CA key", key_rules));
  SecretFileRules cert_rules = key_rules;
  cert_rules.owner_only = false;  // a certificate is public
  ASSIGN_OR_RETURN(std::string cert_pem, ReadSecretFile(ca.cert_path, "the CA certificate", cert_rules));
  absl::StatusOr<CertAuthority> loaded = CertAuthority::FromPem({cert_pem, key_pem});
  if (!loaded.ok()) {
    // FailedPrecondition, not InvalidArgument: the folder's state is wrong, not the request.
    return absl::FailedPreconditionError(
        absl::StrCat(ca.cert_path, ": ", StatusText(loaded.status()), " (--force makes a new CA)"));
  }
  return std::optional<CertAuthority>(std::move(*loaded));
}

IssuedFiles FilesFor(const std::string& dir, const std::string& name) {
  IssuedFiles f;
  f.name = name;
  f.cert_path = absl::StrCat(dir, "/", name, ".pem");
  f.key_path = absl::StrCat(dir, "/", name, ".key");
  return f;
}

absl::Status CheckNodeNames(const ClusterSpec& spec, const ClusterCertOptions& options) {
  std::set<std::string> names;
  for (const NodeSpec& node : spec.nodes) {
    // The parser already refuses '/', so a name cannot leave the folder; these two would
    // overwrite the CA's or the controller's files.
    if (node.name == "ca" || node.name == kControllerName) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.file, ":", node.line, ": node name \"", node.name, "\" is reserved for ", node.name,
          ".pem/.key in the certificate folder: rename the node"));
    }
    names.insert(node.name);
  }
  for (const auto& [name, sans] : options.extra_sans) {
    if (!names.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("extra subjectAltNames for \"", name, "\": no such node in ",
                                                     spec.file, " (nodes: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> NodeSubjectAltNames(const NodeSpec& node, const std::vector<std::string>& extra) {
  std::string host;
  int port = 0;
  std::vector<std::string> all = {"DNS:" + node.name};
  if (SplitHostPort(node.agent, &host, &port)) all.push_back(SanEntryForHost(host));
  // Loopback names let a node's own tools (and single-machine test clusters) reach the agent.
  all.insert(all.end(), {"DNS:localhost", "IP:127.0.0.1", "IP:::1"});
  for (const std::string& e : extra) all.push_back(SanEntryForHost(e));
  std::vector<std::string> unique;
  for (const std::string& e : all) {
    if (std::find(unique.begin(), unique.end(), e) == unique.end()) unique.push_back(e);
  }
  return unique;
}

absl::StatusOr<ClusterCertResult> WriteClusterCertificates(const ClusterSpec& spec, const ClusterCertOptions& options) {
  RETURN_IF_ERROR(CheckNodeNames(spec, options));
  RETURN_IF_ERROR(EnsureDirectory(options.out_dir));
  ClusterCertResult result;
  result.ca = FilesFor(options.out_dir, "ca");
  result.controller = FilesFor(options.out_dir, kControllerName);
  result.controller.subject_alt_names = {};  // a client only: nobody dials tandemctl
  for (const NodeSpec& node : spec.nodes) {
    IssuedFiles f = FilesFor(options.out_dir, node.name);
    auto extra = options.extra_sans.find(node.name);
    f.subject_alt_names =
        NodeSubjectAltNames(node, extra == options.extra_sans.end() ? std::vector<std::string>{} : extra->second);
    result.nodes.push_back(std::move(f));
  }

  // Refuse before making anything, so a refused run leaves the folder as it was.
  if (!options.force) {
    std::vector<std::string> existing;
    std::vector<const IssuedFiles*> leaves = {&result.controller};
    for (const IssuedFiles& f : result.nodes) leaves.push_back(&f);
    for (const IssuedFiles* f : leaves) {
      if (Exists(f->cert_path)) existing.push_back(f->cert_path);
      if (Exists(f->key_path)) existing.push_back(f->key_path);
    }
    if (!existing.empty()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "not replacing ", absl::StrJoin(existing, ", "),
          ": pass --force to replace every file (a new CA too), or move them away to issue new "
          "certificates from the existing CA"));
    }
  }

  ASSIGN_OR_RETURN(std::optional<CertAuthority> ca, ExistingCa(result.ca, options.force));
  result.ca_reused = ca.has_value();
  if (!ca) {
    std::string subject = spec.name.empty() ? "tandem cluster CA" : absl::StrCat("tandem cluster CA ", spec.name);
    ASSIGN_OR_RETURN(CertAuthority made, CertAuthority::Create(subject, std::max(kCaDays, options.days + 1)));
    ca.emplace(std::move(made));
  }
  result.ca_not_after_unix = ca->not_after_unix();

  // Every certificate is made in memory first: a bad SAN or an expiring CA writes nothing.
  std::vector<PemPair> node_pems;
  for (IssuedFiles& f : result.nodes) {
    absl::StatusOr<PemPair> pem =
        ca->Issue({f.name, f.subject_alt_names, LeafUsage::kServerAndClient, options.days});
    if (!pem.ok()) {
      return absl::Status(pem.status().code(), absl::StrCat("node ", f.name, ": ", StatusText(pem.status())));
    }
    node_pems.push_back(std::move(*pem));
  }
  ASSIGN_OR_RETURN(PemPair controller_pem,
                   ca->Issue({kControllerCommonName, {}, LeafUsage::kClientOnly, options.days}));

  if (!result.ca_reused) {
    ASSIGN_OR_RETURN(PemPair ca_pem, ca->ToPem());
    RETURN_IF_ERROR(WriteNewFile(result.ca.key_path, ca_pem.key_pem, kKeyMode, options.force));
    RETURN_IF_ERROR(WriteNewFile(result.ca.cert_path, ca_pem.cert_pem, kCertMode, options.force));
  }
  for (size_t i = 0; i < result.nodes.size(); ++i) {
    RETURN_IF_ERROR(WriteNewFile(result.nodes[i].key_path, node_pems[i].key_pem, kKeyMode, options.force));
    RETURN_IF_ERROR(WriteNewFile(result.nodes[i].cert_path, node_pems[i].cert_pem, kCertMode, options.force));
  }
  RETURN_IF_ERROR(WriteNewFile(result.controller.key_path, controller_pem.key_pem, kKeyMode, options.force));
  RETURN_IF_ERROR(WriteNewFile(result.controller.cert_path, controller_pem.cert_pem, kCertMode, options.force));
  return result;
}

}  // namespace tandem::controller
