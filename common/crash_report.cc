#include "common/crash_report.h"

#include <csignal>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace tandem {

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  // absl's handler takes SIGTERM too; a stop (systemd, a test's teardown, a user) is not a fault
  // and must keep its own handling (default: end quietly; the programs that stop cleanly block it
  // or set their handler after this call).
  struct sigaction term {};
  const bool had_term = sigaction(SIGTERM, nullptr, &term) == 0;
  absl::FailureSignalHandlerOptions options;
  options.symbolize_stacktrace = true;
  absl::InstallFailureSignalHandler(options);
  if (had_term) sigaction(SIGTERM, &term, nullptr);
}

}  // namespace tandem
