#include "engine/model.h"

#include "common/status.h"
#include "engine/cpu/cpu_model.h"
#ifdef TANDEM_HAVE_CUDA
#include "engine/cuda/cuda_model.h"
#endif

namespace tandem::engine {

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir, const ModelLoadOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  if (options.rank < 0 || options.rank >= options.world) {
    return absl::InvalidArgumentError("rank " + std::to_string(options.rank) + " outside a group of " +
                                      std::to_string(options.world));
  }
  // A bad KV dtype is refused before any weight is read (each backend resolves "auto" itself).
  RETURN_IF_ERROR(ParseKvDtype(options.kv_cache_dtype, KvDtype::kF32).status());
  // The backend is chosen once, here; each backend checks what it supports.
  if (options.backend == "cpu") return cpu::LoadCpuModel(dir, config, options);
#ifdef TANDEM_HAVE_CUDA
  if (options.backend == "cuda") return cuda::LoadCudaModel(dir, config, options);
  return absl::InvalidArgumentError("unknown backend \"" + options.backend + "\" (this build has: cpu, cuda)");
#else
  return absl::InvalidArgumentError("unknown backend \"" + options.backend + "\" (this build has: cpu)");
#endif
}

}  // namespace tandem::engine
