// Invalid MSL (std namespace): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 7: the C++ standard library is not available
// expect: 9: use metal:: instead of std::
#include <metal_stdlib>
using namespace metal;
#include <algorithm>
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = std::max(y[i], 0.0f);
}
