// repro C1: `constexpr constant static float t[]` passed to a `constant float*` parameter (ggml-metal.metal:454 best_index_int8).
#include <metal_stdlib>
using namespace metal;
constexpr constant static float table[4] = {1.f, 2.f, 3.f, 4.f};
static inline float pick(constant float* v, int i) { return v[i]; }
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = pick(table, i & 3);
}
