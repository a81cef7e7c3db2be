// kgemu_shim.h: kernelgen's stand-in for <metal_stdlib>, compiled by g++ as C++17.
//
// Everything a Metal compute kernel sees (scalar and vector types, half and bfloat,
// math, SIMD-group collectives, barriers, atomics, address-space keywords) is defined
// here; the fiber scheduler that gives collectives and barriers their meaning lives in
// the Rust runtime (crates/emu/src/runtime/) and is reached through the `kgemu::Rt` table
// that `kgemu_init` receives when the kernel object is loaded.
//
// Rules (documented in crates/emu/src/lib.rs):
// - never include <cmath>/<math.h>/<stdlib.h>: they put abs, exp, ... into the global
//   namespace and clash with `using namespace metal`; math goes through builtins;
// - half and bfloat are 16-bit structs that compute in float and round back (RNE);
// - the keyword macros (device, constant, thread, threadgroup, kernel) come last, so
//   nothing in this file depends on them.
#pragma once
#ifndef KGEMU_SHIM_H
#define KGEMU_SHIM_H

#include <stdint.h>
#include <stddef.h>
#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#endif

#define KGEMU_ABI_VERSION 7u
#define KG_INLINE inline __attribute__((always_inline))

namespace kgemu {
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <class A, class B> struct is_same { static constexpr bool value = false; };
template <class A> struct is_same<A, A> { static constexpr bool value = true; };
template <class T> T&& declval();
struct bits_tag {};

// The conversions are constexpr (MLX's complex.h static_asserts half arithmetic): in a
// constant evaluation they take the portable path, at run time F16C where present.
#define KG_CX constexpr KG_INLINE
#define KG_CONSTEVAL() __builtin_is_constant_evaluated()
KG_CX float bits_to_float(uint32_t b) { return __builtin_bit_cast(float, b); }
KG_CX uint32_t float_to_bits(float f) { return __builtin_bit_cast(uint32_t, f); }

// IEEE binary16 <-> binary32, round to nearest even; NaN keeps its sign and top payload
// bits and becomes quiet (both directions) (the same results as the Rust `half` crate).
KG_CX float f16_to_f32(uint16_t h) {
#if defined(__F16C__)
  if (!KG_CONSTEVAL()) {
    typedef short v8hi __attribute__((vector_size(16)));
    v8hi v = {(short)h, 0, 0, 0, 0, 0, 0, 0};
    return __builtin_ia32_vcvtph2ps(v)[0];
  }
#endif
  {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1fu) return bits_to_float(sign | 0x7f800000u | (man ? 0x00400000u : 0u) | (man << 13));
  if (exp == 0) {
    float f = (float)man * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
  }
}

KG_CX uint16_t f32_to_f16(float f) {
#if defined(__F16C__)
  if (!KG_CONSTEVAL()) {
    typedef float v4sf __attribute__((vector_size(16)));
    v4sf v = {f, 0.0f, 0.0f, 0.0f};
    return (uint16_t)__builtin_ia32_vcvtps2ph(v, 0)[0];
  }
#endif
  {
  uint32_t x = float_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, exp = x & 0x7f800000u, man = x & 0x007fffffu;
  if (exp == 0x7f800000u) {
    uint32_t nan_bit = man == 0 ? 0u : 0x0200u;
    return (uint16_t)(sign | 0x7c00u | nan_bit | (man >> 13));
  }
  int half_exp = (int)(exp >> 23) - 127 + 15;
  if (half_exp >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (half_exp <= 0) {
    if (14 - half_exp > 24) return (uint16_t)sign;
    man |= 0x00800000u;
    uint32_t half_man = man >> (14 - half_exp);
    uint32_t round_bit = 1u << (13 - half_exp);
    if ((man & round_bit) != 0 && (man & (3u * round_bit - 1u)) != 0) half_man += 1;
    return (uint16_t)(sign | half_man);
  }
  uint32_t he = (uint32_t)half_exp << 10, half_man = man >> 13, round_bit = 0x1000u;
  if ((man & round_bit) != 0 && (man & (3u * round_bit - 1u)) != 0)
    return (uint16_t)((sign | he | half_man) + 1u);
  return (uint16_t)(sign | he | half_man);
  }
}

// 1.0f, hidden from the compiler by an empty asm (not constexpr: asm is not, before C++20).
KG_INLINE float opaque_one() {
  float one = 1.0f;
  __asm__("" : "+x"(one));
  return one;
}
KG_CX float bf16_to_f32(uint16_t b) {
  // A NaN becomes quiet (as the Rust `half` crate does); everything else is exact.
#if defined(__SSE2__)
  if (!KG_CONSTEVAL()) {
    // One multiplication by 1 does it (a bfloat load is in every bfloat kernel's inner loop):
    // SSE quiets a signalling NaN operand exactly so (f32 bit 22, bfloat bit 6, set; sign and
    // payload kept) and x * 1 is x otherwise, denormals included (MXCSR's DAZ is never set).
    // The 1 is opaque: the compiler would otherwise fold the multiplication away.
    return bits_to_float((uint32_t)b << 16) * opaque_one();
  }
#endif
  uint32_t q = (b & 0x7fffu) > 0x7f80u ? 0x0040u : 0u;
  return bits_to_float((uint32_t)(b | q) << 16);
}
KG_CX uint16_t f32_to_bf16(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
}  // namespace kgemu

namespace metal {
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

// ---------------------------------------------------------------- type traits
// The subset of <metal_type_traits> MLX's headers use (complex.h, utils.h, steel/).
template <class T, T v> struct integral_constant {
  static constexpr T value = v;
  typedef T value_type;
  typedef integral_constant type;
  constexpr operator value_type() const { return value; }
  constexpr value_type operator()() const { return value; }
};
template <bool B> using bool_constant = integral_constant<bool, B>;
typedef bool_constant<true> true_type;
typedef bool_constant<false> false_type;
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <bool B, class T, class F> struct conditional { typedef T type; };
template <class T, class F> struct conditional<false, T, F> { typedef F type; };
template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> constexpr bool is_same_v = is_same<A, B>::value;
template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct remove_volatile { typedef T type; };
template <class T> struct remove_volatile<volatile T> { typedef T type; };
template <class T> struct remove_cv { typedef typename remove_volatile<typename remove_const<T>::type>::type type; };
template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T&> { typedef T type; };
template <class T> struct remove_reference<T&&> { typedef T type; };
template <class T> struct remove_pointer { typedef T type; };
template <class T> struct remove_pointer<T*> { typedef T type; };
template <class T> struct remove_pointer<T* const> { typedef T type; };
// Address spaces are erased: removing one is the identity.
template <class T> struct remove_addrspace { typedef T type; };
template <class T> using remove_const_t = typename remove_const<T>::type;
template <class T> using remove_volatile_t = typename remove_volatile<T>::type;
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> using remove_reference_t = typename remove_reference<T>::type;
template <class T> using remove_pointer_t = typename remove_pointer<T>::type;
template <class T> using remove_addrspace_t = typename remove_addrspace<T>::type;
template <class T> struct is_pointer : false_type {};
template <class T> struct is_pointer<T*> : true_type {};
template <class T> struct is_pointer<T* const> : true_type {};
template <class T> constexpr bool is_pointer_v = is_pointer<T>::value;
template <class T> struct is_const : false_type {};
template <class T> struct is_const<const T> : true_type {};
template <class T> constexpr bool is_const_v = is_const<T>::value;
template <class T> struct is_void : is_same<typename remove_cv<T>::type, void> {};
template <class T> constexpr bool is_void_v = is_void<T>::value;
template <class T> T&& kg_declval();
template <class From, class To> struct is_convertible {
 private:
  template <class U> static void take(U);
  template <class F, class T, class = decltype(take<T>(kg_declval<F>()))> static true_type test(int);
  template <class F, class T> static false_type test(...);
 public:
  static constexpr bool value = is_void<From>::value && is_void<To>::value ? true : decltype(test<From, To>(0))::value;
};
template <class From, class To> constexpr bool is_convertible_v = is_convertible<From, To>::value;
template <class T> struct kg_is_integral_base : false_type {};
#define KG_INTEGRAL(T) template <> struct kg_is_integral_base<T> : true_type {};
KG_INTEGRAL(bool) KG_INTEGRAL(char) KG_INTEGRAL(signed char) KG_INTEGRAL(unsigned char)
KG_INTEGRAL(short) KG_INTEGRAL(unsigned short) KG_INTEGRAL(int) KG_INTEGRAL(unsigned int)
KG_INTEGRAL(long) KG_INTEGRAL(unsigned long) KG_INTEGRAL(long long) KG_INTEGRAL(unsigned long long)
#undef KG_INTEGRAL
template <class T> struct is_integral : kg_is_integral_base<typename remove_cv<T>::type> {};
template <class T> constexpr bool is_integral_v = is_integral<T>::value;
struct half;
struct bfloat;
template <class T> struct kg_is_float_base : false_type {};
template <> struct kg_is_float_base<float> : true_type {};
template <> struct kg_is_float_base<half> : true_type {};
template <> struct kg_is_float_base<bfloat> : true_type {};
template <class T> struct is_floating_point : kg_is_float_base<typename remove_cv<T>::type> {};
template <class T> constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T> struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <class T> constexpr bool is_arithmetic_v = is_arithmetic<T>::value;
template <class T> struct is_scalar : is_arithmetic<T> {};
template <class T> constexpr bool is_scalar_v = is_scalar<T>::value;
template <class T, bool I = is_integral<T>::value> struct kg_signed : bool_constant<is_floating_point<T>::value> {};
template <class T> struct kg_signed<T, true> : bool_constant<(T(-1) < T(0))> {};
template <class T> struct is_signed : kg_signed<typename remove_cv<T>::type> {};
template <class T> constexpr bool is_signed_v = is_signed<T>::value;
template <class T> struct is_unsigned : bool_constant<is_integral<T>::value && !is_signed<T>::value> {};
template <class T> constexpr bool is_unsigned_v = is_unsigned<T>::value;
template <class T> struct make_unsigned;
template <> struct make_unsigned<char> { typedef unsigned char type; };
template <> struct make_unsigned<signed char> { typedef unsigned char type; };
template <> struct make_unsigned<unsigned char> { typedef unsigned char type; };
template <> struct make_unsigned<short> { typedef unsigned short type; };
template <> struct make_unsigned<unsigned short> { typedef unsigned short type; };
template <> struct make_unsigned<int> { typedef unsigned int type; };
template <> struct make_unsigned<unsigned int> { typedef unsigned int type; };
template <> struct make_unsigned<long> { typedef unsigned long type; };
template <> struct make_unsigned<unsigned long> { typedef unsigned long type; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
template <class... B> struct _disjunction : false_type {};
template <class B0, class... B> struct _disjunction<B0, B...> : bool_constant<B0::value || _disjunction<B...>::value> {};
template <class... B> struct _conjunction : true_type {};
template <class B0, class... B> struct _conjunction<B0, B...> : bool_constant<B0::value && _conjunction<B...>::value> {};
template <class... B> using disjunction = _disjunction<B...>;
template <class... B> using conjunction = _conjunction<B...>;
template <class T> struct make_signed;
template <> struct make_signed<char> { typedef signed char type; };
template <> struct make_signed<signed char> { typedef signed char type; };
template <> struct make_signed<unsigned char> { typedef signed char type; };
template <> struct make_signed<short> { typedef short type; };
template <> struct make_signed<unsigned short> { typedef short type; };
template <> struct make_signed<int> { typedef int type; };
template <> struct make_signed<unsigned int> { typedef int type; };
template <> struct make_signed<long> { typedef long type; };
template <> struct make_signed<unsigned long> { typedef long type; };
template <class T> using make_signed_t = typename make_signed<T>::type;

// ---------------------------------------------------------------- half and bfloat
struct bfloat;
struct half {
  uint16_t bits_;
  half() = default;
  KG_CX half(float f) : bits_(kgemu::f32_to_f16(f)) {}
  KG_CX half(double d) : bits_(kgemu::f32_to_f16((float)d)) {}
  KG_CX half(int i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(uint i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(long i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(ulong i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(short i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(ushort i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(char i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(signed char i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(uchar i) : bits_(kgemu::f32_to_f16((float)i)) {}
  KG_CX half(bool b) : bits_(b ? 0x3c00u : 0u) {}
  explicit constexpr half(bfloat b);
  KG_CX operator float() const { return kgemu::f16_to_f32(bits_); }
  constexpr half(kgemu::bits_tag, uint16_t b) : bits_(b) {}
  static constexpr half from_bits(uint16_t b) { return half(kgemu::bits_tag{}, b); }
};

struct bfloat {
  uint16_t bits_;
  bfloat() = default;
  KG_CX bfloat(float f) : bits_(kgemu::f32_to_bf16(f)) {}
  KG_CX bfloat(double d) : bits_(kgemu::f32_to_bf16((float)d)) {}
  KG_CX bfloat(int i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(uint i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(long i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(ulong i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(short i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(ushort i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(char i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(signed char i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(uchar i) : bits_(kgemu::f32_to_bf16((float)i)) {}
  KG_CX bfloat(bool b) : bits_(b ? 0x3f80u : 0u) {}
  explicit constexpr bfloat(half h);
  KG_CX operator float() const { return kgemu::bf16_to_f32(bits_); }
  constexpr bfloat(kgemu::bits_tag, uint16_t b) : bits_(b) {}
  static constexpr bfloat from_bits(uint16_t b) { return bfloat(kgemu::bits_tag{}, b); }
};
KG_CX half::half(bfloat b) : bits_(kgemu::f32_to_f16(float(b))) {}
KG_CX bfloat::bfloat(half h) : bits_(kgemu::f32_to_bf16(float(h))) {}

typedef half float16_t;
typedef bfloat bfloat16_t;

// Operator rules: T op T -> T (rounded); T op float -> float; float op T -> float;
// T op integer -> T (the integer converted to T first); T op double -> float;
// comparisons in float.
#define KG_H_ARITH(T, op)                                                              \
  KG_CX T operator op(T a, T b) { return T(float(a) op float(b)); }                \
  KG_CX float operator op(T a, float b) { return float(a) op b; }                  \
  KG_CX float operator op(float a, T b) { return a op float(b); }                  \
  KG_CX float operator op(T a, double b) { return float(a) op (float)b; }          \
  KG_CX float operator op(double a, T b) { return (float)a op float(b); }          \
  KG_CX T operator op(T a, int b) { return a op T(b); }                            \
  KG_CX T operator op(int a, T b) { return T(a) op b; }                            \
  KG_CX T operator op(T a, uint b) { return a op T(b); }                           \
  KG_CX T operator op(uint a, T b) { return T(a) op b; }                           \
  KG_CX T operator op(T a, long b) { return a op T(b); }                           \
  KG_CX T operator op(long a, T b) { return T(a) op b; }                           \
  KG_CX T operator op(T a, ulong b) { return a op T(b); }                          \
  KG_CX T operator op(ulong a, T b) { return T(a) op b; }                          \
  template <class X> KG_CX T& operator op##=(T & a, X b) { a = T(a op b); return a; }

#define KG_H_CMP(T, op)                                                                \
  KG_CX bool operator op(T a, T b) { return float(a) op float(b); }                \
  KG_CX bool operator op(T a, float b) { return float(a) op b; }                   \
  KG_CX bool operator op(float a, T b) { return a op float(b); }                   \
  KG_CX bool operator op(T a, double b) { return float(a) op (float)b; }           \
  KG_CX bool operator op(double a, T b) { return (float)a op float(b); }           \
  KG_CX bool operator op(T a, int b) { return float(a) op float(T(b)); }           \
  KG_CX bool operator op(int a, T b) { return float(T(a)) op float(b); }           \
  KG_CX bool operator op(T a, uint b) { return float(a) op float(T(b)); }          \
  KG_CX bool operator op(uint a, T b) { return float(T(a)) op float(b); }          \
  KG_CX bool operator op(T a, long b) { return float(a) op float(T(b)); }          \
  KG_CX bool operator op(long a, T b) { return float(T(a)) op float(b); }          \
  KG_CX bool operator op(T a, ulong b) { return float(a) op float(T(b)); }         \
  KG_CX bool operator op(ulong a, T b) { return float(T(a)) op float(b); }

#define KG_H_TYPE(T)                                                                   \
  KG_H_ARITH(T, +) KG_H_ARITH(T, -) KG_H_ARITH(T, *) KG_H_ARITH(T, /)                  \
  KG_H_CMP(T, ==) KG_H_CMP(T, !=) KG_H_CMP(T, <) KG_H_CMP(T, >) KG_H_CMP(T, <=)        \
  KG_H_CMP(T, >=)                                                                      \
  constexpr T operator-(T a) { return T::from_bits((uint16_t)(a.bits_ ^ 0x8000u)); }   \
  KG_CX T operator+(T a) { return a; }                                             \
  KG_CX T& operator++(T& a) { a = a + T(1); return a; }                            \
  KG_CX T& operator--(T& a) { a = a - T(1); return a; }                            \
  KG_CX T operator++(T& a, int) { T o = a; a = a + T(1); return o; }               \
  KG_CX T operator--(T& a, int) { T o = a; a = a - T(1); return o; }               \
  KG_CX bool operator!(T a) { return !float(a); }

KG_H_TYPE(half)
KG_H_TYPE(bfloat)
#undef KG_H_TYPE
#undef KG_H_CMP
#undef KG_H_ARITH

// Mixed half/bfloat arithmetic computes in float.
#define KG_HB(op)                                                                      \
  KG_CX float operator op(half a, bfloat b) { return float(a) op float(b); }       \
  KG_CX float operator op(bfloat a, half b) { return float(a) op float(b); }
KG_HB(+) KG_HB(-) KG_HB(*) KG_HB(/)
#undef KG_HB

// ---------------------------------------------------------------- vectors
template <class T, int N> struct vec;
template <class T, int N> struct vec_storage;
template <class T> struct alignas(sizeof(T) * 2) vec_storage<T, 2> {
  union { struct { T x, y; }; T c_[2]; };
};
template <class T> struct alignas(sizeof(T) * 4) vec_storage<T, 3> {
  union { struct { T x, y, z; }; T c_[4]; };
};
template <class T> struct alignas(sizeof(T) * 4) vec_storage<T, 4> {
  union { struct { T x, y, z, w; }; T c_[4]; };
};

template <class X> struct vcount { static constexpr int value = 1; };
template <class U, int M> struct vcount<vec<U, M>> { static constexpr int value = M; };
template <class... A> struct vsum { static constexpr int value = 0; };
template <class A0, class... A> struct vsum<A0, A...> {
  static constexpr int value = vcount<A0>::value + vsum<A...>::value;
};
template <class X> struct is_vec { static constexpr bool value = false; };
template <class U, int M> struct is_vec<vec<U, M>> { static constexpr bool value = true; };

template <class T, int N, int... I> struct swizzle_ref;

template <class T, int N> struct vec : vec_storage<T, N> {
  using vec_storage<T, N>::c_;
  typedef T value_type;
  vec() = default;
  KG_INLINE vec(T s) { for (int i = 0; i < N; ++i) c_[i] = s; }
  template <class U, class = typename kgemu::enable_if<!kgemu::is_same<U, T>::value>::type>
  KG_INLINE explicit vec(const vec<U, N>& o) {
    for (int i = 0; i < N; ++i) c_[i] = T(o.c_[i]);
  }
  template <class A0, class A1, class... As,
            class = typename kgemu::enable_if<vsum<A0, A1, As...>::value == N>::type>
  KG_INLINE vec(const A0& a0, const A1& a1, const As&... as) {
    int k = 0;
    put(k, a0);
    put(k, a1);
    int dummy[] = {0, (put(k, as), 0)...};
    (void)dummy;
  }
  template <class U> KG_INLINE void put(int& k, const U& s) { c_[k++] = T(s); }
  template <class U, int M> KG_INLINE void put(int& k, const vec<U, M>& v) {
    for (int i = 0; i < M; ++i) c_[k++] = T(v.c_[i]);
  }
  KG_INLINE T& operator[](int i) { return c_[i]; }
  KG_INLINE const T& operator[](int i) const { return c_[i]; }
  KG_INLINE T& operator[](uint i) { return c_[i]; }
  KG_INLINE const T& operator[](uint i) const { return c_[i]; }
  KG_INLINE T& operator[](ulong i) { return c_[i]; }
  KG_INLINE const T& operator[](ulong i) const { return c_[i]; }

  // Swizzles: the source rewrite turns `v.xy` into `v.kg_swz<0, 1>()` and the write
  // form `v.xy = e` into `v.kg_swz_ref<0, 1>() = e`.
  template <int... I> KG_INLINE vec<T, sizeof...(I)> kg_swz() const {
    static_assert(((I < N) && ...), "swizzle component out of range for this vector");
    return vec<T, sizeof...(I)>(c_[I]...);
  }
  template <int... I> KG_INLINE swizzle_ref<T, N, I...> kg_swz_ref() {
    static_assert(((I < N) && ...), "swizzle component out of range for this vector");
    return swizzle_ref<T, N, I...>{*this};
  }

#define KG_VBIN(op)                                                                    \
  friend KG_INLINE vec operator op(const vec& a, const vec& b) {                       \
    vec r; for (int i = 0; i < N; ++i) r.c_[i] = a.c_[i] op b.c_[i]; return r; }       \
  friend KG_INLINE vec operator op(const vec& a, T b) {                                \
    vec r; for (int i = 0; i < N; ++i) r.c_[i] = a.c_[i] op b; return r; }             \
  friend KG_INLINE vec operator op(T a, const vec& b) {                                \
    vec r; for (int i = 0; i < N; ++i) r.c_[i] = a op b.c_[i]; return r; }             \
  KG_INLINE vec& operator op##=(const vec& b) {                                        \
    for (int i = 0; i < N; ++i) c_[i] = c_[i] op b.c_[i]; return *this; }              \
  KG_INLINE vec& operator op##=(T b) {                                                 \
    for (int i = 0; i < N; ++i) c_[i] = c_[i] op b; return *this; }
  KG_VBIN(+) KG_VBIN(-) KG_VBIN(*) KG_VBIN(/) KG_VBIN(%) KG_VBIN(&) KG_VBIN(|)
  KG_VBIN(^) KG_VBIN(<<) KG_VBIN(>>)
#undef KG_VBIN
#define KG_VCMP(op)                                                                    \
  friend KG_INLINE vec<bool, N> operator op(const vec& a, const vec& b) {              \
    vec<bool, N> r; for (int i = 0; i < N; ++i) r.c_[i] = a.c_[i] op b.c_[i]; return r; } \
  friend KG_INLINE vec<bool, N> operator op(const vec& a, T b) {                       \
    vec<bool, N> r; for (int i = 0; i < N; ++i) r.c_[i] = a.c_[i] op b; return r; }    \
  friend KG_INLINE vec<bool, N> operator op(T a, const vec& b) {                       \
    vec<bool, N> r; for (int i = 0; i < N; ++i) r.c_[i] = a op b.c_[i]; return r; }
  KG_VCMP(==) KG_VCMP(!=) KG_VCMP(<) KG_VCMP(>) KG_VCMP(<=) KG_VCMP(>=) KG_VCMP(&&)
  KG_VCMP(||)
#undef KG_VCMP
  friend KG_INLINE vec operator-(const vec& a) {
    vec r; for (int i = 0; i < N; ++i) r.c_[i] = -a.c_[i]; return r; }
  friend KG_INLINE vec operator+(const vec& a) { return a; }
  friend KG_INLINE vec operator~(const vec& a) {
    vec r; for (int i = 0; i < N; ++i) r.c_[i] = ~a.c_[i]; return r; }
  friend KG_INLINE vec<bool, N> operator!(const vec& a) {
    vec<bool, N> r; for (int i = 0; i < N; ++i) r.c_[i] = !a.c_[i]; return r; }
};

template <class T, int N, int... I> struct swizzle_ref {
  vec<T, N>& v;
  typedef vec<T, sizeof...(I)> V;
  KG_INLINE operator V() const { return V(v.c_[I]...); }
  KG_INLINE swizzle_ref& operator=(const V& o) {
    int k = 0;
    int dummy[] = {(v.c_[I] = o.c_[k++], 0)...};
    (void)dummy;
    return *this;
  }
#define KG_SWOP(op)                                                                    \
  KG_INLINE swizzle_ref& operator op##=(const V& o) { return *this = V(*this) op o; }  \
  KG_INLINE swizzle_ref& operator op##=(T o) { return *this = V(*this) op o; }
  KG_SWOP(+) KG_SWOP(-) KG_SWOP(*) KG_SWOP(/) KG_SWOP(%) KG_SWOP(&) KG_SWOP(|)
  KG_SWOP(^) KG_SWOP(<<) KG_SWOP(>>)
#undef KG_SWOP
};

#define KG_VEC_NAMES(T, name)                                                          \
  typedef vec<T, 2> name##2;                                                           \
  typedef vec<T, 3> name##3;                                                           \
  typedef vec<T, 4> name##4;
KG_VEC_NAMES(float, float)
KG_VEC_NAMES(half, half)
KG_VEC_NAMES(bfloat, bfloat)
KG_VEC_NAMES(int, int)
KG_VEC_NAMES(uint, uint)
KG_VEC_NAMES(short, short)
KG_VEC_NAMES(ushort, ushort)
KG_VEC_NAMES(char, char)
KG_VEC_NAMES(uchar, uchar)
KG_VEC_NAMES(long, long)
KG_VEC_NAMES(ulong, ulong)
KG_VEC_NAMES(bool, bool)
#undef KG_VEC_NAMES

// Packed vectors (packed_float3, ...): N elements without padding, aligned as one, converted to
// and from the vector of the same type (candle's mlx_gemm.metal declares a packed_int3 parameter).
template <class T, int N> struct packed_storage;
template <class T> struct packed_storage<T, 2> { union { struct { T x, y; }; T c_[2]; }; };
template <class T> struct packed_storage<T, 3> { union { struct { T x, y, z; }; T c_[3]; }; };
template <class T> struct packed_storage<T, 4> { union { struct { T x, y, z, w; }; T c_[4]; }; };
template <class T, int N> struct packed_vec : packed_storage<T, N> {
  using packed_storage<T, N>::c_;
  packed_vec() = default;
  KG_INLINE packed_vec(const vec<T, N>& v) { for (int i = 0; i < N; ++i) c_[i] = v[i]; }
  KG_INLINE operator vec<T, N>() const { vec<T, N> v; for (int i = 0; i < N; ++i) v[i] = c_[i]; return v; }
  KG_INLINE T& operator[](int i) { return c_[i]; }
  KG_INLINE const T& operator[](int i) const { return c_[i]; }
};
#define KG_PACKED_NAMES(T, name)                                                       \
  typedef packed_vec<T, 2> packed_##name##2;                                           \
  typedef packed_vec<T, 3> packed_##name##3;                                           \
  typedef packed_vec<T, 4> packed_##name##4;
KG_PACKED_NAMES(float, float)
KG_PACKED_NAMES(half, half)
KG_PACKED_NAMES(bfloat, bfloat)
KG_PACKED_NAMES(int, int)
KG_PACKED_NAMES(uint, uint)
KG_PACKED_NAMES(short, short)
KG_PACKED_NAMES(ushort, ushort)
KG_PACKED_NAMES(char, char)
KG_PACKED_NAMES(uchar, uchar)
#undef KG_PACKED_NAMES

// ---------------------------------------------------------------- ?: (conditional.rs)
// `c ? a : b` is rewritten to `c ? (cond_to<decltype((b))>{}, (a)) : (cond_to<decltype((a))>{}, (b))`:
// each operand converted to Metal's common type where the usual arithmetic conversions give
// another type than C++'s conditional (which finds `half` vs `float` ambiguous), else unchanged.
}  // namespace metal
namespace kgemu {
template <class T> struct cond_low { static constexpr bool value = false; };  // half, bfloat
template <> struct cond_low<metal::half> { static constexpr bool value = true; };
template <> struct cond_low<metal::bfloat> { static constexpr bool value = true; };
template <class T> struct cond_wide { static constexpr bool value = false; };  // float, double
template <> struct cond_wide<float> { static constexpr bool value = true; };
template <> struct cond_wide<double> { static constexpr bool value = true; };
// void: C++'s own rule gives Metal's type.
template <class A, class B, class = void> struct cond_common { typedef void type; };
// half or bfloat with float: float; with an integer: the half or bfloat
template <class L, class B>
struct cond_common<L, B, typename enable_if<cond_low<L>::value && cond_wide<B>::value>::type> { typedef float type; };
template <class A, class L>
struct cond_common<A, L, typename enable_if<cond_low<L>::value && cond_wide<A>::value>::type> { typedef float type; };
template <class L, class B>
struct cond_common<L, B, typename enable_if<cond_low<L>::value && metal::is_integral<B>::value>::type> { typedef L type; };
template <class A, class L>
struct cond_common<A, L, typename enable_if<cond_low<L>::value && metal::is_integral<A>::value>::type> { typedef L type; };
// a vector with a scalar of another type: the vector (the scalar converts to its element type)
template <class T, int N, class S>
struct cond_common<metal::vec<T, N>, S, typename enable_if<(metal::is_arithmetic<S>::value || is_same<S, double>::value) && !is_same<S, T>::value>::type> {
  typedef metal::vec<T, N> type;
};
template <class S, class T, int N>
struct cond_common<S, metal::vec<T, N>, typename enable_if<(metal::is_arithmetic<S>::value || is_same<S, double>::value) && !is_same<S, T>::value>::type> {
  typedef metal::vec<T, N> type;
};
template <class T> using cond_decay = typename metal::remove_cv<typename metal::remove_reference<T>::type>::type;
template <class T> struct cond_lvalue { static constexpr bool value = false; };
template <class T> struct cond_lvalue<T&> { static constexpr bool value = true; };
template <class Other> struct cond_to {};
template <class Other, class X> KG_INLINE constexpr decltype(auto) operator,(cond_to<Other>, X&& x) {
  typedef cond_decay<X> A;
  typedef typename cond_common<A, cond_decay<Other>>::type R;
  if constexpr (!is_same<R, void>::value && !is_same<R, A>::value) {
    return R(static_cast<X&&>(x));
  } else if constexpr (cond_lvalue<X>::value) {
    return static_cast<X&&>(x);  // an lvalue stays one: `(c ? a : b) = v`
  } else {
    return A(static_cast<X&&>(x));  // a value, not a reference to a temporary
  }
}
}  // namespace kgemu
namespace metal {
template <int N> KG_INLINE bool all(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i) if (!v.c_[i]) return false;
  return true;
}
template <int N> KG_INLINE bool any(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i) if (v.c_[i]) return true;
  return false;
}
KG_INLINE bool all(bool b) { return b; }
KG_INLINE bool any(bool b) { return b; }

// ---------------------------------------------------------------- array
template <class T, size_t N> struct array {
  T elems_[N ? N : 1];
  KG_INLINE T& operator[](size_t i) { return elems_[i]; }
  KG_INLINE const T& operator[](size_t i) const { return elems_[i]; }
  static constexpr size_t size() { return N; }
};

// uniform<T>: a value the same in every thread; here just the value.
template <class T> using uniform = T;
template <class T> KG_INLINE T make_uniform(T x) { return x; }

// ---------------------------------------------------------------- as_type
template <class To, class From> KG_INLINE To as_type(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "as_type needs types of the same size");
  To t;
  __builtin_memcpy(&t, &f, sizeof(To));
  return t;
}

// ---------------------------------------------------------------- numeric limits
// As in Metal's own header, the limits are _numeric_limits_impl's, which a source may specialize
// for its own types (candle's reduce.metal: `indexed<T>`).
template <class T> struct _numeric_limits_impl;
template <class T> struct numeric_limits : _numeric_limits_impl<T> {};
template <> struct _numeric_limits_impl<float> {
  static constexpr float min() { return 1.17549435e-38f; }
  static constexpr float max() { return 3.40282347e+38f; }
  static constexpr float lowest() { return -3.40282347e+38f; }
  static constexpr float epsilon() { return 1.1920929e-07f; }
  static constexpr float infinity() { return __builtin_inff(); }
  static constexpr float quiet_NaN() { return __builtin_nanf(""); }
};
template <> struct _numeric_limits_impl<half> {
  static constexpr half min() { return half::from_bits(0x0400); }
  static constexpr half max() { return half::from_bits(0x7bff); }
  static constexpr half lowest() { return half::from_bits(0xfbff); }
  static constexpr half epsilon() { return half::from_bits(0x1400); }
  static constexpr half infinity() { return half::from_bits(0x7c00); }
  static constexpr half quiet_NaN() { return half::from_bits(0x7e00); }
};
template <> struct _numeric_limits_impl<bfloat> {
  static constexpr bfloat min() { return bfloat::from_bits(0x0080); }
  static constexpr bfloat max() { return bfloat::from_bits(0x7f7f); }
  static constexpr bfloat lowest() { return bfloat::from_bits(0xff7f); }
  static constexpr bfloat epsilon() { return bfloat::from_bits(0x3c00); }
  static constexpr bfloat infinity() { return bfloat::from_bits(0x7f80); }
  static constexpr bfloat quiet_NaN() { return bfloat::from_bits(0x7fc0); }
};
#define KG_INT_LIMITS(T, lo, hi)                                                       \
  template <> struct _numeric_limits_impl<T> {                                         \
    static constexpr T min() { return lo; }                                            \
    static constexpr T max() { return hi; }                                            \
    static constexpr T lowest() { return lo; }                                         \
  };
KG_INT_LIMITS(int, (-2147483647 - 1), 2147483647)
KG_INT_LIMITS(uint, 0u, 4294967295u)
KG_INT_LIMITS(short, (short)-32768, (short)32767)
KG_INT_LIMITS(ushort, (ushort)0, (ushort)65535)
KG_INT_LIMITS(char, (char)-128, (char)127)
KG_INT_LIMITS(signed char, (signed char)-128, (signed char)127)
KG_INT_LIMITS(uchar, (uchar)0, (uchar)255)
KG_INT_LIMITS(long, (-9223372036854775807L - 1), 9223372036854775807L)
KG_INT_LIMITS(ulong, 0ul, 18446744073709551615ul)
#undef KG_INT_LIMITS
template <class T, int N> struct _numeric_limits_impl<vec<T, N>> : _numeric_limits_impl<T> {};
// Metal's own traits, which sources name (candle's reduce.metal): a vector's element count (0
// for a scalar), and whether the simd functions take a type (numbers and vectors of them).
template <class T> struct vec_elements : integral_constant<int, 0> {};
template <class T, int N> struct vec_elements<vec<T, N>> : integral_constant<int, N> {};
template <class T> struct kg_vec_scalar { typedef T type; };
template <class T, int N> struct kg_vec_scalar<vec<T, N>> { typedef T type; };
template <class T, class S = typename kg_vec_scalar<remove_cv_t<T>>::type> struct __is_valid_simdgroup_type
    : bool_constant<is_arithmetic<S>::value && !is_same<remove_cv_t<S>, bool>::value> {};

// ---------------------------------------------------------------- math
// The bfloat overloads are templates over exactly `bfloat` (KG_BF): MLX's bf16_math.h
// (in every MLX preamble) defines the same functions as plain functions, which then
// win overload resolution instead of being redefinitions; without it these stand in.
#define KG_BF(B) template <class B, typename kgemu::enable_if<kgemu::is_same<B, bfloat>::value, int>::type = 0>
// float: compiler builtins (glibc for exp/log/tanh/...); half and bfloat: computed in
// float and rounded once; vectors: elementwise.
#define KG_VEC_MAP1(name)                                                              \
  template <class T, int N> KG_INLINE vec<T, N> name(const vec<T, N>& v) {             \
    vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = name(v.c_[i]); return r; }
#define KG_MATH1(name, expr)                                                           \
  KG_INLINE float name(float x) { return expr; }                                       \
  KG_INLINE half name(half x) { return half(name(float(x))); }                         \
  KG_BF(B) KG_INLINE bfloat name(B x) { return bfloat(name(float(x))); }               \
  KG_VEC_MAP1(name)
KG_MATH1(exp, __builtin_expf(x))
KG_MATH1(exp2, __builtin_exp2f(x))
KG_MATH1(exp10, __builtin_powf(10.0f, x))
KG_MATH1(log, __builtin_logf(x))
KG_MATH1(log2, __builtin_log2f(x))
KG_MATH1(log10, __builtin_log10f(x))
KG_MATH1(sqrt, __builtin_sqrtf(x))
KG_MATH1(rsqrt, 1.0f / __builtin_sqrtf(x))
KG_MATH1(fabs, __builtin_fabsf(x))
KG_MATH1(floor, __builtin_floorf(x))
KG_MATH1(ceil, __builtin_ceilf(x))
KG_MATH1(round, __builtin_roundf(x))
KG_MATH1(rint, __builtin_rintf(x))
KG_MATH1(trunc, __builtin_truncf(x))
KG_MATH1(fract, __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f))
KG_MATH1(sin, __builtin_sinf(x))
KG_MATH1(cos, __builtin_cosf(x))
KG_MATH1(tan, __builtin_tanf(x))
KG_MATH1(asin, __builtin_asinf(x))
KG_MATH1(acos, __builtin_acosf(x))
KG_MATH1(atan, __builtin_atanf(x))
KG_MATH1(sinh, __builtin_sinhf(x))
KG_MATH1(cosh, __builtin_coshf(x))
KG_MATH1(tanh, __builtin_tanhf(x))
KG_MATH1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))
KG_MATH1(sign, (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x == 0.0f ? 0.0f * x : 0.0f))))
KG_MATH1(asinh, __builtin_asinhf(x))
KG_MATH1(acosh, __builtin_acoshf(x))
KG_MATH1(atanh, __builtin_atanhf(x))
// x*pi in double, so the argument is exact; then the float function of it
KG_MATH1(cospi, (float)__builtin_cos(3.14159265358979323846 * (double)x))
KG_MATH1(sinpi, (float)__builtin_sin(3.14159265358979323846 * (double)x))
KG_MATH1(tanpi, (float)__builtin_tan(3.14159265358979323846 * (double)x))
#undef KG_MATH1

#define KG_MATH2(name, expr)                                                           \
  KG_INLINE float name(float x, float y) { return expr; }                              \
  KG_INLINE half name(half x, half y) { return half(name(float(x), float(y))); }       \
  KG_BF(B) KG_INLINE bfloat name(B x, B y) { return bfloat(name(float(x), float(y))); } \
  template <class T, int N> KG_INLINE vec<T, N> name(const vec<T, N>& a, const vec<T, N>& b) { \
    vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = name(a.c_[i], b.c_[i]); return r; } \
  template <class T, int N> KG_INLINE vec<T, N> name(const vec<T, N>& a, T b) {        \
    vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = name(a.c_[i], b); return r; }
KG_MATH2(pow, __builtin_powf(x, y))
KG_MATH2(powr, __builtin_powf(x, y))
KG_MATH2(atan2, __builtin_atan2f(x, y))
KG_MATH2(fmod, __builtin_fmodf(x, y))
KG_MATH2(fmin, __builtin_fminf(x, y))
KG_MATH2(fmax, __builtin_fmaxf(x, y))
KG_MATH2(copysign, __builtin_copysignf(x, y))
KG_MATH2(step, (y < x ? 0.0f : 1.0f))
KG_MATH2(divide, x / y)
KG_MATH2(fdim, (x > y ? x - y : (x != x || y != y) ? __builtin_nanf("") : 0.0f))
KG_MATH2(nextafter, __builtin_nextafterf(x, y))
#undef KG_MATH2
KG_INLINE float ldexp(float x, int k) { return __builtin_ldexpf(x, k); }
KG_INLINE float frexp(float x, int* e) { return __builtin_frexpf(x, e); }
KG_INLINE float frexp(float x, int& e) { return __builtin_frexpf(x, &e); }
KG_INLINE float fmax3(float x, float y, float z) { return __builtin_fmaxf(__builtin_fmaxf(x, y), z); }
KG_INLINE float fmin3(float x, float y, float z) { return __builtin_fminf(__builtin_fminf(x, y), z); }
KG_INLINE float fmedian3(float x, float y, float z) {
  return __builtin_fmaxf(__builtin_fminf(x, y), __builtin_fminf(__builtin_fmaxf(x, y), z));
}

KG_INLINE float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
KG_INLINE half fma(half a, half b, half c) {
  return half(__builtin_fmaf(float(a), float(b), float(c)));
}
KG_BF(B) KG_INLINE bfloat fma(B a, B b, B c) {
  return bfloat(__builtin_fmaf(float(a), float(b), float(c)));
}
template <class T, int N>
KG_INLINE vec<T, N> fma(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) {
  vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = fma(a.c_[i], b.c_[i], c.c_[i]); return r;
}

// abs: floating types as fabs, integers as |x| (unsigned unchanged).
KG_INLINE float abs(float x) { return __builtin_fabsf(x); }
KG_INLINE half abs(half x) { return half::from_bits((uint16_t)(x.bits_ & 0x7fffu)); }
KG_BF(B) KG_INLINE bfloat abs(B x) { return bfloat::from_bits((uint16_t)(x.bits_ & 0x7fffu)); }
KG_INLINE int abs(int x) { return x < 0 ? -x : x; }
KG_INLINE long abs(long x) { return x < 0 ? -x : x; }
KG_INLINE short abs(short x) { return (short)(x < 0 ? -x : x); }
KG_INLINE char abs(char x) { return (char)(x < 0 ? -x : x); }
KG_INLINE signed char abs(signed char x) { return (signed char)(x < 0 ? -x : x); }
KG_INLINE uint abs(uint x) { return x; }
KG_INLINE ulong abs(ulong x) { return x; }
KG_INLINE ushort abs(ushort x) { return x; }
KG_INLINE uchar abs(uchar x) { return x; }
KG_VEC_MAP1(abs)

KG_INLINE bool isnan(float x) { return __builtin_isnan(x); }
KG_INLINE bool isinf(float x) { return __builtin_isinf(x); }
KG_INLINE bool isfinite(float x) { return __builtin_isfinite(x); }
KG_INLINE bool signbit(float x) { return __builtin_signbit(x); }
KG_INLINE bool isnan(half x) { return __builtin_isnan(float(x)); }
KG_INLINE bool isinf(half x) { return __builtin_isinf(float(x)); }
KG_INLINE bool isfinite(half x) { return __builtin_isfinite(float(x)); }
KG_INLINE bool isnan(bfloat x) { return __builtin_isnan(float(x)); }
KG_INLINE bool isinf(bfloat x) { return __builtin_isinf(float(x)); }
KG_INLINE bool isfinite(bfloat x) { return __builtin_isfinite(float(x)); }

// min/max/clamp: the usual arithmetic conversions pick the common type; float min/max
// follow fmin/fmax (a NaN operand yields the other operand).
KG_INLINE float kg_min(float a, float b) { return __builtin_fminf(a, b); }
KG_INLINE float kg_max(float a, float b) { return __builtin_fmaxf(a, b); }
KG_INLINE half kg_min(half a, half b) { return half(__builtin_fminf(float(a), float(b))); }
KG_INLINE half kg_max(half a, half b) { return half(__builtin_fmaxf(float(a), float(b))); }
KG_INLINE bfloat kg_min(bfloat a, bfloat b) { return bfloat(__builtin_fminf(float(a), float(b))); }
KG_INLINE bfloat kg_max(bfloat a, bfloat b) { return bfloat(__builtin_fmaxf(float(a), float(b))); }
template <class T> KG_INLINE T kg_min(T a, T b) { return b < a ? b : a; }
template <class T> KG_INLINE T kg_max(T a, T b) { return a < b ? b : a; }
template <class T, int N> KG_INLINE vec<T, N> kg_min(const vec<T, N>& a, const vec<T, N>& b) {
  vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = kg_min(a.c_[i], b.c_[i]); return r;
}
template <class T, int N> KG_INLINE vec<T, N> kg_max(const vec<T, N>& a, const vec<T, N>& b) {
  vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = kg_max(a.c_[i], b.c_[i]); return r;
}
template <class A, class B> KG_INLINE auto min(A a, B b) -> decltype(a + b) {
  typedef decltype(a + b) C;
  return kg_min(C(a), C(b));
}
template <class A, class B> KG_INLINE auto max(A a, B b) -> decltype(a + b) {
  typedef decltype(a + b) C;
  return kg_max(C(a), C(b));
}
template <class X, class L, class H> KG_INLINE auto clamp(X x, L lo, H hi) -> decltype(x + lo + hi) {
  typedef decltype(x + lo + hi) C;
  return kg_min(kg_max(C(x), C(lo)), C(hi));
}
template <class A, class B, class T> KG_INLINE auto mix(A a, B b, T t) -> decltype(a + (b - a) * t) {
  return a + (b - a) * t;
}
template <class T> KG_INLINE T select(T a, T b, bool c) { return c ? b : a; }
template <class T, int N>
KG_INLINE vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c) {
  vec<T, N> r; for (int i = 0; i < N; ++i) r.c_[i] = c.c_[i] ? b.c_[i] : a.c_[i]; return r;
}
template <class T, int N> KG_INLINE T dot(const vec<T, N>& a, const vec<T, N>& b) {
  T s = a.c_[0] * b.c_[0];
  for (int i = 1; i < N; ++i) s = s + a.c_[i] * b.c_[i];
  return s;
}
template <class T, int N> KG_INLINE T length(const vec<T, N>& a) { return sqrt(dot(a, a)); }

// Integer bit functions.
KG_INLINE uint popcount(uint x) { return (uint)__builtin_popcount(x); }
KG_INLINE int popcount(int x) { return __builtin_popcount((uint)x); }
KG_INLINE ulong popcount(ulong x) { return (ulong)__builtin_popcountl(x); }
KG_INLINE uint clz(uint x) { return x ? (uint)__builtin_clz(x) : 32u; }
KG_INLINE uint ctz(uint x) { return x ? (uint)__builtin_ctz(x) : 32u; }
KG_INLINE int clz(int x) { return x ? __builtin_clz((uint)x) : 32; }
KG_INLINE int ctz(int x) { return x ? __builtin_ctz((uint)x) : 32; }
KG_INLINE uint mulhi(uint a, uint b) { return (uint)(((ulong)a * b) >> 32); }
KG_INLINE int mulhi(int a, int b) { return (int)(((long)a * b) >> 32); }
KG_INLINE uint extract_bits(uint x, uint offset, uint bits) {
  return bits == 0 ? 0u : (bits >= 32 ? x >> offset : (x >> offset) & ((1u << bits) - 1u));
}
KG_INLINE uint reverse_bits(uint x) {
  uint r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

namespace precise {
using metal::exp; using metal::exp2; using metal::exp10; using metal::log; using metal::log2;
using metal::log10; using metal::sqrt; using metal::rsqrt; using metal::fabs; using metal::abs;
using metal::sin; using metal::cos; using metal::tan; using metal::tanh; using metal::pow;
using metal::powr; using metal::fma; using metal::divide; using metal::fmin; using metal::fmax;
using metal::floor; using metal::ceil; using metal::round; using metal::trunc;
using metal::sinh; using metal::cosh; using metal::atan; using metal::atan2; using metal::fract;
using metal::min; using metal::max; using metal::clamp; using metal::saturate;
}  // namespace precise
namespace fast {
using metal::exp; using metal::exp2; using metal::exp10; using metal::log; using metal::log2;
using metal::log10; using metal::sqrt; using metal::rsqrt; using metal::fabs; using metal::abs;
using metal::sin; using metal::cos; using metal::tan; using metal::tanh; using metal::pow;
using metal::powr; using metal::fma; using metal::divide; using metal::fmin; using metal::fmax;
using metal::floor; using metal::ceil; using metal::round; using metal::trunc;
using metal::sinh; using metal::cosh; using metal::atan; using metal::atan2; using metal::fract;
using metal::min; using metal::max; using metal::clamp; using metal::saturate;
}  // namespace fast

// ---------------------------------------------------------------- atomics
// Threadgroups of a dispatch run on several OS threads at once, so device atomics are real
// atomic operations (GCC's __atomic builtins; lock-free for 1, 2, 4 and 8 bytes), relaxed as
// Metal's are. Operations without a builtin (float add, min, max) are compare-exchange loops.
// Fibers of one threadgroup share an OS thread and switch only at collectives and barriers,
// so threadgroup atomics need nothing more.
enum memory_order { memory_order_relaxed, memory_order_seq_cst };
template <class T> struct atomic { T v_; };
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;
typedef atomic<bool> atomic_bool;
}  // namespace metal
namespace kgemu {
KG_INLINE int mo(metal::memory_order o) { return o == metal::memory_order_relaxed ? __ATOMIC_RELAXED : __ATOMIC_SEQ_CST; }
template <class T> KG_INLINE T* obj(volatile metal::atomic<T>* o) { return const_cast<T*>(&o->v_); }
template <class T> KG_INLINE const T* obj(const volatile metal::atomic<T>* o) { return const_cast<const T*>(&o->v_); }
template <class T> struct is_int_atomic { static constexpr bool value = !is_same<T, float>::value && !is_same<T, bool>::value; };
// old op v, for every operation, as a compare-exchange loop
template <class T, class F> KG_INLINE T rmw_loop(volatile metal::atomic<T>* o, F f, metal::memory_order m) {
  T* p = obj(o);
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  T next = f(old);
  while (!__atomic_compare_exchange(p, &old, &next, true, mo(m), __ATOMIC_RELAXED)) next = f(old);
  return old;
}
}  // namespace kgemu
namespace metal {
template <class T, class U> KG_INLINE void atomic_store_explicit(volatile atomic<T>* o, U v, memory_order m) {
  T t = T(v);
  __atomic_store(kgemu::obj(o), &t, kgemu::mo(m));
}
template <class T> KG_INLINE T atomic_load_explicit(const volatile atomic<T>* o, memory_order m) {
  T t;
  __atomic_load(kgemu::obj(o), &t, kgemu::mo(m));
  return t;
}
template <class T, class U> KG_INLINE T atomic_exchange_explicit(volatile atomic<T>* o, U v, memory_order m) {
  T t = T(v), old;
  __atomic_exchange(kgemu::obj(o), &t, &old, kgemu::mo(m));
  return old;
}
#define KG_ATOMIC_RMW(name, builtin, expr)                                             \
  template <class T, class U> KG_INLINE T name(volatile atomic<T>* o, U v_in, memory_order m) { \
    T v = T(v_in);                                                                     \
    if constexpr (kgemu::is_int_atomic<T>::value && builtin != 0) {                    \
      if constexpr (builtin == 1) return __atomic_fetch_add(kgemu::obj(o), v, kgemu::mo(m)); \
      if constexpr (builtin == 2) return __atomic_fetch_sub(kgemu::obj(o), v, kgemu::mo(m)); \
      if constexpr (builtin == 3) return __atomic_fetch_and(kgemu::obj(o), v, kgemu::mo(m)); \
      if constexpr (builtin == 4) return __atomic_fetch_or(kgemu::obj(o), v, kgemu::mo(m));  \
      if constexpr (builtin == 5) return __atomic_fetch_xor(kgemu::obj(o), v, kgemu::mo(m)); \
    }                                                                                  \
    return kgemu::rmw_loop(o, [v](T old) { return T(expr); }, m);                      \
  }
KG_ATOMIC_RMW(atomic_fetch_add_explicit, 1, old + v)
KG_ATOMIC_RMW(atomic_fetch_sub_explicit, 2, old - v)
KG_ATOMIC_RMW(atomic_fetch_and_explicit, 3, old & v)
KG_ATOMIC_RMW(atomic_fetch_or_explicit, 4, old | v)
KG_ATOMIC_RMW(atomic_fetch_xor_explicit, 5, old ^ v)
KG_ATOMIC_RMW(atomic_fetch_min_explicit, 0, (v < old ? v : old))
KG_ATOMIC_RMW(atomic_fetch_max_explicit, 0, (old < v ? v : old))
#undef KG_ATOMIC_RMW
template <class T, class U>
KG_INLINE bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* o, T* expected, U desired,
                                                     memory_order m, memory_order f) {
  T d = T(desired);
  // strong: Metal's weak exchange does not fail spuriously on a match either
  return __atomic_compare_exchange(kgemu::obj(o), expected, &d, false, kgemu::mo(m), kgemu::mo(f));
}

enum mem_flags : uint { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4,
                        mem_threadgroup_imageblock = 8, mem_object_data = 16 };
KG_INLINE mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((uint)a | (uint)b); }
}  // namespace metal

// ---------------------------------------------------------------- runtime interface
namespace kgemu {
using metal::uint;
using metal::uint3;

// Mirrors `ThreadInfo` in crates/emu/src/runtime/object.rs (repr(C)).
struct ThreadInfo {
  uint3 thread_position_in_grid;
  uint3 threadgroup_position_in_grid;
  uint3 thread_position_in_threadgroup;
  uint3 threads_per_threadgroup;
  uint3 threads_per_grid;
  uint3 threadgroups_per_grid;
  uint3 dispatch_threads_per_threadgroup;
  uint3 grid_origin;
  uint thread_index_in_simdgroup;
  uint simdgroup_index_in_threadgroup;
  uint thread_index_in_threadgroup;
  uint threads_per_simdgroup;
  uint simdgroups_per_threadgroup;
  uint dispatch_simdgroups_per_threadgroup;
  uint thread_execution_width;
  uint thread_index_in_quadgroup;
  uint quadgroup_index_in_threadgroup;
  uint quadgroups_per_threadgroup;
  uint dispatch_quadgroups_per_threadgroup;
  uint pad_[1];
};

typedef void (*CollFn)(void* const* lanes, uint32_t active);

// Mirrors `Rt` in crates/emu/src/runtime/object.rs (repr(C)).
struct Rt {
  uint32_t abi;
  uint32_t thread_info_size;
  void (*collective)(void* lane, CollFn fn, uint32_t op, uint32_t line);
  void (*barrier)(uint32_t kind, uint32_t line);
  void* (*tg_alloc)(uint32_t site, uint64_t size, uint64_t align, uint64_t element, uint32_t line, const char* name);
  void (*asan_note)(uintptr_t addr, uint64_t size, uint32_t is_write, uintptr_t pc);
  void (*ubsan_note)(const char* what, const char* file, uint32_t line, uint32_t col, uintptr_t pc,
                     const char* type_name, uintptr_t ptr, uint32_t align);
  // The threadgroup-memory check's hook (objects built with -fsanitize=thread only): an
  // access of `size` bytes at `addr`, a write if `is_write`, from the instruction before `pc`.
  void (*tg_access)(uintptr_t addr, uint64_t size, uint32_t is_write, uintptr_t pc);
  // Every worker's threadgroup memory lies in [tg_base, tg_base + tg_span).
  uintptr_t tg_base;
  uintptr_t tg_span;
  // CUDA's (kgemu_cuda.h; crates/emu/src/runtime/warp.rs)
  const ThreadInfo* (*thread_info)();
  void (*warp)(void* lane, CollFn fn, uint32_t op, uint32_t line);
  uint32_t (*live_lanes)();
  void* (*tg_dynamic)(uint32_t site, uint64_t align, uint64_t element, uint32_t line, const char* name);
  void (*cuda_ub)(uint32_t kind, uint32_t op, uint32_t a, uint32_t b, uint32_t line);
  // A `[[threadgroup(index)]]` kernel parameter: the dispatch's size for `index`, allocated
  // as a threadgroup array at `site`.
  void* (*tg_param)(uint32_t index, uint32_t site, uint64_t align, uint64_t element, uint32_t line, const char* name);
};

__attribute__((visibility("hidden"))) inline Rt rt;

template <class T> struct Lane { T v; uint32_t arg; };
template <class T> KG_INLINE Lane<T>* lane_at(void* const* lanes, int i) { return (Lane<T>*)lanes[i]; }

// Collective operation ids (names in crates/emu/src/runtime/object.rs `op_name`).
enum Op : uint32_t {
  OP_SUM = 1, OP_PROD, OP_MAX, OP_MIN, OP_AND, OP_OR, OP_XOR, OP_BROADCAST,
  OP_BROADCAST_FIRST, OP_SHUFFLE, OP_SHUFFLE_DOWN, OP_SHUFFLE_UP, OP_SHUFFLE_XOR, OP_ANY,
  OP_ALL, OP_PREFIX_INCL_SUM, OP_PREFIX_EXCL_SUM, OP_IS_FIRST, OP_PREFIX_INCL_PROD,
  OP_PREFIX_EXCL_PROD, OP_BALLOT, OP_ROTATE_DOWN, OP_ROTATE_UP, OP_FILL_DOWN, OP_FILL_UP
};
// A call-site line that no integer argument converts to (for overloads whose
// parameter lists differ by one trailing integer).
struct CallLine { unsigned v; };

template <class T> struct scalar_of { typedef T type; };
template <class U, int M> struct scalar_of<metal::vec<U, M>> { typedef U type; };
template <class T> KG_INLINE T lowest_of() {
  typedef typename scalar_of<T>::type S;
  if constexpr (is_same<S, float>::value || is_same<S, metal::half>::value ||
                is_same<S, metal::bfloat>::value)
    return T(S(-__builtin_inff()));
  else
    return T(metal::numeric_limits<S>::lowest());
}
template <class T> KG_INLINE T highest_of() {
  typedef typename scalar_of<T>::type S;
  if constexpr (is_same<S, float>::value || is_same<S, metal::half>::value ||
                is_same<S, metal::bfloat>::value)
    return T(S(__builtin_inff()));
  else
    return T(metal::numeric_limits<S>::max());
}

// The documented reduction: inactive lanes hold the identity, then for off = 16, 8, 4,
// 2, 1: v[i] = v[i] op v[i + off] for i < off; every active lane receives v[0].
template <class T, class F> KG_INLINE void tree_reduce(void* const* lanes, uint32_t active, T ident, F f) {
  T v[32];
  const bool full = active == 0xffffffffu;  // the common case: no branch per lane
  if (full)
    for (int i = 0; i < 32; ++i) v[i] = lane_at<T>(lanes, i)->v;
  else
    for (int i = 0; i < 32; ++i) v[i] = ((active >> i) & 1u) ? lane_at<T>(lanes, i)->v : ident;
  for (int off = 16; off >= 1; off >>= 1)
    for (int i = 0; i < off; ++i) v[i] = f(v[i], v[i + off]);
  if (full)
    for (int i = 0; i < 32; ++i) lane_at<T>(lanes, i)->v = v[0];
  else
    for (int i = 0; i < 32; ++i)
      if ((active >> i) & 1u) lane_at<T>(lanes, i)->v = v[0];
}
template <class T> void op_sum(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, T(-0.0f), [](T x, T y) { return T(x + y); });
}
template <class T> void op_prod(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, T(1), [](T x, T y) { return T(x * y); });
}
template <class T> void op_max(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, lowest_of<T>(), [](T x, T y) { return metal::kg_max(x, y); });
}
template <class T> void op_min(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, highest_of<T>(), [](T x, T y) { return metal::kg_min(x, y); });
}
template <class T> void op_and(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, T(~T(0)), [](T x, T y) { return T(x & y); });
}
template <class T> void op_or(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, T(0), [](T x, T y) { return T(x | y); });
}
template <class T> void op_xor(void* const* l, uint32_t a) {
  tree_reduce<T>(l, a, T(0), [](T x, T y) { return T(x ^ y); });
}
KG_INLINE int first_active(uint32_t a) { return a ? __builtin_ctz(a) : 0; }
// broadcast: the lane index is taken from the first active lane; reading an inactive
// lane gives zero. shuffle*: reading an inactive or out-of-range lane gives zero, except
// shuffle_down/up, whose lanes past the edge keep their own value (as on Apple GPUs).
template <class T> void op_broadcast(void* const* l, uint32_t a) {
  uint32_t src = lane_at<T>(l, first_active(a))->arg;
  T v = (src < 32 && ((a >> src) & 1u)) ? lane_at<T>(l, (int)src)->v : T(0);
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) lane_at<T>(l, i)->v = v;
}
template <class T> void op_broadcast_first(void* const* l, uint32_t a) {
  T v = lane_at<T>(l, first_active(a))->v;
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) lane_at<T>(l, i)->v = v;
}
template <class T, int MODE> void op_shuffle(void* const* l, uint32_t a) {
  T in[32];
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) in[i] = lane_at<T>(l, i)->v;
  for (int i = 0; i < 32; ++i) {
    if (!((a >> i) & 1u)) continue;
    uint32_t arg = lane_at<T>(l, i)->arg;
    long src;
    if (MODE == 0) src = (long)arg;
    else if (MODE == 1) src = (long)i + (long)arg;
    else if (MODE == 2) src = (long)i - (long)arg;
    else if (MODE == 3) src = (long)(i ^ (int)(arg & 31u));
    else if (MODE == 4) src = (long)((i + (long)arg) & 31);
    else src = (long)((i - (long)arg) & 31);
    T v;
    if (src < 0 || src >= 32) v = (MODE == 1 || MODE == 2) ? in[i] : T(0);
    else v = ((a >> src) & 1u) ? in[src] : T(0);
    lane_at<T>(l, i)->v = v;
  }
}
template <class T, bool INCLUSIVE, bool PROD> void op_prefix(void* const* l, uint32_t a) {
  T acc = PROD ? T(1) : T(-0.0f);
  for (int i = 0; i < 32; ++i) {
    if (!((a >> i) & 1u)) continue;
    T x = lane_at<T>(l, i)->v;
    T next = PROD ? T(acc * x) : T(acc + x);
    lane_at<T>(l, i)->v = INCLUSIVE ? next : acc;
    acc = next;
  }
}
// shuffle_and_fill: within each segment of `modulo` lanes (arg = delta | modulo << 16),
// lane i reads data of lane i +/- delta of its segment, or, past the segment's edge,
// the filling value of the lane as far into the segment from the other end.
template <class T> struct FillPair { T d; T f; };
template <class T, bool DOWN> void op_fill(void* const* l, uint32_t a) {
  FillPair<T> in[32];
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) in[i] = lane_at<FillPair<T>>(l, i)->v;
  for (int i = 0; i < 32; ++i) {
    if (!((a >> i) & 1u)) continue;
    uint32_t arg = lane_at<FillPair<T>>(l, i)->arg;
    long delta = (long)(arg & 0xffffu), modulo = (long)(arg >> 16);
    if (modulo <= 0 || modulo > 32) modulo = 32;
    long base = i - i % modulo, j = i % modulo + (DOWN ? delta : -delta);
    bool fill = DOWN ? j >= modulo : j < 0;
    long src = base + (fill ? (DOWN ? j - modulo : j + modulo) : j);
    T v = (src >= 0 && src < 32 && ((a >> src) & 1u)) ? (fill ? in[src].f : in[src].d) : T(0);
    lane_at<FillPair<T>>(l, i)->v.d = v;
  }
}
// Quad-group reductions: each group of 4 lanes (lane / 4), inactive lanes holding the
// identity, v[i] = v[i] op v[i + 2] for i < 2, then v[0] op v[1].
template <class T, class F> KG_INLINE void quad_reduce(void* const* lanes, uint32_t active, T ident, F f) {
  for (int q = 0; q < 32; q += 4) {
    T v[4];
    for (int i = 0; i < 4; ++i) v[i] = ((active >> (q + i)) & 1u) ? lane_at<T>(lanes, q + i)->v : ident;
    v[0] = f(v[0], v[2]);
    v[1] = f(v[1], v[3]);
    v[0] = f(v[0], v[1]);
    for (int i = 0; i < 4; ++i)
      if ((active >> (q + i)) & 1u) lane_at<T>(lanes, q + i)->v = v[0];
  }
}
template <class T> void op_quad_sum(void* const* l, uint32_t a) {
  quad_reduce<T>(l, a, T(-0.0f), [](T x, T y) { return T(x + y); });
}
template <class T> void op_quad_prod(void* const* l, uint32_t a) {
  quad_reduce<T>(l, a, T(1), [](T x, T y) { return T(x * y); });
}
template <class T> void op_quad_max(void* const* l, uint32_t a) {
  quad_reduce<T>(l, a, lowest_of<T>(), [](T x, T y) { return metal::kg_max(x, y); });
}
template <class T> void op_quad_min(void* const* l, uint32_t a) {
  quad_reduce<T>(l, a, highest_of<T>(), [](T x, T y) { return metal::kg_min(x, y); });
}
// quad_broadcast / quad_shuffle*: lane indices within the quad (arg), as the simd ones.
template <class T, int MODE> void op_quad_shuffle(void* const* l, uint32_t a) {
  T in[32];
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) in[i] = lane_at<T>(l, i)->v;
  for (int i = 0; i < 32; ++i) {
    if (!((a >> i) & 1u)) continue;
    uint32_t arg = lane_at<T>(l, i)->arg;
    int q = i & ~3, j = i & 3;
    long src;
    if (MODE == 0) src = (long)(arg & 3u);
    else if (MODE == 1) src = (long)j + (long)arg;
    else if (MODE == 2) src = (long)j - (long)arg;
    else src = (long)(j ^ (int)(arg & 3u));
    T v;
    if (src < 0 || src >= 4) v = (MODE == 1 || MODE == 2) ? in[i] : T(0);
    else v = ((a >> (q + src)) & 1u) ? in[q + src] : T(0);
    lane_at<T>(l, i)->v = v;
  }
}
inline void op_any(void* const* l, uint32_t a) {
  bool r = false;
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) r = r || lane_at<bool>(l, i)->v;
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) lane_at<bool>(l, i)->v = r;
}
inline void op_all(void* const* l, uint32_t a) {
  bool r = true;
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) r = r && lane_at<bool>(l, i)->v;
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) lane_at<bool>(l, i)->v = r;
}
inline void op_is_first(void* const* l, uint32_t a) {
  int f = first_active(a);
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) lane_at<bool>(l, i)->v = (i == f);
}
inline void op_ballot(void* const* l, uint32_t a) {
  uint64_t m = 0;
  for (int i = 0; i < 32; ++i) if (((a >> i) & 1u) && lane_at<uint64_t>(l, i)->v) m |= 1ull << i;
  for (int i = 0; i < 32; ++i) if ((a >> i) & 1u) lane_at<uint64_t>(l, i)->v = m;
}

