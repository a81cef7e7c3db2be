// Invalid MSL (a threadgroup array for a deduced thread array reference): g++ with the emulator's
// macros accepts it, Metal does not. Cites: MSL specification chapter 4 (no conversion between
// address spaces; `thread T (&)[N]` binds thread objects only).
// expect: 9: thread parameter 'k' of 'total' is bound to a threadgroup object
// expect: 19: no matching function for call to 'qk_dot'
#include <metal_stdlib>
using namespace metal;
template <typename T, int N>
inline T total(const thread T (&k)[N]) { return k[0] + k[N - 1]; }
template <typename Vec, int N>
inline float qk_dot(const threadgroup Vec (&q)[N], const thread Vec (&k)[N]) { return dot(q[0], k[0]); }

[[kernel]] void k(device float* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  threadgroup float4 qs[2][4];
  threadgroup float ss[4];
  qs[t % 2][t % 4] = float4(t);
  ss[t % 4] = t;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[t] = qk_dot(qs[0], qs[1]);
  out[t] += total(ss);
}
