// repro T3: vec<bool, N> (MSL spec v4 2.2: booln; candle sdpa, mlx steel attention bool masks).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    vec<bool, 2> m = {true, false};
    bool2 b = bool2(true, false);
    out[i] = (m[0] && b[1]) ? 1.0f : 0.0f;
}