template <class T> KG_INLINE T collective(T x, uint32_t arg, CollFn fn, uint32_t op, uint32_t line) {
  Lane<T> lane{x, arg};
  rt.collective(&lane, fn, op, line);
  return lane.v;
}

template <class T> struct element_of { typedef T type; };
template <class T, unsigned long N> struct element_of<T[N]> { typedef typename element_of<T>::type type; };
template <class T> KG_INLINE T* tg_alloc(uint32_t site, uint32_t line, const char* name) {
  return (T*)rt.tg_alloc(site, sizeof(T), alignof(T), sizeof(typename element_of<T>::type), line, name);
}

// Kernel entry glue: buffers bind by index, attributes convert to the declared type.
struct BufPtr { void* p; template <class T> KG_INLINE operator T*() const { return (T*)p; } };
struct BufRef { void* p; template <class T> KG_INLINE operator T&() const { return *(T*)p; } };
// `[[threadgroup(index)]]`: allocated (once per threadgroup) when the entry converts it.
struct TgParam {
  uint32_t index, site, line;
  const char* name;
  template <class T> KG_INLINE operator T*() const {
    return (T*)rt.tg_param(index, site, alignof(T), sizeof(typename element_of<T>::type), line, name);
  }
  template <class T> KG_INLINE operator T&() const { return *operator T*(); }
};
struct Attr3 {
  uint3 v;
  KG_INLINE operator metal::uint3() const { return v; }
  KG_INLINE operator metal::uint2() const { return metal::uint2(v.x, v.y); }
  KG_INLINE operator metal::uint() const { return v.x; }
  KG_INLINE operator metal::ushort3() const { return metal::ushort3(v); }
  KG_INLINE operator metal::ushort2() const { return metal::ushort2(v.x, v.y); }
  KG_INLINE operator metal::ushort() const { return (metal::ushort)v.x; }
  KG_INLINE operator metal::int3() const { return metal::int3(v); }
  KG_INLINE operator int() const { return (int)v.x; }
};
struct Attr1 {
  uint v;
  KG_INLINE operator metal::uint() const { return v; }
  KG_INLINE operator metal::ushort() const { return (metal::ushort)v; }
  KG_INLINE operator int() const { return (int)v; }
  KG_INLINE operator metal::uchar() const { return (metal::uchar)v; }
};
}  // namespace kgemu

