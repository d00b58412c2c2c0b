// Small helpers shared by tests: files, loopback ports, and where the reference data is.
#pragma once

#include <filesystem>
#include <string>

namespace tandem::testing {

// The whole file as a string ("" when it cannot be read).
std::string ReadTextFile(const std::string& path);
// A fresh directory PREFIX-XXXXXX (mkdtemp) in the temporary folder. Aborts the test binary,
// saying why, when none can be made: no test that asks for one could run without it. Removing
// it is the caller's: the integration tests keep theirs when a test failed.
std::string MakeTempDir(const std::string& prefix);
// A MakeTempDir folder owned by one test: removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() : path_(MakeTempDir("tandem-test")) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};
// A loopback port with nothing listening: bind port 0, read it back, close.
int UnusedLoopbackPort();

// The reference data folder: TANDEM_TESTDATA when set (CTest always sets it), else the checkout's
// tests/data, so a test binary run by hand finds the fixtures too. The one place that knows the
// default: the test helpers of every folder ask here.
std::string TestdataDir();

// TestdataDir() with symlinks resolved: what tests give agents and engine hosts as their model
// root. As given when it cannot be resolved.
inline std::string CanonicalTestdataDir() {
  const std::string dir = TestdataDir();
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(dir, ec);
  return ec ? dir : p.string();
}

}  // namespace tandem::testing
