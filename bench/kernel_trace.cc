// A kernel timeline for any CUDA program, graphs and programmatic dependent launch included, where
// Nsight Systems is not at hand (the device machine has no nsys): a CUPTI injection library. The CUDA
// driver loads it at initialisation when CUDA_INJECTION64_PATH names it and calls
// InitializeInjection, which turns on CUPTI's concurrent-kernel activity records (start and end of
// every kernel, as the GPU ran it, with its graph and graph node). At exit the records are written
// as CSV to $TANDEM_KERNEL_TRACE (default kernel-trace.csv):
//   start_ns,end_ns,graph_id,graph_node_id,grid,block,shared_bytes,registers,name
// (registers: per thread, as the kernel was compiled: with the block size, what a block takes of an
// SM's register file, which decides how many blocks of consecutive kernels fit on an SM together).
// scripts/kernel_timeline.py turns a decode step's records into what each kernel adds to the step.
//
//   CUDA_INJECTION64_PATH=$PWD/libtandem_kernel_trace.so TANDEM_KERNEL_TRACE=t.csv
//     cuda_decode_bench --synthetic qwen3-30b-a3b --batches 1 --contexts 1024 ...
//
// A measuring tool, not part of the engine: nothing links it.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  uint64_t start, end, graph_node;
  uint32_t graph;
  int32_t grid[3], block[3];
  int32_t shared;
  int32_t registers;
  std::string name;
};

std::mutex g_mu;
std::vector<Record>* g_records = nullptr;
constexpr size_t kBufferBytes = 16u << 20;

void Fail(const char* what, CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, s != nullptr ? s : "?");
}

std::string Demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : name;
  std::free(d);
  for (char& c : out) {
    if (c == ',' || c == '\n') c = ';';  // one CSV field
  }
  return out;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::vector<Record> got;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    got.push_back({k->start, k->end, k->graphNodeId, k->graphId, {k->gridX, k->gridY, k->gridZ},
                   {k->blockX, k->blockY, k->blockZ}, k->staticSharedMemory + k->dynamicSharedMemory,
                   k->registersPerThread, Demangle(k->name)});
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_records != nullptr) g_records->insert(g_records->end(), got.begin(), got.end());
}

void WriteTrace() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* path = std::getenv("TANDEM_KERNEL_TRACE");
  if (path == nullptr || *path == '\0') path = "kernel-trace.csv";
  std::lock_guard<std::mutex> lock(g_mu);
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "start_ns,end_ns,graph_id,graph_node_id,grid,block,shared_bytes,registers,name\n");
  for (const Record& r : *g_records) {
    std::fprintf(f, "%llu,%llu,%u,%llu,%dx%dx%d,%dx%dx%d,%d,%d,%s\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.graph, static_cast<unsigned long long>(r.graph_node),
                 r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2], r.shared, r.registers,
                 r.name.c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels written to %s\n", g_records->size(), path);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  g_records = new std::vector<Record>();
  CUptiResult r = cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
  if (r != CUPTI_SUCCESS) {
    Fail("cuptiActivityRegisterCallbacks", r);
    return 0;
  }
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    Fail("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    return 0;
  }
  std::atexit(WriteTrace);
  return 1;
}
