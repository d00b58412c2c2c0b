// Finds and parses a model's own chat template, as transformers does: chat_template.jinja beside
// tokenizer_config.json wins (newer transformers save the template there), else the
// "chat_template" of tokenizer_config.json, a string or a list of {name, template} of which
// "default" is used. bos_token / eos_token come along for the render context.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/template.h"

namespace tandem::jinja {

struct ModelChatTemplate {
  Template tmpl;
  std::string bos_token;  // "" when tokenizer_config.json has none
  std::string eos_token;
  std::string source;  // the file the template came from, for messages
  std::string text;    // the template's Jinja source
};

// NotFound when the folder has no template; InvalidArgument (naming the file, the construct and
// its line) when it has one we cannot parse.
absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_dir, const TemplateOptions& options = {});

}  // namespace tandem::jinja
