#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include <sys/stat.h>

namespace tandem {
namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("TANDEM_LOG_LEVEL");
  if (v == nullptr) return LogLevel::kInfo;
  if (std::strcmp(v, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(v, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(v, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& MinLevelStore() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

std::mutex& TagMutex() {
  static std::mutex mu;
  return mu;
}
std::string& Tag() {
  static std::string tag;
  return tag;
}

// JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected stdout/stderr to.
bool StderrIsJournalStream() {
  const char* v = std::getenv("JOURNAL_STREAM");
  if (v == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(v, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(2, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino;
}

std::atomic<bool>& JournalStore() {
  static std::atomic<bool> journal{StderrIsJournalStream()};
  return journal;
}

// The syslog priority journald reads from a line's "<N>" prefix.
const char* JournalPrefix(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "<7>";
    case LogLevel::kInfo: return "<6>";
    case LogLevel::kWarn: return "<4>";
    case LogLevel::kError: return "<3>";
  }
  return "<6>";
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarn: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}

}  // namespace

bool LogsToJournal() { return JournalStore().load(); }
void DetectJournalStderr() { JournalStore().store(StderrIsJournalStream()); }

LogLevel MinLogLevel() { return static_cast<LogLevel>(MinLevelStore().load()); }
void SetMinLogLevel(LogLevel level) { MinLevelStore().store(static_cast<int>(level)); }
void SetLogTag(const std::string& tag) {
  std::lock_guard<std::mutex> lock(TagMutex());
  Tag() = tag;
}

LogLine::LogLine(LogLevel level, const char* file, int line)
    : level_(level), enabled_(level >= MinLogLevel()) {
  if (!enabled_) return;
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  std::string tag;
  {
    std::lock_guard<std::mutex> lock(TagMutex());
    tag = Tag();
  }
  stream_ << LevelName(level) << " " << buf << "." << (ms / 100) << (ms / 10 % 10) << (ms % 10) << " ";
  if (!tag.empty()) stream_ << "[" << tag << "] ";
  stream_ << base << ":" << line << "] ";
}

LogLine::~LogLine() {
  if (!enabled_) return;
  stream_ << "\n";
  std::string s = stream_.str();
  if (LogsToJournal()) {
    // journald makes one entry per line: every line of a multi-line message carries the level,
    // or its continuation lines would land as info.
    const std::string prefix = JournalPrefix(level_);
    std::string out = prefix;
    for (size_t i = 0; i < s.size(); ++i) {
      out += s[i];
      if (s[i] == '\n' && i + 1 < s.size()) out += prefix;
    }
    s = std::move(out);
  }
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tandem
