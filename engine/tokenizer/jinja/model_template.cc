#include "engine/tokenizer/jinja/model_template.h"

#include <fstream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::jinja {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// A special token is written either as its text or as an AddedToken object {"content": ...}.
std::string TokenText(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_dir, const TemplateOptions& options) {
  const std::string config_path = model_dir + "/tokenizer_config.json";
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  nlohmann::json config = nlohmann::json::object();
  std::string text;
  if (ReadFile(config_path, &text)) {
    config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": not a JSON object"));
    }
  }
  std::string source, source_path;
  if (ReadFile(jinja_path, &source)) {
    source_path = jinja_path;
  } else if (auto it = config.find("chat_template"); it != config.end()) {
    source_path = config_path;
    if (it->is_string()) {
      source = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& named : *it) {
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string()) {
          source = named["template"].get<std::string>();
        }
      }
      if (source.empty()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": chat_template has no \"default\" entry"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": chat_template must be a string or a list"));
    }
  } else {
    return absl::NotFoundError(absl::StrCat("no chat template in ", model_dir, " (chat_template.jinja or tokenizer_config.json \"chat_template\")"));
  }
  auto tmpl = Template::Parse(source, options);
  if (!tmpl.ok()) return absl::Status(tmpl.status().code(), absl::StrCat(source_path, ": ", tmpl.status().message()));
  return ModelChatTemplate{std::move(*tmpl), TokenText(config, "bos_token"), TokenText(config, "eos_token"), source_path,
                           std::move(source)};
}

}  // namespace tandem::jinja
