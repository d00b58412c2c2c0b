#include "engine/comm/rank_threads.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/comm/gloo_comm.h"
#include "engine/comm/local_comm.h"

namespace tandem::engine {

namespace {

// What the rank threads share: live comms (to abort them), the first error, and a done count.
struct RunState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Comm*> comms;
  int finished = 0;
  bool failed = false;
  std::string failure;
  absl::Status first_error;

  // Records a failure (the first one wins) and aborts every live comm. Caller holds `mu`.
  void FailLocked(absl::Status st) {
    if (failed) return;
    failed = true;
    first_error = std::move(st);
    failure = std::string(first_error.message());
    for (Comm* c : comms) {
      if (c != nullptr) c->Abort(failure);
    }
  }
};

absl::Status WithRank(int rank, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat("rank ", rank, ": ", st.message()));
}

}  // namespace

absl::Status RunRanksAsThreads(int world_size, Store& store,
                               const std::function<absl::Status(Comm&)>& body,
                               const RankThreadsOptions& options) {
  if (world_size < 1) return absl::InvalidArgumentError("world size must be at least 1");
  // A fresh prefix per call: two groups formed through the same store never share keys.
  static std::atomic<uint64_t> run_counter{0};
  PrefixStore run_store(store, absl::StrCat("threads", run_counter.fetch_add(1)));

  RunState state;
  state.comms.assign(world_size, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::Status st;
      std::unique_ptr<Comm> comm;
      if (world_size == 1) {
        comm = std::make_unique<LocalComm>();
      } else {
        GlooCommOptions opts;
        opts.store = &run_store;
        opts.rank = r;
        opts.world_size = world_size;
        opts.hostname_or_iface = options.hostname_or_iface;
        opts.timeout = options.timeout;
        opts.connect_timeout = options.connect_timeout;
        opts.direct_allreduce_max_bytes = options.direct_allreduce_max_bytes;
        auto created = CreateGlooComm(opts);
        if (created.ok()) {
          comm = std::move(*created);
        } else {
          st = created.status();
        }
      }
      if (comm != nullptr) {
        {
          std::lock_guard<std::mutex> lock(state.mu);
          state.comms[r] = comm.get();
          if (state.failed) comm->Abort(state.failure);
        }
        try {
          st = body(*comm);
        } catch (const std::exception& e) {
          st = absl::InternalError(absl::StrCat("exception: ", e.what()));
        } catch (...) {
          st = absl::InternalError("unknown exception");
        }
      }
      std::lock_guard<std::mutex> lock(state.mu);
      state.comms[r] = nullptr;  // before `comm` is destroyed at the end of this scope
      if (!st.ok()) state.FailLocked(WithRank(r, st));
      state.finished++;
      state.cv.notify_all();
    });
  }

  if (options.deadline.count() > 0) {
    std::unique_lock<std::mutex> lock(state.mu);
    if (!state.cv.wait_for(lock, options.deadline, [&] { return state.finished == world_size; })) {
      state.FailLocked(absl::DeadlineExceededError(
          absl::StrCat(world_size, " rank threads did not finish within ",
                       static_cast<double>(options.deadline.count()) / 1000.0, " s")));
    }
  }
  for (auto& t : threads) t.join();
  return state.first_error;
}

absl::Status RunRanksAsThreads(int world_size, const std::function<absl::Status(Comm&)>& body,
                               const RankThreadsOptions& options) {
  MemoryStore store;
  return RunRanksAsThreads(world_size, store, body, options);
}

}  // namespace tandem::engine
