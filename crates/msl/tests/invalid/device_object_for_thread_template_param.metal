// Invalid MSL (a device object for a deduced thread reference): g++ with the emulator's
// macros accepts it, Metal does not. Cites: MSL specification chapter 4 (no conversion
// between address spaces; `thread T&` binds thread objects only).
// expect: 7: thread parameter 'x' of 'bump' is bound to a device object
#include <metal_stdlib>
using namespace metal;
template <typename T> void bump(thread T& x) { x += T(1); }

[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float local = y[i];
  bump(local);
  bump(y[i]);
  y[i] = local;
}
