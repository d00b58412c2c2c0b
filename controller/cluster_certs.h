// The files of a cluster's mutual TLS, as `tandemctl certs` writes them into one folder:
//   ca.pem, ca.key                 the cluster CA (reused when both exist, unless force)
//   <node>.pem, <node>.key         one per nodes[] entry: server + client certificate
//   controller.pem, controller.key tandemctl's client certificate
// Private keys are created mode 0600 from the first byte (O_CREAT|O_EXCL, or mkstemp + rename
// when replacing), certificates 0644. Nothing is written unless every certificate could be made.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/cluster_spec.h"

namespace tandem::controller {

struct ClusterCertOptions {
  std::string out_dir;
  int days = 365;      // validity of the node and controller certificates
  bool force = false;  // replace existing files, the CA included
  // Extra subjectAltNames per node name: "DNS:x", "IP:y", or a bare host (IP literal or DNS).
  std::map<std::string, std::vector<std::string>> extra_sans;
};

struct IssuedFiles {
  std::string name;       // node name, or "controller"
  std::string cert_path;
  std::string key_path;
  std::vector<std::string> subject_alt_names;
};

struct ClusterCertResult {
  IssuedFiles ca;
  bool ca_reused = false;
  int64_t ca_not_after_unix = 0;
  std::vector<IssuedFiles> nodes;  // in cluster.yaml order
  IssuedFiles controller;
};

// The CA lasts at least this long (or longer than the leaves asked for): rotating leaves is a
// re-run, rotating the CA means touching every node's trust.
inline constexpr int kCaDays = 3650;

// The subjectAltNames of a node's certificate: DNS:<name>, the host of `agent` (IP or DNS),
// DNS:localhost, IP:127.0.0.1, IP:::1, then `extra` (bare hosts become IP:/DNS:); duplicates
// dropped, order kept.
std::vector<std::string> NodeSubjectAltNames(const NodeSpec& node, const std::vector<std::string>& extra);

// Makes (or reuses) the CA and writes every file listed above under options.out_dir (created
// mode 0700 when missing). Errors, each naming the path or node:
//   AlreadyExists      a node/controller file exists and force is off (nothing written)
//   FailedPrecondition only one of ca.pem/ca.key exists, ca.key is group/world-readable, the CA
//                      has expired or expires before the leaves would
//   InvalidArgument    a node name that cannot be a file or DNS name, a bad extra SAN, an
//                      unknown node in extra_sans, days out of range
//   Internal           a write or OpenSSL failed
absl::StatusOr<ClusterCertResult> WriteClusterCertificates(const ClusterSpec& spec, const ClusterCertOptions& options);

}  // namespace tandem::controller
