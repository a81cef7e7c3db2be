#include <metal_stdlib>
#include <metal_simdgroup>
using namespace metal;

// Lanes that return early are inactive in the collectives that follow.
[[kernel]] void sum_inactive(
    const device float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  if ((lane * 7u + sg) % 5u == 3u) return;
  const float s = simd_sum(x[gid]);
  const float m = simd_max(x[gid]);
  const float p = simd_prefix_exclusive_sum(x[gid]);
  out[gid * 3u] = s;
  out[gid * 3u + 1u] = m;
  out[gid * 3u + 2u] = p;
}

// half reductions round after every addition; ints use the same order.
[[kernel]] void typed_sums(
    const device half* h [[buffer(0)]],
    const device int* v [[buffer(1)]],
    device half* hout [[buffer(2)]],
    device int* iout [[buffer(3)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]]) {
  if (lane >= 29u) return;
  hout[gid] = simd_sum(h[gid]);
  iout[gid] = simd_min(v[gid]) + 1000 * simd_max(v[gid]);
}

[[kernel]] void shuffles(
    const device float* x [[buffer(0)]],
    device float4* out [[buffer(1)]],
    uint gid [[thread_position_in_grid]]) {
  const float v = x[gid];
  out[gid] = float4(simd_shuffle_down(v, 3), simd_broadcast(v, 5), simd_shuffle_xor(v, 1), simd_shuffle_up(v, 2));
}

// Every attribute MLX declares, written out per thread.
[[kernel]] void attributes(
    device uint* out [[buffer(0)]],
    uint3 tpig [[thread_position_in_grid]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint3 tpitg [[thread_position_in_threadgroup]],
    uint3 tptg [[threads_per_threadgroup]],
    uint3 tpg [[threads_per_grid]],
    uint3 tgpg [[threadgroups_per_grid]],
    uint3 gs [[grid_size]],
    uint3 go [[grid_origin]],
    uint3 dtptg [[dispatch_threads_per_threadgroup]],
    uint tiisg [[thread_index_in_simdgroup]],
    uint siitg [[simdgroup_index_in_threadgroup]],
    uint tiitg [[thread_index_in_threadgroup]],
    uint tpsg [[threads_per_simdgroup]],
    uint sgptg [[simdgroups_per_threadgroup]],
    uint tew [[thread_execution_width]]) {
  const uint i = (tpig.z * tpg.y + tpig.y) * tpg.x + tpig.x;
  device uint* o = out + i * 32u;
  o[0] = tpig.x; o[1] = tpig.y; o[2] = tpig.z;
  o[3] = tgpig.x; o[4] = tgpig.y; o[5] = tgpig.z;
  o[6] = tpitg.x; o[7] = tpitg.y; o[8] = tpitg.z;
  o[9] = tptg.x; o[10] = tptg.y; o[11] = tptg.z;
  o[12] = tpg.x; o[13] = tpg.y; o[14] = tpg.z;
  o[15] = tgpg.x; o[16] = tgpg.y; o[17] = tgpg.z;
  o[18] = gs.x + go.x + go.y + go.z; o[19] = dtptg.x; o[20] = dtptg.y; o[21] = dtptg.z;
  o[22] = tiisg; o[23] = siitg; o[24] = tiitg; o[25] = tpsg; o[26] = sgptg; o[27] = tew;
  const uint2 xy = tpig.xy;
  o[28] = xy.y * 100u + xy.x;
  o[29] = 0xdeadbeefu;
}

// Two-level reduction through threadgroup memory with barriers (MLX's RMS pattern).
[[kernel]] void tg_reduce(
    const device float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
    uint3 gid [[thread_position_in_grid]],
    uint3 tgp [[threadgroup_position_in_grid]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float partial[32];
  threadgroup float total[1];
  if (sg == 0) partial[lane] = 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const float s = simd_sum(x[gid.x]);
  if (lane == 0) partial[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    const float t = simd_sum(partial[lane]);
    if (lane == 0) total[0] = t;
  }
  threadgroup_barrier(metal::mem_flags::mem_threadgroup);
  out[gid.x] = total[0] + float(nsg) * 0.0f;
  (void)tgp;
}

// Vectors with Metal's layout, swizzles (read and write), half literals.
[[kernel]] void vectors(
    const device float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
    device uint* sizes [[buffer(2)]],
    uint i [[thread_position_in_grid]]) {
  float4 v = float4(x[i], 1.5h, 2.0f, 3.0f);
  v.xy = v.yx;
  v.zw += float2(0.25f);
  const float3 w = v.xyz * 2.0f;
  const half2 hh = half2(v.xy);
  const float4 q = float4(w, float(hh.y)) + float4(float2(1.0f, 2.0f), v.zw);
  out[i] = q.x + q.y * 10.0f + q.z * 100.0f + q.w * 1000.0f + dot(v, v);
  if (i == 0) {
    sizes[0] = sizeof(uint3); sizes[1] = alignof(uint3); sizes[2] = sizeof(half3);
    sizes[3] = sizeof(float2); sizes[4] = sizeof(bfloat4); sizes[5] = sizeof(half);
  }
}

// Reads threadgroup memory that nothing wrote: poison.
[[kernel]] void uninit_read(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup float scratch[64];
  out[i] = scratch[i % 64u];
}

// MLX's atomic outputs.
[[kernel]] void atomics(device atomic<float>* acc [[buffer(0)]], device atomic_uint* count [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(acc, float(i), memory_order_relaxed);
  atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
  atomic_fetch_max_explicit(count + 1, i, memory_order_relaxed);
}

// Pointers into threadgroup arrays.
[[kernel]] void tg_pointer(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float xs[64];
  threadgroup float* p = xs + 32;
  xs[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const threadgroup float* q = p;
  out[tid] = q[tid % 32u] + xs[63u - tid];
}