extern "C" __attribute__((visibility("default"))) uint32_t kgemu_init(const kgemu::Rt* rt) {
  if (rt->abi != KGEMU_ABI_VERSION || rt->thread_info_size != sizeof(kgemu::ThreadInfo)) return 0;
  kgemu::rt = *rt;
  return KGEMU_ABI_VERSION;
}

// ---------------------------------------------------------------- collectives, barriers
namespace metal {
#define KG_LINE unsigned kg_line = __builtin_LINE()
template <class T> KG_INLINE T simd_sum(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_sum<T>, kgemu::OP_SUM, kg_line);
}
template <class T> KG_INLINE T simd_product(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_prod<T>, kgemu::OP_PROD, kg_line);
}
template <class T> KG_INLINE T simd_max(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_max<T>, kgemu::OP_MAX, kg_line);
}
template <class T> KG_INLINE T simd_min(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_min<T>, kgemu::OP_MIN, kg_line);
}
template <class T> KG_INLINE T simd_and(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_and<T>, kgemu::OP_AND, kg_line);
}
template <class T> KG_INLINE T simd_or(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_or<T>, kgemu::OP_OR, kg_line);
}
template <class T> KG_INLINE T simd_xor(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_xor<T>, kgemu::OP_XOR, kg_line);
}
template <class T> KG_INLINE T simd_broadcast(T x, ushort lane, KG_LINE) {
  return kgemu::collective<T>(x, lane, kgemu::op_broadcast<T>, kgemu::OP_BROADCAST, kg_line);
}
template <class T> KG_INLINE T simd_broadcast_first(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_broadcast_first<T>, kgemu::OP_BROADCAST_FIRST, kg_line);
}
template <class T> KG_INLINE T simd_shuffle(T x, ushort lane, KG_LINE) {
  return kgemu::collective<T>(x, lane, kgemu::op_shuffle<T, 0>, kgemu::OP_SHUFFLE, kg_line);
}
template <class T> KG_INLINE T simd_shuffle_down(T x, ushort delta, KG_LINE) {
  return kgemu::collective<T>(x, delta, kgemu::op_shuffle<T, 1>, kgemu::OP_SHUFFLE_DOWN, kg_line);
}
template <class T> KG_INLINE T simd_shuffle_up(T x, ushort delta, KG_LINE) {
  return kgemu::collective<T>(x, delta, kgemu::op_shuffle<T, 2>, kgemu::OP_SHUFFLE_UP, kg_line);
}
template <class T> KG_INLINE T simd_shuffle_xor(T x, ushort mask, KG_LINE) {
  return kgemu::collective<T>(x, mask, kgemu::op_shuffle<T, 3>, kgemu::OP_SHUFFLE_XOR, kg_line);
}
// Quad-group collectives: they synchronise the whole SIMD-group (stricter than Metal,
// which needs only the quad), and reduce within each quad.
template <class T> KG_INLINE T quad_sum(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_quad_sum<T>, 41, kg_line);
}
template <class T> KG_INLINE T quad_product(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_quad_prod<T>, 42, kg_line);
}
template <class T> KG_INLINE T quad_max(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_quad_max<T>, 43, kg_line);
}
template <class T> KG_INLINE T quad_min(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_quad_min<T>, 44, kg_line);
}
template <class T> KG_INLINE T quad_broadcast(T x, ushort lane, KG_LINE) {
  return kgemu::collective<T>(x, lane, kgemu::op_quad_shuffle<T, 0>, 45, kg_line);
}
template <class T> KG_INLINE T quad_shuffle(T x, ushort lane, KG_LINE) {
  return kgemu::collective<T>(x, lane, kgemu::op_quad_shuffle<T, 0>, 46, kg_line);
}
template <class T> KG_INLINE T quad_shuffle_down(T x, ushort delta, KG_LINE) {
  return kgemu::collective<T>(x, delta, kgemu::op_quad_shuffle<T, 1>, 47, kg_line);
}
template <class T> KG_INLINE T quad_shuffle_up(T x, ushort delta, KG_LINE) {
  return kgemu::collective<T>(x, delta, kgemu::op_quad_shuffle<T, 2>, 48, kg_line);
}
template <class T> KG_INLINE T quad_shuffle_xor(T x, ushort mask, KG_LINE) {
  return kgemu::collective<T>(x, mask, kgemu::op_quad_shuffle<T, 3>, 49, kg_line);
}
template <class T> KG_INLINE T simd_shuffle_rotate_down(T x, ushort delta, KG_LINE) {
  return kgemu::collective<T>(x, delta, kgemu::op_shuffle<T, 4>, kgemu::OP_ROTATE_DOWN, kg_line);
}
template <class T> KG_INLINE T simd_shuffle_rotate_up(T x, ushort delta, KG_LINE) {
  return kgemu::collective<T>(x, delta, kgemu::op_shuffle<T, 5>, kgemu::OP_ROTATE_UP, kg_line);
}
template <class T>
KG_INLINE T simd_shuffle_and_fill_down(T data, T filling, ushort delta, ushort modulo,
                                       kgemu::CallLine at = kgemu::CallLine{__builtin_LINE()}) {
  return kgemu::collective<kgemu::FillPair<T>>(kgemu::FillPair<T>{data, filling}, delta | ((uint32_t)modulo << 16),
                                               kgemu::op_fill<T, true>, kgemu::OP_FILL_DOWN, at.v).d;
}
template <class T>
KG_INLINE T simd_shuffle_and_fill_down(T data, T filling, ushort delta,
                                       kgemu::CallLine at = kgemu::CallLine{__builtin_LINE()}) {
  return simd_shuffle_and_fill_down(data, filling, delta, (ushort)32, at);
}
template <class T>
KG_INLINE T simd_shuffle_and_fill_up(T data, T filling, ushort delta, ushort modulo,
                                     kgemu::CallLine at = kgemu::CallLine{__builtin_LINE()}) {
  return kgemu::collective<kgemu::FillPair<T>>(kgemu::FillPair<T>{data, filling}, delta | ((uint32_t)modulo << 16),
                                               kgemu::op_fill<T, false>, kgemu::OP_FILL_UP, at.v).d;
}
template <class T>
KG_INLINE T simd_shuffle_and_fill_up(T data, T filling, ushort delta,
                                     kgemu::CallLine at = kgemu::CallLine{__builtin_LINE()}) {
  return simd_shuffle_and_fill_up(data, filling, delta, (ushort)32, at);
}
template <class T> KG_INLINE T simd_prefix_inclusive_sum(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_prefix<T, true, false>, kgemu::OP_PREFIX_INCL_SUM, kg_line);
}
template <class T> KG_INLINE T simd_prefix_exclusive_sum(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_prefix<T, false, false>, kgemu::OP_PREFIX_EXCL_SUM, kg_line);
}
template <class T> KG_INLINE T simd_prefix_inclusive_product(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_prefix<T, true, true>, kgemu::OP_PREFIX_INCL_PROD, kg_line);
}
template <class T> KG_INLINE T simd_prefix_exclusive_product(T x, KG_LINE) {
  return kgemu::collective<T>(x, 0, kgemu::op_prefix<T, false, true>, kgemu::OP_PREFIX_EXCL_PROD, kg_line);
}
KG_INLINE bool simd_any(bool x, KG_LINE) {
  return kgemu::collective<bool>(x, 0, kgemu::op_any, kgemu::OP_ANY, kg_line);
}
KG_INLINE bool simd_all(bool x, KG_LINE) {
  return kgemu::collective<bool>(x, 0, kgemu::op_all, kgemu::OP_ALL, kg_line);
}
KG_INLINE bool simd_is_first(KG_LINE) {
  return kgemu::collective<bool>(false, 0, kgemu::op_is_first, kgemu::OP_IS_FIRST, kg_line);
}
// simd_ballot returns the mask of active lanes whose predicate is true (as a 64-bit
// integer; Metal's simd_vote converts to one).
KG_INLINE uint64_t simd_ballot(bool x, KG_LINE) {
  return kgemu::collective<uint64_t>(x ? 1u : 0u, 0, kgemu::op_ballot, kgemu::OP_BALLOT, kg_line);
}
// The barrier's kind (1: threadgroup, 2: SIMD-group) and, from bit 8, its memory flags: only a
// barrier with mem_threadgroup orders threadgroup memory (the threadgroup-memory check).
KG_INLINE void threadgroup_barrier(uint flags = mem_none, KG_LINE) {
  kgemu::rt.barrier(1u | (flags << 8), kg_line);
}
KG_INLINE void simdgroup_barrier(uint flags = mem_none, KG_LINE) {
  kgemu::rt.barrier(2u | (flags << 8), kg_line);
}
#undef KG_LINE
}  // namespace metal

