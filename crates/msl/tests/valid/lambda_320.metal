// repro obs: a lambda at __METAL_VERSION__ 320: MSL spec v4 1.5.4 says "Metal 3.2 and later support lambda expressions"; the 3.2 spec text of 2024-06-06 still lists lambdas as unavailable.
// metal-version: 320
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  auto sq = [](float v) { return v * v; };
  y[i] = sq(y[i]);
}
