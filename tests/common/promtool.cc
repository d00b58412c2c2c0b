#include "tests/common/promtool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "common/subprocess.h"
#include "tests/common/test_util.h"

namespace tandem::testing {

std::optional<std::string> PromtoolFindings(const std::string& metrics_text) {
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0) return std::nullopt;
  TempDir scratch;
  const std::string in = scratch / "metrics.txt", out = scratch / "promtool.out";
  std::ofstream(in, std::ios::binary) << metrics_text;
  SubprocessOptions so;
  so.argv = {"/bin/sh", "-c", std::string(promtool) + " check metrics < " + in};
  so.stdout_path = out;
  so.stderr_path = out;
  Subprocess p;
  std::string error;
  if (!p.Start(so, &error)) return "cannot run promtool: " + error;
  const std::optional<int> rc = p.Wait(std::chrono::seconds(30));
  const std::string findings = ReadTextFile(out);
  if (!rc || !WIFEXITED(*rc) || WEXITSTATUS(*rc) != 0) {
    return "promtool failed (" + (rc ? DescribeWaitStatus(*rc) : std::string("timeout")) + "): " + findings;
  }
  return findings;
}

}  // namespace tandem::testing
