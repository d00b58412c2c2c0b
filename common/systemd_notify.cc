#include "common/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <string>

namespace tandem::systemd {
namespace {

void Send(const std::string& state) {
  // 0: keep NOTIFY_SOCKET in the environment; every later message needs it too.
  (void)sd_notify(0, state.c_str());
}

std::string OneLine(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

void NotifyReady(std::string_view status) { Send("READY=1\nSTATUS=" + OneLine(status)); }
void NotifyStatus(std::string_view status) { Send("STATUS=" + OneLine(status)); }
void NotifyStopping(std::string_view status) { Send("STOPPING=1\nSTATUS=" + OneLine(status)); }
void NotifyWatchdog() { Send("WATCHDOG=1"); }
void NotifyLoading(std::string_view status, std::chrono::microseconds extend) {
  Send("STATUS=" + OneLine(status) + "\nEXTEND_TIMEOUT_USEC=" + std::to_string(extend.count()));
}

std::optional<std::chrono::microseconds> WatchdogPingInterval() {
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, names this process.
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec / 2);
}

void WatchdogKicker::Kick() {
  if (!interval_) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t last = last_ns_.load();
  const int64_t gap = std::chrono::duration_cast<std::chrono::nanoseconds>(*interval_ / 2).count();
  if (last >= 0 && now - last < gap) return;
  // One of several threads kicking at once sends; the others see its time.
  if (last_ns_.compare_exchange_strong(last, now)) NotifyWatchdog();
}

int WaitForSignalKeepingWatchdog(const sigset_t& signals, const std::function<bool()>& alive) {
  const std::optional<std::chrono::microseconds> interval = WatchdogPingInterval();
  if (!interval) {
    int sig = 0;
    sigwait(&signals, &sig);
    return sig;
  }
  const auto us = interval->count();
  const timespec tick{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  for (;;) {
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig > 0) return sig;
    // EAGAIN: the interval passed; EINTR: another signal (not one of ours) interrupted the wait.
    if (alive()) NotifyWatchdog();
  }
}

}  // namespace tandem::systemd
