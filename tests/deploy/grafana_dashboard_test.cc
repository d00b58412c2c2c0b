// deploy/grafana/tandem-dashboard.json against what the exporters really serve: every tandem_*
// series a panel queries is one of the families the agent, the API (ServeMetrics) and
// `tandemctl serve` expose, and the request-level series vLLM's dashboards have (issue 17) are on
// a panel, as do the link-utilisation series (issue 19). A renamed or dropped metric fails here
// rather than as an empty panel.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "agentd/metrics.h"
#include "controller/controller_metrics.h"
#include "openai/serve_metrics.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "tests/common/fake_node.h"
#include "tests/common/test_util.h"

namespace tandem {
namespace {

// "# TYPE name type" of an exposition: family name -> type.
void AddFamilies(const std::string& text, std::map<std::string, std::string>* out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    (*out)[name] = type;
  }
}

// Every family the three exporters serve, with the engine's series present (a rank, a pool).
std::map<std::string, std::string> ExportedFamilies() {
  std::map<std::string, std::string> families;
  testing::TempDir tmp;
  auto [sys, proc] = testing::WriteFakeNode(tmp / "node", {});
  agentd::AgentMetrics agent(agentd::FactsRoots{sys, proc}, "n1");
  agent.SetRankStatusSource([] { return v1::RankStatus(); });
  // Link series need byte counters and two samples (the rate comes from the second).
  for (const char* f : {"tx_bytes", "rx_bytes"}) {
    testing::WriteTextFile(sys + "/class/net/enp1s0f0np0/statistics/" + f, "0\n");
  }
  auto links = std::make_shared<agentd::LinkRates>(agentd::FactsRoots{sys, proc}, std::vector<std::string>{});
  const auto t0 = std::chrono::steady_clock::now();
  links->Sample(t0);
  links->Sample(t0 + std::chrono::seconds(5));
  agent.SetLinkRates(links);
  AddFamilies(agent.Render(), &families);

  openai::ServeMetrics serve("tiny");
  engine::EngineStats stats;
  stats.kv_blocks_total = 4;
  stats.kv_tokens_total = 64;
  stats.block_size = 16;
  stats.kv_cache_dtype = "bf16";
  serve.UpdateFromStats(stats);
  AddFamilies(serve.Text(), &families);

  controller::ControllerMetrics ctl;
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, ctl.registry().Collect());
  AddFamilies(text.str(), &families);
  return families;
}

// The tandem_* names the dashboard's queries use, with histogram suffixes taken off.
std::set<std::string> DashboardSeries(const std::map<std::string, std::string>& families) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/deploy/grafana/tandem-dashboard.json");
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  std::set<std::string> names;
  const std::regex metric(R"(tandem_[a-z0-9_]+)");
  for (const auto& panel : dashboard.at("panels")) {
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel.at("targets")) {
      const std::string expr = target.value("expr", "");
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
        std::string name = it->str();
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          const std::string s = suffix;
          if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
            const std::string base = name.substr(0, name.size() - s.size());
            auto f = families.find(base);
            if (f != families.end() && f->second == "histogram") name = base;
          }
        }
        names.insert(name);
      }
    }
  }
  return names;
}

TEST(GrafanaDashboardTest, EveryQueriedSeriesIsExported) {
  const auto families = ExportedFamilies();
  const auto queried = DashboardSeries(families);
  std::printf("%zu exported families, %zu queried by the dashboard\n", families.size(), queried.size());
  ASSERT_GT(queried.size(), 30u);
  for (const std::string& name : queried) EXPECT_TRUE(families.count(name)) << name << " is queried but not exported";
}

TEST(GrafanaDashboardTest, TheVllmRequestSeriesHaveAPanel) {
  const auto queried = DashboardSeries(ExportedFamilies());
  for (const char* name :
       {"tandem_request_queue_time_seconds", "tandem_request_prefill_time_seconds",
        "tandem_request_decode_time_seconds", "tandem_request_inference_time_seconds",
        "tandem_request_prompt_tokens", "tandem_request_generation_tokens", "tandem_iteration_tokens",
        "tandem_cache_config_info", "tandem_time_to_first_token_seconds", "tandem_inter_token_latency_seconds",
        "tandem_e2e_request_latency_seconds", "tandem_kv_cache_usage_perc", "tandem_num_preemptions_total",
        "tandem_request_success_total", "tandem_hash_bytes_total", "tandem_link_tx_bytes_per_second",
        "tandem_link_speed_bytes_per_second", "tandem_link_rx_bytes_total"}) {
    EXPECT_TRUE(queried.count(name)) << name << " has no panel";
  }
}

}  // namespace
}  // namespace tandem
