#include "infer/loading_server.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tandem::infer {
namespace {

// The OpenAI server's error shape (docs/api.md), so a client reads it as any other 503.
http::Response Loading(int status, const std::string& message, const std::string& progress) {
  nlohmann::json body = {{"status", "loading"},
                         {"progress", progress},
                         {"error", {{"message", message}, {"type", "server_error"}, {"code", "loading"}}}};
  http::Response r{status, {}, "application/json", body.dump()};
  if (status == 503) r.headers.push_back({"Retry-After", "5"});
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadingServer>> LoadingServer::Start(const std::string& host, int port,
                                                                    std::function<std::string()> progress) {
  http::ServerOptions options;
  options.host = host;
  options.port = port;
  options.max_connections = 256;
  std::unique_ptr<LoadingServer> s(new LoadingServer(options));
  auto answer = [progress](const http::Request&) {
    const std::string p = progress ? progress() : "";
    return Loading(503, "the model is loading (" + p + "); retry later", p);
  };
  for (const char* path : {"/health", "/v1/models", "/metrics"}) s->server_.HandleInline("GET", path, answer);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) s->server_.HandleInline("POST", path, answer);
  s->server_.SetErrorRenderer([progress](int status, const std::string& message) {
    return Loading(status, message, progress ? progress() : "");
  });
  RETURN_IF_ERROR(s->server_.Start());
  return s;
}

void LoadingServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  server_.Stop(std::chrono::milliseconds(0));
}

}  // namespace tandem::infer
