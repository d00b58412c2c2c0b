// `tandemctl preflight` against two real tandem-agentd processes on loopback, each reading its
// own fake sysfs/procfs tree (tests/common/fake_node.h) and its own copy of a small model. The
// agents run as an operator should run them: cluster token, mutual TLS (certificates from
// `tandemctl certs`), model root.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
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

struct Agent {
  std::string name;
  std::string address;  // grpc HOST:PORT read from the ready line
  Subprocess proc;
};

struct CtlResult {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;
  nlohmann::json json;
};

class PreflightIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("tandem-preflight");
    WriteFile(dir_ / "token", "preflight-integration-token\n");
    fs::permissions(dir_ / "token", fs::perms::owner_read | fs::perms::owner_write);
    fs::create_directories(dir_ / "models");
    // Certificates for the node names the tests use; the hosts are all 127.0.0.1 (ports do not
    // matter to a certificate).
    WriteFile(dir_ / "certs.yaml",
              "model: {path: /m}\nnodes:\n  - {name: spark1, agent: '127.0.0.1:1'}\n  - {name: spark2, agent: '127.0.0.1:2'}\n");
    CtlResult certs = RunCtl({"certs", "-f", (dir_ / "certs.yaml").string(), "--out", (dir_ / "tls").string()});
    ASSERT_EQ(certs.exit_code, 0) << certs.out << certs.err;
  }
  void TearDown() override {
    for (auto& a : agents_) a.proc.Stop(std::chrono::milliseconds(2000));
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(dir_, ec);
    else std::printf("kept %s for inspection\n", dir_.c_str());
  }

  // A small model folder: config.json plus a few "weight" files with distinct contents.
  fs::path WriteModel(const std::string& name) {
    fs::path m = dir_ / "models" / name;
    WriteFile(m / "config.json", R"({"model_type": "qwen3_moe", "num_hidden_layers": 2})");
    WriteFile(m / "tokenizer.json", R"({"model": {"type": "BPE"}})");
    for (int i = 1; i <= 3; ++i) {
      std::string blob(1 << 20, '\0');
      for (size_t k = 0; k < blob.size(); ++k) blob[k] = static_cast<char>((k * 31 + i * 7) & 0xff);
      char fname[64];
      std::snprintf(fname, sizeof(fname), "model-%05d-of-00003.safetensors", i);
      WriteFile(m / fname, blob);
    }
    return m;
  }

  // Starts an agent on a fake node tree; waits for its ready line (10 s at most).
  void StartAgent(const std::string& name, const testing::FakeNodeOptions& opts) {
    fs::path root = dir_ / ("node-" + name);
    auto [sysfs, procfs] = testing::WriteFakeNode(root.string(), opts);
    Agent a;
    a.name = name;
    fs::path out = dir_ / (name + ".out");
    SubprocessOptions so;
    const std::string tls = (dir_ / "tls").string() + "/";
    so.argv = {TANDEM_AGENTD_BIN, "--listen", "127.0.0.1:0", "--node-name", name, "--sysfs-root", sysfs,
               "--procfs-root", procfs, "--state-dir", (dir_ / ("state-" + name)).string(), "--metrics-listen",
               "127.0.0.1:0", "--token-file", (dir_ / "token").string(), "--model-root", (dir_ / "models").string(),
               "--tls-cert", tls + name + ".pem", "--tls-key", tls + name + ".key", "--tls-ca", tls + "ca.pem"};
    so.stdout_path = out.string();
    so.stderr_path = (dir_ / (name + ".err")).string();
    std::string error;
    ASSERT_TRUE(a.proc.Start(so, &error)) << error;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      std::string text = ReadFile(out);
      size_t at = text.find(" grpc=");
      if (text.find("tandem-agentd ready") != std::string::npos && at != std::string::npos) {
        size_t end = text.find_first_of(" \n", at + 6);
        a.address = text.substr(at + 6, end - at - 6);
        break;
      }
      ASSERT_TRUE(a.proc.running()) << "agent exited: " << ReadFile(so.stderr_path);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_FALSE(a.address.empty()) << "no ready line from " << name << ": " << ReadFile(so.stderr_path);
    agents_.push_back(std::move(a));
  }

  // cluster.yaml naming the nodes; `models[i]` is node i's model folder.
  fs::path WriteCluster(const std::vector<std::pair<std::string, std::string>>& nodes,
                        const std::vector<fs::path>& models) {
    const std::string tls = (dir_ / "tls").string() + "/";
    std::string y = "cluster: it\nmodel:\n  path: " + models[0].string() +
                    "\nengine:\n  memory_fraction: 0.70\nnccl:\n  hca: [rocep1s0f0, rocep1s0f1]\n  socket_ifname: enP7s7\n"
                    "auth:\n  token_file: " + (dir_ / "token").string() + "\ntls:\n  ca: " + tls + "ca.pem\n  cert: " + tls +
                    "controller.pem\n  key: " + tls + "controller.key\nnodes:\n";
    for (size_t i = 0; i < nodes.size(); ++i) {
      y += "  - name: " + nodes[i].first + "\n    agent: \"" + nodes[i].second + "\"\n";
      y += "    model_path: " + models[i].string() + "\n";
    }
    fs::path p = dir_ / "cluster.yaml";
    WriteFile(p, y);
    return p;
  }

  CtlResult RunPreflight(const fs::path& cluster, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"preflight", "-f", cluster.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CtlResult r = RunCtl(args);
    if (!r.out.empty()) r.json = nlohmann::json::parse(r.out, nullptr, false);
    return r;
  }

  CtlResult RunCtl(const std::vector<std::string>& args) {
    CtlResult r;
    SubprocessOptions so;
    so.argv = {TANDEMCTL_BIN};
    so.argv.insert(so.argv.end(), args.begin(), args.end());
    so.stdout_path = (dir_ / "ctl.out").string();
    so.stderr_path = (dir_ / "ctl.err").string();
    fs::remove(so.stdout_path);
    fs::remove(so.stderr_path);
    Subprocess p;
    std::string error;
    auto start = Clock::now();
    EXPECT_TRUE(p.Start(so, &error)) << error;
    std::optional<int> st = p.Wait(std::chrono::seconds(60));
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_TRUE(st.has_value()) << "tandemctl did not finish in 60 s";
    if (st && WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
    r.out = ReadFile(so.stdout_path);
    r.err = ReadFile(so.stderr_path);
    return r;
  }

  static std::vector<nlohmann::json> Rows(const CtlResult& r, const std::string& check, const std::string& status) {
    std::vector<nlohmann::json> out;
    if (!r.json.is_object()) return out;
    for (const auto& c : r.json["checks"]) {
      if (c["check"] == check && c["status"] == status) out.push_back(c);
    }
    return out;
  }

  static void PrintFailures(const CtlResult& r) {
    std::printf("tandemctl exit %d in %.3f s\n", r.exit_code, r.seconds);
    if (!r.json.is_object()) {
      std::printf("stdout: %s\nstderr: %s\n", r.out.c_str(), r.err.c_str());
      return;
    }
    for (const auto& c : r.json["checks"]) {
      if (c["status"] != "pass") {
        std::printf("  %s %s %s: %s\n", c["check"].get<std::string>().c_str(), c["node"].get<std::string>().c_str(),
                    c["status"].get<std::string>().c_str(), c["detail"].get<std::string>().c_str());
      }
    }
  }

  std::vector<std::pair<std::string, std::string>> Nodes() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& a : agents_) out.push_back({a.name, a.address});
    return out;
  }

  fs::path dir_;
  std::vector<Agent> agents_;
};

