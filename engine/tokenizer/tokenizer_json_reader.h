// Reads tokenizer.json in one streaming (SAX) pass. model.vocab and model.merges (about 300k
// entries in real files) go straight into flat vectors; everything else becomes a small
// nlohmann::json tree. Building the full tree costs 3-4x more time than the stream.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace tandem::tokenizer {

struct TokenizerJsonParts {
  nlohmann::json rest;  // the document without model.vocab and model.merges
  bool has_vocab = false;
  bool has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;        // byte-level spelling -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
};

// Errors name the key (e.g. "model.merges[12]") or the byte offset of a syntax error.
absl::StatusOr<TokenizerJsonParts> ReadTokenizerJson(std::string_view text);

}  // namespace tandem::tokenizer
