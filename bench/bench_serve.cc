#include "bench/bench_serve.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "common/secret_file.h"
#include "common/status.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

std::vector<int32_t> PromptIds(int index, int len) {
  std::mt19937 rng(static_cast<uint32_t>(index) * 2654435761u + 17u);
  std::uniform_int_distribution<int32_t> dist(100, 3999);
  std::vector<int32_t> ids(static_cast<size_t>(len));
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

// One streaming request; token arrival times come from the SSE chunks' token_ids. The stream is
// cut once it has run past the target's deadline.
RequestSample RunOne(httplib::Client& cli, const ServeTarget& target, const StreamRequest& request) {
  RequestSample s;
  httplib::Request req;
  req.method = "POST";
  req.path = request.path;
  req.body = request.body;
  req.set_header("Content-Type", "application/json");
  if (!target.api_key.empty()) req.set_header("Authorization", "Bearer " + target.api_key);

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::seconds(target.timeout_s);
  std::optional<Clock::time_point> last;
  std::string buffer;
  bool done = false;
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    if (now > deadline) {
      s.error = "no end of stream within " + std::to_string(target.timeout_s) + " s";
      return false;
    }
    buffer.append(data, len);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      Json j = Json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        s.error = j["error"].value("message", "error event");
        continue;
      }
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const Json& c = j["choices"][0];
      const int64_t n = c.contains("token_ids") ? static_cast<int64_t>(c["token_ids"].size()) : 0;
      if (n == 0) continue;
      const double ms = std::chrono::duration<double, std::milli>(now - (last ? *last : start)).count();
      if (!last) {
        s.ttft_ms = ms;
      } else {
        for (int64_t i = 0; i < n; ++i) s.itl_ms.push_back(ms / static_cast<double>(n));
      }
      last = now;
      s.tokens += n;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  s.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!sent) {
    if (s.error.empty()) s.error = "HTTP " + httplib::to_string(err);
    return s;
  }
  if (status != 200) {
    s.error = "HTTP status " + std::to_string(status) + ": " + buffer.substr(0, 200);
    return s;
  }
  if (!done && s.error.empty()) s.error = "stream ended without [DONE]";
  s.ok = s.error.empty();
  return s;
}

// "http://host:port" -> host, port.
absl::Status SplitUrl(const std::string& url, std::string* host, int* port) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  else if (rest.find("://") != std::string::npos) return absl::InvalidArgumentError("only http:// URLs: " + url);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  auto colon = rest.rfind(':');
  *host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = colon == std::string::npos ? 80 : std::atoi(rest.c_str() + colon + 1);
  if (host->empty() || *port <= 0) return absl::InvalidArgumentError("bad --url " + url);
  return absl::OkStatus();
}

}  // namespace

Percentiles ComputePercentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  return p;
}

void AddBenchServeFlags(CLI::App* command, BenchServeOptions* o) {
  const auto count = CLI::Range(1, 1000000).description("");
  command->add_option("--url", o->url, "the server (http only)")->check([](const std::string& url) {
    std::string host;
    int port = 0;
    const absl::Status st = SplitUrl(url, &host, &port);
    return st.ok() ? std::string() : std::string(st.message());
  });
  command
      ->add_option_function<std::string>(
          "--concurrency",
          [o](const std::string& v) {
            o->concurrency.clear();
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ',')) {
              char* end = nullptr;
              long n = std::strtol(item.c_str(), &end, 10);
              if (item.empty() || *end != '\0' || n < 1 || n > 4096) {
                throw CLI::ValidationError("--concurrency", "needs a list like 1,8,32; bad element '" + item + "'");
              }
              o->concurrency.push_back(static_cast<int>(n));
            }
            if (o->concurrency.empty()) throw CLI::ValidationError("--concurrency", "is empty");
          },
          "concurrency levels, each run in turn")
      ->type_name("1,8,32")
      ->default_str("1,8,32");
  command->add_option("--requests", o->requests, "requests per concurrency level")->check(count);
  command->add_option("--max-tokens", o->max_tokens, "tokens per request (ignore_eos)")->check(count);
  command->add_option("--prompt-len", o->prompt_len, "random prompt token ids per request")->check(count);
  command->add_option("--timeout-s", o->timeout_s, "deadline of one request")->check(count);
  command->add_option("--model", o->model, "the model name to ask for [the server's default]");
  command->add_option("--api-key-file", o->api_key_file, "the API key (mode 0600)")->type_name("PATH");
  command->add_option("--api-key")->group("")->check([](const std::string&) {
    return std::string("--api-key is gone (the key would be readable in /proc/PID/cmdline): "
                       "pass --api-key-file PATH (mode 0600)");
  });
  command->add_flag("--json", o->json, "one JSON object per concurrency level (JSON Lines) instead of the table");
}

StreamRequest GreedyStreamRequest(bool chat, const std::string& input_json, int max_tokens, const std::string& model) {
  Json body = {{chat ? "messages" : "prompt", Json::parse(input_json)},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"return_token_ids", true}};
  if (!model.empty()) body["model"] = model;
  return {chat ? "/v1/chat/completions" : "/v1/completions", body.dump()};
}

