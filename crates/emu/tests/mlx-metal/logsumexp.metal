// kernelgen's own instantiations of MLX's logsumexp kernels (logsumexp.h, from MLX's headers,
// unmodified, on the include path). MLX's logsumexp.metal, which the wheel does not ship,
// instantiates them spelling out each signature; so do these, with MLX's host names.
#include <metal_common>
#include <metal_simdgroup>
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/logsumexp.h"

using namespace metal;

#define kg_logsumexp(name, itype)                                                            \
  template [[host_name("block_logsumexp_" #name)]] [[kernel]] void logsumexp<itype>(         \
      const device itype* in, device itype* out, constant int& axis_size,                    \
      uint gid [[threadgroup_position_in_grid]], uint lid [[thread_position_in_threadgroup]], \
      uint simd_lane_id [[thread_index_in_simdgroup]],                                       \
      uint simd_group_id [[simdgroup_index_in_threadgroup]]);                                \
  template [[host_name("looped_logsumexp_" #name)]] [[kernel]] void logsumexp_looped<itype>( \
      const device itype* in, device itype* out, constant int& axis_size,                    \
      uint gid [[threadgroup_position_in_grid]], uint lid [[thread_position_in_threadgroup]], \
      uint lsize [[threads_per_threadgroup]], uint simd_lane_id [[thread_index_in_simdgroup]], \
      uint simd_group_id [[simdgroup_index_in_threadgroup]]);

kg_logsumexp(float32, float)
kg_logsumexp(bfloat16, bfloat16_t)