testing::FakeNodeOptions Spark(const std::string& socket_ip) {
  testing::FakeNodeOptions o;
  o.socket_ipv4 = socket_ip;
  return o;
}

TEST_F(PreflightIntegration, IdenticalNodesPass) {
  StartAgent("spark1", Spark("10.0.0.1"));
  StartAgent("spark2", Spark("10.0.0.2"));
  fs::path cluster = WriteCluster(Nodes(), {WriteModel("model1"), WriteModel("model2")});
  CtlResult r = RunPreflight(cluster);
  PrintFailures(r);
  std::printf("preflight wall time, two agents (cold hash cache): %.3f s (tandemctl says %.3f s)\n", r.seconds,
              r.json.value("wall_seconds", -1.0));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.json["ok"], true);
  EXPECT_EQ(r.json["checks"].size(), 25u);  // 12 checks per node, api-auth once
  EXPECT_EQ(Rows(r, "agent-security", "pass").size(), 2u);
  EXPECT_EQ(Rows(r, "weights-parity", "pass").size(), 2u);
  EXPECT_EQ(r.json["nccl_env"]["spark1"]["NCCL_IB_HCA"], "rocep1s0f0,rocep1s0f1");
  EXPECT_EQ(r.json["nccl_env"]["spark1"]["NCCL_IB_GID_INDEX"], "3");
  EXPECT_EQ(r.json["nccl_env"]["spark2"]["NCCL_SOCKET_IFNAME"], "enP7s7");
  // A second run hits the agents' hash caches.
  CtlResult again = RunPreflight(cluster);
  std::printf("preflight wall time, two agents (warm hash cache): %.3f s\n", again.seconds);
  EXPECT_EQ(again.exit_code, 0);
}

