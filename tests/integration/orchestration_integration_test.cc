// `tandemctl up / status / probe / down / serve` against two real tandem-agentd processes on
// loopback (TP=2, cpu backend, Gloo over 127.0.0.1) with the cluster token, model = a temp
// copy of testdata/qwen3moe-tiny. Prints the phase times of `up`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/subprocess.h"
#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const fs::path& p) { return testing::ReadTextFile(p.string()); }
void WriteFile(const fs::path& p, const std::string& text) { testing::WriteTextFile(p.string(), text); }

int UnusedPort() { return testing::UnusedLoopbackPort(); }

// POST over a plain socket; returns the status code (0 when the connection failed).
int HttpPost(int port, const std::string& path, const std::string& body, std::string* response) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return 0;
  }
  std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  *response = out;
  if (out.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(out.c_str() + 9);
}

struct CtlResult {
  int exit_code = -1;
  std::string out;
  nlohmann::json json;
};

class OrchestrationIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-orch-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const char* td = std::getenv("TANDEM_TESTDATA");
    fs::path tiny = fs::path(td ? td : "/work/shared/testdata") / "qwen3moe-tiny";
    ASSERT_TRUE(fs::exists(tiny / "model.safetensors")) << tiny;
    for (const char* m : {"model1", "model2"}) {
      fs::create_directories(dir_ / m);
      fs::copy_file(tiny / "config.json", dir_ / m / "config.json");
      fs::copy_file(tiny / "model.safetensors", dir_ / m / "model.safetensors");
    }
    WriteFile(dir_ / "token", "integration-token\n");
    WriteFile(dir_ / "badtoken", "not-the-token\n");
    ports_ = {UnusedPort(), UnusedPort()};
  }
  void TearDown() override {
    if (serve_.pid() > 0) serve_.Stop(std::chrono::milliseconds(2000));
    for (auto& a : agents_) a.Stop(std::chrono::milliseconds(2000));
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(dir_, ec);
    else std::printf("kept %s for inspection\n", dir_.c_str());
  }

  void StartAgent(int i) {
    std::string name = "n" + std::to_string(i + 1);
    SubprocessOptions so;
    so.argv = {TANDEM_AGENTD_BIN, "--listen", "127.0.0.1:" + std::to_string(ports_[i]), "--node-name", name,
               "--state-dir", (dir_ / ("state-" + name)).string(), "--token-file", (dir_ / "token").string()};
    fs::path out = dir_ / (name + ".out");
    so.stdout_path = out.string();
    so.stderr_path = (dir_ / (name + ".err")).string();
    fs::remove(out);
    Subprocess p;
    std::string error;
    ASSERT_TRUE(p.Start(so, &error)) << error;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (ReadFile(out).find("tandem-agentd ready") == std::string::npos) {
      ASSERT_TRUE(p.running()) << "agent exited: " << ReadFile(so.stderr_path);
      ASSERT_LT(Clock::now(), deadline) << "no ready line from " << name;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (static_cast<size_t>(i) < agents_.size()) agents_[i] = std::move(p);
    else agents_.push_back(std::move(p));
  }

  fs::path WriteCluster(const std::string& token_file, const std::string& name = "cluster.yaml") {
    std::string y = "cluster: it\nmodel:\n  served_name: tiny\nengine:\n  backend: cpu\n  memory_fraction: 0.01\n"
                    "  kv_tokens: 2048\n  max_num_seqs: 4\napi:\n  listen: 127.0.0.1:0\nauth:\n  token_file: " +
                    (dir_ / token_file).string() +
                    "\nprobe:\n  prompt_ids: [1, 2, 3, 4]\n  max_tokens: 6\n  interval: 2s\n"
                    "serve:\n  restart_budget: 5 per 10m\ntimeouts:\n  load: 60s\n  join: 30s\n  leave: 5s\nnodes:\n";
    for (int i = 0; i < 2; ++i) {
      y += "  - name: n" + std::to_string(i + 1) + "\n    agent: 127.0.0.1:" + std::to_string(ports_[i]) +
           "\n    model_path: " + (dir_ / ("model" + std::to_string(i + 1))).string() + "\n";
    }
    WriteFile(dir_ / name, y);
    return dir_ / name;
  }

  CtlResult Ctl(std::vector<std::string> args, int timeout_s = 120) {
    CtlResult r;
    SubprocessOptions so;
    so.argv = {TANDEMCTL_BIN};
    so.argv.insert(so.argv.end(), args.begin(), args.end());
    if (args[0] != "down") so.argv.insert(so.argv.end(), {"--state-dir", (dir_ / "ctl").string()});
    so.stdout_path = (dir_ / "ctl.out").string();
    so.stderr_path = so.stdout_path;
    fs::remove(so.stdout_path);
    Subprocess p;
    std::string error;
    EXPECT_TRUE(p.Start(so, &error)) << error;
    std::optional<int> st = p.Wait(std::chrono::seconds(timeout_s));
    EXPECT_TRUE(st.has_value()) << "tandemctl " << args[0] << " did not finish";
    if (st && WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
    r.out = ReadFile(so.stdout_path);
    size_t brace = r.out.find("{\n");
    if (brace != std::string::npos) r.json = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
    return r;
  }

  fs::path dir_;
  std::vector<int> ports_;
  std::vector<Subprocess> agents_;
  Subprocess serve_;
};

TEST_F(OrchestrationIntegration, UpStatusProbeCompletionDown) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  std::printf("--- tandemctl up (exit %d) ---\n%s", up.exit_code, up.out.c_str());
  ASSERT_EQ(up.exit_code, 0);
  EXPECT_NE(up.out.find("serving generation"), std::string::npos);

  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.out;
  ASSERT_TRUE(st.json.is_object()) << st.out;
  EXPECT_EQ(st.json["state"], "serving");
  ASSERT_EQ(st.json["nodes"].size(), 2u);
  EXPECT_EQ(st.json["nodes"][1]["rank"], 1);
  EXPECT_EQ(st.json["nodes"][0]["generation"], st.json["nodes"][1]["generation"]);
  EXPECT_TRUE(st.json["nodes"][0]["last_probe"]["ok"].get<bool>());

  CtlResult probe = Ctl({"probe", "-f", cluster.string()});
  std::printf("%s", probe.out.c_str());
  EXPECT_EQ(probe.exit_code, 0);
  EXPECT_NE(probe.out.find("match the reference"), std::string::npos) << probe.out;

  std::string endpoint = st.json["nodes"][0]["api_endpoint"];
  int api_port = std::atoi(endpoint.substr(endpoint.rfind(':') + 1).c_str());
  std::string resp;
  int code = HttpPost(api_port, "/v1/completions", R"({"model":"tiny","prompt":[1,2,3,4],"max_tokens":4,"temperature":0})",
                      &resp);
  std::printf("POST /v1/completions -> %d\n", code);
  EXPECT_EQ(code, 200) << resp;

  CtlResult down = Ctl({"down", "-f", cluster.string()});
  std::printf("%s", down.out.c_str());
  EXPECT_EQ(down.exit_code, 0);
  st = Ctl({"status", "-f", cluster.string(), "--json"});
  EXPECT_EQ(st.exit_code, 1);
  EXPECT_EQ(st.json["state"], "down") << st.out;
}

