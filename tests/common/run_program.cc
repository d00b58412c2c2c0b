#include "tests/common/run_program.h"

#include <sys/wait.h>

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

}  // namespace tandem::testing
