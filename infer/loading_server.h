// The API port while `tandem-infer serve` loads its model: bound first, so that a port another
// process holds fails in a second (naming the address) instead of after minutes of loading, and
// so that clients and health checks see "503 loading" instead of "connection refused".
// Every route of the OpenAI server answers 503 with {"status": "loading", "progress": ...}; the
// real server takes the same port right after Stop().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "http/server.h"

namespace tandem::infer {

class LoadingServer {
 public:
  // Binds host:port (port 0: any free port) and answers at once. `progress` says how far the load
  // is ("40% (120/300 tensors)"), asked per request.
  static absl::StatusOr<std::unique_ptr<LoadingServer>> Start(const std::string& host, int port,
                                                              std::function<std::string()> progress);
  ~LoadingServer() { Stop(); }

  int port() const { return server_.port(); }
  // Closes the port and the open connections; the real server can bind it when this returns.
  void Stop();

 private:
  explicit LoadingServer(http::ServerOptions options) : server_(std::move(options)) {}
  http::Server server_;
  bool stopped_ = false;
};

}  // namespace tandem::infer
