// Valid MSL: a function constant (MSL specification section 5.8), declared as Metal does: a
// program-scope constant whose value the pipeline gives. kernelgen's emulator runs it with the
// values a load gives (`kernelgen emu --function-constant 0=true`) and refuses to compile a
// read of one without a value. With FunctionConstants::Reject the check reports the declaration (line 7).
#include <metal_stdlib>
using namespace metal;
constant bool use_bias [[function_constant(0)]];
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = use_bias ? 1.0f : 0.0f;
}
