// Two real tandem-agentd processes on loopback (TP=2, cpu backend, Gloo over 127.0.0.1) run as
// an operator should run them: the cluster token, mutual TLS (certificates from `tandemctl
// certs`), model folders = temp copies of tests/data/qwen3moe-tiny (or ModelFixture()) under the
// agents' --model-root; and tandemctl run against them: the fixture of the integration tests that
// drive the controller (orchestration_integration_test, serve_recovery_integration_test).
// The test target defines TANDEM_AGENTD_BIN and TANDEMCTL_BIN.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem::testing {

// One HTTP/1.1 request over a plain socket (Connection: close); returns the status code (0 when
// the connection failed) and the whole response (headers and body) in *response.
inline int HttpRequest(int port, const std::string& method, const std::string& path, const std::string& body,
                       std::string* response) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{10, 0};  // every blocking read and write has a deadline
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return 0;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty()) {
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  *response = out;
  if (out.rfind("HTTP/1.", 0) != 0 || out.size() < 12) return 0;
  return std::atoi(out.c_str() + 9);
}

// The body of a response HttpRequest returned (what follows the blank line after the headers);
// empty when it has none.
inline std::string ResponseBody(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

struct CtlResult {
  int exit_code = -1;
  std::string out;
  nlohmann::json json;  // the first JSON object in the output (status --json), else discarded
};

class LoopbackCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::tandem::testing::MakeTempDir("tandem-orch");
    std::filesystem::path tiny = std::filesystem::path(::tandem::testing::TestdataDir()) / ModelFixture();
    ASSERT_TRUE(std::filesystem::exists(tiny / "model.safetensors")) << tiny;
    for (const char* m : {"model1", "model2"}) {
      std::filesystem::create_directories(dir_ / m);
      std::filesystem::copy_file(tiny / "config.json", dir_ / m / "config.json");
      std::filesystem::copy_file(tiny / "model.safetensors", dir_ / m / "model.safetensors");
      // NVFP4 exports (ModelOpt) keep their quantization settings in a second file as well.
      if (std::filesystem::exists(tiny / "hf_quant_config.json")) {
        std::filesystem::copy_file(tiny / "hf_quant_config.json", dir_ / m / "hf_quant_config.json");
      }
    }
    // Secret files: owner-only and at least 16 bytes, or agent and controller refuse them.
    WriteSecret("token", "integration-token\n");
    WriteSecret("badtoken", "not-the-cluster-token\n");
    ports_ = {UnusedLoopbackPort(), UnusedLoopbackPort()};
    WriteTextFile((dir_ / "certs.yaml").string(), "model: {path: /m}\nnodes:\n  - {name: n1, agent: '127.0.0.1:" +
                                                      std::to_string(ports_[0]) + "'}\n  - {name: n2, agent: '127.0.0.1:" +
                                                      std::to_string(ports_[1]) + "'}\n");
    CtlResult certs = Ctl({"certs", "-f", (dir_ / "certs.yaml").string(), "--out", (dir_ / "tls").string()});
    ASSERT_EQ(certs.exit_code, 0) << certs.out;
  }
  void TearDown() override {
    if (serve_.pid() > 0) serve_.Stop(std::chrono::milliseconds(2000));
    for (auto& a : agents_) a.Stop(std::chrono::milliseconds(2000));
    std::error_code ec;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_, ec);
    else std::printf("kept %s for inspection\n", dir_.c_str());
  }

  // The folder under tests/data that model1 and model2 copy; a parametrized test brings `up`
  // another model (a hybrid) by overriding it.
  virtual std::string ModelFixture() const { return "qwen3moe-tiny"; }

  std::string Read(const std::filesystem::path& p) const { return ReadTextFile(p.string()); }

  std::string Tls(const std::string& file) const { return (dir_ / "tls" / file).string(); }

  void WriteSecret(const std::string& name, const std::string& text) {
    WriteTextFile((dir_ / name).string(), text);
    ::chmod((dir_ / name).c_str(), 0600);
  }

  // Agent i (n1 = head, n2 = worker) on its fixed port, confined to the test's folder; waits for
  // its ready line. Called again after a kill, it restarts the agent on the same port. `env` is
  // added to its environment (e.g. TANDEM_FAILPOINTS).
  void StartAgent(int i, const std::map<std::string, std::string>& env = {}) {
    std::string name = "n" + std::to_string(i + 1);
    SubprocessOptions so;
    so.argv = {TANDEM_AGENTD_BIN, "--listen", "127.0.0.1:" + std::to_string(ports_[i]), "--node-name", name,
               "--state-dir", (dir_ / ("state-" + name)).string(), "--token-file", (dir_ / "token").string(),
               "--model-root", dir_.string(), "--tls-cert", Tls(name + ".pem"), "--tls-key", Tls(name + ".key"),
               "--tls-ca", Tls("ca.pem")};
    so.env = env;
    std::filesystem::path out = dir_ / (name + ".out");
    so.stdout_path = out.string();
    so.stderr_path = (dir_ / (name + ".err")).string();
    std::filesystem::remove(out);
    Subprocess p;
    std::string error;
    ASSERT_TRUE(p.Start(so, &error)) << error;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Read(out).find("tandem-agentd ready") == std::string::npos) {
      ASSERT_TRUE(p.running()) << "agent exited: " << Read(so.stderr_path);
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no ready line from " << name;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (static_cast<size_t>(i) < agents_.size()) agents_[i] = std::move(p);
    else agents_.push_back(std::move(p));
  }

  // kill -9 agent i and reap it.
  void KillAgent(int i) {
    agents_[i].Signal(SIGKILL);
    ASSERT_TRUE(agents_[i].Wait(std::chrono::seconds(5)).has_value());
  }

  // `serve_yaml`: the serve: block (restart budget etc.).
  std::filesystem::path WriteCluster(const std::string& token_file, const std::string& name = "cluster.yaml",
                                     const std::string& serve_yaml = "serve:\n  restart_budget: 5 per 10m\n") {
    std::string y = "cluster: it\nmodel:\n  served_name: tiny\nengine:\n  backend: cpu\n  memory_fraction: 0.01\n"
                    "  kv_tokens: 2048\n  max_num_seqs: 4\napi:\n  listen: 127.0.0.1:0\nauth:\n  token_file: " +
                    (dir_ / token_file).string() + "\ntls:\n  ca: " + Tls("ca.pem") + "\n  cert: " +
                    Tls("controller.pem") + "\n  key: " + Tls("controller.key") +
                    "\nprobe:\n  prompt_ids: [1, 2, 3, 4]\n  max_tokens: 6\n  interval: 2s\n" + serve_yaml +
                    "timeouts:\n  load: 60s\n  join: 30s\n  leave: 5s\nnodes:\n";
    for (int i = 0; i < 2; ++i) {
      y += "  - name: n" + std::to_string(i + 1) + "\n    agent: 127.0.0.1:" + std::to_string(ports_[i]) +
           "\n    model_path: " + (dir_ / ("model" + std::to_string(i + 1))).string() + "\n";
    }
    WriteTextFile((dir_ / name).string(), y);
    return dir_ / name;
  }

  std::string StateDir() const { return (dir_ / "ctl").string(); }

  CtlResult Ctl(std::vector<std::string> args, int timeout_s = 120) {
    CtlResult r;
    SubprocessOptions so;
    so.argv = {TANDEMCTL_BIN};
    so.argv.insert(so.argv.end(), args.begin(), args.end());
    if (args[0] == "up" || args[0] == "status" || args[0] == "probe") {
      so.argv.insert(so.argv.end(), {"--state-dir", StateDir()});
    }
    so.stdout_path = (dir_ / "ctl.out").string();
    so.stderr_path = so.stdout_path;
    std::filesystem::remove(so.stdout_path);
    Subprocess p;
    std::string error;
    EXPECT_TRUE(p.Start(so, &error)) << error;
    std::optional<int> st = p.Wait(std::chrono::seconds(timeout_s));
    EXPECT_TRUE(st.has_value()) << "tandemctl " << args[0] << " did not finish";
    if (st && WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
    r.out = Read(so.stdout_path);
    // exit_code stays -1; say why, so a failed assertion that prints `out` shows it.
    if (st && WIFSIGNALED(*st)) r.out += "\n[tandemctl ended by signal " + std::to_string(WTERMSIG(*st)) + "]\n";
    size_t brace = r.out.find("{\n");
    if (brace != std::string::npos) r.json = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
    return r;
  }

  // `tandemctl serve` in the background (log in serve.out, appended across restarts), /metrics
  // on a free loopback port; returns that port (0 after a failed assertion).
  int StartServe(const std::filesystem::path& cluster, const std::string& interval_s = "0.5") {
    SubprocessOptions so;
    so.argv = {TANDEMCTL_BIN, "serve",      "-f", cluster.string(), "--state-dir", StateDir(), "--interval", interval_s,
               "--metrics-listen", "127.0.0.1:0"};
    std::filesystem::path out = dir_ / ("serve-" + std::to_string(++serve_runs_) + ".out");
    so.stdout_path = out.string();
    so.stderr_path = so.stdout_path;
    std::string error;
    EXPECT_TRUE(serve_.Start(so, &error)) << error;
    static const std::regex kMetrics(R"(tandemctl serve: metrics=\S+:(\d+))");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      std::string text = Read(out);
      if (std::regex_search(text, m, kMetrics)) return std::stoi(m[1]);
      if (!serve_.running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "tandemctl serve did not start:\n" << Read(out);
    return 0;
  }
  std::string ServeLog() const { return Read(dir_ / ("serve-" + std::to_string(serve_runs_) + ".out")); }
  // For a wait that ran out (a reconcile turn stuck somewhere): serve's log, then every thread's
  // backtrace from `gdb -batch` attached to the running serve, with a 20 s deadline; or why there
  // is none (serve not running, gdb not installed, attach refused).
  std::string ServeLogAndStacks() { return ServeLog() + ServeStacks(); }
  std::string ServeStacks() {
    if (!serve_.running()) return "no backtrace: serve is not running\n";
    const char* kGdb = "/usr/bin/gdb";
    if (access(kGdb, X_OK) != 0) return "no backtrace: gdb is not installed\n";
    SubprocessOptions so;
    so.argv = {kGdb, "-p", std::to_string(serve_.pid()), "-batch", "-nx", "-ex", "thread apply all bt"};
    const std::filesystem::path out = dir_ / "serve-stacks.txt";
    so.stdout_path = out.string();
    so.stderr_path = so.stdout_path;
    Subprocess gdb;
    std::string error;
    if (!gdb.Start(so, &error)) return "no backtrace: " + error + "\n";
    if (!gdb.Wait(std::chrono::seconds(20))) {
      gdb.Stop();
      return "no backtrace: gdb did not finish within 20 s\n" + Read(out);
    }
    return "serve's threads (gdb):\n" + Read(out);
  }

  // SIGTERM: serve must stop cleanly (exit 0) and leave the cluster as it is.
  void StopServe() {
    serve_.Signal(SIGTERM);
    std::optional<int> rc = serve_.Wait(std::chrono::seconds(10));
    ASSERT_TRUE(rc.has_value()) << "serve did not stop on SIGTERM";
    EXPECT_TRUE(WIFEXITED(*rc) && WEXITSTATUS(*rc) == 0) << DescribeWaitStatus(*rc);
  }

  std::filesystem::path dir_;
  std::vector<int> ports_;
  std::vector<Subprocess> agents_;
  Subprocess serve_;
  int serve_runs_ = 0;
};

}  // namespace tandem::testing
