// repro T3 (MLX steel/attn/mma.h:61): a template instantiated with bool builds vec<T, N> of bool (the attention kernels' mask tiles).
#include <metal_stdlib>
using namespace metal;
template <typename T, int N> struct Tile { vec<T, N> v; T get(int i) const thread { return v[i]; } };
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    Tile<bool, 2> t;
    t.v = vec<bool, 2>(true);
    out[i] = t.get(0) ? 1.0f : 0.0f;
}
