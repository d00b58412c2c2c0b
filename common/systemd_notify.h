// systemd's notification protocol for Type=notify units (sd_notify(3), libsystemd): READY=1 once
// the program really serves, STATUS= lines while it loads and serves, WATCHDOG=1 keep-alives and
// STOPPING=1 on shutdown. Started from a terminal or a test without NOTIFY_SOCKET, every call
// does nothing, so the programs call these unconditionally.
//
// The watchdog: the unit's WatchdogSec reaches the process as WATCHDOG_USEC. The keep-alive must
// come from the thread whose hang we want systemd to notice (the agent's RPC self-check, the
// engine loop, the reconcile loop), never from a timer thread of its own, which would go on
// beating while the work it stands for is stuck.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace tandem::systemd {

// Each sends one message when NOTIFY_SOCKET is set; a newline in `status` becomes a space (the
// protocol is one assignment per line).
void NotifyReady(std::string_view status);
void NotifyStatus(std::string_view status);
void NotifyStopping(std::string_view status);
void NotifyWatchdog();
// STATUS= of a start that is still making progress, with EXTEND_TIMEOUT_USEC=`extend`: systemd
// then waits that much longer than TimeoutStartSec for READY=1, so a large model can load for as
// long as it keeps moving, and a load that stalls still times out.
void NotifyLoading(std::string_view status, std::chrono::microseconds extend);

// How often WATCHDOG=1 must be sent: half of WATCHDOG_USEC (the margin sd_watchdog_enabled(3)
// asks for); nullopt when no watchdog is set for this process.
std::optional<std::chrono::microseconds> WatchdogPingInterval();

// Rate-limits keep-alives for a loop that turns more often than the watchdog needs: Kick() from
// every turn sends WATCHDOG=1 when half a ping interval has passed since the last one, so a loop
// that turns at least every half interval keeps the unit alive. Without a watchdog Kick() does
// nothing. Kick() may be called from several threads (a restart's per-node progress lines).
class WatchdogKicker {
 public:
  WatchdogKicker() : interval_(WatchdogPingInterval()) {}
  bool enabled() const { return interval_.has_value(); }
  void Kick();

 private:
  const std::optional<std::chrono::microseconds> interval_;
  std::atomic<int64_t> last_ns_{-1};  // steady_clock of the last WATCHDOG=1; -1 = none yet
};

// Waits for one of `signals` (blocked in every thread beforehand) and returns its number. With a
// watchdog it wakes every ping interval, runs `alive` and sends WATCHDOG=1 only when that check
// passes: a main thread that only waits for signals vouches for the part `alive` exercises.
int WaitForSignalKeepingWatchdog(const sigset_t& signals, const std::function<bool()>& alive);

}  // namespace tandem::systemd
