// Runs a libFuzzer target without libFuzzer: every file of the seed corpus, then a fixed
// number of deterministic mutations of each (byte flips, truncations, insertions). A crash or
// sanitizer report fails the test; the target itself asserts nothing about the verdicts.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [mutations-per-seed]\n", argv[0]);
    return 2;
  }
  int mutations = argc > 2 ? std::atoi(argv[2]) : 200;
  std::vector<std::string> seeds;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(argv[1], ec)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    seeds.push_back(ss.str());
  }
  if (ec || seeds.empty()) {
    std::fprintf(stderr, "no seed corpus in %s\n", argv[1]);
    return 1;
  }
  std::mt19937_64 rng(12345);
  size_t runs = 0;
  for (const auto& seed : seeds) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
    ++runs;
    for (int m = 0; m < mutations; ++m) {
      std::string s = seed;
      int kind = static_cast<int>(rng() % 4);
      if (s.empty()) kind = 3;
      size_t pos = s.empty() ? 0 : rng() % s.size();
      switch (kind) {
        case 0: s[pos] = static_cast<char>(rng()); break;                 // flip a byte
        case 1: s.resize(pos); break;                                     // truncate
        case 2: s.erase(pos, 1 + rng() % 8); break;                       // delete a run
        case 3: s.insert(pos, 1 + rng() % 8, static_cast<char>(rng())); break;  // insert
      }
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
      ++runs;
    }
  }
  std::printf("fuzz replay: %zu seeds, %zu inputs run without a crash\n", seeds.size(), runs);
  return 0;
}