TEST_F(OrchestrationIntegration, FailedPreflightBlocksUp) {
  // One byte of node 2's weights differs: weights parity fails and nothing may be loaded.
  fs::path w = dir_ / "model2" / "model.safetensors";
  std::fstream f(w, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(w) - 1));
  f.put('\x5a');
  f.close();
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  std::printf("--- tandemctl up (exit %d) ---\n%s", up.exit_code, up.out.c_str());
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_NE(up.out.find("weights-parity"), std::string::npos);
  EXPECT_NE(up.out.find("up FAILED in preflight"), std::string::npos);
  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  ASSERT_TRUE(st.json.is_object()) << st.out;
  EXPECT_EQ(st.json["state"], "down");
  for (const auto& n : st.json["nodes"]) EXPECT_EQ(n["state"], "idle") << n.dump();
}

TEST_F(OrchestrationIntegration, WrongTokenIsRejectedWithAClearMessage) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("badtoken");
  CtlResult st = Ctl({"status", "-f", cluster.string()});
  std::printf("%s", st.out.c_str());
  EXPECT_EQ(st.exit_code, 1);
  EXPECT_NE(st.out.find("rejected by the agent"), std::string::npos);
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_NE(up.out.find("rejected by the agent"), std::string::npos) << up.out;
}

TEST_F(OrchestrationIntegration, ServeRestartsTheGroupAfterTheWorkerAgentIsKilled) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  ASSERT_EQ(Ctl({"up", "-f", cluster.string()}).exit_code, 0);
  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  uint64_t gen0 = st.json["nodes"][0]["generation"];
  SubprocessOptions so;
  so.argv = {TANDEMCTL_BIN, "serve", "-f", cluster.string(), "--state-dir", (dir_ / "ctl").string(), "--interval", "0.5",
             "--metrics-listen", "127.0.0.1:0"};
  so.stdout_path = (dir_ / "serve.out").string();
  so.stderr_path = so.stdout_path;
  std::string error;
  ASSERT_TRUE(serve_.Start(so, &error)) << error;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  agents_[1].Signal(SIGKILL);
  agents_[1].Wait(std::chrono::seconds(5));
  auto t0 = Clock::now();
  StartAgent(1);
  uint64_t gen = gen0;
  std::string state;
  while (Clock::now() - t0 < std::chrono::seconds(60)) {
    st = Ctl({"status", "-f", cluster.string(), "--json"});
    if (st.json.is_object()) {
      state = st.json["state"];
      gen = st.json["nodes"][0]["generation"];
      if (state == "serving" && gen > gen0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("serving again at generation %llu (was %llu) %.1f s after the worker agent restarted\n",
              static_cast<unsigned long long>(gen), static_cast<unsigned long long>(gen0), s);
  EXPECT_EQ(state, "serving") << ReadFile(dir_ / "serve.out");
  EXPECT_GT(gen, gen0);
  serve_.Signal(SIGTERM);
  std::optional<int> rc = serve_.Wait(std::chrono::seconds(10));
  ASSERT_TRUE(rc.has_value()) << "serve did not stop on SIGTERM";
  EXPECT_TRUE(WIFEXITED(*rc) && WEXITSTATUS(*rc) == 0) << DescribeWaitStatus(*rc);
  // SIGTERM leaves the cluster as it is.
  EXPECT_EQ(Ctl({"status", "-f", cluster.string()}).exit_code, 0);
}

}  // namespace
}  // namespace tandem
