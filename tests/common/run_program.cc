#include "tests/common/run_program.h"

#include <sys/wait.h>

#include <thread>

#include "common/subprocess.h"
#include "tests/common/test_util.h"

namespace tandem::testing {

ProgramResult RunProgram(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  TempDir dir;
  SubprocessOptions opts;
  opts.argv = argv;
  opts.stdout_path = dir / "stdout";
  opts.stderr_path = dir / "stderr";
  ProgramResult r;
  Subprocess p;
  std::string error;
  if (!p.Start(opts, &error)) {
    r.err = "could not start " + argv.front() + ": " + error;
    return r;
  }
  std::optional<int> status = p.Wait(timeout);
  if (!status) p.Stop(std::chrono::milliseconds(1000));
  if (status && WIFEXITED(*status)) r.exit_code = WEXITSTATUS(*status);
  r.out = ReadTextFile(dir / "stdout");
  r.err = ReadTextFile(dir / "stderr");
  return r;
}

std::optional<std::vector<std::string>> WaitForMatch(Subprocess& child, const std::string& path, const std::regex& re,
                                                     std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::string text = ReadTextFile(path);
    std::smatch m;
    if (std::regex_search(text, m, re)) return std::vector<std::string>(m.begin(), m.end());
    if (!child.running() || std::chrono::steady_clock::now() > until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace tandem::testing