// ---------------------------------------------------------------- Metal compiler builtins
// What MLX's headers call below the standard library: `METAL_FUNC`, the math-mode
// constants and the `__metal_*` builtins (bf16_math.h calls them with float; the math
// mode is ignored: fast and precise math are the same here). A collective reached
// through one of them keeps the line of the `__metal_*` call as its call site.
#define METAL_FUNC inline __attribute__((always_inline))
#define __METAL_MAYBE_FAST_MATH__ 0
#define __METAL_FAST_MATH__ 1
#define __METAL_PRECISE_MATH__ 2
#define KG_MB1(name) KG_INLINE float __metal_##name(float x, int = 0) { return metal::name(x); }
KG_MB1(fabs) KG_MB1(acos) KG_MB1(acosh) KG_MB1(asin) KG_MB1(asinh) KG_MB1(atan) KG_MB1(atanh)
KG_MB1(ceil) KG_MB1(cos) KG_MB1(cosh) KG_MB1(cospi) KG_MB1(exp) KG_MB1(exp10) KG_MB1(exp2)
KG_MB1(floor) KG_MB1(fract) KG_MB1(log) KG_MB1(log10) KG_MB1(log2) KG_MB1(rint) KG_MB1(round)
KG_MB1(rsqrt) KG_MB1(sin) KG_MB1(sinh) KG_MB1(sinpi) KG_MB1(sqrt) KG_MB1(tan) KG_MB1(tanh)
KG_MB1(tanpi) KG_MB1(trunc)
#undef KG_MB1
#define KG_MB2(name) KG_INLINE float __metal_##name(float x, float y, int = 0) { return metal::name(x, y); }
KG_MB2(atan2) KG_MB2(divide) KG_MB2(fmax) KG_MB2(fmin) KG_MB2(fmod) KG_MB2(pow) KG_MB2(powr)
KG_MB2(nextafter)
#undef KG_MB2
KG_INLINE float __metal_fma(float a, float b, float c) { return metal::fma(a, b, c); }
KG_INLINE float __metal_fmax3(float x, float y, float z, int = 0) { return metal::fmax3(x, y, z); }
KG_INLINE float __metal_fmin3(float x, float y, float z, int = 0) { return metal::fmin3(x, y, z); }
KG_INLINE float __metal_fmedian3(float x, float y, float z, int = 0) { return metal::fmedian3(x, y, z); }
KG_INLINE float __metal_frexp(float x, int* e) { return metal::frexp(x, e); }
KG_INLINE float __metal_ldexp(float x, int k, int = 0) { return metal::ldexp(x, k); }
KG_INLINE metal::ushort __metal_get_simdgroup_size(metal::ushort) { return 32; }
#define KG_LINE unsigned kg_line = __builtin_LINE()
#define KG_MS1(name) \
  template <class T> KG_INLINE T __metal_simd_##name(T x, KG_LINE) { return metal::simd_##name(x, kg_line); }
