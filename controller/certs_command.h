// `tandemctl certs`: makes the cluster CA and every node's and the controller's certificate
// for mutual TLS (cluster_certs.h), then says where each file goes. Exit 0 written, 1 a
// failure (an existing file without --force, a write error), 2 usage or a bad cluster file.
//
// Unlike the other commands its flags are parsed here, not in main.cc: the --san syntax is
// part of what the command means, and a test can then run the command as an operator would.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem::controller {

extern const char kCertsUsage[];

// One --san value: "NODE=EXTRA[,EXTRA...]" where a later item may start another node
// ("a=10.0.0.5,a.lan,b=10.0.0.6"). Appends to `out`. InvalidArgument when no node is named
// first or an item is empty.
absl::Status ParseSanFlag(const std::string& value, std::map<std::string, std::vector<std::string>>* out);

// Runs `tandemctl certs ARGS...` (ARGS without "certs"), printing to stdout/stderr.
int RunCertsCommand(const std::vector<std::string>& args);

}  // namespace tandem::controller
