#include "bench/decode_bench_flags.h"

#include <cstdlib>

#include "absl/strings/str_join.h"
#include "bench/synthetic_configs.h"
#include "common/status.h"

namespace tandem::bench {

namespace {

absl::StatusOr<std::vector<int>> ParseInts(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    char* end = nullptr;
    const long v = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v <= 0) return absl::InvalidArgumentError("bad number list: " + s);
    out.push_back(static_cast<int>(v));
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string DecodeBenchUsage() {
  return "usage: bench --backend cuda [--synthetic NAME] [--tp N] [--batches 1,8,32] [--contexts 1024,4096]\n"
         "             [--prefill 512,2048] [--runs N] [--steps N] [--kv-dtype bf16|f32] [--no-kernel-table]\n"
         "  --synthetic NAME: the published shapes with random weights, one of: " +
         absl::StrJoin(SyntheticModelNames(), ", ") +
         "\n"
         "  --tp N: N ranks as threads, rank r on GPU r (NCCL); bytes and GB/s are one GPU's shard\n";
}

absl::StatusOr<DecodeBenchOptions> ParseDecodeBenchFlags(const std::vector<std::string>& args) {
  DecodeBenchOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("flag " + f + " needs a value");
      return args[++i];
    };
    if (f == "--synthetic") {
      ASSIGN_OR_RETURN(o.synthetic, value());
      // An unknown name fails here, listing the known ones, before any GPU work.
      RETURN_IF_ERROR(SyntheticConfig(o.synthetic).status());
    } else if (f == "--backend") {
      ASSIGN_OR_RETURN(std::string b, value());
      if (b != "cuda") return absl::InvalidArgumentError("bench: only --backend cuda is supported");
    } else if (f == "--batches" || f == "--contexts" || f == "--prefill") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(auto list, ParseInts(v));
      (f == "--batches" ? o.batches : f == "--contexts" ? o.contexts : o.prefill_lengths) = list;
    } else if (f == "--kv-dtype") {
      ASSIGN_OR_RETURN(o.kv_dtype, value());
    } else if (f == "--tp") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(auto list, ParseInts(v));
      o.tp = list[0];
    } else if (f == "--no-kernel-table") {
      o.kernel_table = false;
    } else if (f == "--help" || f == "-h") {
      o.help = true;
    } else if (f == "--runs" || f == "--steps") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(auto list, ParseInts(v));
      (f == "--runs" ? o.runs : o.steps) = list[0];
    } else {
      return absl::InvalidArgumentError("bench: unknown flag " + f);
    }
  }
  return o;
}

}  // namespace tandem::bench