KG_MS1(sum) KG_MS1(product) KG_MS1(max) KG_MS1(min) KG_MS1(prefix_inclusive_sum)
KG_MS1(prefix_exclusive_sum) KG_MS1(prefix_inclusive_product) KG_MS1(prefix_exclusive_product)
#undef KG_MS1
#define KG_MS2(name) \
  template <class T> KG_INLINE T __metal_simd_##name(T x, metal::ushort n, KG_LINE) { return metal::simd_##name(x, n, kg_line); }
KG_MS2(broadcast) KG_MS2(shuffle) KG_MS2(shuffle_down) KG_MS2(shuffle_up) KG_MS2(shuffle_xor)
KG_MS2(shuffle_rotate_down) KG_MS2(shuffle_rotate_up)
#undef KG_MS2
// bitwise on the bits of a float (bf16_math.h instantiates it with float)
template <class T> KG_INLINE T __metal_simd_xor(T x, KG_LINE) {
  if constexpr (kgemu::is_same<T, float>::value)
    return metal::as_type<float>(metal::simd_xor(metal::as_type<metal::uint>(x), kg_line));
  else
    return metal::simd_xor(x, kg_line);
}
#undef KG_LINE
template <class T>
KG_INLINE T __metal_simd_shuffle_and_fill_down(T d, T f, metal::ushort delta, metal::ushort modulo,
                                               kgemu::CallLine at = kgemu::CallLine{__builtin_LINE()}) {
  return metal::simd_shuffle_and_fill_down(d, f, delta, modulo, at);
}
template <class T>
KG_INLINE T __metal_simd_shuffle_and_fill_up(T d, T f, metal::ushort delta, metal::ushort modulo,
                                             kgemu::CallLine at = kgemu::CallLine{__builtin_LINE()}) {
  return metal::simd_shuffle_and_fill_up(d, f, delta, modulo, at);
}

