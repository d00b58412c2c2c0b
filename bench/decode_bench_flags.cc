#include "bench/decode_bench_flags.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

// --prefill-batch: "NxL" rows separated by commas; an empty value turns the rows off. A row listed
// twice would only time the same step twice.
absl::StatusOr<std::vector<PrefillBatch>> ParsePrefillBatches(const std::string& s) {
  std::vector<PrefillBatch> out;
  if (s.empty()) return out;
  for (const absl::string_view part : absl::StrSplit(s, ',')) {
    const std::vector<std::string> nl = absl::StrSplit(part, 'x');
    // Digits only (SimpleAtoi alone would take " 8" and "+8"), and more than zero.
    auto count = [](const std::string& d, int* v) {
      return !d.empty() && d.find_first_not_of("0123456789") == std::string::npos && absl::SimpleAtoi(d, v) && *v > 0;
    };
    PrefillBatch b;
    if (nl.size() != 2 || !count(nl[0], &b.sequences) || !count(nl[1], &b.tokens)) {
      return absl::InvalidArgumentError("bench: bad --prefill-batch row '" + std::string(part) +
                                        "' (SEQUENCESxTOKENS, or a list of them: 8x1024,4x2048; empty for none)");
    }
    if (std::find(out.begin(), out.end(), b) != out.end()) {
      return absl::InvalidArgumentError("bench: --prefill-batch lists " + PrefillBatchName(b) + " twice");
    }
    out.push_back(b);
  }
  return out;
}

constexpr kernels::WeightFormat kFormats[] = {kernels::WeightFormat::kBf16, kernels::WeightFormat::kFp8Block,
                                              kernels::WeightFormat::kNvfp4};

// --weights: known names, each at most once (a format listed twice would load the model twice).
absl::StatusOr<std::vector<kernels::WeightFormat>> ParseWeights(const std::string& s) {
  std::vector<kernels::WeightFormat> out;
  for (const absl::string_view part : absl::StrSplit(s, ',')) {
    const auto known = std::find_if(std::begin(kFormats), std::end(kFormats),
                                    [&](kernels::WeightFormat f) { return WeightFormatName(f) == part; });
    if (known == std::end(kFormats)) {
      return absl::InvalidArgumentError("bench: unknown --weights format '" + std::string(part) +
                                        "' (bf16, fp8 or nvfp4, or a list of them: bf16,fp8,nvfp4)");
    }
    if (std::find(out.begin(), out.end(), *known) != out.end()) {
      return absl::InvalidArgumentError("bench: --weights lists " + std::string(part) + " twice");
    }
    out.push_back(*known);
  }
  return out;
}

}  // namespace

std::string PrefillBatchName(const PrefillBatch& b) {
  return std::to_string(b.sequences) + "x" + std::to_string(b.tokens);
}

std::string WeightFormatName(kernels::WeightFormat f) {
  switch (f) {
    case kernels::WeightFormat::kFp8Block:
      return "fp8";
    case kernels::WeightFormat::kNvfp4:
      return "nvfp4";
    case kernels::WeightFormat::kBf16:
    default:
      return "bf16";
  }
}

