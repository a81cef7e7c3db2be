// A function template deducing T from a thread reference to a local and from a value: Metal
// deduces float from both; clang deduced `__private float` from the reference (once its `thread`
// was blanked) and `float` from the value.
#include <metal_stdlib>
using namespace metal;

template <typename T>
inline void add_to(thread T& acc, T v) { acc += v; }

[[kernel]] void k(device float* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  float acc = 0;
  add_to(acc, out[t]);
  out[t] = acc;
}
