// Invalid MSL (vector constructors with too few components): Metal rejects them (as g++ with
// the emulator's shim does; the check took them for braced initialisers, which may be short).
// Cites: MSL specification section 2.2.3 (vector constructors: the scalars and vectors passed
// give every component; only one scalar splats).
// expect: 14: too few elements in vector initialization
// expect: 15: too few elements in vector initialization
// expect: 16:45: too few elements in vector initialization
// expect: 16:57: too few elements in vector initialization
#include <metal_stdlib>
using namespace metal;
#define PAIR4(a, b) float4(a, b)
[[kernel]] void k(device float4* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float a = y[i].x, b = y[i].y;
  float4 v = float4(a, b);
  float3 w(a, b);
  y[i] = v + float4(w, 1.0f) + vec<float, 4>(1, 2, 3) + PAIR4(a, b);
}
