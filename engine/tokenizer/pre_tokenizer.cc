#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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

struct Span {
  size_t start, end;
  bool is_match;
};

// Cuts one piece by a regex according to `behavior`, appending the results to `out`. Merged
// pieces are always adjacent in `piece`, so every result is a view into it.
void SplitPiece(std::string_view piece, const Regex& regex, SplitBehavior behavior, bool invert,
                std::vector<std::string_view>* out) {
  std::vector<Span> spans;
  size_t last = 0;
  regex.ForEachMatch(piece, [&](size_t s, size_t e) {
    if (s > last) spans.push_back({last, s, false});
    spans.push_back({s, e, true});
    last = e;
  });
  if (last < piece.size()) spans.push_back({last, piece.size(), false});
  if (invert) {
    for (auto& sp : spans) sp.is_match = !sp.is_match;
  }
  const size_t first = out->size();
  bool pending = false;  // the last piece is open for the next span (MergedWithNext, Contiguous)
  auto extend_last = [&](const Span& sp) {
    std::string_view& b = out->back();
    b = std::string_view(b.data(), piece.data() + sp.end - b.data());
  };
  for (const Span& sp : spans) {
    const std::string_view text = piece.substr(sp.start, sp.end - sp.start);
    const bool have_last = out->size() > first;
    switch (behavior) {
      case SplitBehavior::kRemoved:
        if (!sp.is_match) out->push_back(text);
        break;
      case SplitBehavior::kIsolated:
        out->push_back(text);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (sp.is_match && have_last) extend_last(sp);
        else out->push_back(text);
        break;
      case SplitBehavior::kMergedWithNext:
        if (pending && have_last) extend_last(sp);
        else out->push_back(text);
        pending = sp.is_match;
        break;
      case SplitBehavior::kContiguous:
        if (sp.is_match && pending && have_last) extend_last(sp);
        else out->push_back(text);
        pending = sp.is_match;
        break;
    }
  }
}

}  // namespace

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* words,
                         std::deque<std::string>* storage) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::kSplit) {
        SplitPiece(piece, *step.regex, step.behavior, step.invert, &next);
        continue;
      }
      if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
        storage->push_back(" " + std::string(piece));
        piece = storage->back();
      }
      if (step.byte_level_regex) {
        SplitPiece(piece, *step.byte_level_regex, SplitBehavior::kIsolated, false, &next);
      } else {
        next.push_back(piece);
      }
    }
    pieces.swap(next);
  }
  for (std::string_view p : pieces) {
    if (!p.empty()) words->push_back(p);
  }
}

}  // namespace tandem::tokenizer