// ---------------------------------------------------------------- simdgroup matrices
// 8x8 only. Lane l holds row (l / 4 & 4) + (l / 2) % 4, columns (l / 4 & 2) * 2 + (l % 2) * 2
// and the next one (the layout MLX's steel/gemm/mma.h get_coord assumes).
// simdgroup_multiply_accumulate is a collective over the SIMD-group: each element of D
// is C[i][j] + sum over k = 0..7 of A[i][k] * B[k][j], in float, one fma per k in k
// order, then converted to D's type (inactive lanes contribute zeros).
namespace kgemu {
struct MmaLane { float a[2], b[2], c[2]; };
KG_INLINE int mma_row(int l) { return ((l / 4) & 4) + (l / 2) % 4; }
KG_INLINE int mma_col(int l) { return ((l / 4) & 2) * 2 + (l % 2) * 2; }
inline void op_mma(void* const* l, uint32_t active) {
  float A[8][8] = {}, B[8][8] = {}, C[8][8] = {};
  for (int i = 0; i < 32; ++i) {
    if (!((active >> i) & 1u)) continue;
    const MmaLane& m = lane_at<MmaLane>(l, i)->v;
    int r = mma_row(i), c = mma_col(i);
    for (int e = 0; e < 2; ++e) { A[r][c + e] = m.a[e]; B[r][c + e] = m.b[e]; C[r][c + e] = m.c[e]; }
  }
  for (int i = 0; i < 32; ++i) {
    if (!((active >> i) & 1u)) continue;
    MmaLane& m = lane_at<MmaLane>(l, i)->v;
    int r = mma_row(i), c = mma_col(i);
    for (int e = 0; e < 2; ++e) {
      float acc = C[r][c + e];
      for (int k = 0; k < 8; ++k) acc = __builtin_fmaf(A[r][k], B[k][c + e], acc);
      m.c[e] = acc;
    }
  }
}
enum : uint32_t { OP_MMA = 40 };
}  // namespace kgemu
namespace metal {
template <class T, int R, int C> struct simdgroup_matrix {
  static_assert(R == 8 && C == 8, "the emulator supports 8x8 simdgroup matrices only");
  vec<T, 2> e_;
  simdgroup_matrix() = default;
  // Metal's simdgroup_matrix(d): d on the diagonal, zero elsewhere (this lane's two elements,
  // MLX's steel tiles start from (0)).
  KG_INLINE explicit simdgroup_matrix(T d) {
    const int l = int(kgemu::rt.thread_info()->thread_index_in_simdgroup);
    for (int e = 0; e < 2; ++e) e_[e] = kgemu::mma_row(l) == kgemu::mma_col(l) + e ? d : T(0);
  }
  KG_INLINE vec<T, 2>& thread_elements() { return e_; }
  KG_INLINE const vec<T, 2>& thread_elements() const { return e_; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
template <class TD, class TA, class TB, class TC>
KG_INLINE void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                                             const simdgroup_matrix<TB, 8, 8>& b, const simdgroup_matrix<TC, 8, 8>& c,
                                             unsigned kg_line = __builtin_LINE()) {
  kgemu::MmaLane m;
  for (int e = 0; e < 2; ++e) {
    m.a[e] = float(a.e_[e]);
    m.b[e] = float(b.e_[e]);
    m.c[e] = float(c.e_[e]);
  }
  m = kgemu::collective<kgemu::MmaLane>(m, 0, kgemu::op_mma, kgemu::OP_MMA, kg_line);
  for (int e = 0; e < 2; ++e) d.e_[e] = TD(m.c[e]);
}
template <class TD, class TA, class TB>
KG_INLINE void simdgroup_multiply(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                                  const simdgroup_matrix<TB, 8, 8>& b, unsigned kg_line = __builtin_LINE()) {
  simdgroup_matrix<float, 8, 8> z;
  z.e_ = vec<float, 2>(0.0f);
  simdgroup_multiply_accumulate(d, a, b, z, kg_line);
}
}  // namespace metal

// ---------------------------------------------------------------- function constants
// A `[[function_constant(n)]]` without a value becomes a stand-in type with a
// `kgemu_fc_missing` member (see crates/emu/src/translate.rs); reading it does not compile.
namespace kgemu {
template <class T, class = void> struct is_fc_missing : metal::false_type {};
template <class T> struct is_fc_missing<T, decltype((void)T::kgemu_fc_missing)> : metal::true_type {};
}  // namespace kgemu
namespace metal {
template <class T> constexpr bool is_function_constant_defined(const T&) { return !kgemu::is_fc_missing<T>::value; }

// <metal_logging> (Metal 3.2): messages are dropped.
struct os_log {
  constexpr os_log() {}
  constexpr os_log(const char*, const char*) {}
  template <class... A> void log_debug(const char*, A...) const {}
  template <class... A> void log_info(const char*, A...) const {}
  template <class... A> void log_error(const char*, A...) const {}
  template <class... A> void log_fault(const char*, A...) const {}
  template <class... A> void log(const char*, A...) const {}
};
}  // namespace metal

// ---------------------------------------------------------------- sanitizer hooks
// Under -fsanitize=address,undefined (with recovery), every report handler the kernel
// calls is wrapped here (hidden, so only this object uses the wrappers): the wrapper
// tells the runtime which GPU thread and .metal line caused it, then calls the real
// handler, which prints the sanitizer's own report.
#if defined(__SANITIZE_ADDRESS__)
namespace kgemu {
template <class F> KG_INLINE F real_fn(const char* name) { return (F)dlsym(RTLD_DEFAULT, name); }
}
#define KG_ASAN_WRAP(kind, size, is_write)                                             \
  extern "C" __attribute__((visibility("hidden"), noinline))                          \
  void __asan_report_##kind##size##_noabort(uintptr_t addr) {                          \
    kgemu::rt.asan_note(addr, size, is_write, (uintptr_t)__builtin_return_address(0)); \
    static auto real = kgemu::real_fn<void (*)(uintptr_t)>("__asan_report_" #kind #size "_noabort"); \
    if (real) real(addr);                                                              \
  }
KG_ASAN_WRAP(load, 1, 0) KG_ASAN_WRAP(load, 2, 0) KG_ASAN_WRAP(load, 4, 0)
KG_ASAN_WRAP(load, 8, 0) KG_ASAN_WRAP(load, 16, 0)
KG_ASAN_WRAP(store, 1, 1) KG_ASAN_WRAP(store, 2, 1) KG_ASAN_WRAP(store, 4, 1)
KG_ASAN_WRAP(store, 8, 1) KG_ASAN_WRAP(store, 16, 1)
#undef KG_ASAN_WRAP
extern "C" __attribute__((visibility("hidden"), noinline))
void __asan_report_load_n_noabort(uintptr_t addr, uintptr_t size) {
  kgemu::rt.asan_note(addr, size, 0, (uintptr_t)__builtin_return_address(0));
  static auto real = kgemu::real_fn<void (*)(uintptr_t, uintptr_t)>("__asan_report_load_n_noabort");
  if (real) real(addr, size);
}
extern "C" __attribute__((visibility("hidden"), noinline))
void __asan_report_store_n_noabort(uintptr_t addr, uintptr_t size) {
  kgemu::rt.asan_note(addr, size, 1, (uintptr_t)__builtin_return_address(0));
  static auto real = kgemu::real_fn<void (*)(uintptr_t, uintptr_t)>("__asan_report_store_n_noabort");
  if (real) real(addr, size);
}

namespace kgemu {
struct UbLoc { const char* file; uint32_t line; uint32_t column; };
struct UbTypeDesc { uint16_t kind; uint16_t info; char name[1]; };
struct UbTypeMismatch { UbLoc loc; const UbTypeDesc* type; unsigned char log_alignment; unsigned char check_kind; };
KG_INLINE void ub_note(const char* what, void* data, uintptr_t pc, const char* type_name = nullptr,
                       uintptr_t ptr = 0, uint32_t align = 0) {
  const UbLoc* loc = (const UbLoc*)data;
  rt.ubsan_note(what, loc->file, loc->line, loc->column, pc, type_name, ptr, align);
}
}  // namespace kgemu
extern "C" __attribute__((visibility("hidden"), noinline))
void __ubsan_handle_type_mismatch_v1(void* data, uintptr_t ptr) {
  const kgemu::UbTypeMismatch* d = (const kgemu::UbTypeMismatch*)data;
  uintptr_t align = (uintptr_t)1 << d->log_alignment;
  const char* what = ptr == 0 ? "null pointer use"
                     : (align > 1 && (ptr & (align - 1)) != 0) ? "misaligned access"
                                                               : "access to an object of insufficient size";
  kgemu::ub_note(what, data, (uintptr_t)__builtin_return_address(0), d->type ? d->type->name : nullptr, ptr,
                 (uint32_t)align);
  static auto real = kgemu::real_fn<void (*)(void*, uintptr_t)>("__ubsan_handle_type_mismatch_v1");
  if (real) real(data, ptr);
}
#define KG_UB_WRAP2(name, what)                                                        \
  extern "C" __attribute__((visibility("hidden"), noinline))                          \
  void __ubsan_handle_##name(void* data, uintptr_t a, uintptr_t b) {                   \
    kgemu::ub_note(what, data, (uintptr_t)__builtin_return_address(0));                \
    static auto real = kgemu::real_fn<void (*)(void*, uintptr_t, uintptr_t)>("__ubsan_handle_" #name); \
    if (real) real(data, a, b);                                                        \
  }
#define KG_UB_WRAP1(name, what)                                                        \
  extern "C" __attribute__((visibility("hidden"), noinline))                          \
  void __ubsan_handle_##name(void* data, uintptr_t a) {                                \
    kgemu::ub_note(what, data, (uintptr_t)__builtin_return_address(0));                \
    static auto real = kgemu::real_fn<void (*)(void*, uintptr_t)>("__ubsan_handle_" #name); \
    if (real) real(data, a);                                                           \
  }
KG_UB_WRAP2(add_overflow, "signed integer overflow in +")
KG_UB_WRAP2(sub_overflow, "signed integer overflow in -")
KG_UB_WRAP2(mul_overflow, "signed integer overflow in *")
KG_UB_WRAP2(divrem_overflow, "integer division by zero or overflow")
KG_UB_WRAP2(shift_out_of_bounds, "shift out of bounds")
KG_UB_WRAP2(pointer_overflow, "pointer overflow")
KG_UB_WRAP1(negate_overflow, "signed integer overflow in unary -")
KG_UB_WRAP1(out_of_bounds, "array index out of bounds")
KG_UB_WRAP1(load_invalid_value, "load of an invalid value")
KG_UB_WRAP1(vla_bound_not_positive, "variable-length array bound not positive")
#undef KG_UB_WRAP1
#undef KG_UB_WRAP2
#endif

// ---------------------------------------------------------------- threadgroup-memory check
// Built with -fsanitize=thread (compile.rs, Build::Racecheck), g++ calls a hook before every
// load and store through a pointer, and turns every atomic operation into a call. No
// ThreadSanitizer runtime is linked: the hooks are these. An access to threadgroup memory (one
// compare against the runtime's region) goes to the runtime's race and bounds check
// (runtime/racecheck.rs) with the caller's address, for its source line (a CUDA source's
// `__shared__` arrays are threadgroup arrays too); atomics are done as the plain build does
// them, unrecorded (atomic operations do not race).
#if defined(__SANITIZE_THREAD__)
namespace kgemu {
KG_INLINE void tg_note(const volatile void* a, uint64_t n, uint32_t w, uintptr_t pc) {
  if ((uintptr_t)a - rt.tg_base < rt.tg_span) rt.tg_access((uintptr_t)a, n, w, pc);
}
}  // namespace kgemu
#define KG_TSAN extern "C" __attribute__((visibility("hidden"), noinline, no_sanitize_thread))
#define KG_TSAN_PC ((uintptr_t)__builtin_return_address(0))
#define KG_TSAN_RW(n)                                                                              \
  KG_TSAN void __tsan_read##n(void* a) { kgemu::tg_note(a, n, 0, KG_TSAN_PC); }                    \
  KG_TSAN void __tsan_write##n(void* a) { kgemu::tg_note(a, n, 1, KG_TSAN_PC); }                   \
  KG_TSAN void __tsan_unaligned_read##n(void* a) { kgemu::tg_note(a, n, 0, KG_TSAN_PC); }          \
  KG_TSAN void __tsan_unaligned_write##n(void* a) { kgemu::tg_note(a, n, 1, KG_TSAN_PC); }         \
  KG_TSAN void __tsan_volatile_read##n(void* a) { kgemu::tg_note(a, n, 0, KG_TSAN_PC); }           \
  KG_TSAN void __tsan_volatile_write##n(void* a) { kgemu::tg_note(a, n, 1, KG_TSAN_PC); }
KG_TSAN_RW(1) KG_TSAN_RW(2) KG_TSAN_RW(4) KG_TSAN_RW(8) KG_TSAN_RW(16)
#undef KG_TSAN_RW
KG_TSAN void __tsan_read_range(void* a, unsigned long n) { kgemu::tg_note(a, n, 0, KG_TSAN_PC); }
KG_TSAN void __tsan_write_range(void* a, unsigned long n) { kgemu::tg_note(a, n, 1, KG_TSAN_PC); }
KG_TSAN void __tsan_init() {}
KG_TSAN void __tsan_func_entry(void*) {}
KG_TSAN void __tsan_func_exit() {}
KG_TSAN void __tsan_vptr_update(void**, void*) {}
KG_TSAN void __tsan_vptr_read(void**) {}
// The memory order is ignored: fibers of a threadgroup share an OS thread, and device atomics
// are relaxed in Metal; sequentially consistent is never weaker.
#define KG_TSAN_ATOMIC(n, T)                                                                       \
  KG_TSAN T __tsan_atomic##n##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  KG_TSAN void __tsan_atomic##n##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN T __tsan_atomic##n##_fetch_nand(volatile T* a, T v, int) { return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST); } \
  KG_TSAN bool __tsan_atomic##n##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {    \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
  }                                                                                                \
  KG_TSAN bool __tsan_atomic##n##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {      \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
  }                                                                                                \
  KG_TSAN T __tsan_atomic##n##_compare_exchange_val(volatile T* a, T c, T v, int, int) {           \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
    return c;                                                                                      \
  }
