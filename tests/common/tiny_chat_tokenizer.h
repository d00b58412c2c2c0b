// The Qwen3 tokenizer (tests/data/qwen3-tokenizer) cut to the tiny models' 4096 ids, so chat and
// text prompts reach qwen3moe-tiny. Qwen3's added tokens (<|im_start|>, <|im_end|>, <think>, ...)
// sit at 151643..151668, which the tiny embedding cannot look up: the cut moves them to the top of
// the tiny range (4070..4095), drops the BPE entries that had those ids and the merges that make
// or use them. Everything else is Qwen3's tokenizer as is. (serve_fixture.mjs makes the same cut
// for the node tests.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/common/test_util.h"

namespace tandem::testing {

// Writes tokenizer_config.json (the chat template) and the cut tokenizer.json into `model_dir`.
inline void WriteTinyChatTokenizer(const std::filesystem::path& model_dir) {
  using Json = nlohmann::json;
  const std::filesystem::path tok = std::filesystem::path(TestdataDir()) / "qwen3-tokenizer";
  std::filesystem::copy_file(tok / "tokenizer_config.json", model_dir / "tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(tok / "tokenizer.json");
  Json t = Json::parse(in);
  const int64_t vocab = 4096;
  const int64_t first = vocab - static_cast<int64_t>(t["added_tokens"].size());
  std::set<std::string> removed;
  Json& v = t["model"]["vocab"];
  for (auto it = v.begin(); it != v.end();) {
    if (it.value().get<int64_t>() >= first) {
      removed.insert(it.key());
      it = v.erase(it);
    } else {
      ++it;
    }
  }
  Json merges = Json::array();
  for (const Json& m : t["model"]["merges"]) {
    std::string l, r;
    if (m.is_array()) {
      l = m[0], r = m[1];
    } else {
      const std::string s = m;
      l = s.substr(0, s.find(' '));
      r = s.substr(s.find(' ') + 1);
    }
    if (removed.count(l) || removed.count(r) || removed.count(l + r)) continue;
    merges.push_back(m);
  }
  t["model"]["merges"] = std::move(merges);
  int64_t next = first;
  for (Json& a : t["added_tokens"]) a["id"] = next++;
  std::ofstream(model_dir / "tokenizer.json") << t.dump();
}

}  // namespace tandem::testing
