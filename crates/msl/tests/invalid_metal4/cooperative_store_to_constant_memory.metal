// Invalid Metal 4: a matmul2d cooperative tensor loaded from and stored to constant memory, and
// stored to a rank-3 thread tensor. Cites: Apple's MPPTensorOpsMatMul2dImpl.h (the load and
// store of a matmul2d cooperative tensor: device or threadgroup tensors, else "Unsupported
// address space"; "Tensor must be rank 1 or 2").
// expect: 19: Unsupported address space
// expect: 20: Unsupported address space
// expect: 23: Unsupported address space
// expect: 23: Tensor must be rank 1 or 2
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(tensor<device half, dextents<int32_t, 2>> A [[buffer(0)]], tensor<device half, dextents<int32_t, 2>> B [[buffer(1)]], tensor<constant float, dextents<int32_t, 2>> C [[buffer(2)]], tensor<constant float, dextents<int32_t, 1>> bias [[buffer(3)]]) {
  matmul2d<matmul2d_descriptor(64, 32), execution_simdgroups<4>> op;
  auto cT = op.get_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  op.run(A, B, cT);
  auto bT = op.get_destination_cooperative_tensor<decltype(A), decltype(B), float>();
  bT.load(bias);
  cT.store(C);
  float local[4];
  auto t3 = tensor<float, dextents<int32_t, 3>, tensor_inline>(local, dextents<int32_t, 3>(1, 2, 2));
  cT.store(t3);
}
