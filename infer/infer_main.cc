// tandem-infer: the engine without the cluster. Wiring and flags only; the work is in infer.cc.
//   tandem-infer tokenize --model DIR --text TEXT
//   tandem-infer generate --model DIR [--backend cpu] [--tp N] [--ranks threads|processes]
//                (--prompt TEXT [--chat] [--no-thinking] | --prompt-ids 1,2,3) [--max-tokens N]
//                [--temperature T] [--seed S] [--json] [--stats] [--threads N]
//   tandem-infer logits --model DIR [--tp N] [--ranks ...] --prompt-ids 1,2,3 --out FILE
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/flag_args.h"
#include "common/status.h"
#include "infer/infer.h"
#include "infer/make_model.h"
#include "infer/rank_processes.h"
#include "bench/bench_serve.h"
#include "infer/serve_command.h"
#ifdef TANDEM_HAVE_CUDA
#include "bench/decode_bench.h"
#endif

namespace {

const char kUsage[] =
    "usage: tandem-infer tokenize --model DIR --text TEXT\n"
    "       tandem-infer generate --model DIR [--backend cpu|cuda] [--tp N] [--ranks threads|processes]\n"
    "                    (--prompt TEXT [--chat] [--no-thinking] | --prompt-ids 1,2,3) [--max-tokens N]\n"
    "                    [--temperature T] [--seed S] [--json] [--stats] [--threads N] [--timeout-s S]\n"
    "                    [--kv-cache-dtype auto|f32|bf16|fp8]\n"
    "       tandem-infer logits --model DIR [--backend cpu|cuda] [--tp N] [--ranks threads|processes]\n"
    "                    --prompt-ids 1,2,3 --out FILE\n"
    "       tandem-infer serve --model DIR [--port P] ...        (OpenAI-compatible server; serve --help)\n"
    "       tandem-infer bench-serve --url URL [--concurrency 1,8,32] ...   (bench-serve --help)\n"
    "       tandem-infer make-model --out DIR [--tokenizer-from DIR] ...    (random-weight checkpoint)\n"
    "       tandem-infer bench --backend cuda [--synthetic NAME] [--tp N] ...  (CUDA builds; bench --help)\n"
    "  --backend cuda --tp N --ranks processes: one process per GPU (rank r on device r % GPUs), NCCL\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tandem-infer: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using tandem::infer::InferOptions;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  // The serving subcommands parse their own flags (infer/serve_command.h).
  if (std::string(argv[1]) == "serve") return tandem::infer::RunServeCommand({argv + 2, argv + argc});
  if (std::string(argv[1]) == "make-model") return tandem::infer::RunMakeModelCommand({argv + 2, argv + argc});
  if (std::string(argv[1]) == "bench-serve") return tandem::bench::RunBenchServeCommand({argv + 2, argv + argc});
#ifdef TANDEM_HAVE_CUDA
  // tandem-infer bench --backend cuda --synthetic qwen3-30b-a3b (bench/decode_bench.h)
  if (std::string(argv[1]) == "bench") return tandem::bench::RunDecodeBenchCommand({argv + 2, argv + argc});
#endif
  InferOptions o;
  o.command = argv[1];
  bool ranks_given = false;
  for (int i = 1; i < argc; ++i) o.argv.push_back(argv[i]);

  for (tandem::FlagArgs a({argv + 2, argv + argc}); a.Next();) {
    const std::string flag = a.name();
    auto next = [&](std::string* out) -> bool {
      auto v = a.Value();
      if (!v.ok()) return false;
      *out = *std::move(v);
      return true;
    };
    auto number = [&](auto* out) -> bool {
      std::string v;
      if (!next(&v)) return false;
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') return false;
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(d);
      return true;
    };
    bool ok = true;
    if (flag == "--model") ok = next(&o.model_dir);
    else if (flag == "--backend") ok = next(&o.backend);
    else if (flag == "--tp") ok = number(&o.tp);
    else if (flag == "--ranks") ok = next(&o.ranks), ranks_given = true;
    else if (flag == "--threads") ok = number(&o.threads);
    else if (flag == "--kv-cache-dtype") ok = next(&o.kv_cache_dtype);
    else if (flag == "--text" || flag == "--prompt") ok = next(&o.text), o.has_text = true;
    else if (flag == "--chat") o.chat = true;
    else if (flag == "--no-thinking") o.enable_thinking = false;
    else if (flag == "--prompt-ids") {
      std::string v;
      ok = next(&v);
      if (ok) {
        auto ids = tandem::infer::ParseIdList(v);
        if (!ids.ok()) return Fail(tandem::StatusText(ids.status()));
        o.prompt_ids = *ids;
      }
    }
    else if (flag == "--max-tokens") ok = number(&o.max_tokens);
    else if (flag == "--temperature") ok = number(&o.temperature);
    else if (flag == "--seed") ok = number(&o.seed);
    else if (flag == "--json") o.json = true;
    else if (flag == "--stats") o.stats = true;
    else if (flag == "--out") ok = next(&o.out);
    else if (flag == "--kv-block-size") ok = number(&o.kv_block_size);
    else if (flag == "--timeout-s") {
      double s = 0;
      ok = number(&s);
      o.timeout_ms = static_cast<int>(s * 1000);
    }
    // Hidden: set by the launcher on the ranks it spawns.
    else if (flag == "--rank") ok = number(&o.rank);
    else if (flag == "--world") ok = number(&o.world);
    else if (flag == "--store") ok = next(&o.store_dir);
    else return Fail("unknown flag " + flag + "\n" + kUsage);
    if (!ok) return Fail("flag " + flag + " needs a valid value");
  }
  if (!ranks_given) o.ranks = "threads";

  auto out = tandem::infer::RunInfer(o);
  if (!out.ok()) {
    Fail(tandem::StatusText(out.status()));
    // A spawned rank tells the launcher whether it failed by itself or because the group broke.
    return o.world > 0 && tandem::infer::IsGroupFailure(out.status()) ? tandem::infer::kExitLostGroup : 1;
  }
  if (!out->empty()) std::printf("%s\n", out->c_str());
  return 0;
}
