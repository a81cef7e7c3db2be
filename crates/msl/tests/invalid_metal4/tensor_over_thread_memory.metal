// Invalid Metal 4: an inline tensor whose elements are device memory, made over thread
// memory (a local array). Cites: MSL specification chapter 4 (no conversion between address
// spaces; a tensor's element type carries its address space).
// expect: 12: no matching constructor
#include <metal_stdlib>
#include <metal_tensor>
using namespace metal;

[[kernel]] void k(device half* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  half local[16];
  local[i % 16] = out[i];
  auto t = tensor<device half, dextents<int32_t, 1>, tensor_inline>(local, dextents<int32_t, 1>(16));
  (void)t;
}
