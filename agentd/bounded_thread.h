// A thread that can be joined with a deadline: a thread still running at the deadline is
// reported instead of waited for, and can be left to run on alone. The engine host's teardown
// uses it so that no leave ever blocks past its deadline.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace tandem::agentd {

class BoundedThread {
 public:
  ~BoundedThread() {
    if (thread_.joinable()) thread_.join();  // only reached once JoinFor succeeded or never started
  }
  void Start(std::function<void()> fn) {
    auto done = std::make_shared<std::promise<void>>();
    done_ = done->get_future();
    thread_ = std::thread([fn = std::move(fn), done] {
      fn();
      done->set_value();
    });
  }
  bool JoinFor(std::chrono::milliseconds timeout) {
    if (!thread_.joinable()) return true;
    if (done_.wait_for(timeout) != std::future_status::ready) return false;
    thread_.join();
    return true;
  }
  // Lets a stuck thread run on alone (it must own what it uses).
  void Detach() {
    if (thread_.joinable()) thread_.detach();
  }

 private:
  std::thread thread_;
  std::future<void> done_;
};

}  // namespace tandem::agentd
