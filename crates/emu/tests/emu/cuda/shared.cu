#include "mlx/backend/cuda/device/utils.cuh"

// kernelgen test: __shared__ memory as threadgroup memory (its guards, canaries and the
// threadgroup-memory check); the marker comments name the lines the reports must give.
namespace mlx::core::cu {

// Each lane writes its slot and reads its mirror's after __syncwarp, which orders them.
__global__ void warp_exchange_synced(
    const float* x,
    float* out) {
  __shared__ float s[32];
  s[threadIdx.x] = 2.0f * x[threadIdx.x];
  __syncwarp();
  out[threadIdx.x] = s[31 - threadIdx.x];
}

// A shuffle in place of __syncwarp: every lane writes before any reads in every run order, but
// a shuffle orders no memory.
__global__ void warp_exchange_shuffled(
    const float* x,
    float* out) {
  __shared__ float s[32];
  s[threadIdx.x] = 2.0f * x[threadIdx.x]; // @shfl-write
  float one = __shfl_sync(0xffffffff, 1.0f, 0);
  out[threadIdx.x] = one * s[31 - threadIdx.x]; // @shfl-read
}

// 40000 bytes of static shared memory (more than Metal's 32 KiB, within CUDA's 48 KiB) and
// n[0] floats of the launch's dynamic shared memory, each reversed into `out`.
__global__ void large_shared(
    const float* x,
    const int* n,
    float* out) {
  __shared__ float big[10000];
  extern __shared__ float dyn[];
  int count = n[0];
  for (int i = threadIdx.x; i < 10000; i += blockDim.x) {
    big[i] = x[i];
  }
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    dyn[i] = x[i] + 1.0f;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 10000; i += blockDim.x) {
    out[i] = big[9999 - i];
  }
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    out[10000 + i] = dyn[count - 1 - i];
  }
}

// One float of dynamic shared memory a thread; the last thread reads one past it.
__global__ void dynamic_past_end(
    const float* x,
    float* out) {
  extern __shared__ float dyn[]; // @dyn-decl
  dyn[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x + 1]; // @dyn-past-end
}

} // namespace mlx::core::cu
