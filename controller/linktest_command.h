// `tandemctl linktest -f cluster.yaml`: a timed TCP transfer between every ordered pair of nodes,
// every interface of a pair at once (Agent.LinkReceive on the receiver, Agent.LinkSend on the
// sender), the interface counters of both ends around it, and one verdict per half with its
// evidence (docs/linktest.md). Pairs run one after the other so that they do not share the
// wire. Exit 0 every half healthy (or at its PCIe ceiling), 1 a half is not (or a pair could not
// run, or nothing could be paired), 2 usage or a bad cluster file.
//
// Its flags are defined here (as bench's are), so a test parses a command line as an operator
// writes it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/cli.h"

namespace tandem::controller {

struct LinktestCommandOptions {
  std::string cluster_file = "cluster.yaml";
  std::chrono::milliseconds duration{5000};  // of each pair's transfer, 1..60 s
  int streams = 4;                           // TCP streams per interface
  bool json = false;
  // GetFacts' deadline, and what the transfer RPCs get beyond the duration.
  std::chrono::milliseconds timeout{20000};
  std::vector<std::string> interfaces;       // --interfaces: "IF" (every node) or "NODE=IF"
  bool no_collectives = false;               // --no-collectives: skip the group's all-reduces
  std::string transport;                     // --transport tcp|rdma|both ("": both where RDMA exists)
};

void AddLinktestFlags(CLI::App* command, LinktestCommandOptions* options);

int RunLinktest(const LinktestCommandOptions& options);

}  // namespace tandem::controller
