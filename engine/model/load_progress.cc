#include "engine/model/load_progress.h"

#include <cstdio>

#include "common/log.h"
#include "common/systemd_notify.h"

namespace tandem::engine {
namespace {

int Percent(const LoadProgress& p) {
  const int64_t total = p.tensors_total.load();
  return total > 0 ? static_cast<int>(100 * p.tensors_read.load() / total) : 0;
}

}  // namespace

std::string DescribeLoadProgress(const LoadProgress& p) {
  const int64_t total = p.tensors_total.load();
  if (total == 0) return "opening the checkpoint";
  // GiB for real models; MiB keeps a test checkpoint's bytes readable.
  const bool gib = p.bytes_total.load() >= (int64_t{1} << 30);
  const double unit = gib ? (1 << 30) : (1 << 20);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%d%% (%lld/%lld tensors, %.1f of %.1f %s read)", Percent(p),
                static_cast<long long>(p.tensors_read.load()), static_cast<long long>(total),
                static_cast<double>(p.bytes_read.load()) / unit, static_cast<double>(p.bytes_total.load()) / unit,
                gib ? "GiB" : "MiB");
  return buf;
}

LoadProgressLog::LoadProgressLog(std::string what, const LoadProgress* progress, std::chrono::milliseconds every)
    : what_(std::move(what)), progress_(progress) {
  thread_ = std::thread([this, every] {
    int logged_decile = 0;
    int64_t bytes_at_last_line = -1;
    auto next = std::chrono::steady_clock::now() + every;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      // Wake often enough to catch each 10% soon after it passes.
      cv_.wait_for(lock, std::min(every, std::chrono::milliseconds(250)));
      if (stop_) break;
      const int decile = Percent(*progress_) / 10;
      const auto now = std::chrono::steady_clock::now();
      if (decile > logged_decile || now >= next) {
        const std::string line = "loading " + what_ + ": " + DescribeLoadProgress(*progress_);
        TLOG(INFO) << line;
        // The unit's STATUS= too; while bytes keep arriving, systemd's start timeout is pushed
        // out by three log periods (a stalled load still times out).
        const int64_t bytes = progress_->bytes_read.load();
        if (bytes != bytes_at_last_line) {
          systemd::NotifyLoading(line, 3 * std::chrono::duration_cast<std::chrono::microseconds>(every));
        } else {
          systemd::NotifyStatus(line);
        }
        bytes_at_last_line = bytes;
        logged_decile = std::max(logged_decile, decile);
        next = now + every;
      }
    }
  });
}

LoadProgressLog::~LoadProgressLog() { Stop(); }

void LoadProgressLog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LoadProgressLog::Done() {
  Stop();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", s);
  TLOG(INFO) << "loaded " << what_ << " in " << secs << " s: " << DescribeLoadProgress(*progress_);
}

}  // namespace tandem::engine
