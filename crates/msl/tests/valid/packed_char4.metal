// repro T2: packed_char4 / packed_int3 (MSL spec v4 2.2.3 lists packed_charn, packed_intn; ggml-metal.metal:659, candle mlx_gemm.metal:1038).
#include <metal_stdlib>
using namespace metal;
kernel void k(device const packed_char4* q [[buffer(0)]], device const packed_int3* s [[buffer(1)]], device float4* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    out[i] = float4(q[i]) + float(s[i].x);
}
