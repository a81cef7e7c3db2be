// Valid Metal 4 (checked at __METAL_VERSION__ 400): inline tensors over device and
// threadgroup memory (with strides, and by deduction), a one-SIMD-group matmul2d whose inputs
// and destination are cooperative tensors filled in registers (MLX's NAX pattern), and a
// cooperative tensor in a function template.
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;

template <typename CT>
void zero(thread CT& ct) {
  for (ushort i = 0; i < ct.get_capacity(); ++i) {
    ct[i] = 0;
  }
}

[[kernel]] void inline_tiles(device half* a [[buffer(0)]], device float* c [[buffer(1)]],
                         constant int& k [[buffer(2)]], threadgroup half* stage [[threadgroup(0)]],
                         uint tid [[thread_index_in_threadgroup]]) {
  auto tA = tensor<device half, dextents<int32_t, 2>, tensor_inline>(a, dextents<int32_t, 2>(k, 64));
  tensor<threadgroup half, dextents<int32_t, 2>, tensor_inline> tB(stage, dextents<int32_t, 2>(32, k), array<int32_t, 2>({1, k}));
  auto tC = tensor(c, dextents<int32_t, 2>(32, 64));
  auto fixed = tensor<threadgroup half, dextents<int32_t, 2>, tensor_inline>(stage, extents<int32_t, 16, 16>());
  constexpr auto desc = mpp::tensor_ops::matmul2d_descriptor(64, 32, static_cast<int>(dynamic_extent), false, false, false,
                                                              mpp::tensor_ops::matmul2d_descriptor::mode::multiply_accumulate);
  mpp::tensor_ops::matmul2d<desc, execution_simdgroups<4>> op;
  auto acc = op.get_destination_cooperative_tensor<decltype(tA), decltype(tB), float>();
  zero(acc);
  op.run(tA, tB, acc);
  acc.store(tC);
  (void)fixed;
  (void)tid;
}

[[kernel]] void register_matmul(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                            ushort lane [[thread_index_in_simdgroup]]) {
  constexpr auto desc = mpp::tensor_ops::matmul2d_descriptor(16, 32, 16, false, true, true,
                                                              mpp::tensor_ops::matmul2d_descriptor::mode::multiply_accumulate);
  mpp::tensor_ops::matmul2d<desc, execution_simdgroup> gemm_op;
  auto ct_a = gemm_op.get_left_input_cooperative_tensor<half, half, float>();
  auto ct_b = gemm_op.get_right_input_cooperative_tensor<half, half, float>();
  auto ct_c = gemm_op.get_destination_cooperative_tensor<remove_addrspace_t<decltype(ct_a)>,
                                                         remove_addrspace_t<decltype(ct_b)>, float>();
  for (short i = 0; i < 8; i++) {
    ct_a[i] = half(x[lane * 8 + i]);
    ct_b[i] = half(x[256 + lane * 8 + i]);
    ct_b[8 + i] = half(x[512 + lane * 8 + i]);
    ct_c[i] = 0;
    ct_c[8 + i] = 0;
  }
  gemm_op.run(ct_a, ct_b, ct_c);
  for (short i = 0; i < 16; i++) {
    y[lane * 16 + i] = ct_c[i];
  }
}
