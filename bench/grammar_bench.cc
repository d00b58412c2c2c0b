// What constrained decoding costs (issue 16: at most 10% of a batch-1 decode step).
//   1. Mask time per token over the real Qwen3 vocabulary (151k tokens) for several schemas:
//      a walk of tokens drawn uniformly from each mask (finishing within the token budget), the
//      time of each GrammarConstraint::MaskLogits (the mask, and -inf written into a row of
//      151936 logits) in thread CPU time (the build machine is shared); median, p99 and max per run,
//      on a fresh compiled grammar (its mask cache empty: cold, what the first request with a
//      schema pays) and again on the same (warm); and the time to compile the grammar (paid
//      once per schema when the request is read, not at a decode step; the first compile of
//      all also sorts the vocabulary for string content, timed apart).
//   2. End-to-end decode tokens/s at batch 1 on the cpu backend with and without the grammar
//      (the model's greedy tokens, prefill excluded), the grammar over the full vocabulary.
// Every figure is the median of --runs runs, with the smallest and largest in brackets.
//   grammar_bench [--tokenizer DIR] [--model DIR] [--runs N] [--tokens N] [--threads N]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "engine/batching/llm_engine.h"
#include "engine/batching/logits_processors.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace {

using Json = nlohmann::ordered_json;
using tandem::grammar::CompiledGrammar;
using tandem::grammar::GrammarMatcher;

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

struct Schema {
  const char* name;
  const char* json;
};

const Schema kSchemas[] = {
    {"weather (flat object, enum)",
     R"({"type":"object","properties":{"city":{"type":"string"},"temperature":{"type":"number"},
        "unit":{"enum":["celsius","fahrenheit"]},"raining":{"type":"boolean"}},
        "required":["city","temperature","unit","raining"],"additionalProperties":false})"},
    {"orders (array of nested objects)",
     R"({"type":"object","properties":{"orders":{"type":"array","items":{"type":"object","properties":{
        "id":{"type":"integer"},"sku":{"type":"string","maxLength":16},"qty":{"type":"integer"},
        "notes":{"type":["string","null"]}},"required":["id","sku","qty"]}}},"required":["orders"]})"},
    {"json_object (any JSON object)", R"({"type":"object"})"},
    {"tool arguments (strings, optional members)",
     R"({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},
        "mode":{"enum":["overwrite","append"]},"line":{"type":"integer"}},"required":["path","content"]})"},
    {"notes (maxLength 64 and 2000 strings)",
     R"({"type":"object","properties":{"title":{"type":"string","maxLength":64},
        "body":{"type":"string","minLength":1,"maxLength":2000}},"required":["title","body"]})"},
};

