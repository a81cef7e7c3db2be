// Valid MSL: is_function_constant_defined (MSL specification section 5.8.1) in a kernel and in a
// program-scope constant's initializer.
#include <metal_stdlib>
using namespace metal;
constant float scale [[function_constant(0)]];
constant bool has_scale = is_function_constant_defined(scale);
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (is_function_constant_defined(scale)) {
    y[i] *= scale;
  }
  y[i] += has_scale ? 1.0f : 0.0f;
}
