// Invalid MSL (typeid): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 7: typeid
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(sizeof(typeid(i)));
}
