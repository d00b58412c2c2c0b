// Small helpers shared by tests that touch files and loopback ports.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tandem::testing {

// The whole file as a string ("" when it cannot be read).
std::string ReadTextFile(const std::string& path);
// A loopback port with nothing listening: bind port 0, read it back, close.
int UnusedLoopbackPort();

// The reference data folder (TANDEM_TESTDATA, else ../shared/testdata), symlinks resolved: what
// tests give agents and engine hosts as their model root. As given when it cannot be resolved.
inline std::string CanonicalTestdataDir() {
  const char* td = std::getenv("TANDEM_TESTDATA");
  const std::string dir = td ? td : "../shared/testdata";
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(dir, ec);
  return ec ? dir : p.string();
}

}  // namespace tandem::testing
