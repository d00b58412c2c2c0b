#include "common/failpoint.h"

#include <cstdlib>
#include <set>
#include <string>

#include "common/log.h"

namespace tandem {

bool FailpointEnabled(std::string_view name) {
  static const std::set<std::string, std::less<>> enabled = [] {
    std::set<std::string, std::less<>> out;
    const char* env = std::getenv("TANDEM_FAILPOINTS");
    std::string list = env ? env : "";
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) out.insert(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    for (const auto& f : out) TLOG(WARN) << "failpoint " << f << " is ON (TANDEM_FAILPOINTS): for tests only";
    return out;
  }();
  return enabled.count(name) > 0;
}

}  // namespace tandem
