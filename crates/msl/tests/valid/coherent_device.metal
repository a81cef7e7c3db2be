// repro T9: coherent(...) qualifier (MSL spec v4 4.8; mlx fence.metal uses coherent(system)).
// metal-version: 320
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(volatile coherent(device) uint* flag [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    flag[i] = 1;
}