std::shared_ptr<const CompiledGrammar> Compile(const char* schema, std::shared_ptr<const tandem::grammar::TokenVocabulary> v) {
  tandem::grammar::GrammarBuilder b;
  auto root = tandem::grammar::AddJsonSchema(Json::parse(schema), b, "root");
  auto g = b.Build(*root);
  return *CompiledGrammar::Compile(std::move(*g), std::move(v));
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

struct Spread {
  double median, lo, hi;
};
Spread Of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// One walk as the engine does it (GrammarConstraint on a row of Qwen3-30B-A3B's 151936 logits):
// per-token seconds of MaskLogits, the grammar's mask and setting the rest to -inf.
std::vector<double> Walk(const std::shared_ptr<const CompiledGrammar>& g, int max_tokens, uint64_t seed) {
  constexpr int64_t kModelVocab = 151936;
  tandem::engine::GrammarConstraint c(g);
  std::mt19937_64 rng(seed);
  std::vector<float> row(kModelVocab);
  std::vector<double> times;
  std::vector<int32_t> allowed;
  for (int used = 0; used < max_tokens && !c.terminated(); ++used) {
    std::fill(row.begin(), row.end(), 0.0f);
    const double t0 = CpuSeconds();
    c.MaskLogits(row.data(), kModelVocab);
    times.push_back(CpuSeconds() - t0);
    allowed.clear();
    for (int64_t id = 0; id < kModelVocab; ++id) {
      if (row[id] == 0.0f) allowed.push_back(static_cast<int32_t>(id));
    }
    if (allowed.empty()) break;
    c.Accept(allowed[rng() % allowed.size()], row.data(), kModelVocab, max_tokens - used - 1);
  }
  return times;
}

// Decode tokens/s of one greedy request (first token to last), with or without a grammar.
double DecodeTokensPerSecond(tandem::engine::LLMEngine& e, std::shared_ptr<const CompiledGrammar> g, int tokens,
                             int run) {
  using Clock = std::chrono::steady_clock;
  tandem::engine::GenerationRequest r;
  r.request_id = "bench-" + std::to_string(run) + (g ? "-g" : "");
  r.prompt_ids = {785, 1196, 374, 2033, 25};
  r.params.temperature = 0.0f;
  r.params.max_tokens = tokens;
  r.params.ignore_eos = true;
  r.params.grammar = std::move(g);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int64_t count = 0;
  Clock::time_point first, last;
  absl::Status st = e.Submit(r, [&](const tandem::engine::GenerationEvent& ev) {
    std::lock_guard<std::mutex> l(mu);
    if (!ev.token_ids.empty()) {
      if (count == 0) first = Clock::now();
      last = Clock::now();
      count += static_cast<int64_t>(ev.token_ids.size());
    }
    if (ev.finished) {
      done = true;
      cv.notify_all();
    }
  });
  if (!st.ok()) {
    std::fprintf(stderr, "submit: %s\n", std::string(st.message()).c_str());
    std::exit(1);
  }
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  const double s = std::chrono::duration<double>(last - first).count();
  return count > 1 && s > 0 ? static_cast<double>(count - 1) / s : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_dir = std::string(TANDEM_TESTDATA_DEFAULT) + "/qwen3-tokenizer";
  std::string model_dir = std::string(TANDEM_TESTDATA_DEFAULT) + "/qwen3moe-tiny";
  int runs = 5, tokens = 256, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--tokenizer") tok_dir = argv[i + 1];
    else if (k == "--model") model_dir = argv[i + 1];
    else if (k == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--tokens") tokens = std::max(2, std::atoi(argv[i + 1]));
    else if (k == "--threads") threads = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: grammar_bench [--tokenizer DIR] [--model DIR] [--runs N] [--tokens N] [--threads N]\n");
      return 2;
    }
  }
  auto tok = tandem::tokenizer::Tokenizer::LoadFromDir(tok_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  const double v0 = CpuSeconds();
  auto vocab = tandem::grammar::TokenVocabulary::FromTokenizer(**tok, (*tok)->vocab_size(), (*tok)->eos_token_ids());
  std::printf("vocabulary: %lld tokens (%zu generable), built in %.1f ms\n", static_cast<long long>(vocab->size()),
              vocab->sorted().size(), 1e3 * (CpuSeconds() - v0));

  const double s0 = CpuSeconds();
  Compile(kSchemas[0].json, vocab);
  std::printf("first grammar compiled in %.1f ms (with the vocabulary's string buckets)\n", 1e3 * (CpuSeconds() - s0));

  std::printf("\n1. MaskLogits per token (thread CPU ms), walks of up to %d tokens, %d runs\n", tokens, runs);
  std::printf("%-44s %6s %8s %22s %22s %22s %22s %22s\n", "schema", "tokens", "compile", "cold median", "cold p99",
              "cold max", "warm median", "warm p99");
  for (const Schema& s : kSchemas) {
    std::vector<double> compile, cold_median, cold_p99, cold_max, warm_median, warm_p99, walked;
    for (int run = 0; run < runs; ++run) {
      const double c0 = CpuSeconds();
      auto fresh = Compile(s.json, vocab);  // empty mask cache
      compile.push_back(1e3 * (CpuSeconds() - c0));
      std::vector<double> cold = Walk(fresh, tokens, 1000 + run);
      std::vector<double> warm = Walk(fresh, tokens, 1000 + run);  // the same walk, cache filled
      cold_median.push_back(1e3 * Percentile(cold, 0.5));
      cold_p99.push_back(1e3 * Percentile(cold, 0.99));
      cold_max.push_back(1e3 * Percentile(cold, 1.0));
      warm_median.push_back(1e3 * Percentile(warm, 0.5));
      warm_p99.push_back(1e3 * Percentile(warm, 0.99));
      walked.push_back(static_cast<double>(warm.size()));
    }
    const Spread cc = Of(compile), cm = Of(cold_median), cp = Of(cold_p99), cx = Of(cold_max), wm = Of(warm_median),
                 wp = Of(warm_p99);
    std::printf("%-44s %6.0f %8.2f %9.3f [%.3f-%.3f] %9.3f [%.3f-%.3f] %9.3f [%.3f-%.3f] %9.3f [%.3f-%.3f] %9.3f [%.3f-%.3f]\n",
                s.name, Of(walked).median, cc.median, cm.median, cm.lo, cm.hi, cp.median, cp.lo, cp.hi, cx.median, cx.lo,
                cx.hi, wm.median, wm.lo, wm.hi, wp.median, wp.lo, wp.hi);
  }

  std::printf("\n2. decode tokens/s at batch 1, cpu backend (%s, %d threads), %d greedy tokens\n", model_dir.c_str(),
              threads, tokens);
  tandem::engine::ModelLoadOptions mo;
  mo.backend = "cpu";
  mo.threads = threads;
  auto model = tandem::engine::Model::Load(model_dir, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  tandem::engine::StepDriver driver(model->get(), nullptr);
  tandem::engine::EngineOptions eo;
  eo.kv_tokens = 4 * (tokens + 64);
  eo.max_model_len = tokens + 64;
  auto engine = tandem::engine::LLMEngine::Create(&driver, tok->get(), eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  // The any-object grammar never has to end early, so both requests run all their tokens.
  auto g = Compile(kSchemas[2].json, vocab);
  std::vector<double> plain, constrained;
  DecodeTokensPerSecond(**engine, nullptr, 8, -1);  // warm-up
  for (int run = 0; run < runs; ++run) {
    plain.push_back(DecodeTokensPerSecond(**engine, nullptr, tokens, run));
    constrained.push_back(DecodeTokensPerSecond(**engine, g, tokens, run));
  }
  const Spread p = Of(plain), c = Of(constrained);
  std::printf("without grammar: %8.1f tok/s [%.1f-%.1f]\n", p.median, p.lo, p.hi);
  std::printf("with grammar:    %8.1f tok/s [%.1f-%.1f]  (%.1f%% slower; step %.3f ms vs %.3f ms)\n", c.median, c.lo,
              c.hi, 100.0 * (1.0 - c.median / p.median), 1e3 / c.median, 1e3 / p.median);
  (*engine)->Shutdown();
  return 0;
}
