// A counter raised once the kernels before it on a stream are done, for a kernel on another stream
// that waits on it instead of on a launch boundary (the staged q/k/v launched ahead:
// kernels/staged_norm_matmul.h StagedReady).
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace tandem::kernels {

// *counter += 1 once everything enqueued on `stream` before it has completed and its writes are
// visible at GPU scope (one thread; a PDL launch that waits for its predecessor).
void signal_done(uint32_t* counter, cudaStream_t stream);

}  // namespace tandem::kernels
