// An alias of a function pointer type as the type of a template's non-type parameter, given a
// function template's specialization (MLX's fft.h: `RadixFunc<T> radix_func`, given `radix4<T>`):
// clang gave the spelt-out pointer a `__generic` pointee, which no function's address matches.
#include <metal_stdlib>
using namespace metal;

template <typename T>
using Step = void (*)(thread vec<T, 2>*, thread vec<T, 2>*);

template <typename T>
void swap2(thread vec<T, 2>* x, thread vec<T, 2>* y) { vec<T, 2> w = *x; *x = *y; *y = w; }

template <typename T, Step<T> step>
void run(thread vec<T, 2>* x, thread vec<T, 2>* y) { step(x, y); }

[[kernel]] void k(device float2* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  float2 a = out[2 * t], b = out[2 * t + 1];
  run<float, swap2<float>>(&a, &b);
  out[2 * t] = a;
}
