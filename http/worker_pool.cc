#include "http/worker_pool.h"

#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "common/log.h"

namespace tandem::http {

struct WorkerPool::State {
  struct Slot {
    std::thread thread;
    bool done = false;  // the thread function has finished its work (under mu)
  };
  std::mutex mu;
  std::condition_variable work_cv;   // a task was queued, or stopping
  std::condition_variable ended_cv;  // a thread ended
  std::deque<std::function<void()>> queue;
  // Shared with its thread: a detached thread still marks its slot done after Stop returned.
  std::list<std::shared_ptr<Slot>> slots;
  int max_threads = 1;
  int idle = 0;
  int live = 0;
  bool stopping = false;
};

namespace {

void RunWorker(std::shared_ptr<WorkerPool::State> s, std::shared_ptr<WorkerPool::State::Slot> slot) {
  std::unique_lock<std::mutex> l(s->mu);
  for (;;) {
    ++s->idle;
    s->work_cv.wait(l, [&] { return s->stopping || !s->queue.empty(); });
    --s->idle;
    if (s->queue.empty()) break;  // stopping, and nothing left to run
    std::function<void()> task = std::move(s->queue.front());
    s->queue.pop_front();
    l.unlock();
    task();
    task = nullptr;  // what the task captured is released before the thread counts as idle
    l.lock();
  }
  slot->done = true;
  --s->live;
  s->ended_cv.notify_all();
}

}  // namespace

WorkerPool::WorkerPool(int max_threads) : state_(std::make_shared<State>()) {
  state_->max_threads = max_threads < 1 ? 1 : max_threads;
}

WorkerPool::~WorkerPool() { Stop(std::chrono::steady_clock::now()); }

void WorkerPool::Submit(std::function<void()> task) {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->queue.push_back(std::move(task));
  if (state_->idle < static_cast<int>(state_->queue.size()) && state_->live < state_->max_threads &&
      !state_->stopping) {
    auto slot = std::make_shared<State::Slot>();
    state_->slots.push_back(slot);
    ++state_->live;
    slot->thread = std::thread(RunWorker, state_, slot);
  }
  state_->work_cv.notify_one();
}

bool WorkerPool::Stop(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(state_->mu);
  state_->stopping = true;
  state_->work_cv.notify_all();
  state_->ended_cv.wait_until(l, deadline, [&] { return state_->live == 0; });
  const bool all = state_->live == 0;
  std::list<std::shared_ptr<State::Slot>> slots;
  slots.swap(state_->slots);
  l.unlock();
  int left = 0;
  for (const auto& slot : slots) {
    if (!slot->thread.joinable()) continue;
    bool done;
    {
      std::lock_guard<std::mutex> g(state_->mu);
      done = slot->done;
    }
    if (done) {
      slot->thread.join();  // it has only to return
    } else {
      ++left;
      slot->thread.detach();
    }
  }
  if (left > 0) TLOG(WARN) << "http: " << left << " handler thread(s) did not finish in time; left running";
  return all;
}

int WorkerPool::threads() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->live;
}

}  // namespace tandem::http
