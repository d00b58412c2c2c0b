// The prompts `tandemctl bench` sends: a built-in set (code, English prose, Chinese prose, each
// from a one-line question to a page of context) or the operator's JSONL file, one
// {"category": "...", "prompt": "..."} per line.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::bench {

struct BenchPrompt {
  std::string category;
  std::string prompt;
};

// Prompts in the order they are sent; a category's prompts need not be adjacent.
using PromptSet = std::vector<BenchPrompt>;

// The built-in set: categories "code", "english", "chinese", 6 prompts each, short to long.
const PromptSet& DefaultPromptSet();

// Parses JSONL text. Blank lines are skipped; any other line must be an object with a non-empty
// string "category" and "prompt" and nothing else. kInvalidArgument naming `file`:line; an empty
// set is an error too.
absl::StatusOr<PromptSet> ParsePromptSetJsonl(const std::string& text, const std::string& file);

// Reads and parses a file (kNotFound when it cannot be read).
absl::StatusOr<PromptSet> LoadPromptSetJsonl(const std::string& path);

// The categories in order of first appearance.
std::vector<std::string> PromptCategories(const PromptSet& prompts);

}  // namespace tandem::bench
