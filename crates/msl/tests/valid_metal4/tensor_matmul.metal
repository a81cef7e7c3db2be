// Valid Metal 4 (checked at __METAL_VERSION__ 400): matmul2d over tensor handles bound as
// kernel arguments, as in the examples of Apple's MPPTensorOpsMatMul2d.h (with the slice<E...>
// spelling of the toolchain), a descriptor built in the template argument, a program-scope
// descriptor, and a cooperative destination with a bias added in registers.
#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

constexpr constant auto tile = matmul2d_descriptor(64, 32, 16, false, true, true, matmul2d_descriptor::mode::multiply_accumulate);

[[kernel]] void simple_matmul(tensor<device half, dextents<int32_t, 2>> A [[buffer(0)]],
                          tensor<device half, dextents<int32_t, 2>> B [[buffer(1)]],
                          tensor<device float, dextents<int32_t, 2>> C [[buffer(2)]],
                          constant uint& M [[buffer(3)]], constant uint& N [[buffer(4)]],
                          uint2 tgid [[threadgroup_position_in_grid]]) {
  constexpr auto desc = matmul2d_descriptor(64, 32, static_cast<int>(dynamic_extent));
  matmul2d<desc, execution_simdgroups<4>> op;
  if (tgid.x * 64 + 63 < M && tgid.y * 32 + 31 < N) {
    auto tA = A.slice<dynamic_extent, 64>(0, tgid.y * 64);
    auto tB = B.slice<32, dynamic_extent>(tgid.x * 32, 0);
    auto tC = C.slice<32, 64>(tgid.x * 32, tgid.y * 64);
    op.run(tA, tB, tC);
  } else {
    auto mA = A.slice(0, tgid.y * 64);
    auto mB = B.slice(tgid.x * 32, 0);
    auto mC = C.slice(tgid.x * 32, tgid.y * 64);
    op.run(mA, mB, mC);
  }
}

[[kernel]] void matmul_bias(tensor<device half, dextents<int32_t, 2>> A [[buffer(0)]],
                        tensor<device half, dextents<int32_t, 2>> B [[buffer(1)]],
                        tensor<device float, dextents<int32_t, 2>> C [[buffer(2)]],
                        tensor<device float, dextents<int32_t, 2>> bias [[buffer(3)]],
                        uint2 tgid [[threadgroup_position_in_grid]]) {
  matmul2d<matmul2d_descriptor(64, 32, static_cast<int>(dynamic_extent)), execution_simdgroups<4>> op;
  auto mA = A.slice(0, tgid.y * 64);
  auto mB = B.slice(tgid.x * 32, 0);
  auto mC = C.slice(tgid.x * 32, tgid.y * 64);
  auto cT = op.get_destination_cooperative_tensor<decltype(mA), decltype(mB), float>();
  for (uint16_t i = 0; i < cT.get_capacity(); ++i) {
    if (cT.is_valid_element(i)) {
      cT[i] = 0;
    }
  }
  op.run(mA, mB, cT);
  auto biasT = op.get_destination_cooperative_tensor<decltype(mA), decltype(mB), float>();
  biasT.load(bias);
  for (uint16_t i = 0; i < cT.get_capacity(); ++i) {
    if (cT.is_valid_element(i)) {
      auto idx = cT.get_multidimensional_index(i);
      cT[i] += biasT[i] * float(idx[0] + idx[1]);
    }
  }
  cT.store(mC);
  matmul2d<tile, execution_simdgroup> small;
  (void)small;
}
