// An in-process gRPC server for one service on a free loopback port (plaintext), stopped when it
// goes out of scope: for the tests of a service and of the clients that talk to it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace tandem::testing {

class LoopbackServer {
 public:
  // `service` must outlive the server. port() is 0 when the server did not start.
  explicit LoopbackServer(grpc::Service* service) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service);
    server_ = b.BuildAndStart();
  }
  ~LoopbackServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace tandem::testing
