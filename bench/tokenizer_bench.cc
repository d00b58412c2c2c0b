// Encode throughput on a few hundred KB of mixed text (English, code, CJK, emoji, numbers),
// built from the reference corpus plus generated prose. Prints load time, MB/s and tokens/s
// for a cold pass (empty word cache) and warm passes.
//   tokenizer_bench [TOKENIZER_DIR] [TARGET_KB]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"

using Clock = std::chrono::steady_clock;

// Thread CPU time: on a shared build machine wall time mostly measures the other jobs.
static double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

static double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int main(int argc, char** argv) {
  const std::string dir =
      argc > 1 ? argv[1] : std::string(TANDEM_TESTDATA_DEFAULT) + "/qwen3-tokenizer";
  const size_t target = (argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 400) * 1024;

  auto start = Clock::now();
  double cpu = CpuSeconds();
  auto tok = tandem::tokenizer::Tokenizer::LoadFromDir(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  std::printf("load %s: %.3f s wall, %.3f s CPU\n", dir.c_str(), Seconds(start), CpuSeconds() - cpu);

  // Mixed text: the corpus strings, interleaved with varied English and code so that the word
  // cache does not see only repeats.
  std::ifstream in(dir + "/encodings.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> corpus;
  const auto refs = nlohmann::json::parse(ss.str());  // named: a range-for over a temporary's member dangles
  for (const auto& c : refs["cases"]) corpus.push_back(c["text"]);
  if (corpus.empty()) {
    std::fprintf(stderr, "no cases in %s/encodings.json\n", dir.c_str());
    return 1;
  }
  const char* words[] = {"tensor", "parallel", "expert", "router", "kernel", "latency", "the",
                         "of", "GPU", "all-reduce", "cache", "分布式", "推理", "модель", "schnell"};
  std::string text;
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; text.size() < target; ++i) {
    text += corpus[i % corpus.size()];
    text += '\n';
    for (int w = 0; w < 40; ++w) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift: varied but reproducible
      text += words[x % (sizeof(words) / sizeof(words[0]))];
      text += (x >> 8) % 7 == 0 ? ", " : " ";
      if ((x >> 16) % 11 == 0) text += std::to_string(x % 100000) + " ";
    }
    text += "\nfor (int i = 0; i < n; ++i) { y[i] = a * x[i] + b; }\n";
  }

  for (int pass = 0; pass < 4; ++pass) {
    start = Clock::now();
    cpu = CpuSeconds();
    const auto ids = (*tok)->Encode(text);
    const double s = Seconds(start), c = CpuSeconds() - cpu;
    std::printf("encode pass %d (%s): %.1f KB -> %zu tokens in %.3f s wall (%.2f MB/s), "
                "%.3f s CPU (%.2f MB/s, %.0f tokens/s)\n",
                pass, pass == 0 ? "cold cache" : "warm cache", text.size() / 1024.0, ids.size(), s,
                text.size() / s / 1e6, c, text.size() / c / 1e6, ids.size() / c);
    if (pass == 3) {
      start = Clock::now();
      const std::string back = (*tok)->Decode(ids);
      std::printf("decode: %.3f s (%.2f MB/s), round trip %s\n", Seconds(start),
                  back.size() / Seconds(start) / 1e6, back == text ? "exact" : "DIFFERS");
    }
  }
  return 0;
}
