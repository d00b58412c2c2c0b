// Stop strings over streamed text: text is emitted as soon as it cannot be the beginning of a
// stop string; a found stop string ends the text just before it (the stop string itself is not
// part of the output, as OpenAI does).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::engine {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);  // empty strings are ignored

  // Adds `piece` and returns the text that is safe to emit now. When a stop string is complete,
  // sets *stopped and returns the text before its first occurrence; the matcher is done then.
  std::string Push(std::string_view piece, bool* stopped);
  // The text still held back (the sequence ended for another reason).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // a suffix of the text that is a proper prefix of some stop string
  bool stopped_ = false;
};

}  // namespace tandem::engine
