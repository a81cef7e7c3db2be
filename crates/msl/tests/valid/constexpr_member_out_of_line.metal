// The out-of-line definition of a static constexpr member takes its initializer from the class
// (MLX conv.metal:383, WinogradTransforms).
#include <metal_stdlib>
using namespace metal;
template <int N> struct Taps;
template <> struct Taps<2> {
    static constexpr constant float w[2] = {0.25f, 0.75f};
};
constant constexpr const float Taps<2>::w[2];
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = Taps<2>::w[i & 1];
}
