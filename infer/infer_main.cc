// tandem-infer: the engine without the cluster. Subcommands and their flags only (common/cli.h); the
// work is in infer.cc, serve_command.cc, make_model.cc and bench/.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_serve.h"
#include "common/cli.h"
#include "common/crash_report.h"
#include "common/status.h"
#include "common/version.h"
#include "infer/infer.h"
#include "infer/make_model.h"
#include "infer/rank_processes.h"
#include "infer/serve_command.h"
#ifdef TANDEM_HAVE_CUDA
#include "bench/decode_bench.h"
#endif

namespace {

using tandem::infer::InferOptions;

constexpr char kDescription[] =
    "tandem-infer: the engine without the cluster: tokenize, generate, dump logits, serve the OpenAI API from "
    "one process, write a random-weight checkpoint, benchmark.";

constexpr char kFooter[] =
    "Run `tandem-infer <command> --help` for a command's flags. --backend cuda --tp N --ranks processes: one\n"
    "process per GPU (rank r on device r % GPUs), NCCL. Exit status: 0 done, 1 failed, 2 bad usage.";

// The model and how its ranks run: the flags generate and logits share.
void AddEngineFlags(CLI::App* command, InferOptions* o) {
  command->add_option("--model", o->model_dir, "Hugging Face model folder")->type_name("DIR")->required();
  command->add_option("--backend", o->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--tp", o->tp, "tensor-parallel ranks")->check(CLI::Range(1, 1024).description(""))->type_name("N");
  command->add_option("--ranks", o->ranks, "ranks as threads of this process or as processes (tp > 1)")
      ->check(CLI::IsMember({"threads", "processes"}));
  command->add_option("--threads", o->threads, "matmul threads per rank (0: cores / tp)")->type_name("N");
  command->add_option("--kv-cache-dtype", o->kv_cache_dtype, "the KV cache's element type: auto|f32|bf16|fp8");
  command->add_option("--kv-block-size", o->kv_block_size, "tokens per KV block")
      ->check(CLI::Range(1, 4096).description(""))
      ->type_name("N");
  command->add_option_function<double>(
             "--timeout-s", [o](const double& s) { o->timeout_ms = static_cast<int>(s * 1000); },
             "deadline of each collective (the rendezvous gets twice as long)")
      ->check(CLI::Range(0.001, 86400.0).description(""))
      ->type_name("SECONDS")
      ->default_str("30");
  command->add_option_function<std::string>(
             "--prompt-ids",
             [o](const std::string& v) {
               absl::StatusOr<std::vector<int32_t>> ids = tandem::infer::ParseIdList(v);
               if (!ids.ok()) throw CLI::ValidationError("--prompt-ids", std::string(ids.status().message()));
               o->prompt_ids = *std::move(ids);
             },
             "prompt token ids")
      ->type_name("1,2,3");
  // Set by the launcher on the rank processes it spawns (infer/rank_processes.cc); not for people.
  command->add_option("--rank", o->rank)->group("");
  command->add_option("--world", o->world)->group("");
  command->add_option("--store", o->store_dir)->group("");
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tandem-infer: %s\n", msg.c_str());
  return 1;
}

// tokenize / generate / logits: the engine's answer on stdout.
int RunInferCommand(InferOptions o) {
  auto out = tandem::infer::RunInfer(o);
  if (!out.ok()) {
    Fail(tandem::StatusText(out.status()));
    // A spawned rank tells the launcher whether it failed by itself or because the group broke.
    return o.world > 0 && tandem::infer::IsGroupFailure(out.status()) ? tandem::infer::kExitLostGroup : 1;
  }
  if (!out->empty()) std::printf("%s\n", out->c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tandem::InstallCrashReport(argv[0]);
  namespace cli = tandem::cli;
  auto app = cli::NewApp("tandem-infer", kDescription, [] { return std::string("tandem-infer ") + tandem::Version(); });
  app->require_subcommand(1);
  app->footer(kFooter);

  InferOptions tok;
  CLI::App* tokenize_cmd = cli::AddCommand(app.get(), "tokenize", "the token ids of a text: {\"ids\": [...]}");
  tokenize_cmd->add_option("--model", tok.model_dir, "model folder with tokenizer.json")->type_name("DIR")->required();
  tokenize_cmd->add_option_function<std::string>(
      "--text,--prompt", [&tok](const std::string& t) { tok.text = t, tok.has_text = true; }, "the text")->required();

  InferOptions gen;
  CLI::App* generate_cmd =
      cli::AddCommand(app.get(), "generate", "greedy or sampled continuation of a prompt (text or token ids)");
  AddEngineFlags(generate_cmd, &gen);
  generate_cmd->add_option_function<std::string>(
      "--prompt,--text", [&gen](const std::string& t) { gen.text = t, gen.has_text = true; },
      "prompt text (tokenized with the folder's tokenizer)");
  generate_cmd->add_flag("--chat", gen.chat, "wrap --prompt as one user turn of the chat template");
  generate_cmd->add_flag_callback("--no-thinking", [&gen] { gen.enable_thinking = false; },
                                  "with --chat: add the empty think block");
  generate_cmd->add_option("--max-tokens", gen.max_tokens, "tokens to generate")->type_name("N");
  generate_cmd->add_option("--temperature", gen.temperature, "0: greedy")->type_name("T");
  generate_cmd->add_option("--seed", gen.seed, "sampling seed")->type_name("S");
  cli::AddJson(generate_cmd, &gen.json);
  generate_cmd->add_flag("--stats", gen.stats, "decode tokens/s on stderr");

  InferOptions logits;
  CLI::App* logits_cmd = cli::AddCommand(app.get(), "logits", "the prompt's logits into a safetensors file");
  AddEngineFlags(logits_cmd, &logits);
  logits_cmd->add_option("--out", logits.out, "the safetensors file to write")->type_name("FILE")->required();

  tandem::infer::ServeOptions serve;
  CLI::App* serve_cmd = cli::AddCommand(app.get(), "serve", "the OpenAI-compatible server from one process");
  tandem::infer::AddServeFlags(serve_cmd, &serve);

  tandem::infer::MakeModelOptions make;
  CLI::App* make_cmd =
      cli::AddCommand(app.get(), "make-model", "write a small qwen3_moe checkpoint with RANDOM weights");
  tandem::infer::AddMakeModelFlags(make_cmd, &make);

  tandem::bench::BenchServeOptions bench_serve;
  CLI::App* bench_serve_cmd =
      cli::AddCommand(app.get(), "bench-serve", "load-test a running OpenAI server at several concurrencies");
  tandem::bench::AddBenchServeFlags(bench_serve_cmd, &bench_serve);

#ifdef TANDEM_HAVE_CUDA
  // The decode benchmark parses its own flags (bench/decode_bench_flags.h, shared with
  // cuda_decode_bench): everything after `bench` goes to it, --help included.
  CLI::App* bench_cmd = cli::AddCommand(app.get(), "bench", "the CUDA decode benchmark (bench --help)");
  bench_cmd->prefix_command();
  bench_cmd->allow_extras();
  bench_cmd->fallthrough(false);  // its --help and unknown flags are its own parser's to answer
  bench_cmd->set_help_flag();
#endif

  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::optional<int> rc = cli::Parse(*app, args)) return *rc;

  if (tokenize_cmd->parsed() || generate_cmd->parsed() || logits_cmd->parsed()) {
    InferOptions& o = tokenize_cmd->parsed() ? tok : generate_cmd->parsed() ? gen : logits;
    o.command = args[0];
    o.argv = args;  // the rank processes run this same command line with --rank/--world/--store
    return RunInferCommand(std::move(o));
  }
  if (serve_cmd->parsed()) {
    if (absl::Status st = tandem::infer::CheckServeOptions(serve); !st.ok()) {
      return cli::UsageError(*serve_cmd, std::string(st.message()));
    }
    return tandem::infer::RunServeCommand(serve);
  }
  if (make_cmd->parsed()) return tandem::infer::RunMakeModelCommand(make);
  if (bench_serve_cmd->parsed()) return tandem::bench::RunBenchServeCommand(bench_serve);
#ifdef TANDEM_HAVE_CUDA
  return tandem::bench::RunDecodeBenchCommand(bench_cmd->remaining());
#else
  return cli::kExitUsage;
#endif
}
