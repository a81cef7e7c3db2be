
#include "mlx/backend/cuda/device/utils.cuh"

#include <cooperative_groups.h>

// kernelgen test: float to __half and __nv_bfloat16 and back, and the math intrinsics the
// CUDA bodies use, one input per thread.
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_convert(
    const float* x,
    __half* h,
    __nv_bfloat16* b,
    float* back,
    float* math) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  h[i] = __float2half(v);
  b[i] = __float2bfloat16(v);
  back[2 * i] = __half2float(h[i]);
  back[2 * i + 1] = __bfloat162float(b[i]);
  float a = fabsf(v);
  math[8 * i + 0] = expf(v);
  math[8 * i + 1] = __expf(v);
  math[8 * i + 2] = rsqrtf(a);
  math[8 * i + 3] = tanhf(v);
  math[8 * i + 4] = fmaxf(v, 0.25f) + fminf(v, -0.25f);
  math[8 * i + 5] = sqrtf(a) + logf(a);
  math[8 * i + 6] = __fdividef(v, 3.0f);
  math[8 * i + 7] = v / (1.0f + __expf(-v));
}

} // namespace mlx::core::cu
