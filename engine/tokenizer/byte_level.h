// The GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable Unicode character,
// so that a BPE vocabulary over bytes can be stored as JSON text. Printable Latin-1 bytes
// ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes take the code points
// U+0100.. in byte order (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

// The code point that shows `byte`.
char32_t ByteToCodePoint(uint8_t byte);

// The byte shown by `cp`, or nullopt when cp is not in the alphabet.
std::optional<uint8_t> CodePointToByte(char32_t cp);

// Decodes a vocabulary entry written in the byte-level alphabet (UTF-8 text) into the raw
// bytes it stands for; nullopt when some character is outside the alphabet.
std::optional<std::string> ByteLevelToBytes(std::string_view shown);

// The inverse: raw bytes shown in the byte-level alphabet, as UTF-8.
std::string BytesToByteLevel(std::string_view bytes);

}  // namespace tandem::tokenizer
