// cuda_decode_bench: the decode roofline benchmark without the rest of tandem-infer (no gRPC), so
// that it runs on a bare GPU machine. Same flags as `tandem-infer bench --backend cuda`.
#include <string>
#include <vector>

#include "engine/cuda/decode_bench.h"

int main(int argc, char** argv) {
  return tandem::engine::cuda::RunDecodeBenchCommand(std::vector<std::string>(argv + 1, argv + argc));
}
