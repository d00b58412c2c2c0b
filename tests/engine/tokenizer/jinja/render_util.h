// What the Jinja tests share: render a template source with a JSON context in one call.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/tokenizer/jinja/template.h"

namespace tandem::jinja::testing {

inline absl::StatusOr<std::string> Render(std::string_view source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                                          const TemplateOptions& options = {}) {
  auto tmpl = Template::Parse(source, options);
  if (!tmpl.ok()) return tmpl.status();
  return tmpl->Render(context);
}

// The rendered text, or "ERROR: <message>".
inline std::string R(std::string_view source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  auto out = Render(source, context);
  return out.ok() ? *out : "ERROR: " + std::string(out.status().message());
}

inline bool Fails(std::string_view source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  return !Render(source, context).ok();
}

}  // namespace tandem::jinja::testing
