// Valid MSL: members of a class template defined out of line with thread reference parameters
// (the class's T is not deduced: the definition matches the declaration in the class), a member
// template defined out of line, and a namespace-qualified function template definition.
#include <metal_stdlib>
using namespace metal;
template <typename T> struct S {
  void g(thread T& y);
  template <typename U> void h(thread T& a, thread U& b);
  template <typename U> static U twice(const thread U& u) { return u + u; }
};
template <typename T> void S<T>::g(thread T& y) { y += T(1); }
template <typename T> template <typename U> void S<T>::h(thread T& a, thread U& b) { a += T(b); }
namespace ns {
template <typename T> void f(thread T& x);
}
template <typename T> void ns::f(thread T& x) { x *= T(2); }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float v = y[i];
  int n = 1;
  S<float> s;
  s.g(v);
  s.h(v, n);
  ns::f(v);
  y[i] = v + S<float>::twice(v);
}
