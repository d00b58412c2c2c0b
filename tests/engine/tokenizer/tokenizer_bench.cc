// Encode throughput on a few hundred KB of mixed text (English, code, CJK, emoji, numbers),
// built from the reference corpus plus generated prose. Prints load time, MB/s and tokens/s
// for a cold pass (empty word cache) and warm passes.
//   tokenizer_bench [TOKENIZER_DIR] [TARGET_KB]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"

using Clock = std::chrono::steady_clock;

static double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int main(int argc, char** argv) {
  const std::string dir =
      argc > 1 ? argv[1] : std::string(TANDEM_TESTDATA_DEFAULT) + "/qwen3-tokenizer";
  const size_t target = (argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 400) * 1024;

  auto start = Clock::now();
  auto tok = tandem::tokenizer::Tokenizer::LoadFromDir(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  std::printf("load %s: %.3f s\n", dir.c_str(), Seconds(start));

  // Mixed text: the corpus strings, interleaved with varied English and code so that the word
  // cache does not see only repeats.
  std::ifstream in(dir + "/encodings.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> corpus;
  for (const auto& c : nlohmann::json::parse(ss.str())["cases"]) corpus.push_back(c["text"]);
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
    const auto ids = (*tok)->Encode(text);
    const double s = Seconds(start);
    std::printf("encode pass %d (%s): %.1f KB -> %zu tokens in %.3f s = %.2f MB/s, %.0f tokens/s\n",
                pass, pass == 0 ? "cold cache" : "warm cache", text.size() / 1024.0, ids.size(), s,
                text.size() / s / 1e6, ids.size() / s);
    if (pass == 3) {
      start = Clock::now();
      const std::string back = (*tok)->Decode(ids);
      std::printf("decode: %.3f s (%.2f MB/s), round trip %s\n", Seconds(start),
                  back.size() / Seconds(start) / 1e6, back == text ? "exact" : "DIFFERS");
    }
  }
  return 0;
}
