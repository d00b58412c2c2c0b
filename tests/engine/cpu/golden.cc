#include "tests/engine/cpu/golden.h"

#include <algorithm>
#include <cmath>

#include "common/status.h"
#include "engine/model/safetensors.h"

namespace tandem::engine::testing {

namespace {
std::vector<int32_t> ToInt32(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }
}  // namespace

absl::StatusOr<std::vector<GoldenPrompt>> LoadGolden(const std::string& model_dir) {
  ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(model_dir + "/golden.safetensors"));
  std::vector<GoldenPrompt> prompts;
  // prompt0..2 always; prompt3 (150 tokens) and later where the file has them.
  for (int i = 0; i < 3 || file->Find("prompt" + std::to_string(i) + ".ids") != nullptr; ++i) {
    const std::string p = "prompt" + std::to_string(i) + ".";
    GoldenPrompt g;
    ASSIGN_OR_RETURN(auto ids, file->ReadInts(p + "ids"));
    ASSIGN_OR_RETURN(auto greedy, file->ReadInts(p + "greedy"));
    ASSIGN_OR_RETURN(Tensor logits, file->ReadFloat(p + "logits"));
    g.ids = ToInt32(ids);
    g.greedy = ToInt32(greedy);
    g.logits.assign(logits.data.begin(), logits.data.end());
    prompts.push_back(std::move(g));
  }
  return prompts;
}

double RelativeError(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size()) return INFINITY;
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

}  // namespace tandem::engine::testing
