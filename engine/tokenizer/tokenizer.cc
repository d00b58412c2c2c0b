// Encoding, decoding and streaming decoding. Loading is in tokenizer_loader.cc.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <deque>

#include "common/status.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (IsValidUtf8(text)) {
    EncodeText(text, SIZE_MAX, &ids);
  } else {
    EncodeText(ReplaceInvalidUtf8(text), SIZE_MAX, &ids);
  }
  return ids;
}

std::optional<std::vector<int32_t>> Tokenizer::EncodeAtMost(std::string_view text, size_t max_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(std::min(text.size() / 3, max_tokens) + 4);
  const bool fits = IsValidUtf8(text) ? EncodeText(text, max_tokens, &ids)
                                      : EncodeText(ReplaceInvalidUtf8(text), max_tokens, &ids);
  if (!fits) return std::nullopt;
  return ids;
}

namespace {
// ASCII is unchanged by every Unicode normal form: such text needs no normalizer pass.
bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}
}  // namespace

// Raw text: added tokens first (they are never normalized or split), then the rest.
bool Tokenizer::EncodeText(std::string_view text, size_t limit, std::vector<int32_t>* out) const {
  for (const TextSegment& seg : raw_added_.Split(text)) {
    if (seg.token_id >= 0) {
      out->push_back(seg.token_id);
      if (out->size() > limit) return false;
      continue;
    }
    std::string normalized;
    std::string_view norm_view = seg.text;
    if (!normalizer_.empty() && !IsAscii(seg.text)) {
      normalized = normalizer_.Apply(seg.text);
      norm_view = normalized;
    }
    if (normalized_added_.empty()) {
      if (!EncodeNormalized(norm_view, limit, out)) return false;
      continue;
    }
    for (const TextSegment& inner : normalized_added_.Split(norm_view)) {
      if (inner.token_id >= 0) {
        out->push_back(inner.token_id);
        if (out->size() > limit) return false;
      } else if (!EncodeNormalized(inner.text, limit, out)) {
        return false;
      }
    }
  }
  return true;
}

bool Tokenizer::EncodeNormalized(std::string_view text, size_t limit, std::vector<int32_t>* out) const {
  std::deque<std::string> storage;
  const size_t max_bytes = bpe_.max_token_bytes();
  const bool bounded = limit != SIZE_MAX && bpe_.all_bytes();
  return pre_tokenizer_.ForEachWord(text, &storage, [&](std::string_view word) {
    // A word of n bytes is at least ceil(n / max_bytes) tokens: refuse one that cannot fit
    // before merging it (a single 60 MB "word" would otherwise take seconds and gigabytes).
    if (bounded && (word.size() + max_bytes - 1) / max_bytes > limit - std::min(limit, out->size())) return false;
    bpe_.EncodeWord(word, out);
    return out->size() <= limit;
  });
}

const std::string* Tokenizer::TokenBytes(int32_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return &added_tokens_[it->second].content;
  return bpe_.TokenBytes(id);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_tokens_[it->second].special;
}

std::vector<int32_t> Tokenizer::special_token_ids() const {
  std::vector<int32_t> ids;
  for (const auto& t : added_tokens_) {
    if (t.special) ids.push_back(t.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  auto it = added_by_content_.find(AsAbsl(token));
  if (it != added_by_content_.end()) return it->second;
  const auto bytes = ByteLevelToBytes(token);
  if (!bytes) return std::nullopt;
  const int32_t id = bpe_.FindToken(*bytes);
  if (id < 0) return std::nullopt;
  return id;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (skip_special_tokens && IsSpecial(id)) continue;
    if (const std::string* b = TokenBytes(id)) bytes.append(*b);
  }
  if (IsValidUtf8(bytes)) return bytes;
  return ReplaceInvalidUtf8(bytes);
}

std::string StreamDecoder::Push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) return "";
  const std::string* b = tokenizer_.TokenBytes(id);
  if (!b) return "";
  std::string bytes = std::move(pending_);
  pending_.clear();
  bytes.append(*b);
  const size_t tail = IncompleteUtf8Tail(bytes);
  pending_.assign(bytes, bytes.size() - tail, tail);
  bytes.resize(bytes.size() - tail);
  // Bytes that can no longer become valid (a stray continuation byte, say) turn into U+FFFD
  // now, exactly as Decode would turn them.
  if (IsValidUtf8(bytes)) return bytes;
  return ReplaceInvalidUtf8(bytes);
}

std::string StreamDecoder::Flush() {
  std::string rest = ReplaceInvalidUtf8(pending_);
  pending_.clear();
  return rest;
}

}  // namespace tandem::tokenizer