TEST_F(PreflightIntegration, ChangedDriverFailsThenPassesOnceFixed) {
  testing::FakeNodeOptions two = Spark("10.0.0.2");
  two.driver_version = "575.57.08";
  StartAgent("spark1", Spark("10.0.0.1"));
  StartAgent("spark2", two);
  fs::path cluster = WriteCluster(Nodes(), {WriteModel("model1"), WriteModel("model2")});
  CtlResult r = RunPreflight(cluster);
  PrintFailures(r);
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.json["ok"], false);
  auto fails = Rows(r, "driver-parity", "fail");
  ASSERT_EQ(fails.size(), 2u);
  EXPECT_NE(fails[1]["detail"].get<std::string>().find("575.57.08"), std::string::npos);
  EXPECT_NE(fails[1]["detail"].get<std::string>().find("580.95.05 as on spark1"), std::string::npos);
  // The operator fixes the node; facts are read fresh, so no agent restart is needed.
  fs::path root = dir_ / "node-spark2";  // the fake node tree
  testing::WriteTextFile((root / "sys/module/nvidia/version").string(), "580.95.05\n");
  std::string proc = ReadFile(root / "proc/driver/nvidia/version");
  size_t at = proc.find("575.57.08");
  if (at != std::string::npos) testing::WriteTextFile((root / "proc/driver/nvidia/version").string(), proc.replace(at, 9, "580.95.05"));
  CtlResult fixed = RunPreflight(cluster);
  PrintFailures(fixed);
  EXPECT_EQ(fixed.exit_code, 0);
}

