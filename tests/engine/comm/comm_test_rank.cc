// One rank of a Gloo group as its own process, for gloo_comm_process_test.
//   comm_test_rank --store-dir DIR --generation G --rank R --world W --mode sum|stall
// sum:   all-reduce (3 sizes), broadcast from rank 1, gather to rank 0, barrier; checks every
//        value; exit 0 when all matched, 1 on a wrong value, 2 on a comm error.
// stall: one all-reduce, then publishes "ready<R>" in the store and enters a second all-reduce
//        that its peer never joins (the test kills this process there); exit 3 if it returns.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/comm/gloo_comm.h"
#include "engine/comm/store.h"

using namespace tandem::engine;

namespace {

float Contribution(int rank, size_t i) {
  return static_cast<float>((rank + 1) * 1000) + static_cast<float>(i % 4096) * 0.25f;
}

int CommError(const absl::Status& st) {
  std::printf("comm error: %s\n", std::string(st.message()).c_str());
  return 2;
}

int Mismatch(const std::string& what) {
  std::printf("MISMATCH: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string store_dir, mode = "sum";
  int rank = 0, world = 2;
  uint64_t generation = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--store-dir")
      store_dir = value;
    else if (flag == "--generation")
      generation = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--rank")
      rank = std::atoi(value.c_str());
    else if (flag == "--world")
      world = std::atoi(value.c_str());
    else if (flag == "--mode")
      mode = value;
  }
  FileStore files(store_dir);
  PrefixStore store(files, GenerationPrefix(generation));
  GlooCommOptions opts;
  opts.store = &store;
  opts.rank = rank;
  opts.world_size = world;
  opts.timeout = std::chrono::milliseconds(20000);
  opts.connect_timeout = std::chrono::milliseconds(30000);
  auto created = CreateGlooComm(opts);
  if (!created.ok()) return CommError(created.status());
  Comm& comm = **created;

  if (mode == "stall") {
    std::vector<float> data(16, static_cast<float>(rank + 1));
    if (absl::Status st = comm.AllReduceSum(data.data(), data.size()); !st.ok())
      return CommError(st);
    (void)store.Set("ready" + std::to_string(rank), "1");
    absl::Status st = comm.AllReduceSum(data.data(), data.size());
    std::printf("stall all-reduce returned: %s\n", st.ToString().c_str());
    return 3;
  }

  for (size_t n : {size_t{1}, size_t{4096}, size_t{300000}}) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = Contribution(rank, i);
    if (absl::Status st = comm.AllReduceSum(data.data(), n); !st.ok()) return CommError(st);
    for (size_t i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < world; ++r) want += Contribution(r, i);
      if (data[i] != want)
        return Mismatch("all-reduce n=" + std::to_string(n) + " index " + std::to_string(i));
    }
    std::printf("rank %d all-reduce n=%zu: data[0]=%.2f\n", rank, n, data[0]);
  }
  std::vector<uint8_t> bytes(1000, 0);
  if (rank == 1)
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  if (absl::Status st = comm.Broadcast(bytes.data(), bytes.size(), 1); !st.ok())
    return CommError(st);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != static_cast<uint8_t>(i * 13 + 5))
      return Mismatch("broadcast byte " + std::to_string(i));
  }
  float mine[2] = {static_cast<float>(rank * 10), static_cast<float>(rank * 10 + 1)};
  std::vector<float> all(rank == 0 ? 2 * world : 0);
  if (absl::Status st = comm.Gather(mine, 2, rank == 0 ? all.data() : nullptr, 0); !st.ok())
    return CommError(st);
  if (rank == 0) {
    for (int r = 0; r < world; ++r) {
      if (all[2 * r] != r * 10.0f || all[2 * r + 1] != r * 10.0f + 1)
        return Mismatch("gather slot " + std::to_string(r));
    }
  }
  if (absl::Status st = comm.Barrier(); !st.ok()) return CommError(st);
  std::printf("rank %d of %d OK (all-reduce, broadcast, gather, barrier)\n", rank, world);
  return 0;
}
