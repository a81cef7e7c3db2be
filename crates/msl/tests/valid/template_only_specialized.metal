// A function template declared without a body, used only through the specializations the source
// defines (candle indexing.metal:5, ggml-metal.metal:1052 and 1898, mistral.rs pagedattention.metal:26).
#include <metal_stdlib>
using namespace metal;
template <typename T> inline T max_value();
template <> inline uint max_value<uint>() { return 0xFFFFFFFFu; }
template <> inline uchar max_value<uchar>() { return 0xFF; }
template <uint N> bool below(int i);
template <> bool below<1>(int i) { return i < 1; }
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = below<1>(int(i)) ? max_value<uint>() : uint(max_value<uchar>());
}
