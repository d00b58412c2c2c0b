// `tandem-infer serve` and `tandem-infer bench-serve` as library functions (infer_main.cc only
// dispatches to them), so that tests and the agent can run the same code.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli.h"

namespace tandem::infer {

struct ServeOptions {
  std::string model_dir;
  std::string backend = "cpu";
  int tp = 1;                        // ranks as threads of this process
  int threads = 0;                   // matmul threads per rank; 0 = cores / tp
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype auto|f32|bf16|fp8 (fp8: twice bf16's tokens)
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0 = any free port
  std::string served_model_name;     // "" = basename of model_dir
  std::string api_key_file;          // "" = open API; else the key clients must send (0600 file)
  bool insecure = false;             // allow a non-loopback --host without an API key
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 0;         // 0 = min(4096, max_position_embeddings)
  int64_t kv_tokens = 0;             // 0 = sized from memory
  double memory_fraction = 0;        // 0 = the backend's default (cpu 0.70 of MemAvailable, cuda 0.90 of the GPU)
  int32_t max_waiting = 256;
  // The HTTP front door (OpenAIServerOptions): 0 = its default.
  int max_in_flight = 0;             // 0 = max_num_seqs + max_waiting + 8
  int max_connections = 0;
  int64_t max_body_bytes = 0;        // 0 = 4 MiB
  std::chrono::milliseconds header_timeout{0};
  std::chrono::milliseconds body_timeout{0};
  std::chrono::milliseconds idle_timeout{0};
  std::chrono::milliseconds write_timeout{0};
  std::chrono::milliseconds shutdown_deadline{10000};  // SIGTERM: let requests finish this long
};

// The `serve` subcommand's flags, into `options` (infer_main.cc, and ParseServeFlags).
void AddServeFlags(CLI::App* command, ServeOptions* options);
// The rules across flags, after parsing: a network --host needs --api-key-file or --insecure.
absl::Status CheckServeOptions(const ServeOptions& options);
// AddServeFlags + parse + CheckServeOptions over "serve" flags (everything after the subcommand);
// InvalidArgument names the flag.
absl::StatusOr<ServeOptions> ParseServeFlags(const std::vector<std::string>& args);

// Loads the model, starts the engine and the HTTP server, prints
// "tandem-infer serving model=NAME on http://H:P" to stdout when ready, and serves until SIGTERM or
// SIGINT (or until `stop` returns true, polled; for tests). Then drains for shutdown_deadline,
// aborts what is left and returns.
absl::Status Serve(const ServeOptions& options, const std::function<bool()>& stop = nullptr);

// The subcommand's entry point after parsing: exit code, errors on stderr.
int RunServeCommand(const ServeOptions& options);

}  // namespace tandem::infer