KG_TSAN_ATOMIC(8, uint8_t) KG_TSAN_ATOMIC(16, uint16_t) KG_TSAN_ATOMIC(32, uint32_t) KG_TSAN_ATOMIC(64, uint64_t)
#undef KG_TSAN_ATOMIC
KG_TSAN void __tsan_atomic_thread_fence(int) {}
KG_TSAN void __tsan_atomic_signal_fence(int) {}
#undef KG_TSAN_PC
#undef KG_TSAN
#endif

// What follows is Metal's alone: a CUDA source (kgemu_cuda.h) sees none of it.
#ifndef KGEMU_CUDA
// ---------------------------------------------------------------- MSL spellings
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
#define HUGE_VALF (__builtin_huge_valf())
#define MAXFLOAT 3.40282347e+38f
#define FLT_MAX 3.40282347e+38f
#define FLT_MIN 1.17549435e-38f
#define FLT_EPSILON 1.1920929e-07f
#define HALF_MAX (metal::half::from_bits(0x7bff))
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_E_F 2.71828182845904523536028747135266250f
#define M_LN2_F 0.693147180559945309417232121458176568f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_SQRT2_F 1.41421356237309504880168872420969808f
#define M_LOG10E_F 0.434294481903251827651128918916605082f
#define M_LN10_F 2.30258509299404568401799145468436421f
#define M_PI_2_F 1.57079632679489661923132169163975144f
#define M_PI_4_F 0.785398163397448309615660845819875721f
#define M_1_PI_F 0.318309886183790671537767526745028724f
#define M_2_PI_F 0.636619772367581343075535053490057448f
#define M_2_SQRTPI_F 1.12837916709551257389615890312154517f
#define M_SQRT1_2_F 0.707106781186547524400844362104849039f
// assert (<metal_assert>, through <metal_stdlib>): the condition is evaluated, as the Metal check
// has it; a false one does nothing, as on a GPU without shader validation.
#undef assert
#define assert(condition) ((void)(bool)(condition))

using namespace metal;

// Address-space and function qualifiers are empty in C++.
#define device
#define constant
#define thread
#define threadgroup
#define kernel
#endif  // KGEMU_CUDA

#endif  // KGEMU_SHIM_H
