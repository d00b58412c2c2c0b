// The pieces of an EngineHost that live longer than one call: the loaded shard (Loaded) and the
// group of one generation (Group). Internal to agentd/engine_host*.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "agentd/bounded_thread.h"
#include "agentd/engine_host.h"
#include "agentd/group_comm.h"
#include "agentd/group_transport.h"
#include "agentd/grpc_store.h"
#include "engine/model.h"
#include "openai/serve_metrics.h"
#include "openai/serving_stack.h"
#include "engine/batching/timed_comm.h"
#include "engine/step_driver.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::agentd {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

inline int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct EngineHost::Loaded {
  v1::LoadModelRequest request;
  std::unique_ptr<GroupComm> comm;  // null for a world of one
  std::unique_ptr<engine::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null when the folder has none (or it did not load)
  std::string tokenizer_error;                      // why it did not load ("" = none in the folder)
  std::string folder;                               // the resolved model folder (its chat template)
};

struct EngineHost::Group {
  uint64_t generation = 0;
  int rank = 0;
  int world = 1;
  // Shared: a group left behind by a stuck teardown keeps its model alive on its own, so a later
  // load never frees weights a leaked thread still reads.
  std::shared_ptr<Loaded> loaded;
  std::unique_ptr<GrpcStore> remote;  // ranks > 0: the head's store
  std::unique_ptr<CancellableStore> cancellable;
  std::unique_ptr<engine::PrefixStore> prefixed;
  std::unique_ptr<engine::Comm> comm;
  // Head only.
  std::unique_ptr<openai::ServeMetrics> serve_metrics;
  std::unique_ptr<engine::TimedComm> timed;
  std::unique_ptr<engine::StepDriver> driver;
  std::unique_ptr<openai::ServingStack> stack;  // the engine and the API over `driver`

  BoundedThread worker;
  BoundedThread monitor;
  BoundedThread heartbeat;  // ranks > 0: HeartbeatLoop
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;                 // under stop_mu
  std::atomic<bool> settled{false};  // a failure (or the leave) has been recorded: report no more

  void Abort(const std::string& reason) {
    if (cancellable) cancellable->Cancel();
    if (comm) comm->Abort(reason);
  }
  ~Group() {
    // Leaked groups never get here; the rest have stopped their threads.
    stack.reset();
    driver.reset();
  }
};

}  // namespace tandem::agentd
