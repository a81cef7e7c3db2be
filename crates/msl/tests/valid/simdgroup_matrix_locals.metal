// Valid MSL: simdgroup matrices as local variables (MSL specification section 6.7, SIMD-group
// matrix functions), passed to simdgroup_multiply_accumulate, simdgroup_load and
// simdgroup_store (found by the emulator's own tests: locals must deduce like references).
#include <metal_stdlib>
using namespace metal;
[[kernel]] void mma(device const float* a [[buffer(0)]], device float* d [[buffer(1)]],
                    ushort l [[thread_index_in_simdgroup]]) {
  simdgroup_matrix<float, 8, 8> A, B, C, D;
  A.thread_elements() = float2(a[2 * l], a[2 * l + 1]);
  B = A;
  C = simdgroup_float8x8(0.0f);
  simdgroup_multiply_accumulate(D, A, B, C);
  simdgroup_multiply(C, A, D);
  simdgroup_load(A, a);
  simdgroup_store(C, d);
  d[2 * l] = D.thread_elements()[0];
}
