
#include "mlx/backend/cuda/device/utils.cuh"

#include <cooperative_groups.h>

// kernelgen test: planted bugs, one kernel each (a COLS-wide row per block of 256 threads,
// as row_sum.cu); the marker comments name the lines the reports must give.
namespace mlx::core::cu {

namespace cg = cooperative_groups;

// The warp sums are read back without __syncthreads between the write and the read.
__global__ void missing_syncthreads(
    const float* x,
    float* out) {
  __shared__ float partial[8];
  uint32_t lane = threadIdx.x % 32;
  uint32_t warp = threadIdx.x / 32;
  float acc = x[blockIdx.x * 256 + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) {
    acc += __shfl_xor_sync(0xffffffff, acc, offset);
  }
  if (lane == 0) {
    partial[warp] = acc; // @warp-sum
  }
  if (warp == 0) {
    float v = lane < 8 ? partial[lane] : 0.0f; // @no-barrier
    for (int offset = 16; offset > 0; offset /= 2) {
      v += __shfl_xor_sync(0xffffffff, v, offset);
    }
    if (lane == 0) {
      out[blockIdx.x] = v;
    }
  }
}

// `<=` where `<` was meant: the last thread reads one element past the input.
__global__ void off_by_one(
    const float* x,
    float* out) {
  constexpr int N = 1000;
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= N) {
    out[i % N] = 2.0f * x[i]; // @past-end
  }
}

// A half-warp mask while all 32 lanes shuffle: lanes 16..31 are not in it.
__global__ void half_warp_mask(
    const float* x,
    float* out) {
  float acc = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) {
    acc += __shfl_xor_sync(0xffff, acc, offset); // @half-mask
  }
  out[threadIdx.x] = acc;
}

// The full mask, but only lanes 0..15 reach the shuffle: lanes 16..31 wait at the barrier.
__global__ void mask_names_waiting_lanes(
    const float* x,
    float* out) {
  float acc = x[threadIdx.x];
  if (threadIdx.x % 32 < 16) {
    acc += __shfl_down_sync(0xffffffff, acc, 8); // @absent
  }
  __syncthreads(); // @elsewhere
  out[threadIdx.x] = acc;
}

// The full mask, but only lanes 0..15 reach the shuffle and lanes 16..31 return: lanes 8..15
// read lanes that are gone.
__global__ void mask_names_returned_lanes(
    const float* x,
    float* out) {
  float acc = x[threadIdx.x];
  if (threadIdx.x % 32 < 16) {
    acc += __shfl_down_sync(0xffffffff, acc, 8);
  }
  out[threadIdx.x] = acc;
}

// A width that is not a power of two.
__global__ void bad_width(
    const float* x,
    float* out) {
  float acc = x[threadIdx.x];
  acc += __shfl_xor_sync(0xffffffff, acc, 1, 24); // @width
  out[threadIdx.x] = acc;
}

// A width of 16 where the reduction spans the warp: each half-warp sums only itself.
__global__ void narrow_width(
    const float* x,
    float* out) {
  float acc = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) {
    acc += __shfl_xor_sync(0xffffffff, acc, offset, 16);
  }
  out[threadIdx.x] = acc;
}

} // namespace mlx::core::cu
