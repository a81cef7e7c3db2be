// Invalid MSL (a duplicate [[host_name]]): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.1.11 (a host name names one function in a library).
// expect: 9: host_name
#include <metal_stdlib>
using namespace metal;
template <typename T>
[[kernel]] void scale(device T* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] *= T(2); }
template [[host_name("scale")]] [[kernel]] void scale<float>(device float*, uint);
template [[host_name("scale")]] [[kernel]] void scale<half>(device half*, uint);
