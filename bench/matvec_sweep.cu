// Decode matvec design sweep (batch 1, bf16 weights, f32 x): which block shape keeps HBM busy for
// products of 0.5-50 MB. Standalone: nvcc -O3 -arch=sm_90 -std=c++17 bench/matvec_sweep.cu -o matvec_sweep
// Prints, per shape and variant, the median of 50 event-timed launches (weights rotated over copies
// totalling >= 512 MB so they come from HBM), alone and as a 48-launch graph chain.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ void Widen8(const uint4& raw, float out[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  for (int i = 0; i < 4; ++i) { float2 f = __bfloat1622float2(h[i]); out[2 * i] = f.x; out[2 * i + 1] = f.y; }
}

// W warps per block, R rows per warp, NL loads per lane per row-chunk, SX: x staged in shared memory.
template <int W, int R, int NL, bool SX, bool PDL>
__global__ void __launch_bounds__(W * 32) Mv(float* y, const float* x, const uint16_t* w, int in, int out) {
  extern __shared__ float sx[];
  if (PDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * W + threadIdx.x / 32) * R;
  uint4 buf[R][NL];
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < NL; ++k) {
      const int i = k * 256 + lane * 8;
      if (o0 + r < out && i < in) buf[r][k] = __ldcs(reinterpret_cast<const uint4*>(w + (o0 + r) * in + i));
    }
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  const float* xs = x;
  if (SX) {
    for (int i = threadIdx.x * 4; i < in; i += W * 32 * 4) *reinterpret_cast<float4*>(sx + i) = *reinterpret_cast<const float4*>(x + i);
    __syncthreads();
    xs = sx;
  }
  float acc[R] = {};
  for (int base = 0; base < in; base += 256 * NL) {
    if (base > 0)
      for (int r = 0; r < R; ++r)
        for (int k = 0; k < NL; ++k) {
          const int i = base + k * 256 + lane * 8;
          if (o0 + r < out && i < in) buf[r][k] = __ldcs(reinterpret_cast<const uint4*>(w + (o0 + r) * in + i));
        }
#pragma unroll
    for (int k = 0; k < NL; ++k) {
      const int i = base + k * 256 + lane * 8;
      if (i >= in) continue;
      const float4 a = *reinterpret_cast<const float4*>(xs + i), b = *reinterpret_cast<const float4*>(xs + i + 4);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float v[8];
        Widen8(buf[r][k], v);
        acc[r] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0 && o0 + r < out) y[o0 + r] = s;
  }
}

struct Shape { const char* name; int out, in; };

template <int W, int R, int NL, bool SX, bool PDL>
void Run(const char* vname, const Shape& s, std::vector<uint16_t*>& ws, float* x, float* y) {
  auto k = Mv<W, R, NL, SX, PDL>;
  const int rows_per_block = W * R;
  const dim3 grid((s.out + rows_per_block - 1) / rows_per_block), block(W * 32);
  const size_t smem = SX ? s.in * sizeof(float) : 0;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto launch = [&](int i) {
    cudaLaunchConfig_t c = {};
    c.gridDim = grid; c.blockDim = block; c.dynamicSmemBytes = smem; c.stream = st;
    cudaLaunchAttribute a[1];
    if (PDL) { a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; a[0].val.programmaticStreamSerializationAllowed = 1; c.attrs = a; c.numAttrs = 1; }
    CK(cudaLaunchKernelEx(&c, k, y, x, ws[i % ws.size()], s.in, s.out));
  };
  for (int i = 0; i < 5; ++i) launch(i);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<float> alone;
  for (int i = 0; i < 50; ++i) {
    CK(cudaEventRecord(e0, st)); launch(i); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); alone.push_back(ms * 1000);
  }
  // Chain of 48 launches in a graph (like 48 layers back to back).
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 48; ++i) launch(i);
  CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
  std::vector<float> chain;
  for (int i = 0; i < 12; ++i) {
    CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); chain.push_back(ms * 1000 / 48);
  }
  std::sort(alone.begin(), alone.end()); std::sort(chain.begin(), chain.end());
  const double bytes = 2.0 * s.out * s.in;
  printf("%-8s %-22s alone %6.1f us %5.0f GB/s | chained %6.1f us %5.0f GB/s\n", s.name, vname, alone[25],
         bytes / alone[25] / 1e3, chain[6], bytes / chain[6] / 1e3);
  CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g)); CK(cudaStreamDestroy(st));
}

int main() {
  std::vector<Shape> shapes = {{"qkv", 5120, 2048}, {"o_proj", 2048, 4096}, {"router", 128, 2048},
                               {"gateup", 12288, 2048}, {"down768", 16384, 768}};
  float *x, *y;
  CK(cudaMalloc(&x, 1 << 20)); CK(cudaMalloc(&y, 1 << 20));
  std::vector<float> hx(1 << 18, 0.5f);
  CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  for (const Shape& s : shapes) {
    const size_t n = static_cast<size_t>(s.out) * s.in;
    const int copies = std::max<int>(2, (512u << 20) / (2 * n));
    std::vector<uint16_t*> ws(std::min(copies, 64));
    std::vector<uint16_t> hw(n);
    for (size_t i = 0; i < n; ++i) hw[i] = 0x3c00 + (i * 2654435761u >> 24) % 64;  // small random bf16
    for (auto& p : ws) { CK(cudaMalloc(&p, n * 2)); CK(cudaMemcpy(p, hw.data(), n * 2, cudaMemcpyHostToDevice)); }
    if (s.in == 2048) {
      Run<4, 1, 8, false, true>("W4 R1 NL8 pdl", s, ws, x, y);
      Run<4, 1, 8, false, false>("W4 R1 NL8", s, ws, x, y);
      Run<8, 2, 8, false, true>("W8 R2 NL8 pdl", s, ws, x, y);
      Run<8, 2, 4, false, true>("W8 R2 NL4 pdl", s, ws, x, y);
      Run<8, 1, 8, true, true>("W8 R1 NL8 smemx pdl", s, ws, x, y);
      Run<16, 1, 8, false, true>("W16 R1 NL8 pdl", s, ws, x, y);
      Run<8, 4, 4, false, true>("W8 R4 NL4 pdl", s, ws, x, y);
      Run<2, 1, 8, false, true>("W2 R1 NL8 pdl", s, ws, x, y);
    } else if (s.in == 4096) {
      Run<4, 1, 16, false, true>("W4 R1 NL16 pdl", s, ws, x, y);
      Run<8, 1, 16, false, true>("W8 R1 NL16 pdl", s, ws, x, y);
      Run<8, 2, 8, false, true>("W8 R2 NL8 pdl", s, ws, x, y);
      Run<8, 1, 8, false, true>("W8 R1 NL8 pdl", s, ws, x, y);
      Run<16, 1, 16, true, true>("W16 R1 NL16 smemx pdl", s, ws, x, y);
    } else {
      Run<4, 1, 3, false, true>("W4 R1 NL3 pdl", s, ws, x, y);
      Run<8, 4, 3, false, true>("W8 R4 NL3 pdl", s, ws, x, y);
      Run<8, 2, 3, false, true>("W8 R2 NL3 pdl", s, ws, x, y);
      Run<8, 8, 3, false, true>("W8 R8 NL3 pdl", s, ws, x, y);
    }
    for (auto p : ws) CK(cudaFree(p));
  }
  int clk = 0; CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  printf("sm clock attr %d kHz\n", clk);
  return 0;
}
