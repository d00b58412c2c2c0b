// Failpoints: named places where a test can make the program misbehave on purpose (hang, fail),
// to prove that the code around them copes — the way TiKV's fail-rs or etcd's gofail do. They
// are switched on only by the environment variable TANDEM_FAILPOINTS (comma-separated names),
// read once; production never sets it. Each name is documented where it is used.
#pragma once

#include <string_view>

namespace tandem {

// True when `name` is listed in TANDEM_FAILPOINTS.
bool FailpointEnabled(std::string_view name);

}  // namespace tandem
