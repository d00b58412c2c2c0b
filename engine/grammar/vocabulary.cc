#include "engine/grammar/vocabulary.h"

#include <algorithm>
#include <unordered_set>

#include "engine/grammar/string_masks.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, const std::vector<int32_t>& special_ids,
                                 const std::vector<int32_t>& eos_ids)
    : bytes_(std::move(token_bytes)), eos_(bytes_.size(), false), rank_(bytes_.size(), -1) {
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  std::unordered_set<int32_t> excluded(special_ids.begin(), special_ids.end());
  for (int32_t id : eos_ids) {
    if (id >= 0 && id < size() && !eos_[id]) {
      eos_[id] = true;
      eos_ids_.push_back(id);
    }
  }
  for (int32_t id = 0; id < size(); ++id) {
    if (bytes_[id].empty() || excluded.count(id) != 0 || eos_[id]) continue;
    sorted_.push_back(id);
    if (bytes_[id].size() == 1 && byte_token_[static_cast<uint8_t>(bytes_[id][0])] < 0) {
      byte_token_[static_cast<uint8_t>(bytes_[id][0])] = id;
    }
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    rank_[sorted_[i]] = static_cast<int32_t>(i);
    sorted_offset_.push_back(sorted_text_.size());
    sorted_text_ += bytes_[sorted_[i]];
    if (i == 0) continue;
    const std::string& a = bytes_[sorted_[i - 1]];
    const std::string& b = bytes_[sorted_[i]];
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[i] = static_cast<int32_t>(k);
  }
  sorted_offset_.push_back(sorted_text_.size());
  // From the last rank back: a block at some depth continues into the next rank exactly when
  // the two share that many bytes.
  const int32_t n = static_cast<int32_t>(sorted_.size());
  block_end_.assign(sorted_text_.size(), n);
  for (int32_t i = n - 1; i >= 0; --i) {
    const size_t len = sorted_offset_[i + 1] - sorted_offset_[i];
    for (size_t d = 1; d <= len; ++d) {
      const bool continues = i + 1 < n && static_cast<size_t>(lcp_[i + 1]) >= d;
      block_end_[sorted_offset_[i] + d - 1] = continues ? block_end_[sorted_offset_[i + 1] + d - 1] : i + 1;
    }
  }
}

TokenVocabulary::~TokenVocabulary() = default;

const StringContentIndex& TokenVocabulary::string_content() const {
  std::call_once(string_content_once_, [this] { string_content_ = std::make_unique<const StringContentIndex>(*this); });
  return *string_content_;
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromTokenizer(const tokenizer::Tokenizer& tok,
                                                                      int64_t vocab_size,
                                                                      const std::vector<int32_t>& eos_ids) {
  std::vector<std::string> bytes(static_cast<size_t>(std::max<int64_t>(vocab_size, 0)));
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (const std::string* b = tok.TokenBytes(static_cast<int32_t>(id))) bytes[id] = *b;
  }
  return std::make_shared<const TokenVocabulary>(std::move(bytes), tok.special_token_ids(), eos_ids);
}

}  // namespace tandem::grammar
