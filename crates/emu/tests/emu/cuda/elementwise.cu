
#include "mlx/backend/cuda/device/utils.cuh"

#include <cooperative_groups.h>

#define inf cuda::std::numeric_limits<float>::infinity()

// kernelgen test: an elementwise kernel as MLX 0.32 assembles it
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_axpy(
    const float* x,
    const __nv_bfloat16* y,
    float* out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 1000) {
    out[i] = twice(x[i]) + __bfloat162float(y[i]);
  }
}

} // namespace mlx::core::cu
