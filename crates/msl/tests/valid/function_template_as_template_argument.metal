// A function template's specialization as the argument of a template's function pointer parameter,
// through decltype and explicit instantiations (ggml-metal.metal:4166, candle quantized.metal:7354: their
// dequantize functions).
#include <metal_stdlib>
using namespace metal;
template <typename type4> void dequantize_f32(device const float4* src, short il, thread type4& reg) { reg = type4(src[il]); }
void dequantize_half(device const float4* src, short il, thread half4& reg) { reg = half4(src[il]); }
template <typename type4, void (*dequantize)(device const float4*, short, thread type4&)>
kernel void get_rows(device const float4* src [[buffer(0)]], device float4* dst [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    type4 r;
    dequantize(src, short(i % 4), r);
    dst[i] = float4(r);
}
typedef decltype(get_rows<float4, dequantize_f32>) get_rows_t;
template [[host_name("get_rows_f32")]] kernel get_rows_t get_rows<float4, dequantize_f32>;
template [[host_name("get_rows_f16")]] kernel void get_rows<half4, dequantize_half>(device const float4*, device float4*, uint);
