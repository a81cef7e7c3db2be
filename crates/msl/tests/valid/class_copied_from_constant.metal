// A class object copied out of constant memory (a program-scope constant, a constant buffer): by
// copy-initialisation, assignment, a by-value argument and a return. clang's implicit copy
// members take a `__generic` reference, which a `__constant` object does not bind to; Metal's
// copy from every address space (MLX's reduce_init: `out[tid] = Op::init;`).
#include <metal_stdlib>
using namespace metal;
struct P { float a, b; };
constant P p = {1, 2};
float first(P x) { return x.a; }
P get() { return p; }
[[kernel]] void k(device P* out [[buffer(0)]], constant P& q [[buffer(1)]], uint t [[thread_position_in_grid]]) {
  P l = q;
  l = p;
  out[t] = p;
  out[t].a = first(q) + first(l);
  out[t + 1] = get();
}
