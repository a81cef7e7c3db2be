// Bugs only the sanitizers see: they stay inside mapped, unprotected memory.
#include <metal_stdlib>
using namespace metal;

// Threads 32.. write past the end of a threadgroup array.
[[kernel]] void tg_overflow(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float a[32];
  a[tid] = float(tid);  // @tg-write
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = a[tid % 32u];
}

// A uint32 load from a byte offset that is not a multiple of 4.
[[kernel]] void misaligned(const device uint8_t* bytes [[buffer(0)]], device uint* out [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  const device uint32_t* words = (const device uint32_t*)(bytes + 1 + i * 4u);
  out[i] = words[0];  // @misaligned
}

// Reads a float that lies in the small gap between two declared regions.
[[kernel]] void gap_read(const device float* slot [[buffer(0)]], device float* out [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  out[i] = slot[i];  // @gap-read
}

// A correct kernel: sanitize mode must not report anything.
[[kernel]] void clean(const device float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float t[64];
  t[i % 64u] = x[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = simd_sum(t[(i + 1u) % 64u]) + float(lane);
}
