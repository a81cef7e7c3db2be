// A function template specialization given as a template argument, whose body has an error that
// clang's OpenCL model raises and Metal does not (MLX's fft.h passes `radix3<T>` as a
// `RadixFunc<T>`; radix.h's `x[0] - 0.5 * a_1` is a double literal and a float vector to clang
// in a template, a float to Metal). clang marks the specialization invalid where it first
// instantiated it (in `fft<float, false>`), and refuses it as an argument on that line again (in
// `fft<float, true>`), with no reason of its own.
#include <metal_stdlib>
using namespace metal;

template <typename T>
using Step = void (*)(thread vec<T, 2>*);

template <typename T>
void halve(thread vec<T, 2>* x) { *x = 0.5 * *x; }

template <typename T, Step<T> step>
void run(thread vec<T, 2>* x) { step(x); }

template <typename T, bool inverse>
void fft(thread vec<T, 2>* x) { run<T, halve<T>>(x); }

[[kernel]] void k(device float2* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  float2 a = out[t];
  fft<float, false>(&a);
  fft<float, true>(&a);
  out[t] = a;
}
