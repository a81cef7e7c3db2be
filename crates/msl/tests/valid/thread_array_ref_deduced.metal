// A function template deducing its element type and size from a thread array reference, called
// with a local array: clang's `__generic T[N]` did not deduce from `__private float[4]`.
#include <metal_stdlib>
using namespace metal;

template <typename T, int N>
inline T total(const thread T (&k)[N]) {
  T s = 0;
  for (int i = 0; i < N; ++i) s += k[i];
  return s;
}

[[kernel]] void k(device float* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  float ks[4] = {1, 2, 3, float(t)};
  out[t] = total(ks);
}
