#include "engine/batching/stop_strings.h"

#include <algorithm>
#include <utility>

namespace tandem::engine {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopStringMatcher::Push(std::string_view piece, bool* stopped) {
  *stopped = false;
  if (stopped_) return "";
  held_.append(piece.data(), piece.size());
  if (stops_.empty()) return std::exchange(held_, std::string());

  // The earliest complete stop string wins (what a reader of the whole text would see first).
  // Every occurrence lies inside held_: text before it was emitted only when no stop string
  // could start there.
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    *stopped = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }

  // Hold back the longest suffix that a stop string starts with.
  size_t keep = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringMatcher::Flush() {
  if (stopped_) return "";
  return std::exchange(held_, std::string());
}

}  // namespace tandem::engine