std::string DecodeBenchUsage() {
  return "usage: bench --backend cuda [--synthetic NAME] [--tp N] [--batches 1,8,32] [--contexts 1024,4096]\n"
         "             [--prefill 512,2048] [--prefill-batch 8x1024] [--runs N] [--steps N]\n"
         "             [--kv-dtype bf16|f32|fp8] [--weights bf16|fp8|nvfp4] [--quant-prefill-split]\n"
         "             [--decode-attention split|paged]\n"
         "             [--no-kernel-table]\n"
         "  --synthetic NAME: the published shapes with random weights, one of: " +
         absl::StrJoin(SyntheticModelNames(), ", ") +
         "\n"
         "  --prefill 512,2048: prefill rows of one sequence of that many tokens (an empty value, --prefill=,\n"
         "    runs none)\n"
         "  --prefill-batch NxL[,NxL...]: prefill rows of N prompts of L tokens each in one step (default 8x1024;\n"
         "    an empty value, --prefill-batch=, runs none); tokens/s counts all N x L tokens\n"
         "  --tp N: N ranks as threads, rank r on GPU r (NCCL); bytes and GB/s are one GPU's shard\n"
         "  --kv-dtype T: the KV cache's element type: bf16 (default), f32 or fp8 (e4m3, scale 1)\n"
         "  --weights F: random weights of the linears a quantized checkpoint quantizes (attention, DeltaNet\n"
         "    in_proj qkv/z and out_proj, experts, shared expert, dense MLP) in format F: bf16 (default),\n"
         "    fp8 (e4m3, a float32 scale per 128 x 128 block) or nvfp4 (e2m1, an e4m3 scale per 16 columns\n"
         "    and a float32 scale per row); embedding, lm_head, routers and norms stay bf16. A list\n"
         "    (--weights bf16,fp8,nvfp4) runs each format in turn in this process, one model loaded at a\n"
         "    time, and ends with batch 1's tokens/s per format and its ratio to bf16\n"
         "  --quant-prefill-split: the fp8 / nvfp4 prefill products in bf16 hi + lo (float32-grade, three\n"
         "    tensor-core products; the model option cuda_quant_prefill_split) instead of rounded to bf16\n"
         "  --decode-attention K: the decode steps' attention kernel (the model option cuda_decode_attention):\n"
         "    split (default: the split tensor-core kernel wherever it takes the shape) or paged\n"
         "  --decode-attention-buffers N: the most K/V tile buffers a split decode attention block may take\n"
         "    (the model option cuda_decode_attention_buffers): 3 (default) lets batch-1 steps at long contexts\n"
         "    keep three of a partition's tiles in flight where shared memory holds them (Hopper); 2 keeps the\n"
         "    double-buffered walk everywhere (the GB10's path)\n";
}

absl::StatusOr<DecodeBenchOptions> ParseDecodeBenchFlags(const std::vector<std::string>& args) {
  DecodeBenchOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    // "--flag=value" as "--flag value", as every tandem command line takes it (common/cli.h).
    std::string f = args[i];
    std::optional<std::string> inline_value;
    if (const size_t eq = f.find('='); f.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = f.substr(eq + 1);
      f.resize(eq);
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("flag " + f + " needs a value");
      return args[++i];
    };
    if ((f == "--no-kernel-table" || f == "--quant-prefill-split" || f == "--help") &&
        inline_value) {
      return absl::InvalidArgumentError("bench: flag " + f + " takes no value");
    }
    if (f == "--synthetic") {
      ASSIGN_OR_RETURN(o.synthetic, value());
      // An unknown name fails here, listing the known ones, before any GPU work.
      RETURN_IF_ERROR(SyntheticConfig(o.synthetic).status());
    } else if (f == "--backend") {
      ASSIGN_OR_RETURN(std::string b, value());
      if (b != "cuda") return absl::InvalidArgumentError("bench: only --backend cuda is supported");
    } else if (f == "--batches" || f == "--contexts" || f == "--prefill") {
      ASSIGN_OR_RETURN(std::string v, value());
      // An empty --prefill runs no single-sequence prefill rows (as --prefill-batch= runs no batched
      // ones); a decode bench needs at least one batch and one context.
      if (v.empty() && f == "--prefill") {
        o.prefill_lengths.clear();
        continue;
      }
      ASSIGN_OR_RETURN(auto list, ParseInts(v));
      (f == "--batches" ? o.batches : f == "--contexts" ? o.contexts : o.prefill_lengths) = list;
    } else if (f == "--prefill-batch") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(o.prefill_batches, ParsePrefillBatches(v));
    } else if (f == "--kv-dtype") {
      ASSIGN_OR_RETURN(o.kv_dtype, value());
    } else if (f == "--weights") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(o.weights, ParseWeights(v));
    } else if (f == "--tp") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(auto list, ParseInts(v));
      o.tp = list[0];
    } else if (f == "--no-kernel-table") {
      o.kernel_table = false;
    } else if (f == "--quant-prefill-split") {
      o.quant_prefill_split = true;
    } else if (f == "--decode-attention") {
      ASSIGN_OR_RETURN(o.decode_attention, value());
      if (o.decode_attention != "split" && o.decode_attention != "paged") {
        return absl::InvalidArgumentError("bench: --decode-attention takes split or paged (got '" +
                                          o.decode_attention + "')");
      }
    } else if (f == "--decode-attention-buffers") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(auto list, ParseInts(v));
      if (list.size() != 1 || list[0] < 2) {
        return absl::InvalidArgumentError("bench: --decode-attention-buffers takes one count of 2 or more (got '" + v +
                                          "'); the model refuses counts past its kernels' most");
      }
      o.decode_attention_buffers = list[0];
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
