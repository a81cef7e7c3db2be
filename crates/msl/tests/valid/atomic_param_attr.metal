// repro control: the same with [[kernel]].
#include <metal_stdlib>
using namespace metal;
[[kernel]] void count(device atomic_int* dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    atomic_fetch_add_explicit(dst, 1, memory_order_relaxed);
}
