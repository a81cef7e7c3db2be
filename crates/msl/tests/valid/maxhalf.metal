// repro T4: MAXHALF (used undefined by ggml-metal.metal and mistral.rs flash_attn.metal, both compiled on Apple).
#include <metal_stdlib>
using namespace metal;
kernel void k(device half* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = -MAXHALF;
}
