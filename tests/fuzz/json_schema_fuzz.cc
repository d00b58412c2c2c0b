// Fuzz target: a JSON schema from a client is compiled into a grammar (engine/grammar). Any
// input must either be refused with InvalidArgument or give a grammar whose matcher, over a
// small vocabulary of bytes and multi-byte tokens, (1) allows exactly the tokens it accepts
// for the first steps of a walk, and (2) completes by its shortest completion to text that
// parses as JSON.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"

namespace {

using namespace tandem::grammar;

std::shared_ptr<const TokenVocabulary> Vocabulary() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\":", "\", \"", "true", "null", "12", "[{", "}]", "\\u00", "\xC3\xA9", "a\"", "\"}"}) {
    bytes.push_back(t);
  }
  bytes.push_back("<eos>");
  const int32_t eos = static_cast<int32_t>(bytes.size() - 1);
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::vector<int32_t>{}, std::vector<int32_t>{eos});
}

bool Bit(const std::vector<uint64_t>& mask, int32_t id) { return (mask[id >> 6] >> (id & 63)) & 1; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const TokenVocabulary> kVocab = Vocabulary();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  GrammarBuilder b;
  absl::StatusOr<RuleId> root = AddJsonSchema(schema, b, "root");
  if (!root.ok()) {
    if (root.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  absl::StatusOr<Grammar> g = b.Build(*root);
  if (!g.ok()) return 0;  // e.g. a $ref cycle without progress (left recursion)
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> c = CompiledGrammar::Compile(std::move(*g), kVocab);
  if (!c.ok()) return 0;  // matches no finite text
  GrammarMatcher m(*c);
  std::vector<uint64_t> mask;
  std::string out;
  // A few steps of the walk checked against AcceptToken, each taking the allowed token picked
  // by the input's bytes.
  for (size_t step = 0; step < 6 && !m.IsTerminated(); ++step) {
    m.FillMask(&mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < kVocab->size(); ++id) {
      GrammarMatcher copy = m;
      if (copy.AcceptToken(id) != Bit(mask, id)) std::abort();
      if (Bit(mask, id) && !kVocab->is_eos(id)) allowed.push_back(id);
    }
    if (allowed.empty()) break;
    const int32_t pick = allowed[static_cast<uint8_t>(text[step % text.size()]) % allowed.size()];
    if (!m.AcceptToken(pick)) std::abort();
    out += kVocab->bytes(pick);
  }
  // The shortest completion, one byte token at a time, ends within its promised length.
  const int64_t promised = m.MinBytesToEnd();
  for (int64_t i = 0; !m.CanEnd(); ++i) {
    const int32_t t = m.CompletionToken();
    if (i >= promised || t < 0 || !m.AcceptToken(t)) std::abort();
    out += kVocab->bytes(t);
  }
  if (nlohmann::json::parse(out, nullptr, false).is_discarded()) std::abort();
  return 0;
}
