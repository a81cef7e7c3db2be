// Invalid MSL (a constexpr variable initialized by a call of a function that is not constexpr):
// the check lets through a constexpr initializer clang 14 cannot evaluate and gives no reason
// for (a vector element access); one with a reason, as here, stays refused. Any C++ compiler
// refuses it too: a control of that filter. Cites: MSL specification section 1.5 (Metal is
// C++14: a constexpr variable needs a constant expression).
// expect: 11: constexpr variable 'two' must be initialized by a constant expression
#include <metal_stdlib>
using namespace metal;
struct P { float a, b; };
float scale() { return 2; }
constexpr constant P two = P{scale(), 0};
[[kernel]] void k(device float* out [[buffer(0)]], uint t [[thread_position_in_grid]]) { out[t] = two.a; }
