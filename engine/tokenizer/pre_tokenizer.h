// The text stages before BPE, configured from tokenizer.json: the normalizer (Unicode normal
// forms) and the pre-tokenizer (regex Split steps and the ByteLevel step), which cut text into
// the words that BPE merges inside of.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

// A chain of normal forms ("normalizer": null, NFC/NFD/NFKC/NFKD, or a Sequence of those).
class Normalizer {
 public:
  void AddStep(NormalForm form) { steps_.push_back(form); }
  bool empty() const { return steps_.empty(); }
  // Input must be valid UTF-8 (Encode cleans it first).
  std::string Apply(std::string_view text) const;

 private:
  std::vector<NormalForm> steps_;
};

// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available).
class Regex {
 public:
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // `literal`: the pattern is a plain string (tokenizers' {"String": ...} form).
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern, bool literal);
  // Calls on_match(start, end) for every non-empty match, left to right. When on_match returns
  // bool, false stops the search (and ForEachMatch returns false).
  template <typename F>
  bool ForEachMatch(std::string_view text, F&& on_match) const;

 private:
  Regex() = default;
  // Finds the next match at or after `from`; false at the end. Empty matches are skipped.
  bool Next(std::string_view text, size_t from, void* match_data, bool first, size_t* start,
            size_t* end) const;
  void* NewMatchData() const;
  static void FreeMatchData(void* md);
  void* code_ = nullptr;  // pcre2_code_8*
};

template <typename F>
bool Regex::ForEachMatch(std::string_view text, F&& on_match) const {
  void* md = NewMatchData();
  size_t pos = 0, start = 0, end = 0;
  bool first = true, go_on = true;
  while (go_on && pos <= text.size() && Next(text, pos, md, first, &start, &end)) {
    first = false;
    if constexpr (std::is_same_v<decltype(on_match(start, end)), bool>) {
      go_on = on_match(start, end);
    } else {
      on_match(start, end);
    }
    pos = end;
  }
  FreeMatchData(md);
  return go_on;
}

// How a Split step treats the pieces the pattern matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One pre-tokenizer step: pieces in, pieces out.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind;
  // kSplit
  std::unique_ptr<Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel. The byte <-> character mapping itself needs no work here: the vocabulary is
  // kept as raw bytes. What remains is the optional prefix space and the GPT-2 regex.
  bool add_prefix_space = false;
  std::unique_ptr<Regex> byte_level_regex;  // set when use_regex is true
};

class PreTokenizer {
 public:
  void AddStep(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  bool has_byte_level() const;
  // Cuts `text` into words (raw bytes). The views point into `text` or, when a step had to
  // make new text (a prefix space), into `storage`; both must outlive `words`.
  void Split(std::string_view text, std::vector<std::string_view>* words,
             std::deque<std::string>* storage) const;
  // The same words, one at a time and in the same order: each piece goes through every step
  // before the next piece is cut, so a caller that stops early (on_word returns false) has not
  // paid for the rest of the text. Returns false when stopped.
  bool ForEachWord(std::string_view text, std::deque<std::string>* storage,
                   absl::FunctionRef<bool(std::string_view)> on_word) const;

 private:
  bool ForEachWordFrom(size_t step, std::string_view piece, std::deque<std::string>* storage,
                       absl::FunctionRef<bool(std::string_view)> on_word) const;

  std::vector<PreTokenizerStep> steps_;
};

// The regex GPT-2 uses when ByteLevel has use_regex: true.
extern const char kGpt2SplitPattern[];

}  // namespace tandem::tokenizer
