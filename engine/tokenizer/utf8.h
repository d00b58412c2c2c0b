// UTF-8 helpers shared by encoding (input clean-up, NFC) and decoding (lossy bytes -> text).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::tokenizer {

// Length of the well-formed UTF-8 sequence starting at s[pos] (1..4), or 0 when the bytes at
// pos do not start a complete well-formed sequence. `*maximal_prefix` (when non-null) receives
// the length of the longest prefix that could still begin a well-formed sequence (>= 1 on
// failure): this is the "maximal subpart" that Unicode says to replace by one U+FFFD.
size_t Utf8SequenceLength(std::string_view s, size_t pos, size_t* maximal_prefix = nullptr);

// True when every byte of `s` belongs to a well-formed UTF-8 sequence.
bool IsValidUtf8(std::string_view s);

// Replaces every ill-formed subsequence by U+FFFD (one per maximal subpart, the rule of the
// Unicode standard, WHATWG and Rust's from_utf8_lossy). Valid input comes back unchanged.
std::string ReplaceInvalidUtf8(std::string_view s);

// How many bytes at the end of `s` form an incomplete but so far well-formed multi-byte
// sequence (0..3): a streaming decoder holds those back until the next token completes them.
size_t IncompleteUtf8Tail(std::string_view s);

// True for code points that NFC never changes, whatever surrounds them: a conservative list
// of common scripts that lets Normalize skip utf8proc for most text.
bool IsNfcStableCodePoint(char32_t cp);
// True when every character of valid UTF-8 `s` is NFC-stable (so NFC(s) == s).
bool IsNfcQuick(std::string_view s);

// Unicode normal forms through utf8proc. Input must be valid UTF-8.
enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
absl::StatusOr<std::string> Normalize(std::string_view s, NormalForm form);

}  // namespace tandem::tokenizer
