// A function template taking a threadgroup array and a thread array of the same deduced element
// type, called with a local array (mistral.rs's pagedattention.metal, Qk_dot::dot and qk_dot_):
// Metal deduces Vec = float4 from both; clang's `__generic Vec[N]` did not deduce from a local
// (`__private float4[4]`), and a bare `Vec[N]` deduced `__private float4`, a second type.
#include <metal_stdlib>
using namespace metal;

template <typename Vec, int N>
inline float qk_dot(const threadgroup Vec (&q)[N], const thread Vec (&k)[N]) {
  float s = 0;
  for (int i = 0; i < N; ++i) s += dot(q[i], k[i]);
  return s;
}

[[kernel]] void k(device float* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  threadgroup float4 qs[2][4];
  float4 ks[4];
  for (int i = 0; i < 4; ++i) { ks[i] = float4(t); qs[t % 2][i] = ks[i]; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[t] = qk_dot(qs[t % 2], ks);
}
