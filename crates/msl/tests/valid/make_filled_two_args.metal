// repro T6: make_filled_simdgroup_matrix<float, 8>(0.f) (ggml-metal.metal:10510, candle quantized, mistral.rs flash_attn:435).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8>(0.f);
    simdgroup_store(m, out, 8);
}
