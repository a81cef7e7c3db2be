// A scalar with a vector converts to the vector's element type, whatever their ranks (MSL 2.2.2):
// half4 * float (candle quantized.metal:1795), an unsuffixed literal times a vec<T, 2> in a
// template (MLX fft/radix.h:62, ggml-metal.metal's gelu).
#include <metal_stdlib>
using namespace metal;
template <typename T>
vec<T, 2> half_step(vec<T, 2> a) { return a - 0.5 * a; }
kernel void k(device half4* h [[buffer(0)]], device float2* f [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    half4 v = h[i] * 2.0f;
    v *= 0.25f;
    h[i] = v;
    f[i] = half_step(f[i]);
}
