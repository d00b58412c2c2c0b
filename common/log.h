// The one logging facility: TLOG(INFO) << "text"; lines go to stderr with time and level.
// Under systemd, stderr is a stream to journald: each line then starts with the syslog priority
// journald reads ("<6>" info, "<4>" warn, ...; sd-daemon(3)), so `journalctl -p warning` and the
// journal's colours work; on a terminal or a file the same lines come without it.
#pragma once

#include <sstream>
#include <string>

namespace tandem {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Messages below this level are dropped. Set from TANDEM_LOG_LEVEL (debug|info|warn|error).
LogLevel MinLogLevel();
void SetMinLogLevel(LogLevel level);
// A prefix for every line, e.g. the node name or "rank 1".
void SetLogTag(const std::string& tag);

// True when stderr is the journal stream systemd named in JOURNAL_STREAM (its device and inode
// match stderr's, systemd.exec(5)): lines get the priority prefix. Decided at the first line;
// DetectJournalStderr() decides again (a test that redirected stderr).
bool LogsToJournal();
void DetectJournalStderr();

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  template <typename T>
  LogLine& operator<<(const T& v) {
    if (enabled_) stream_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  bool enabled_;
  std::ostringstream stream_;
};

}  // namespace tandem

#define TANDEM_LOG_DEBUG ::tandem::LogLevel::kDebug
#define TANDEM_LOG_INFO ::tandem::LogLevel::kInfo
#define TANDEM_LOG_WARN ::tandem::LogLevel::kWarn
#define TANDEM_LOG_ERROR ::tandem::LogLevel::kError
#define TLOG(level) ::tandem::LogLine(TANDEM_LOG_##level, __FILE__, __LINE__)
