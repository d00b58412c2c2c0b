#pragma once

namespace tandem {

// A program that dies of a fault says where. After this call a SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT or SIGTRAP writes "*** SIG... received" to stderr with the faulting instruction's
// function and, as far as frame pointers allow (x86-64 builds omit them), its callers (absl's
// failure signal handler); then the signal's default action ends the process as before (the same
// status to a parent, a core where the system keeps them). SIGTERM keeps the handling it had: a
// stop is not a crash. Call it first thing in main, before any thread starts.
void InstallCrashReport(const char* argv0);

}  // namespace tandem
