#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <optional>

#include "absl/status/status.h"

namespace tandem::tokenizer {

const char kGpt2SplitPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::string Normalizer::Apply(std::string_view text) const {
  std::string s(text);
  for (NormalForm form : steps_) {
    auto r = Normalize(s, form);
    // utf8proc fails only on invalid UTF-8, which Encode has already replaced.
    if (r.ok()) s = std::move(*r);
  }
  return s;
}

Regex::~Regex() {
  if (code_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern, bool literal) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  // PCRE2_UCP is not allowed with PCRE2_LITERAL (and means nothing there).
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return absl::InvalidArgumentError("regex does not compile at offset " +
                                      std::to_string(err_offset) + ": " +
                                      reinterpret_cast<const char*>(msg));
  }
  // JIT makes matching several times faster; without it (unsupported CPU) the interpreter runs.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<Regex> re(new Regex());
  re->code_ = code;
  return re;
}

void* Regex::NewMatchData() const {
  return pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(code_), nullptr);
}

void Regex::FreeMatchData(void* md) { pcre2_match_data_free(static_cast<pcre2_match_data*>(md)); }

bool Regex::Next(std::string_view text, size_t from, void* match_data, bool first, size_t* start,
                 size_t* end) const {
  auto* code = static_cast<pcre2_code*>(code_);
  auto* md = static_cast<pcre2_match_data*>(match_data);
  // The text was validated by the first call; checking again on every call is quadratic.
  uint32_t options = first ? 0 : PCRE2_NO_UTF_CHECK;
  while (from <= text.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                         options, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                       options | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc < 0) return false;  // no match (or a resource limit: the rest stays one piece)
    options |= PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] > ov[0]) {
      *start = ov[0];
      *end = ov[1];
      return true;
    }
    // Empty match: step over one character and search again.
    from = ov[0] + 1;
    while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
  }
  return false;
}

bool PreTokenizer::has_byte_level() const {
  for (const auto& s : steps_) {
    if (s.kind == PreTokenizerStep::Kind::kByteLevel) return true;
  }
  return false;
}

namespace {

// Cuts one piece by a regex according to `behavior`, passing the results to `emit` in order
// (false from emit stops the cut). A result can still grow while the next span is looked at
// (the merged behaviours extend the last piece), so the last one is held until that is known.
// Merged pieces are always adjacent in `piece`, so every result is a view into it.
bool SplitPiece(std::string_view piece, const Regex& regex, SplitBehavior behavior, bool invert,
                absl::FunctionRef<bool(std::string_view)> emit) {
  std::optional<std::string_view> open;  // the last result, not yet passed on
  bool pending = false;  // the open piece accepts the next span (MergedWithNext, Contiguous)
  auto push = [&](std::string_view text) {
    if (open && !emit(*open)) return false;
    open = text;
    return true;
  };
  auto on_span = [&](size_t start, size_t end, bool is_match) {
    if (invert) is_match = !is_match;
    const std::string_view text = piece.substr(start, end - start);
    auto extend = [&] { open = std::string_view(open->data(), piece.data() + end - open->data()); };
    switch (behavior) {
      case SplitBehavior::kRemoved:
        return is_match || push(text);
      case SplitBehavior::kIsolated:
        return push(text);
      case SplitBehavior::kMergedWithPrevious:
        if (is_match && open) {
          extend();
          return true;
        }
        return push(text);
      case SplitBehavior::kMergedWithNext:
      case SplitBehavior::kContiguous: {
        const bool joins = behavior == SplitBehavior::kMergedWithNext ? pending : is_match && pending;
        if (joins && open) {
          extend();
        } else if (!push(text)) {
          return false;
        }
        pending = is_match;
        return true;
      }
    }
    return true;
  };
  size_t last = 0;
  const bool whole = regex.ForEachMatch(piece, [&](size_t s, size_t e) {
    if (s > last && !on_span(last, s, false)) return false;
    last = e;
    return on_span(s, e, true);
  });
  if (!whole) return false;
  if (last < piece.size() && !on_span(last, piece.size(), false)) return false;
  return !open || emit(*open);
}

}  // namespace

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* words,
                         std::deque<std::string>* storage) const {
  ForEachWord(text, storage, [words](std::string_view w) {
    words->push_back(w);
    return true;
  });
}

bool PreTokenizer::ForEachWord(std::string_view text, std::deque<std::string>* storage,
                               absl::FunctionRef<bool(std::string_view)> on_word) const {
  return ForEachWordFrom(0, text, storage, on_word);
}

// Steps apply to each piece independently, so taking one piece through every step before the
// next (depth first) gives the words in the same order as applying each step to all pieces.
bool PreTokenizer::ForEachWordFrom(size_t step_index, std::string_view piece, std::deque<std::string>* storage,
                                   absl::FunctionRef<bool(std::string_view)> on_word) const {
  if (step_index == steps_.size()) return piece.empty() || on_word(piece);
  const PreTokenizerStep& step = steps_[step_index];
  auto next = [&](std::string_view p) { return ForEachWordFrom(step_index + 1, p, storage, on_word); };
  if (step.kind == PreTokenizerStep::Kind::kSplit) {
    return SplitPiece(piece, *step.regex, step.behavior, step.invert, next);
  }
  if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
    storage->push_back(" " + std::string(piece));
    piece = storage->back();
  }
  if (step.byte_level_regex) return SplitPiece(piece, *step.byte_level_regex, SplitBehavior::kIsolated, false, next);
  return next(piece);
}

}  // namespace tandem::tokenizer
