#pragma once
namespace tandem {
// The release string of this build (from CMake's project version).
const char* Version();
}  // namespace tandem
