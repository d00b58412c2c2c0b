// cuda_decode_bench: the decode roofline benchmark without the rest of tandem-infer (no gRPC), so
// that it runs on a bare GPU machine. Same flags as `tandem-infer bench --backend cuda`.
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cuda/decode_bench.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto opt = tandem::engine::cuda::ParseDecodeBenchFlags(args);
  if (!opt.ok()) {
    std::fprintf(stderr, "cuda_decode_bench: %s\n", std::string(opt.status().message()).c_str());
    return 2;
  }
  auto report = tandem::engine::cuda::RunDecodeBench(*opt);
  if (!report.ok()) {
    std::fprintf(stderr, "cuda_decode_bench: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::printf("%s", report->c_str());
  return 0;
}
