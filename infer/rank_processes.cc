#include "infer/rank_processes.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "common/log.h"

namespace tandem::infer {

using engine::Comm;

absl::StatusOr<std::string> SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return absl::InternalError("cannot read /proc/self/exe");
  return std::string(buf, n);
}

absl::StatusOr<std::unique_ptr<RankProcesses>> RankProcesses::Spawn(const std::string& exe,
                                                                    const std::vector<std::string>& args,
                                                                    int world, const std::string& store_dir) {
  std::unique_ptr<RankProcesses> group(new RankProcesses());
  for (int r = 1; r < world; ++r) {
    SubprocessOptions opts;
    opts.argv = {exe};
    opts.argv.insert(opts.argv.end(), args.begin(), args.end());
    for (const std::string& flag : {std::string("--rank"), std::to_string(r), std::string("--world"),
                                    std::to_string(world), std::string("--store"), store_dir}) {
      opts.argv.push_back(flag);
    }
    opts.stdout_path = "/dev/null";
    Subprocess child;
    std::string error;
    if (!child.Start(opts, &error)) {
      return absl::InternalError("cannot start rank " + std::to_string(r) + ": " + error);
    }
    group->children_.push_back(std::move(child));
  }
  group->watcher_ = std::thread([g = group.get()] { g->Watch(); });
  return group;
}

RankProcesses::~RankProcesses() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  for (auto& c : children_) c.Stop(std::chrono::milliseconds(1000));
}

void RankProcesses::SetComm(Comm* comm) {
  std::lock_guard<std::mutex> lock(mu_);
  comm_ = comm;
  if (comm_ != nullptr && !failure_.empty()) comm_->Abort(failure_);
}

void RankProcesses::Watch() {
  while (!stop_) {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].running()) continue;
      const int status = children_[i].Wait(std::chrono::milliseconds(0)).value_or(-1);
      if (status == 0) continue;  // a clean exit comes only after rank 0 said Stop
      std::string reason = "rank " + std::to_string(i + 1) + " exited (" + DescribeWaitStatus(status) +
                           ") while the group was running; see its log above";
      std::lock_guard<std::mutex> lock(mu_);
      if (comm_ == nullptr) {
        // Still in the rendezvous, which cannot be interrupted: give up now rather than wait it out.
        std::fprintf(stderr, "tandem-infer: %s\n", reason.c_str());
        for (auto& c : children_) c.Signal(SIGKILL);
        _exit(1);
      }
      failure_ = reason;
      comm_->Abort(reason);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool IsGroupFailure(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return true;
    case absl::StatusCode::kFailedPrecondition:
      return std::string(st.message()).find("comm aborted") != std::string::npos;
    default:
      return false;
  }
}

absl::Status RankProcesses::Finish(std::chrono::milliseconds timeout) {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  absl::Status result, lost_group;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (size_t i = 0; i < children_.size(); ++i) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto status = children_[i].Wait(std::max(left, std::chrono::milliseconds(0)));
    std::string problem;
    if (!status) {
      children_[i].Stop(std::chrono::milliseconds(500));
      problem = "did not exit within the deadline (killed)";
    } else if (*status != 0) {
      problem = "exited with " + DescribeWaitStatus(*status);
    }
    if (problem.empty()) continue;
    absl::Status st = absl::UnavailableError("rank " + std::to_string(i + 1) + " " + problem);
    const bool only_lost_group = status && WIFEXITED(*status) && WEXITSTATUS(*status) == kExitLostGroup;
    if (only_lost_group) {
      if (lost_group.ok()) lost_group = st;
    } else if (result.ok()) {
      result = st;
    }
  }
  if (!result.ok()) return result;
  if (!lost_group.ok()) return lost_group;
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_.empty()) return absl::UnavailableError(failure_);
  return absl::OkStatus();
}

}  // namespace tandem::infer
