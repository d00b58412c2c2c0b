// SHA-256 over OpenSSL's EVP interface: strings and files (read in 4 MiB chunks).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::agentd {

inline constexpr size_t kHashChunkBytes = 4u << 20;

std::string Sha256Hex(std::string_view data);

// Hashes a file. `on_chunk(n)` is called after every chunk of n bytes; `cancel` (optional) is
// polled between chunks and turns into kCancelled. `bytes_read` receives the byte count.
absl::StatusOr<std::string> Sha256File(const std::string& path, uint64_t* bytes_read = nullptr,
                                       const std::function<void(uint64_t)>& on_chunk = nullptr,
                                       const std::atomic<bool>* cancel = nullptr);

}  // namespace tandem::agentd