absl::StatusOr<std::vector<RequestSample>> RunRequests(
    const ServeTarget& target, int concurrency, const std::vector<StreamRequest>& requests,
    const std::function<void(size_t index, const RequestSample&)>& done) {
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(SplitUrl(target.url, &host, &port));
  std::mutex mu;
  std::vector<RequestSample> samples(requests.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      httplib::Client cli(host, port);  // one keep-alive connection per worker
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      cli.set_read_timeout(target.timeout_s, 0);
      cli.set_write_timeout(target.timeout_s, 0);
      cli.set_connection_timeout(std::min(target.timeout_s, 10), 0);
      for (size_t i; (i = next.fetch_add(1)) < requests.size();) {
        RequestSample s = RunOne(cli, target, requests[i]);
        std::lock_guard<std::mutex> lock(mu);
        samples[i] = std::move(s);
        if (done) done(i, samples[i]);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  return samples;
}

absl::StatusOr<BenchLevelResult> RunBenchLevel(const BenchServeOptions& o, int concurrency) {
  std::vector<StreamRequest> requests;
  for (int i = 0; i < o.requests; ++i) {
    requests.push_back(GreedyStreamRequest(false, Json(PromptIds(i, o.prompt_len)).dump(), o.max_tokens, o.model));
  }
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(std::vector<RequestSample> samples,
                   RunRequests(ServeTarget{o.url, o.api_key, o.timeout_s}, concurrency, requests));
  BenchLevelResult r;
  r.concurrency = concurrency;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ttft, itl;
  for (const RequestSample& s : samples) {
    if (!s.ok) {
      ++r.failed;
      if (r.first_error.empty()) r.first_error = s.error;
      continue;
    }
    ++r.ok;
    r.output_tokens += s.tokens;
    ttft.push_back(s.ttft_ms);
    itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
  }
  r.requests_per_second = r.seconds > 0 ? r.ok / r.seconds : 0;
  r.output_tokens_per_second = r.seconds > 0 ? static_cast<double>(r.output_tokens) / r.seconds : 0;
  r.ttft_ms = ComputePercentiles(std::move(ttft));
  r.itl_ms = ComputePercentiles(std::move(itl));
  return r;
}

std::string FormatBenchTable(const std::vector<BenchLevelResult>& results) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%5s %5s %4s %8s %7s %9s | %9s %9s %9s | %8s %8s %8s\n", "conc", "ok", "err",
                "seconds", "req/s", "out_tok/s", "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p90", "itl_p99");
  out += line;
  for (const BenchLevelResult& r : results) {
    std::snprintf(line, sizeof(line), "%5d %5d %4d %8.2f %7.2f %9.1f | %9.1f %9.1f %9.1f | %8.2f %8.2f %8.2f\n",
                  r.concurrency, r.ok, r.failed, r.seconds, r.requests_per_second, r.output_tokens_per_second,
                  r.ttft_ms.p50, r.ttft_ms.p90, r.ttft_ms.p99, r.itl_ms.p50, r.itl_ms.p90, r.itl_ms.p99);
    out += line;
  }
  out += "(latencies in ms, measured at the client)\n";
  return out;
}

std::string FormatBenchJson(const BenchLevelResult& r) {
  Json j = {{"concurrency", r.concurrency},
            {"ok", r.ok},
            {"failed", r.failed},
            {"seconds", r.seconds},
            {"output_tokens", r.output_tokens},
            {"requests_per_second", r.requests_per_second},
            {"output_tokens_per_second", r.output_tokens_per_second},
            {"ttft_ms", {{"p50", r.ttft_ms.p50}, {"p90", r.ttft_ms.p90}, {"p99", r.ttft_ms.p99}}},
            {"itl_ms", {{"p50", r.itl_ms.p50}, {"p90", r.itl_ms.p90}, {"p99", r.itl_ms.p99}}}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j.dump();
}

int RunBenchServeCommand(BenchServeOptions options) {
  if (!options.api_key_file.empty()) {
    absl::StatusOr<std::string> key = ReadSecretFile(options.api_key_file, "--api-key-file");
    if (!key.ok()) {
      std::fprintf(stderr, "tandem-infer bench-serve: %s\n", StatusText(key.status()).c_str());
      return 2;
    }
    options.api_key = *std::move(key);
  }
  std::vector<BenchLevelResult> results;
  bool any_failed = false;
  for (int c : options.concurrency) {
    absl::StatusOr<BenchLevelResult> r = RunBenchLevel(options, c);
    if (!r.ok()) {
      std::fprintf(stderr, "tandem-infer bench-serve: %s\n", StatusText(r.status()).c_str());
      return 1;
    }
    if (r->failed > 0) {
      any_failed = true;
      std::fprintf(stderr, "concurrency %d: %d request(s) failed; first: %s\n", c, r->failed, r->first_error.c_str());
    }
    if (options.json) std::printf("%s\n", FormatBenchJson(*r).c_str());
    std::fflush(stdout);
    results.push_back(*r);
  }
  if (!options.json) std::fputs(FormatBenchTable(results).c_str(), stdout);
  return any_failed ? 1 : 0;
}

}  // namespace tandem::bench
