// The log line's shape (level letter, UTC time to the millisecond, tag, file:line), the level
// filter, and the start level taken from TANDEM_LOG_LEVEL (read once per process, so that case
// runs in a fresh copy of this binary through a "threadsafe" death test), and the journald
// priority prefixes when stderr is the stream JOURNAL_STREAM names.
#include "common/log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
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

// Runs `body` with stderr captured and JOURNAL_STREAM naming the capture file (as systemd names
// the journal's socket) or, with `other_stream`, some other stream; returns what was written.
template <typename F>
std::string StderrWithJournalStream(bool other_stream, F body) {
  return Stderr([&] {
    struct stat st {};
    ASSERT_EQ(fstat(2, &st), 0);
    const unsigned long long ino = static_cast<unsigned long long>(st.st_ino) + (other_stream ? 1 : 0);
    const std::string stream = std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" + std::to_string(ino);
    setenv("JOURNAL_STREAM", stream.c_str(), 1);
    DetectJournalStderr();
    body();
    unsetenv("JOURNAL_STREAM");
    DetectJournalStderr();
  });
}

TEST(LogTest, JournalStderrGetsPriorityPrefixesOnEveryLine) {
  const std::string out = StderrWithJournalStream(false, [] {
    EXPECT_TRUE(LogsToJournal());
    SetMinLogLevel(LogLevel::kDebug);
    TLOG(DEBUG) << "d";
    TLOG(INFO) << "i";
    TLOG(WARN) << "w";
    TLOG(ERROR) << "table:\nrow 1\nrow 2";
  });
  std::printf("%s", out.c_str());
  EXPECT_TRUE(std::regex_match(out, std::regex(R"(<7>D [^\n]*\] d\n<6>I [^\n]*\] i\n<4>W [^\n]*\] w\n)"
                                               R"(<3>E [^\n]*\] table:\n<3>row 1\n<3>row 2\n)")))
      << "'" << out << "'";
  EXPECT_FALSE(LogsToJournal());
}

TEST(LogTest, AnotherJournalStreamLeavesTheLinesPlain) {
  // stderr redirected to a file by hand while systemd's JOURNAL_STREAM still names the socket.
  const std::string out = StderrWithJournalStream(true, [] {
    EXPECT_FALSE(LogsToJournal());
    TLOG(WARN) << "w";
  });
  EXPECT_TRUE(std::regex_match(out, std::regex(R"(W \d\d:\d\d:\d\d\.\d\d\d log_test\.cc:\d+\] w\n)"))) << "'" << out << "'";
}

}  // namespace
}  // namespace tandem
