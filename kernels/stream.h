// The stream type of every launcher, without pulling CUDA headers into plain C++ code (the CPU
// references and their callers include the same op headers).
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;  // identical to the runtime's own typedef
