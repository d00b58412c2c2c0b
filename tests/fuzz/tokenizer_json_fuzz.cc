// Fuzz target: tokenizer.json is outside input. Loading must either succeed or return an
// error; a loaded tokenizer must encode and decode any text (here: the input itself and a
// fixed sample) without crashing, and Decode must return valid UTF-8.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tandem::tokenizer::Tokenizer;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto tok = Tokenizer::LoadFromJson(input, "");
  if (!tok.ok()) return 0;
  for (std::string_view text : {input, std::string_view("héllo <s> wörld\n\n 123 \xF0\x9F\x9A")}) {
    const auto ids = (*tok)->Encode(text);
    const std::string back = (*tok)->Decode(ids);
    if (!tandem::tokenizer::IsValidUtf8(back)) std::abort();
    tandem::tokenizer::StreamDecoder stream(**tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.Push(id);
    streamed += stream.Flush();
    if (streamed != back) std::abort();
  }
  return 0;
}
