// Invalid MSL (dynamic cast): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 9: dynamic_cast is not supported
#include <metal_stdlib>
using namespace metal;
struct A { int a; };
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  A a{1};
  thread A* p = dynamic_cast<thread A*>(&a);
  y[i] = p->a;
}
