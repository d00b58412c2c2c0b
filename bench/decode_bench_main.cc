// cuda_decode_bench: the decode roofline benchmark without the rest of tandem-infer (no gRPC), so
// that it runs on a bare GPU machine. Same flags as `tandem-infer bench --backend cuda`.
#include <string>
#include <vector>

#include "bench/decode_bench.h"

int main(int argc, char** argv) {
  return tandem::bench::RunDecodeBenchCommand(std::vector<std::string>(argv + 1, argv + argc));
}
