// A template taking thread T& called on elements reached through a thread pointer: its local of type
// T is a thread variable (MLX sort.h:17's thread_swap; candle mlx_sort.metal:119; mistral.rs sort).
#include <metal_stdlib>
using namespace metal;
template <typename T>
void thread_swap(thread T& a, thread T& b) { T w = a; a = b; b = w; }
void sort2(thread float* vals) {
    if (vals[1] < vals[0]) thread_swap(vals[1], vals[0]);
}
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float vals[2] = {out[2 * i], out[2 * i + 1]};
    sort2(vals);
    out[2 * i] = vals[0];
}
