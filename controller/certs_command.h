// `tandemctl certs`: makes the cluster CA and every node's and the controller's certificate
// for mutual TLS (cluster_certs.h), then says where each file goes. Exit 0 written, 1 a
// failure (an existing file without --force, a write error), 2 usage or a bad cluster file.
//
// Unlike the other commands its flags are defined here, not in main.cc: the --san syntax is
// part of what the command means, and a test can then run the command as an operator would.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cli.h"
#include "controller/cluster_certs.h"

namespace tandem::controller {

// One --san value: "NODE=EXTRA[,EXTRA...]" where a later item may start another node
// ("a=10.0.0.5,a.lan,b=10.0.0.6"). Appends to `out`. InvalidArgument when no node is named
// first or an item is empty.
absl::Status ParseSanFlag(const std::string& value, std::map<std::string, std::vector<std::string>>* out);

struct CertsCommandOptions {
  std::string cluster_file = "cluster.yaml";
  ClusterCertOptions certs;       // extra_sans: filled from `sans` by RunCerts
  std::vector<std::string> sans;  // each --san value, checked by ParseSanFlag when parsed
};

// The command's description and flags, on the `certs` subcommand (or a test's App).
void AddCertsFlags(CLI::App* command, CertsCommandOptions* options);

// Writes the files and prints where each goes; the exit code.
int RunCerts(const CertsCommandOptions& options);

}  // namespace tandem::controller
