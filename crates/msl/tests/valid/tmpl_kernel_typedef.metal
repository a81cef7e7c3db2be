// repro K1: same, with ggml's `typedef decltype(f<...>) t; template [[host_name]] kernel t f<...>;` form (ggml-metal.metal).
#include <metal_stdlib>
using namespace metal;
template <typename T>
kernel void scale(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = x[i] * T(2); }
typedef decltype(scale<float>) scale_t;
template [[host_name("scale_f32")]] kernel scale_t scale<float>;
