
#include "mlx/backend/cuda/device/utils.cuh"

#include <cooperative_groups.h>

#define inf cuda::std::numeric_limits<float>::infinity()

// kernelgen test: one block of 256 threads sums a row of COLS bf16 values: strided partial
// sums, a __shfl_xor_sync butterfly in each warp, the 8 warp sums through __shared__ memory,
// and a second butterfly in warp 0.
namespace mlx::core::cu {

namespace cg = cooperative_groups;

__global__ void custom_kernel_row_sum(
    const __nv_bfloat16* x,
    float* out) {
  constexpr int COLS = 1000;
  using T = __nv_bfloat16;
  __shared__ float partial[8];
  const T* row = x + blockIdx.x * COLS;
  uint32_t lane = threadIdx.x % 32;
  uint32_t warp = threadIdx.x / 32;
  float acc = 0.0f;
  for (int i = threadIdx.x; i < COLS; i += blockDim.x) {
    acc += __bfloat162float(row[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    acc += __shfl_xor_sync(0xffffffff, acc, offset);
  }
  if (lane == 0) {
    partial[warp] = acc;
  }
  __syncthreads();
  if (warp == 0) {
    float v = lane < 8 ? partial[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) {
      v += __shfl_xor_sync(0xffffffff, v, offset);
    }
    if (lane == 0) {
      out[blockIdx.x] = v;
    }
  }
}

} // namespace mlx::core::cu
