// Reading a whole small file (configs, templates, prompt sets, results) into memory.
#pragma once

#include <optional>
#include <string>

namespace tandem {

// The file's bytes as they are; nullopt when it cannot be opened (missing, unreadable). Callers
// word their own error, since what the file is and whether its absence is fine differ.
std::optional<std::string> ReadFileText(const std::string& path);

}  // namespace tandem
