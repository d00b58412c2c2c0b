// Encoding, decoding and streaming decoding. Loading is in tokenizer_loader.cc.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <deque>

#include "common/status.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (IsValidUtf8(text)) {
    EncodeText(text, &ids);
  } else {
    EncodeText(ReplaceInvalidUtf8(text), &ids);
  }
  return ids;
}

// Raw text: added tokens first (they are never normalized or split), then the rest.
void Tokenizer::EncodeText(std::string_view text, std::vector<int32_t>* out) const {
  for (const TextSegment& seg : raw_added_.Split(text)) {
    if (seg.token_id >= 0) {
      out->push_back(seg.token_id);
      continue;
    }
    const std::string normalized = normalizer_.Apply(seg.text);
    if (normalized_added_.empty()) {
      EncodeNormalized(normalized, out);
      continue;
    }
    for (const TextSegment& inner : normalized_added_.Split(normalized)) {
      if (inner.token_id >= 0) {
        out->push_back(inner.token_id);
      } else {
        EncodeNormalized(inner.text, out);
      }
    }
  }
}

void Tokenizer::EncodeNormalized(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<std::string_view> words;
  std::deque<std::string> storage;
  pre_tokenizer_.Split(text, &words, &storage);
  for (std::string_view w : words) bpe_.EncodeWord(w, out);
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
