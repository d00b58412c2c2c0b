// The log line's shape (level letter, UTC time to the millisecond, tag, file:line), the level
// filter, and the start level taken from TANDEM_LOG_LEVEL (read once per process, so that case
// runs in a fresh copy of this binary through a "threadsafe" death test).
#include "common/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

namespace tandem {
namespace {

// Captures what `body` writes to stderr; the level and tag are put back afterwards.
template <typename F>
std::string Stderr(F body) {
  const LogLevel before = MinLogLevel();
  ::testing::internal::CaptureStderr();
  body();
  std::string out = ::testing::internal::GetCapturedStderr();
  SetMinLogLevel(before);
  SetLogTag("");
  return out;
}

TEST(LogTest, LineShape) {
  const std::string out = Stderr([] {
    SetMinLogLevel(LogLevel::kDebug);
    TLOG(INFO) << "hello " << 42 << ' ' << 1.5;
  });
  EXPECT_TRUE(std::regex_match(out, std::regex(R"(I \d\d:\d\d:\d\d\.\d\d\d log_test\.cc:\d+\] hello 42 1\.5\n)")))
      << "'" << out << "'";
  const std::string tagged = Stderr([] {
    SetLogTag("rank 1");
    TLOG(ERROR) << "down";
  });
  EXPECT_TRUE(std::regex_match(tagged, std::regex(R"(E \d\d:\d\d:\d\d\.\d\d\d \[rank 1\] log_test\.cc:\d+\] down\n)")))
      << "'" << tagged << "'";
}

TEST(LogTest, LinesBelowTheLevelAreDropped) {
  const std::string out = Stderr([] {
    SetMinLogLevel(LogLevel::kWarn);
    TLOG(DEBUG) << "d";
    TLOG(INFO) << "i";
    TLOG(WARN) << "w";
    TLOG(ERROR) << "e";
  });
  EXPECT_TRUE(std::regex_match(out, std::regex(R"(W [^\n]*\] w\nE [^\n]*\] e\n)"))) << "'" << out << "'";
  EXPECT_EQ(Stderr([] {
              SetMinLogLevel(LogLevel::kError);
              TLOG(WARN) << "w";
            }),
            "");
}

TEST(LogTest, StartLevelComesFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::pair<const char*, LogLevel> cases[] = {{"debug", LogLevel::kDebug},
                                                    {"info", LogLevel::kInfo},
                                                    {"warn", LogLevel::kWarn},
                                                    {"error", LogLevel::kError},
                                                    {"WARN", LogLevel::kInfo},  // names are lowercase
                                                    {"", LogLevel::kInfo}};
  for (const auto& [value, level] : cases) {
    setenv("TANDEM_LOG_LEVEL", value, 1);
    EXPECT_EXIT(std::exit(MinLogLevel() == level ? 0 : 1), ::testing::ExitedWithCode(0), "")
        << "TANDEM_LOG_LEVEL=" << value;
  }
  unsetenv("TANDEM_LOG_LEVEL");
  EXPECT_EXIT(std::exit(MinLogLevel() == LogLevel::kInfo ? 0 : 1), ::testing::ExitedWithCode(0), "") << "unset";
}

}  // namespace
}  // namespace tandem
