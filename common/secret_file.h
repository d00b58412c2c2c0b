// Secrets (the cluster token, API keys, TLS private keys) come from files, never from a command
// line (/proc/PID/cmdline is world-readable) or a log line. A secret file must be readable by its
// owner only and hold a secret long enough not to be guessed.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {

struct SecretFileRules {
  size_t min_bytes = 16;     // after trailing whitespace is stripped
  bool strip_trailing_whitespace = true;  // the newline an editor adds
  bool owner_only = true;    // refuse group/world-readable (or -writable) files
};

// Reads a secret file. `what` names it in messages ("the token file", "--api-key-file").
// FailedPrecondition naming the path and the fix when the file cannot be read, is not a regular
// file, is readable or writable by group/others ("chmod 600 PATH"), or is shorter than
// min_bytes. The secret itself never appears in a message.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what,
                                           const SecretFileRules& rules = {});

}  // namespace tandem
