// A local pointer into thread memory, written `thread const T*` (candle quantized.metal:4348, ggml
// ggml-metal.metal:368): clang's range of the declaration starts after `thread`, which is still written.
#include <metal_stdlib>
using namespace metal;
kernel void k(device const uint* x [[buffer(0)]], device uchar* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    uint q = x[i];
    thread const uint8_t * q8 = (thread const uint8_t *)&q;
    thread uint16_t * q16 = (thread uint16_t *)&q;
    y[i] = q8[1] + uchar(q16[0]);
}
