// TANDEM_FAILPOINTS is read once per process, so every list is tried in a process of its own: a
// death test in the "threadsafe" style runs the test again in a fresh copy of this binary.
#include "common/failpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tandem {
namespace {

// Exits 0 when every name in `expect` is on or off as given under TANDEM_FAILPOINTS=`list`.
void ExpectFailpoints(const char* list, const std::vector<std::pair<const char*, bool>>& expect,
                      const char* log_regex = "") {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (list == nullptr) {
    unsetenv("TANDEM_FAILPOINTS");
  } else {
    setenv("TANDEM_FAILPOINTS", list, 1);
  }
  EXPECT_EXIT(
      {
        int wrong = 0;
        for (const auto& [name, on] : expect) {
          if (FailpointEnabled(name) != on) {
            std::fprintf(stderr, "failpoint '%s' should be %s\n", name, on ? "on" : "off");
            ++wrong;
          }
        }
        std::exit(wrong);
      },
      ::testing::ExitedWithCode(0), log_regex)
      << "TANDEM_FAILPOINTS=" << (list ? list : "(unset)");
}

TEST(FailpointTest, UnsetOrEmptyListsNothing) {
  ExpectFailpoints(nullptr, {{"engine_shutdown_hang", false}, {"", false}});
  ExpectFailpoints("", {{"engine_shutdown_hang", false}, {"", false}});
}

TEST(FailpointTest, ListedNamesAreOnAndNothingElse) {
  ExpectFailpoints("engine_shutdown_hang", {{"engine_shutdown_hang", true}, {"engine_shutdown", false}},
                   "failpoint engine_shutdown_hang is ON");
  // Commas separate names; empty items (leading, trailing, doubled commas) are skipped; names
  // match whole and case-sensitively.
  ExpectFailpoints(",a,,b_c,",
                   {{"a", true}, {"b_c", true}, {"", false}, {"b", false}, {"A", false}, {"a,", false}, {"ab_c", false}});
}

}  // namespace
}  // namespace tandem
