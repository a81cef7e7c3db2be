// repro T8: `assert(...)` with only <metal_stdlib> included (mistral.rs pagedattention.metal:836, compiled by xcrun metal in mistral.rs's macOS CI).
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  constexpr int N = 128, G = 32;
  assert(N % G == 0);
  out[i] = float(N / G);
}
