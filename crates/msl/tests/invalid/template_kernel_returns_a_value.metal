// Invalid MSL (a template kernel whose instantiation returns a value): g++ with the emulator's macros
// accepts it, Metal does not.
// Cites: MSL specification section 5.1.3 (a compute function's return type must be void).
// expect: 8: kernel 'k' returns 'float'
#include <metal_stdlib>
using namespace metal;
template <typename T>
[[kernel]] T k(device T* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = T(1);
  return y[i];
}
template [[host_name("k_f32")]] [[kernel]] decltype(k<float>) k<float>;