TEST_F(PreflightIntegration, CorruptedWeightFileFailsNamingTheFile) {
  StartAgent("spark1", Spark("10.0.0.1"));
  StartAgent("spark2", Spark("10.0.0.2"));
  fs::path m1 = WriteModel("model1"), m2 = WriteModel("model2");
  {
    // Same size, one byte flipped in the middle: only the digest can tell.
    std::fstream f(m2 / "model-00002-of-00003.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500000);
    f.put('\x5a');
  }
  CtlResult r = RunPreflight(WriteCluster(Nodes(), {m1, m2}));
  PrintFailures(r);
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  auto fails = Rows(r, "weights-parity", "fail");
  ASSERT_EQ(fails.size(), 2u);
  for (const auto& f : fails) {
    EXPECT_NE(f["detail"].get<std::string>().find("differs: model-00002-of-00003.safetensors"), std::string::npos) << f;
  }
  EXPECT_EQ(Rows(r, "driver-parity", "pass").size(), 2u);
}

// Issue 12, row 3: the hash cache was keyed on size + mtime, so a byte flipped with the mtime set
// back passed preflight on a warm cache. ctime cannot be set back: the file is hashed again.
TEST_F(PreflightIntegration, ByteFlippedWithMtimeRestoredFailsOnAWarmCache) {
  StartAgent("spark1", Spark("10.0.0.1"));
  StartAgent("spark2", Spark("10.0.0.2"));
  fs::path m1 = WriteModel("model1"), m2 = WriteModel("model2");
  fs::path cluster = WriteCluster(Nodes(), {m1, m2});
  CtlResult warm = RunPreflight(cluster);
  ASSERT_EQ(warm.exit_code, 0) << warm.out << warm.err;
  const fs::path target = m2 / "model-00003-of-00003.safetensors";
  struct stat before {};
  ASSERT_EQ(stat(target.c_str(), &before), 0);
  {
    std::fstream f(target, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(123457);
    f.put('\x01');
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, target.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(stat(target.c_str(), &after), 0);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_size, before.st_size);
  CtlResult r = RunPreflight(cluster);
  PrintFailures(r);
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  auto fails = Rows(r, "weights-parity", "fail");
  ASSERT_EQ(fails.size(), 2u);
  EXPECT_NE(fails[0]["detail"].get<std::string>().find("differs: model-00003-of-00003.safetensors"), std::string::npos)
      << fails[0];
  // --rehash reads every byte (same verdict), and so does preflight.verify: full.
  CtlResult full = RunPreflight(cluster, {"--rehash"});
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_EQ(Rows(full, "weights-parity", "fail").size(), 2u);
  std::printf("warm-cache preflight %.3f s, --rehash %.3f s\n", r.seconds, full.seconds);
}

// Issue 15: a quantized checkpoint's scales live beside its weights in the same safetensors file,
// so the file digest covers them. Two copies of a quantized fixture whose weights are identical
// but one scale tensor differs (a block scale of FP8, a group scale, the per-weight scale_2 or the
// input_scale of NVFP4): weights parity fails naming model.safetensors on both nodes.
TEST_F(PreflightIntegration, QuantizedCopiesWhoseScalesDifferFailNamingTheFile) {
  StartAgent("spark1", Spark("10.0.0.1"));
  StartAgent("spark2", Spark("10.0.0.2"));
  struct Case {
    std::string fixture, tensor;
  };
  const std::vector<Case> cases = {
      {"qwen3moe-fp8-tiny", "model.layers.1.mlp.experts.7.down_proj.weight_scale_inv"},
      {"qwen3moe-nvfp4-tiny", "model.layers.1.mlp.experts.7.down_proj.weight_scale"},
      {"qwen3moe-nvfp4-tiny", "model.layers.0.self_attn.o_proj.weight_scale_2"},
      {"qwen3moe-nvfp4-tiny", "model.layers.0.self_attn.o_proj.input_scale"},
  };
  // The fixture's files (not symlinks: the agents confine the model to their root).
  auto copy = [&](const std::string& fixture, const std::string& as) {
    const fs::path src = fs::path(testing::TestdataDir()) / fixture, dst = dir_ / "models" / as;
    fs::create_directories(dst);
    for (const char* f : {"config.json", "hf_quant_config.json", "model.safetensors"}) {
      if (fs::exists(src / f)) fs::copy_file(src / f, dst / f, fs::copy_options::overwrite_existing);
    }
    return dst;
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const fs::path m1 = copy(c.fixture, "q" + std::to_string(i) + "a");
    const fs::path m2 = copy(c.fixture, "q" + std::to_string(i) + "b");
    // The tensor's bytes from the safetensors header (u64 length, then JSON with data_offsets
    // relative to the end of the header); its first element changed, the size kept.
    const fs::path file = m2 / "model.safetensors";
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t header_len = 0;
    f.read(reinterpret_cast<char*>(&header_len), sizeof header_len);
    std::string header(header_len, '\0');
    f.read(header.data(), static_cast<std::streamsize>(header_len));
    const nlohmann::json h = nlohmann::json::parse(header);
    ASSERT_TRUE(h.contains(c.tensor)) << c.fixture << " has no " << c.tensor;
    const std::string dtype = h[c.tensor]["dtype"];
    const std::streamoff at = 8 + static_cast<std::streamoff>(header_len) + h[c.tensor]["data_offsets"][0].get<int64_t>();
    f.seekg(at);
    if (dtype == "F32") {
      float v = 0;
      f.read(reinterpret_cast<char*>(&v), sizeof v);
      v = v == 0.0f ? 1.0f : 2.0f * v;
      f.seekp(at);
      f.write(reinterpret_cast<const char*>(&v), sizeof v);
    } else {
      ASSERT_EQ(dtype, "F8_E4M3") << c.tensor;
      char b = 0;
      f.read(&b, 1);
      b = static_cast<char>(b ^ 0x02);  // one mantissa bit: another finite scale
      f.seekp(at);
      f.write(&b, 1);
    }
    f.close();
    ASSERT_EQ(fs::file_size(m1 / "model.safetensors"), fs::file_size(file));
    CtlResult r = RunPreflight(WriteCluster(Nodes(), {m1, m2}));
    PrintFailures(r);
    std::printf("%s, %s changed on spark2: preflight %.3f s\n", c.fixture.c_str(), c.tensor.c_str(), r.seconds);
    ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
    auto fails = Rows(r, "weights-parity", "fail");
    ASSERT_EQ(fails.size(), 2u) << c.tensor;
    for (const auto& row : fails) {
      const std::string detail = row["detail"].get<std::string>();
      EXPECT_NE(detail.find("differs: model.safetensors"), std::string::npos) << c.tensor << ": " << detail;
      EXPECT_EQ(detail.find("config.json"), std::string::npos) << c.tensor << ": " << detail;
    }
    EXPECT_EQ(Rows(r, "model-present", "pass").size(), 2u);
  }
}

TEST_F(PreflightIntegration, UnreachableAgentFailsFastNamingNodeAndAddress) {
  StartAgent("spark1", Spark("10.0.0.1"));
  std::string dead = "127.0.0.1:" + std::to_string(UnusedPort());
  auto nodes = Nodes();
  nodes.push_back({"spark2", dead});
  CtlResult r = RunPreflight(WriteCluster(nodes, {WriteModel("model1"), WriteModel("model2")}));
  PrintFailures(r);
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(r.seconds, 5.0);
  auto fails = Rows(r, "agent-reachable", "fail");
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0]["node"], "spark2");
  EXPECT_NE(fails[0]["detail"].get<std::string>().find(dead), std::string::npos) << fails[0];
  EXPECT_EQ(Rows(r, "agent-reachable", "pass").size(), 1u);
}

TEST_F(PreflightIntegration, MalformedYamlExits2WithFileAndLine) {
  fs::path p = dir_ / "cluster.yaml";
  WriteFile(p, "cluster: x\nnodes:\n  - name: a\n    agent: [127.0.0.1:1\n");
  CtlResult r = RunPreflight(p);
  std::printf("stderr: %s", r.err.c_str());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(p.string() + ":5: invalid YAML"), std::string::npos) << r.err;
  // A well-formed file with a bad value: also 2, naming line and key.
  WriteFile(p, "model: {path: /m}\nnodes:\n  - name: a\n    agent: spark2\n");
  CtlResult r2 = RunPreflight(p);
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_NE(r2.err.find(p.string() + ":4: nodes[0].agent: expected HOST:PORT, got \"spark2\""), std::string::npos) << r2.err;
}

}  // namespace
}  // namespace tandem
