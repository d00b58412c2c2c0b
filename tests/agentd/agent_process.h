// A real tandem-agentd for tests: started on 127.0.0.1 port 0 (gRPC and /metrics), its ports
// read back from the ready line, stubs that carry the cluster token.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "tests/common/test_util.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::testing {

inline std::string AgentBinaryPath() {
  if (const char* p = std::getenv("TANDEM_AGENTD")) return p;
  return TANDEM_AGENTD_BINARY;
}

// Writes a cluster token file the agent accepts (mode 0600, >= 16 bytes).
inline std::string WriteTokenFile(const std::string& path, const std::string& token) {
  std::ofstream(path) << token << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

inline std::string SlurpFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct AgentProcess {
  std::string name, dir;
  std::string token;  // sent by stubs made with Context()
  std::map<std::string, std::string> env;  // more environment for the agent (NOTIFY_SOCKET, ...)
  Subprocess proc;
  int grpc_port = 0, metrics_port = 0;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(grpc_port); }
  std::string log() const { return SlurpFile(dir + "/stderr"); }

  // `token_file` "" = no auth. Returns "" or what went wrong (with the agent's stderr).
  std::string Start(const std::string& node, const std::string& workdir, const std::string& token_file,
                    const std::vector<std::string>& extra = {}) {
    name = node;
    dir = workdir;
    std::filesystem::create_directories(dir);
    SubprocessOptions so;
    so.argv = {AgentBinaryPath(), "--listen", "127.0.0.1:0", "--node-name", node, "--state-dir", dir + "/state",
               "--metrics-listen", "127.0.0.1:0", "--model-root", CanonicalTestdataDir()};
    if (!token_file.empty()) {
      so.argv.push_back("--token-file");
      so.argv.push_back(token_file);
    }
    so.argv.insert(so.argv.end(), extra.begin(), extra.end());
    so.stdout_path = dir + "/stdout";
    so.stderr_path = dir + "/stderr";
    so.env = env;
    so.env.emplace("TANDEM_LOG_LEVEL", "info");
    std::string err;
    if (!proc.Start(so, &err)) return err;
    static const std::regex kReady(R"(tandem-agentd ready node=\S+ grpc=\S+:(\d+) metrics=\S+:(\d+))");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string text = SlurpFile(so.stdout_path);
      if (std::regex_search(text, m, kReady)) {
        grpc_port = std::stoi(m[1]);
        metrics_port = std::stoi(m[2]);
        return "";
      }
      if (!proc.running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "agent " + node + " did not start; stderr:\n" + log();
  }

  std::unique_ptr<v1::AgentControl::Stub> Control() const {
    return v1::AgentControl::NewStub(grpc::CreateChannel(endpoint(), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<v1::Agent::Stub> Agent() const {
    return v1::Agent::NewStub(grpc::CreateChannel(endpoint(), grpc::InsecureChannelCredentials()));
  }
  // A context with a deadline and (when set) the token.
  std::unique_ptr<grpc::ClientContext> Context(std::chrono::milliseconds deadline = std::chrono::seconds(30)) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + deadline);
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }
};

}  // namespace tandem::testing
