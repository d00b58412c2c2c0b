#include "engine/tokenizer/eos_token_ids.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_text.h"
#include "common/json_integer.h"
#include "common/status.h"

namespace tandem::tokenizer {
namespace {

using json = nlohmann::json;

// nullopt: no such file (not an error: a tokenizer-only folder has neither).

absl::Status AppendId(const json& v, const std::string& where, std::vector<int32_t>* out) {
  const std::optional<int64_t> id = JsonInteger(v, 0, kJsonInt32Max);
  if (!id) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a token id (an integer >= 0), got ", v.dump()));
  }
  out->push_back(static_cast<int32_t>(*id));
  return absl::OkStatus();
}

// The ids of eos_token_id in the config file `path` (text `text`), looked for in text_config too
// when `text_config`; empty when absent or null.
absl::StatusOr<std::vector<int32_t>> EosOf(const std::string& text, const std::string& path, bool text_config) {
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  const json* holder = &root;
  std::string key = "eos_token_id";
  if (!root.contains(key) && text_config && root.contains("text_config") && root["text_config"].is_object()) {
    holder = &root["text_config"];
    key = "text_config.eos_token_id";
  }
  std::vector<int32_t> ids;
  auto it = holder->find("eos_token_id");
  if (it == holder->end() || it->is_null()) return ids;
  const std::string where = absl::StrCat(path, ": ", key);
  if (!it->is_array()) {
    RETURN_IF_ERROR(AppendId(*it, where, &ids));
    return ids;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    RETURN_IF_ERROR(AppendId((*it)[i], absl::StrCat(where, "[", i, "]"), &ids));
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ReadGenerationEosTokenIds(const std::string& model_dir) {
  // transformers reads generation_config.json whole when it exists and only otherwise derives a
  // generation config from the model's config, so the two files are not merged.
  const std::string gen_path = model_dir + "/generation_config.json";
  if (std::optional<std::string> gen = ReadFileText(gen_path)) return EosOf(*gen, gen_path, /*text_config=*/false);
  const std::string config_path = model_dir + "/config.json";
  if (std::optional<std::string> config = ReadFileText(config_path)) return EosOf(*config, config_path, /*text_config=*/true);
  return std::vector<int32_t>{};
}

}  // namespace tandem::tokenizer
