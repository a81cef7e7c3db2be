// repro T7: simdgroup_matrix * simdgroup_matrix (mlx conv.metal:448).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    simdgroup_matrix<float, 8, 8> a = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_matrix<float, 8, 8> b = make_filled_simdgroup_matrix<float, 8, 8>(2.0f);
    simdgroup_matrix<float, 8, 8> c = (a * b) * a;
    simdgroup_store(c, out, 8);
}
