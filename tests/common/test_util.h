// Small helpers shared by tests that touch files and loopback ports.
#pragma once

#include <string>

namespace tandem::testing {

// The whole file as a string ("" when it cannot be read).
std::string ReadTextFile(const std::string& path);
// A loopback port with nothing listening: bind port 0, read it back, close.
int UnusedLoopbackPort();

}  // namespace tandem::testing
