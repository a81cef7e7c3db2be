// repro K1: template kernel declared with the `kernel` keyword + `template [[host_name]] kernel void f<T>(...)` instantiation (MSL spec v4 5.1.11 uses exactly this form); seen in ggml-metal.metal, candle quantized.metal, torchao int*mm, mistral.rs blockwise_fp8/scalar_fp8.
#include <metal_stdlib>
using namespace metal;
template <typename T>
kernel void scale(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = x[i] * T(2); }
template [[host_name("scale_f32")]] kernel void scale<float>(device float*, uint);
