// Invalid Metal 4: a tensor handle (a kernel argument bound by the host) over threadgroup
// memory; handles are device or constant. Cites: MSL specification chapter 4 and Apple's
// metal_tensor (a tensor_handle's element type is in the device or constant space).
// expect: 9: the elements of a tensor_handle are in the device or constant address space
#include <metal_stdlib>
#include <metal_tensor>
using namespace metal;

[[kernel]] void k(tensor<threadgroup half, dextents<int32_t, 2>> A, device half* y [[buffer(0)]]) {
  auto s = A.slice(0, 0);
  (void)s;
  y[0] = 0;
}
