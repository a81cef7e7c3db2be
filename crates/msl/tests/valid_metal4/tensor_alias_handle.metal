// Valid Metal 4 (checked at __METAL_VERSION__ 400): tensor handles named through an alias
// (`using TA = tensor<device half, ...>`) are kernel arguments bound to buffers like the spelled
// type, and a handle (a thread object whose elements are device memory) binds to a deduced
// `thread T&` parameter.
#include <metal_stdlib>
#include <metal_tensor>
using namespace metal;

using TA = tensor<device half, dextents<int32_t, 2>>;
template <class T> using const_tensor = tensor<constant T, dextents<int32_t, 2>>;

template <class T> int rank_of(thread T& t) { return int(t.get_rank()); }

[[kernel]] void k(TA A [[buffer(0)]], const_tensor<float> B [[buffer(1)]], device int* y [[buffer(2)]]) {
  y[0] = rank_of(A) + rank_of(B);
}
