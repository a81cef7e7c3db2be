// kgemu_cuda.h: kernelgen's stand-in for what a CUDA kernel compiled by MLX's cuda_kernel
// (nvrtc) sees: CUDA's built-in variables, vector types, __half and __nv_bfloat16 (as
// cuda_fp16.h / cuda_bf16.h define them), math, warp operations, __syncthreads, atomics,
// cooperative groups (the part a kernel in one block uses), cuda::std's limits and arrays, and
// the utilities of MLX's mlx/backend/cuda/device/utils.cuh that a body may call. Written from
// the documentation (CUDA C++ Programming Guide, PTX ISA), not from NVIDIA's or MLX's headers.
//
// It includes kgemu_shim.h with KGEMU_CUDA defined: the runtime interface, half/bfloat
// conversions and the sanitizer hooks come from there, Metal's names stay in namespace metal.
// Warp operations and the threads' ids reach the runtime through `kgemu::rt` (runtime/warp.rs).
// docs/emulator.md ("CUDA") says what is modelled and where it stops.
#pragma once
#ifndef KGEMU_CUDA_H
#define KGEMU_CUDA_H
#define KGEMU_CUDA 1
#include "kgemu_shim.h"

// ---------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __inline_hint__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __cluster_dims__(...)
#define __grid_constant__
#define __constant__ const
#define __align__(n) __attribute__((aligned(n)))
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))
// The translation rewrites every `__shared__` declaration it supports; any other is an error.
#define __shared__ kgemu_shared_memory_must_be_declared_in_a_function_as_shared_T_name_N_semicolon

// ---------------------------------------------------------------- vector types
// CUDA's (vector_types.h): plain structs with x, y, z, w, the sizes and alignments of CUDA's;
// no operators, as in CUDA.
#define KG_CU_VEC(T, name, a2, a4)                                                     \
  struct name##1 { T x; };                                                             \
  struct __attribute__((aligned(a2))) name##2 { T x, y; };                             \
  struct name##3 { T x, y, z; };                                                       \
  struct __attribute__((aligned(a4))) name##4 { T x, y, z, w; };                       \
  KG_INLINE name##1 make_##name##1(T x) { return name##1{x}; }                         \
  KG_INLINE name##2 make_##name##2(T x, T y) { return name##2{x, y}; }                 \
  KG_INLINE name##3 make_##name##3(T x, T y, T z) { return name##3{x, y, z}; }         \
  KG_INLINE name##4 make_##name##4(T x, T y, T z, T w) { return name##4{x, y, z, w}; }
KG_CU_VEC(signed char, char, 2, 4)
KG_CU_VEC(unsigned char, uchar, 2, 4)
KG_CU_VEC(short, short, 4, 8)
KG_CU_VEC(unsigned short, ushort, 4, 8)
KG_CU_VEC(int, int, 8, 16)
KG_CU_VEC(unsigned int, uint, 8, 16)
KG_CU_VEC(long, long, 16, 16)
KG_CU_VEC(unsigned long, ulong, 16, 16)
KG_CU_VEC(long long, longlong, 16, 16)
KG_CU_VEC(unsigned long long, ulonglong, 16, 16)
KG_CU_VEC(float, float, 8, 16)
KG_CU_VEC(double, double, 16, 16)
#undef KG_CU_VEC
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---------------------------------------------------------------- __half and __nv_bfloat16
// 16-bit storage; every operation computes in float and rounds once to nearest even, which
// for +, -, *, / and sqrt is the correctly rounded result (float has more than 2p + 2 bits
// for both), as the GPU's own instructions give. __hfma rounds once from double. Conversions
// from float round to nearest even; a NaN becomes CUDA's canonical NaN (0x7fff) either way,
// and __half2float gives float's canonical NaN (0x7fffffff), as cuda_fp16.h's do.
namespace kgemu {
namespace cu {
KG_CX uint16_t f32_to_f16(float f) {
  return (float_to_bits(f) & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fffu : kgemu::f32_to_f16(f);
}
KG_CX float f16_to_f32(uint16_t h) {
  return ((h & 0x7fffu) > 0x7c00u) ? bits_to_float(0x7fffffffu) : kgemu::f16_to_f32(h);
}
KG_CX uint16_t f32_to_bf16(float f) {
  return (float_to_bits(f) & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fffu : kgemu::f32_to_bf16(f);
}
KG_CX float bf16_to_f32(uint16_t b) { return bits_to_float((uint32_t)b << 16); }
// A double rounded once to a format with `man` fraction bits, exponent bias `bias` and
// largest biased exponent `emax` (all ones: infinity/NaN), to nearest even.
KG_CX uint16_t f64_to_small(double d, int man, int bias, int emax) {
  uint64_t x = __builtin_bit_cast(uint64_t, d);
  uint16_t sign = (uint16_t)((x >> 63) << (man + (emax == 0x1f ? 5 : 8)));
  uint64_t mag = x & 0x7fffffffffffffffull;
  if (mag > 0x7ff0000000000000ull) return 0x7fffu;
  int ebits = emax == 0x1f ? 5 : 8;
  uint16_t inf = (uint16_t)(((1u << ebits) - 1u) << man);
  if (mag == 0x7ff0000000000000ull) return sign | inf;
  if (mag == 0) return sign;
  int e = (int)(mag >> 52) - 1023;
  uint64_t m = (mag & 0xfffffffffffffull) | (e > -1023 ? 1ull << 52 : 0);
  if (e == -1023) e = -1022;
  int be = e + bias;  // biased exponent of the result
  int shift = 52 - man + (be < 1 ? 1 - be : 0);
  if (shift > 63) return sign;
  uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) q += 1;
  uint64_t r = be < 1 ? q : ((uint64_t)be << man) + (q - (1ull << man));
  if (r >= inf) return sign | inf;
  return (uint16_t)(sign | r);
}
KG_CX uint16_t f64_to_f16(double d) { return f64_to_small(d, 10, 15, 0x1f); }
KG_CX uint16_t f64_to_bf16(double d) { return f64_to_small(d, 7, 127, 0xff); }
}  // namespace cu
}  // namespace kgemu

struct __half;
struct __nv_bfloat16;
struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };
// The members cuda_fp16.h / cuda_bf16.h give both types: construction from float, double and
// the integer types, conversion to float and to every integer type (so mixing one with
// another arithmetic type is ambiguous, as in CUDA: cast first).
#define KG_CU_HALF_TYPE(H, RAW, TO, TO64)                                         \
  struct __attribute__((aligned(2))) H {                                               \
    unsigned short __x;                                                                \
    H() = default;                                                                     \
    constexpr H(const RAW& r) : __x(r.x) {}                                            \
    KG_CX H(float f) : __x(kgemu::cu::TO(f)) {}                                        \
    KG_CX H(double d) : __x(kgemu::cu::TO64(d)) {}                       \
    KG_CX H(short v) : __x(kgemu::cu::TO((float)v)) {}                                 \
    KG_CX H(unsigned short v) : __x(kgemu::cu::TO((float)v)) {}                        \
    KG_CX H(int v) : __x(kgemu::cu::TO64((double)v)) {}                  \
    KG_CX H(unsigned int v) : __x(kgemu::cu::TO64((double)v)) {}         \
    KG_CX H(long v) : __x(kgemu::cu::TO64((double)v)) {}                 \
    KG_CX H(unsigned long v) : __x(kgemu::cu::TO64((double)v)) {}        \
    KG_CX H(long long v) : __x(kgemu::cu::TO64((double)v)) {}            \
    KG_CX H(unsigned long long v) : __x(kgemu::cu::TO64((double)v)) {}   \
    constexpr operator RAW() const { return RAW{__x}; }                                \
    KG_CX operator float() const;                                                      \
    operator signed char() const;                                                      \
    operator unsigned char() const;                                                    \
    operator char() const;                                                             \
    operator short() const;                                                            \
    operator unsigned short() const;                                                   \
    operator int() const;                                                              \
    operator unsigned int() const;                                                     \
    operator long() const;                                                             \
    operator unsigned long() const;                                                    \
    operator long long() const;                                                        \
    operator unsigned long long() const;                                               \
    operator bool() const { return (__x & 0x7fffu) != 0; }                             \
  };
KG_CU_HALF_TYPE(__half, __half_raw, f32_to_f16, f64_to_f16)
KG_CU_HALF_TYPE(__nv_bfloat16, __nv_bfloat16_raw, f32_to_bf16, f64_to_bf16)
#undef KG_CU_HALF_TYPE
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
KG_CX __half::operator float() const { return kgemu::cu::f16_to_f32(__x); }
KG_CX __nv_bfloat16::operator float() const { return kgemu::cu::bf16_to_f32(__x); }
namespace kgemu {
namespace cu {
// float to an integer type, toward zero, saturating, NaN to 0 (cvt.rzi.sat, as CUDA's
// __half2int_rz and friends).
template <class I> KG_INLINE I to_int_rz(float f) {
  constexpr bool is_signed = I(-1) < I(0);
  constexpr unsigned long long top = 1ull << (sizeof(I) * 8 - 1);
  constexpr double lo = is_signed ? -(double)top : 0.0;
  constexpr double hi = is_signed ? (double)top : 2.0 * (double)top;  // first value out of range
  if (f != f) return I(0);
  double t = __builtin_trunc((double)f);
  if (t < lo) return is_signed ? (I)top : I(0);
  if (t >= hi) return is_signed ? (I)(top - 1) : (I)~I(0);
  return (I)t;
}
}  // namespace cu
}  // namespace kgemu
#define KG_CU_TO_INT(H, I) \
  KG_INLINE H::operator I() const { return kgemu::cu::to_int_rz<I>(float(*this)); }
#define KG_CU_TO_INTS(H)                                                               \
  KG_CU_TO_INT(H, signed char) KG_CU_TO_INT(H, unsigned char) KG_CU_TO_INT(H, char)   \
  KG_CU_TO_INT(H, short) KG_CU_TO_INT(H, unsigned short) KG_CU_TO_INT(H, int)          \
  KG_CU_TO_INT(H, unsigned int) KG_CU_TO_INT(H, long) KG_CU_TO_INT(H, unsigned long)   \
  KG_CU_TO_INT(H, long long) KG_CU_TO_INT(H, unsigned long long)
KG_CU_TO_INTS(__half)
KG_CU_TO_INTS(__nv_bfloat16)
#undef KG_CU_TO_INTS
#undef KG_CU_TO_INT

// Operators (cuda_fp16.hpp / cuda_bf16.hpp define them on two operands of the type only).
#define KG_CU_HALF_OPS(H)                                                              \
  KG_INLINE H operator+(const H& a, const H& b) { return H(float(a) + float(b)); }    \
  KG_INLINE H operator-(const H& a, const H& b) { return H(float(a) - float(b)); }    \
  KG_INLINE H operator*(const H& a, const H& b) { return H(float(a) * float(b)); }    \
  KG_INLINE H operator/(const H& a, const H& b) { return H(float(a) / float(b)); }    \
  KG_INLINE H& operator+=(H& a, const H& b) { return a = a + b; }                      \
  KG_INLINE H& operator-=(H& a, const H& b) { return a = a - b; }                      \
  KG_INLINE H& operator*=(H& a, const H& b) { return a = a * b; }                      \
  KG_INLINE H& operator/=(H& a, const H& b) { return a = a / b; }                      \
  KG_INLINE H operator+(const H& a) { return a; }                                      \
  KG_INLINE H operator-(const H& a) { H r = a; r.__x ^= 0x8000u; return r; }           \
  KG_INLINE H& operator++(H& a) { return a = a + H(1.0f); }                            \
  KG_INLINE H& operator--(H& a) { return a = a - H(1.0f); }                            \
  KG_INLINE H operator++(H& a, int) { H r = a; a = a + H(1.0f); return r; }            \
  KG_INLINE H operator--(H& a, int) { H r = a; a = a - H(1.0f); return r; }            \
  KG_INLINE bool operator==(const H& a, const H& b) { return float(a) == float(b); }  \
  KG_INLINE bool operator!=(const H& a, const H& b) { return float(a) != float(b); }  \
  KG_INLINE bool operator<(const H& a, const H& b) { return float(a) < float(b); }    \
  KG_INLINE bool operator>(const H& a, const H& b) { return float(a) > float(b); }    \
  KG_INLINE bool operator<=(const H& a, const H& b) { return float(a) <= float(b); }  \
  KG_INLINE bool operator>=(const H& a, const H& b) { return float(a) >= float(b); }
KG_CU_HALF_OPS(__half)
KG_CU_HALF_OPS(__nv_bfloat16)
#undef KG_CU_HALF_OPS

// Pairs (__half2, __nv_bfloat162): elementwise.
#define KG_CU_PAIR(P, H)                                                               \
  struct __attribute__((aligned(4))) P {                                               \
    H x, y;                                                                            \
    P() = default;                                                                     \
    constexpr P(const H& a, const H& b) : x(a), y(b) {}                                \
  };                                                                                   \
  KG_INLINE P operator+(const P& a, const P& b) { return P(a.x + b.x, a.y + b.y); }   \
  KG_INLINE P operator-(const P& a, const P& b) { return P(a.x - b.x, a.y - b.y); }   \
  KG_INLINE P operator*(const P& a, const P& b) { return P(a.x * b.x, a.y * b.y); }   \
  KG_INLINE P operator/(const P& a, const P& b) { return P(a.x / b.x, a.y / b.y); }   \
  KG_INLINE P& operator+=(P& a, const P& b) { return a = a + b; }                      \
  KG_INLINE P& operator-=(P& a, const P& b) { return a = a - b; }                      \
  KG_INLINE P& operator*=(P& a, const P& b) { return a = a * b; }                      \
  KG_INLINE P& operator/=(P& a, const P& b) { return a = a / b; }                      \
  KG_INLINE P operator-(const P& a) { return P(-a.x, -a.y); }                          \
  KG_INLINE bool operator==(const P& a, const P& b) { return a.x == b.x && a.y == b.y; } \
  KG_INLINE bool operator!=(const P& a, const P& b) { return !(a == b); }
KG_CU_PAIR(__half2, __half)
KG_CU_PAIR(__nv_bfloat162, __nv_bfloat16)
#undef KG_CU_PAIR
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;

// Conversion intrinsics.
KG_INLINE float __half2float(__half h) { return float(h); }
KG_INLINE __half __float2half(float f) { return __half(f); }
KG_INLINE __half __float2half_rn(float f) { return __half(f); }
KG_INLINE __half __double2half(double d) { return __half(d); }
KG_INLINE float __bfloat162float(__nv_bfloat16 b) { return float(b); }
KG_INLINE __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
KG_INLINE __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
KG_INLINE __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
KG_INLINE __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
KG_INLINE unsigned short __half_as_ushort(__half h) { return h.__x; }
KG_INLINE short __half_as_short(__half h) { return (short)h.__x; }
KG_INLINE __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
KG_INLINE unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
KG_INLINE short __bfloat16_as_short(__nv_bfloat16 b) { return (short)b.__x; }
KG_INLINE int __half2int_rz(__half h) { return kgemu::cu::to_int_rz<int>(float(h)); }
KG_INLINE int __bfloat162int_rz(__nv_bfloat16 b) { return kgemu::cu::to_int_rz<int>(float(b)); }
KG_INLINE __half __int2half_rn(int i) { return __half(i); }
KG_INLINE __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16(i); }
KG_INLINE __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
KG_INLINE __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
KG_INLINE __half2 __float22half2_rn(float2 v) { return __half2(__half(v.x), __half(v.y)); }
KG_INLINE float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
KG_INLINE __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
KG_INLINE __half2 __half2half2(__half a) { return __half2(a, a); }
KG_INLINE __half __low2half(__half2 h) { return h.x; }
KG_INLINE __half __high2half(__half2 h) { return h.y; }
KG_INLINE float __low2float(__half2 h) { return float(h.x); }
KG_INLINE float __high2float(__half2 h) { return float(h.y); }
KG_INLINE __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162(__nv_bfloat16(f), __nv_bfloat16(f)); }
KG_INLINE __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b)); }
KG_INLINE __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __nv_bfloat162(__nv_bfloat16(v.x), __nv_bfloat16(v.y)); }
KG_INLINE float2 __bfloat1622float2(__nv_bfloat162 b) { return float2{float(b.x), float(b.y)}; }
KG_INLINE __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
KG_INLINE __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
KG_INLINE __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) { return b.x; }
KG_INLINE __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) { return b.y; }
KG_INLINE float __low2float(__nv_bfloat162 b) { return float(b.x); }
KG_INLINE float __high2float(__nv_bfloat162 b) { return float(b.y); }

// Arithmetic intrinsics (one rounding each).
#define KG_CU_HALF_FNS(H, P, TO64)                                                     \
  KG_INLINE H __hadd(H a, H b) { return a + b; }                                       \
  KG_INLINE H __hsub(H a, H b) { return a - b; }                                       \
  KG_INLINE H __hmul(H a, H b) { return a * b; }                                       \
  KG_INLINE H __hdiv(H a, H b) { return a / b; }                                       \
  KG_INLINE H __hneg(H a) { return -a; }                                               \
  KG_INLINE H __habs(H a) { H r = a; r.__x &= 0x7fffu; return r; }                     \
  KG_INLINE H __hfma(H a, H b, H c) {                                                  \
    H r;                                                                               \
    r.__x = kgemu::cu::TO64((double)float(a) * (double)float(b) + (double)float(c));   \
    return r;                                                                          \
  }                                                                                    \
  KG_INLINE H __hmax(H a, H b) { return H(__builtin_fmaxf(float(a), float(b))); }      \
  KG_INLINE H __hmin(H a, H b) { return H(__builtin_fminf(float(a), float(b))); }      \
  KG_INLINE bool __heq(H a, H b) { return a == b; }                                    \
  KG_INLINE bool __hne(H a, H b) { return a != b; }                                    \
  KG_INLINE bool __hlt(H a, H b) { return a < b; }                                     \
  KG_INLINE bool __hle(H a, H b) { return a <= b; }                                    \
  KG_INLINE bool __hgt(H a, H b) { return a > b; }                                     \
  KG_INLINE bool __hge(H a, H b) { return a >= b; }                                    \
  KG_INLINE bool __hisnan(H a) { return float(a) != float(a); }                        \
  KG_INLINE int __hisinf(H a) { float f = float(a); return f == __builtin_inff() ? 1 : f == -__builtin_inff() ? -1 : 0; } \
  KG_INLINE P __hadd2(P a, P b) { return a + b; }                                      \
  KG_INLINE P __hsub2(P a, P b) { return a - b; }                                      \
  KG_INLINE P __hmul2(P a, P b) { return a * b; }                                      \
  KG_INLINE P __h2div(P a, P b) { return a / b; }                                      \
  KG_INLINE P __hfma2(P a, P b, P c) { return P(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  KG_INLINE P __hmax2(P a, P b) { return P(__hmax(a.x, b.x), __hmax(a.y, b.y)); }     \
  KG_INLINE P __hmin2(P a, P b) { return P(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
KG_CU_HALF_FNS(__half, __half2, f64_to_f16)
KG_CU_HALF_FNS(__nv_bfloat16, __nv_bfloat162, f64_to_bf16)
#undef KG_CU_HALF_FNS
KG_INLINE __half hexp(__half a) { return __half(__builtin_expf(float(a))); }
KG_INLINE __nv_bfloat16 hexp(__nv_bfloat16 a) { return __nv_bfloat16(__builtin_expf(float(a))); }
KG_INLINE __half hsqrt(__half a) { return __half(__builtin_sqrtf(float(a))); }
KG_INLINE __nv_bfloat16 hsqrt(__nv_bfloat16 a) { return __nv_bfloat16(__builtin_sqrtf(float(a))); }
KG_INLINE __half hrsqrt(__half a) { return __half(1.0f / __builtin_sqrtf(float(a))); }
KG_INLINE __nv_bfloat16 hrsqrt(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / __builtin_sqrtf(float(a))); }

// ---------------------------------------------------------------- the thread's ids
namespace kgemu {
namespace cu {
// The calling GPU thread's ids. `const`: within one call of a function the answer is the
// same (a fiber is one GPU thread), so the compiler asks once per function.
__attribute__((const, noinline)) inline const ThreadInfo* ti() { return rt.thread_info(); }
KG_INLINE ::uint3 thread_idx() { const ThreadInfo* t = ti(); return ::uint3{t->thread_position_in_threadgroup.x, t->thread_position_in_threadgroup.y, t->thread_position_in_threadgroup.z}; }
KG_INLINE ::uint3 block_idx() { const ThreadInfo* t = ti(); return ::uint3{t->threadgroup_position_in_grid.x, t->threadgroup_position_in_grid.y, t->threadgroup_position_in_grid.z}; }
KG_INLINE ::dim3 block_dim() { const ThreadInfo* t = ti(); return ::dim3(t->threads_per_threadgroup.x, t->threads_per_threadgroup.y, t->threads_per_threadgroup.z); }
KG_INLINE ::dim3 grid_dim() { const ThreadInfo* t = ti(); return ::dim3(t->threadgroups_per_grid.x, t->threadgroups_per_grid.y, t->threadgroups_per_grid.z); }
KG_INLINE unsigned lane_id() { return ti()->thread_index_in_simdgroup; }
// warpSize is a variable in CUDA, not a constant expression.
KG_INLINE int warp_size() { return 32; }
}  // namespace cu
}  // namespace kgemu
#define threadIdx (::kgemu::cu::thread_idx())
#define blockIdx (::kgemu::cu::block_idx())
#define blockDim (::kgemu::cu::block_dim())
#define gridDim (::kgemu::cu::grid_dim())
#define warpSize (::kgemu::cu::warp_size())

// ---------------------------------------------------------------- warp operations
// Masked, as CUDA's: the calling lane must be in `mask` (else undefined behaviour, reported
// at the line); the lanes of the mask that have not returned run the operation together once
// all of them reach it with the same mask (runtime/warp.rs). Shuffles move data as PTX's
// shfl.sync does (its clamp and segment mask from `width`); a lane that reads a lane outside
// the group reads poison (all bits set: NaN for floats), the value being undefined in CUDA.
namespace kgemu {
namespace cu {
enum Op : uint32_t { OP_SHFL = 64, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR, OP_BALLOT, OP_ANY, OP_ALL, OP_SYNCWARP };
// __syncthreads: a barrier of the block (kind 1) that orders shared and global memory, Metal's
// mem_threadgroup | mem_device in the flags from bit 8 (the threadgroup-memory check reads them).
constexpr uint32_t SYNCTHREADS = 1u | ((uint32_t)metal::mem_device | (uint32_t)metal::mem_threadgroup) << 8;
// Mirrors what runtime/warp.rs reads: the mask first.
template <class T> struct WarpLane { uint32_t mask; uint32_t arg; int32_t width; uint32_t pad; T v; };
template <class T> KG_INLINE WarpLane<T>* wl(void* const* l, int i) { return (WarpLane<T>*)l[i]; }
template <class T> KG_INLINE T poison() { T t; __builtin_memset((void*)&t, 0xff, sizeof(T)); return t; }
template <class T, int MODE> void op_shfl(void* const* l, uint32_t group) {
  T in[32];
  for (int i = 0; i < 32; ++i) if ((group >> i) & 1u) in[i] = wl<T>(l, i)->v;
  for (int i = 0; i < 32; ++i) {
    if (!((group >> i) & 1u)) continue;
    WarpLane<T>* me = wl<T>(l, i);
    // PTX: c = ((32 - width) << 8) | clamp (0x1f, 0 for up); segmask = c[12:8]
    int segmask = (32 - me->width) & 0x1f, clamp = MODE == OP_SHFL_UP ? 0 : 0x1f;
    int max_lane = (i & segmask) | (clamp & ~segmask), min_lane = i & segmask;
    int b = (int)(me->arg & 0x1fu), j;
    bool in_range;
    if (MODE == OP_SHFL) { j = min_lane | (b & ~segmask); in_range = j <= max_lane; }
    else if (MODE == OP_SHFL_UP) { j = i - b; in_range = j >= max_lane; }
    else if (MODE == OP_SHFL_DOWN) { j = i + b; in_range = j <= max_lane; }
    else { j = i ^ b; in_range = j <= max_lane; }
    if (!in_range) j = i;
    me->v = ((group >> j) & 1u) ? in[j] : poison<T>();
  }
}
template <int MODE> void op_vote(void* const* l, uint32_t group) {
  uint32_t ballot = 0;
  for (int i = 0; i < 32; ++i) if (((group >> i) & 1u) && wl<uint32_t>(l, i)->v) ballot |= 1u << i;
  uint32_t r = MODE == OP_BALLOT ? ballot : MODE == OP_ANY ? (uint32_t)(ballot != 0) : (uint32_t)(ballot == group);
  for (int i = 0; i < 32; ++i) if ((group >> i) & 1u) wl<uint32_t>(l, i)->v = r;
}
inline void op_syncwarp(void* const*, uint32_t) {}
KG_INLINE void check_mask(uint32_t op, unsigned mask, unsigned line) {
  unsigned lane = lane_id();
  if (!((mask >> lane) & 1u)) rt.cuda_ub(1, op, mask, lane, line);
}
template <class T, int MODE> KG_INLINE T shfl(unsigned mask, T var, unsigned arg, int width, unsigned line) {
  check_mask(MODE, mask, line);
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) rt.cuda_ub(2, MODE, (uint32_t)width, 0, line);
  WarpLane<T> lane{mask, arg, width, 0, var};
  rt.warp(&lane, op_shfl<T, MODE>, MODE, line);
  return lane.v;
}
template <int MODE> KG_INLINE unsigned vote(unsigned mask, int pred, unsigned line) {
  check_mask(MODE, mask, line);
  WarpLane<uint32_t> lane{mask, 0, 32, 0, pred != 0};
  rt.warp(&lane, op_vote<MODE>, MODE, line);
  return lane.v;
}
}  // namespace cu
}  // namespace kgemu
#define KG_LINE unsigned kg_line = __builtin_LINE()
// One overload per type CUDA has one for (a narrower integer promotes to int, as there).
#define KG_CU_SHFL(T)                                                                  \
  KG_INLINE T __shfl_sync(unsigned mask, T var, int src, int width = 32, KG_LINE) {    \
    return kgemu::cu::shfl<T, kgemu::cu::OP_SHFL>(mask, var, (unsigned)src, width, kg_line); \
  }                                                                                    \
  KG_INLINE T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, KG_LINE) { \
    return kgemu::cu::shfl<T, kgemu::cu::OP_SHFL_UP>(mask, var, delta, width, kg_line); \
  }                                                                                    \
  KG_INLINE T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, KG_LINE) { \
    return kgemu::cu::shfl<T, kgemu::cu::OP_SHFL_DOWN>(mask, var, delta, width, kg_line); \
  }                                                                                    \
  KG_INLINE T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, KG_LINE) { \
    return kgemu::cu::shfl<T, kgemu::cu::OP_SHFL_XOR>(mask, var, (unsigned)lane_mask, width, kg_line); \
  }
KG_CU_SHFL(int) KG_CU_SHFL(unsigned int) KG_CU_SHFL(long) KG_CU_SHFL(unsigned long)
KG_CU_SHFL(long long) KG_CU_SHFL(unsigned long long) KG_CU_SHFL(float) KG_CU_SHFL(double)
KG_CU_SHFL(__half) KG_CU_SHFL(__half2) KG_CU_SHFL(__nv_bfloat16) KG_CU_SHFL(__nv_bfloat162)
#undef KG_CU_SHFL
KG_INLINE unsigned __ballot_sync(unsigned mask, int pred, KG_LINE) { return kgemu::cu::vote<kgemu::cu::OP_BALLOT>(mask, pred, kg_line); }
KG_INLINE int __any_sync(unsigned mask, int pred, KG_LINE) { return (int)kgemu::cu::vote<kgemu::cu::OP_ANY>(mask, pred, kg_line); }
KG_INLINE int __all_sync(unsigned mask, int pred, KG_LINE) { return (int)kgemu::cu::vote<kgemu::cu::OP_ALL>(mask, pred, kg_line); }
KG_INLINE void __syncwarp(unsigned mask = 0xffffffffu, KG_LINE) {
  kgemu::cu::check_mask(kgemu::cu::OP_SYNCWARP, mask, kg_line);
  kgemu::cu::WarpLane<uint32_t> lane{mask, 0, 32, 0, 0};
  kgemu::rt.warp(&lane, kgemu::cu::op_syncwarp, kgemu::cu::OP_SYNCWARP, kg_line);
}
// The lanes of the warp that have not returned (CUDA's answer also leaves out lanes elsewhere
// in divergent code; code that relies on that races here, as it may on a GPU).
KG_INLINE unsigned __activemask() { return kgemu::rt.live_lanes(); }
KG_INLINE unsigned __lanemask_lt() { return (1u << kgemu::cu::lane_id()) - 1u; }
KG_INLINE void __syncthreads(KG_LINE) { kgemu::rt.barrier(kgemu::cu::SYNCTHREADS, kg_line); }
// Fibers of a block run one at a time on one CPU thread and device memory is ordinary memory:
// a fence needs no more than the compiler's.
KG_INLINE void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
KG_INLINE void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------- math
// glibc's float functions (crates/emu's allow-list): expf and __expf alike are glibc's expf,
// correctly rounded in practice, where CUDA's expf is within 2 ulp and __expf within
// 2 + floor(|1.173 x|) ulp; rsqrtf is 1 / sqrtf (CUDA's: 2 ulp); __fdividef is x / y.
// A comparison with a GPU's results needs the tolerance of those bounds.
KG_INLINE float expf(float x) { return __builtin_expf(x); }
KG_INLINE float __expf(float x) { return __builtin_expf(x); }
KG_INLINE float exp2f(float x) { return __builtin_exp2f(x); }
KG_INLINE float exp10f(float x) { return __builtin_powf(10.0f, x); }
KG_INLINE float expm1f(float x) { return __builtin_expm1f(x); }
KG_INLINE float logf(float x) { return __builtin_logf(x); }
KG_INLINE float __logf(float x) { return __builtin_logf(x); }
KG_INLINE float log2f(float x) { return __builtin_log2f(x); }
KG_INLINE float __log2f(float x) { return __builtin_log2f(x); }
KG_INLINE float log10f(float x) { return __builtin_log10f(x); }
KG_INLINE float log1pf(float x) { return __builtin_log1pf(x); }
KG_INLINE float sqrtf(float x) { return __builtin_sqrtf(x); }
KG_INLINE float __fsqrt_rn(float x) { return __builtin_sqrtf(x); }
KG_INLINE float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
KG_INLINE float cbrtf(float x) { return __builtin_cbrtf(x); }
KG_INLINE float powf(float x, float y) { return __builtin_powf(x, y); }
KG_INLINE float __powf(float x, float y) { return __builtin_powf(x, y); }
KG_INLINE float sinf(float x) { return __builtin_sinf(x); }
KG_INLINE float cosf(float x) { return __builtin_cosf(x); }
KG_INLINE float tanf(float x) { return __builtin_tanf(x); }
KG_INLINE float __sinf(float x) { return __builtin_sinf(x); }
KG_INLINE float __cosf(float x) { return __builtin_cosf(x); }
KG_INLINE float tanhf(float x) { return __builtin_tanhf(x); }
KG_INLINE float sinhf(float x) { return __builtin_sinhf(x); }
KG_INLINE float coshf(float x) { return __builtin_coshf(x); }
KG_INLINE float atanf(float x) { return __builtin_atanf(x); }
KG_INLINE float atan2f(float y, float x) { return __builtin_atan2f(y, x); }
KG_INLINE float erff(float x) { return __builtin_erff(x); }
KG_INLINE float erfcf(float x) { return __builtin_erfcf(x); }
KG_INLINE float fabsf(float x) { return __builtin_fabsf(x); }
KG_INLINE float fmaxf(float x, float y) { return __builtin_fmaxf(x, y); }
KG_INLINE float fminf(float x, float y) { return __builtin_fminf(x, y); }
KG_INLINE float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
KG_INLINE float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
KG_INLINE float __fmul_rn(float a, float b) { return a * b; }
KG_INLINE float __fadd_rn(float a, float b) { return a + b; }
KG_INLINE float __fsub_rn(float a, float b) { return a - b; }
KG_INLINE float __fdiv_rn(float a, float b) { return a / b; }
KG_INLINE float __fdividef(float a, float b) { return a / b; }
KG_INLINE float __frcp_rn(float a) { return 1.0f / a; }
KG_INLINE float __saturatef(float x) { return x != x ? 0.0f : __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f); }
KG_INLINE float floorf(float x) { return __builtin_floorf(x); }
KG_INLINE float ceilf(float x) { return __builtin_ceilf(x); }
KG_INLINE float roundf(float x) { return __builtin_roundf(x); }
KG_INLINE float rintf(float x) { return __builtin_rintf(x); }
KG_INLINE float truncf(float x) { return __builtin_truncf(x); }
KG_INLINE float fmodf(float x, float y) { return __builtin_fmodf(x, y); }
KG_INLINE float copysignf(float x, float y) { return __builtin_copysignf(x, y); }
KG_INLINE float ldexpf(float x, int k) { return __builtin_ldexpf(x, k); }
KG_INLINE bool isnan(float x) { return __builtin_isnan(x); }
KG_INLINE bool isinf(float x) { return __builtin_isinf(x); }
KG_INLINE bool isfinite(float x) { return __builtin_isfinite(x); }
KG_INLINE bool signbit(float x) { return __builtin_signbit(x); }
KG_INLINE bool isnan(double x) { return __builtin_isnan(x); }
KG_INLINE bool isinf(double x) { return __builtin_isinf(x); }
KG_INLINE bool isfinite(double x) { return __builtin_isfinite(x); }
KG_INLINE double sqrt(double x) { return __builtin_sqrt(x); }
KG_INLINE double fabs(double x) { return __builtin_fabs(x); }
KG_INLINE double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
KG_INLINE double fmax(double a, double b) { return __builtin_fmax(a, b); }
KG_INLINE double fmin(double a, double b) { return __builtin_fmin(a, b); }
KG_INLINE float __int_as_float(int i) { return __builtin_bit_cast(float, i); }
KG_INLINE int __float_as_int(float f) { return __builtin_bit_cast(int, f); }
KG_INLINE float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
KG_INLINE unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
KG_INLINE int __float2int_rn(float f) { return (int)__builtin_rintf(f); }
KG_INLINE int __float2int_rz(float f) { return kgemu::cu::to_int_rz<int>(f); }
KG_INLINE unsigned __float2uint_rz(float f) { return kgemu::cu::to_int_rz<unsigned>(f); }
KG_INLINE float __int2float_rn(int i) { return (float)i; }
KG_INLINE float __uint2float_rn(unsigned u) { return (float)u; }
KG_INLINE int __popc(unsigned x) { return __builtin_popcount(x); }
KG_INLINE int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
KG_INLINE int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
KG_INLINE int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
KG_INLINE int __ffs(int x) { return __builtin_ffs(x); }
KG_INLINE int __ffsll(long long x) { return __builtin_ffsll(x); }
KG_INLINE unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
KG_INLINE unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
KG_INLINE int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
KG_INLINE unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
// min/max as CUDA's overloads: integers by value, floats as fminf/fmaxf.
#define KG_CU_MINMAX(A, B, R)                                                          \
  KG_INLINE R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }                      \
  KG_INLINE R max(A a, B b) { return (R)a < (R)b ? (R)b : (R)a; }
KG_CU_MINMAX(int, int, int) KG_CU_MINMAX(unsigned int, unsigned int, unsigned int)
KG_CU_MINMAX(int, unsigned int, unsigned int) KG_CU_MINMAX(unsigned int, int, unsigned int)
KG_CU_MINMAX(long, long, long) KG_CU_MINMAX(unsigned long, unsigned long, unsigned long)
KG_CU_MINMAX(long long, long long, long long)
KG_CU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
#undef KG_CU_MINMAX
KG_INLINE float min(float a, float b) { return __builtin_fminf(a, b); }
KG_INLINE float max(float a, float b) { return __builtin_fmaxf(a, b); }
KG_INLINE double min(double a, double b) { return __builtin_fmin(a, b); }
KG_INLINE double max(double a, double b) { return __builtin_fmax(a, b); }
KG_INLINE double min(float a, double b) { return __builtin_fmin(a, b); }
KG_INLINE double max(float a, double b) { return __builtin_fmax(a, b); }
KG_INLINE double min(double a, float b) { return __builtin_fmin(a, b); }
KG_INLINE double max(double a, float b) { return __builtin_fmax(a, b); }
KG_INLINE int abs(int x) { return x < 0 ? -x : x; }
KG_INLINE long long llabs(long long x) { return x < 0 ? -x : x; }
// __ldg: a read through the read-only cache; the same value.
template <class T> KG_INLINE T __ldg(const T* p) { return *p; }

// ---------------------------------------------------------------- atomics
// Real atomic operations (relaxed, as CUDA's): blocks run on several CPU threads at once.
// Those without a builtin (float add, min, max of floats) are compare-exchange loops.
namespace kgemu {
namespace cu {
template <class T, class F> KG_INLINE T rmw(T* p, F f) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
template <class T, class F> KG_INLINE T rmw_bits(T* p, F f) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics of 4 or 8 bytes");
  typedef typename metal::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type U;
  U* q = (U*)p;
  U old = __atomic_load_n(q, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(q, &old, __builtin_bit_cast(U, f(__builtin_bit_cast(T, old))), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return __builtin_bit_cast(T, old);
}
}  // namespace cu
}  // namespace kgemu
#define KG_CU_ATOMIC_INT(T)                                                            \
  KG_INLINE T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
  KG_INLINE T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); } \
  KG_INLINE T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); } \
  KG_INLINE T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }   \
  KG_INLINE T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); } \
  KG_INLINE T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
  KG_INLINE T atomicMin(T* p, T v) { return kgemu::cu::rmw(p, [v](T o) { return v < o ? v : o; }); } \
  KG_INLINE T atomicMax(T* p, T v) { return kgemu::cu::rmw(p, [v](T o) { return o < v ? v : o; }); } \
  KG_INLINE T atomicCAS(T* p, T cmp, T v) {                                            \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return cmp;                                                                        \
  }
KG_CU_ATOMIC_INT(int) KG_CU_ATOMIC_INT(unsigned int) KG_CU_ATOMIC_INT(unsigned long long)
KG_CU_ATOMIC_INT(long long)
#undef KG_CU_ATOMIC_INT
KG_INLINE unsigned atomicInc(unsigned* p, unsigned v) { return kgemu::cu::rmw(p, [v](unsigned o) { return o >= v ? 0u : o + 1u; }); }
KG_INLINE float atomicAdd(float* p, float v) { return kgemu::cu::rmw_bits(p, [v](float o) { return o + v; }); }
KG_INLINE double atomicAdd(double* p, double v) { return kgemu::cu::rmw_bits(p, [v](double o) { return o + v; }); }
KG_INLINE float atomicExch(float* p, float v) { return kgemu::cu::rmw_bits(p, [v](float) { return v; }); }
KG_INLINE float atomicMax(float* p, float v) { return kgemu::cu::rmw_bits(p, [v](float o) { return __builtin_fmaxf(o, v); }); }
KG_INLINE float atomicMin(float* p, float v) { return kgemu::cu::rmw_bits(p, [v](float o) { return __builtin_fminf(o, v); }); }

// ---------------------------------------------------------------- cuda::std
namespace cuda {
namespace std {
using ::metal::enable_if; using ::metal::enable_if_t; using ::metal::is_same; using ::metal::is_same_v;
using ::metal::conditional; using ::metal::conditional_t; using ::metal::integral_constant;
using ::metal::true_type; using ::metal::false_type; using ::metal::is_integral; using ::metal::is_integral_v;
using ::metal::is_signed; using ::metal::is_signed_v; using ::metal::is_unsigned; using ::metal::is_unsigned_v;
using ::metal::remove_const_t; using ::metal::remove_cv_t; using ::metal::remove_reference_t;
using ::metal::make_unsigned_t; using ::metal::make_signed_t;
template <class T> struct is_floating_point : false_type {};
template <> struct is_floating_point<float> : true_type {};
template <> struct is_floating_point<double> : true_type {};
template <> struct is_floating_point<__half> : true_type {};
template <> struct is_floating_point<__nv_bfloat16> : true_type {};
template <class T> constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T> struct numeric_limits;
#define KG_CU_INT_LIMITS(T, lo_, hi_)                                                  \
  template <> struct numeric_limits<T> {                                               \
    static constexpr bool is_specialized = true, is_signed = ::metal::is_signed<T>::value, is_integer = true; \
    static constexpr int digits = (int)(sizeof(T) * 8) - (is_signed ? 1 : 0);           \
    static constexpr T min() { return lo_; }                                           \
    static constexpr T lowest() { return lo_; }                                        \
    static constexpr T max() { return hi_; }                                           \
  };
KG_CU_INT_LIMITS(bool, false, true)
KG_CU_INT_LIMITS(signed char, (signed char)-128, (signed char)127)
KG_CU_INT_LIMITS(char, (char)-128, (char)127)
KG_CU_INT_LIMITS(unsigned char, (unsigned char)0, (unsigned char)255)
KG_CU_INT_LIMITS(short, (short)-32768, (short)32767)
KG_CU_INT_LIMITS(unsigned short, (unsigned short)0, (unsigned short)65535)
KG_CU_INT_LIMITS(int, (-2147483647 - 1), 2147483647)
KG_CU_INT_LIMITS(unsigned int, 0u, 4294967295u)
KG_CU_INT_LIMITS(long, (-9223372036854775807L - 1), 9223372036854775807L)
KG_CU_INT_LIMITS(unsigned long, 0ul, 18446744073709551615ul)
KG_CU_INT_LIMITS(long long, (-9223372036854775807LL - 1), 9223372036854775807LL)
KG_CU_INT_LIMITS(unsigned long long, 0ull, 18446744073709551615ull)
#undef KG_CU_INT_LIMITS
#define KG_CU_FLOAT_LIMITS(T, MIN, MAX, EPS, INF, QNAN, DIGITS)                        \
  template <> struct numeric_limits<T> {                                               \
    static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true, has_quiet_NaN = true; \
    static constexpr int digits = DIGITS;                                              \
    static constexpr T min() { return MIN; }                                           \
    static constexpr T lowest() { return -(MAX); }                                     \
    static constexpr T max() { return MAX; }                                           \
    static constexpr T epsilon() { return EPS; }                                       \
    static constexpr T infinity() { return INF; }                                      \
    static constexpr T quiet_NaN() { return QNAN; }                                    \
  };
KG_CU_FLOAT_LIMITS(float, 1.17549435e-38f, 3.40282347e+38f, 1.1920929e-07f, __builtin_inff(), __builtin_nanf(""), 24)
KG_CU_FLOAT_LIMITS(double, 2.2250738585072014e-308, 1.7976931348623157e+308, 2.220446049250313e-16, __builtin_inf(), __builtin_nan(""), 53)
#undef KG_CU_FLOAT_LIMITS
#define KG_CU_HALF_LIMITS(H, RAW, MIN, MAX, EPS, INF, DIGITS)                          \
  template <> struct numeric_limits<H> {                                               \
    static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true, has_quiet_NaN = true; \
    static constexpr int digits = DIGITS;                                              \
    static constexpr H min() { return H(RAW{MIN}); }                                   \
    static constexpr H lowest() { return H(RAW{(unsigned short)(MAX | 0x8000u)}); }    \
    static constexpr H max() { return H(RAW{MAX}); }                                   \
    static constexpr H epsilon() { return H(RAW{EPS}); }                               \
    static constexpr H infinity() { return H(RAW{INF}); }                              \
    static constexpr H quiet_NaN() { return H(RAW{0x7fff}); }                          \
  };
KG_CU_HALF_LIMITS(__half, __half_raw, 0x0400, 0x7bff, 0x1400, 0x7c00, 11)
KG_CU_HALF_LIMITS(__nv_bfloat16, __nv_bfloat16_raw, 0x0080, 0x7f7f, 0x3c00, 0x7f80, 8)
#undef KG_CU_HALF_LIMITS
template <class T, size_t N> struct array {
  T elems_[N];
  KG_INLINE T& operator[](size_t i) { return elems_[i]; }
  KG_INLINE const T& operator[](size_t i) const { return elems_[i]; }
  KG_INLINE T* data() { return elems_; }
  KG_INLINE const T* data() const { return elems_; }
  static constexpr size_t size() { return N; }
  KG_INLINE T* begin() { return elems_; }
  KG_INLINE T* end() { return elems_ + N; }
  KG_INLINE const T* begin() const { return elems_; }
  KG_INLINE const T* end() const { return elems_ + N; }
};
template <class T> KG_INLINE constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T> KG_INLINE constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }
}  // namespace std
}  // namespace cuda

// ---------------------------------------------------------------- cooperative groups
// What a kernel of one block uses: the block and its tiles of 32 lanes or fewer. A grid-wide
// group is not supported (each block runs on its own here).
namespace kgemu {
namespace cu {
template <class T> constexpr bool always_false = false;
}
}  // namespace kgemu
namespace cooperative_groups {
struct thread_block {
  KG_INLINE void sync(KG_LINE) const { kgemu::rt.barrier(kgemu::cu::SYNCTHREADS, kg_line); }
  KG_INLINE unsigned thread_rank() const { return kgemu::cu::ti()->thread_index_in_threadgroup; }
  KG_INLINE unsigned size() const { dim3 d = kgemu::cu::block_dim(); return d.x * d.y * d.z; }
  KG_INLINE unsigned num_threads() const { return size(); }
  KG_INLINE dim3 group_index() const { return kgemu::cu::block_idx(); }
  KG_INLINE dim3 thread_index() const { return kgemu::cu::thread_idx(); }
  KG_INLINE dim3 group_dim() const { return kgemu::cu::block_dim(); }
  KG_INLINE dim3 dim_threads() const { return kgemu::cu::block_dim(); }
};
KG_INLINE thread_block this_thread_block() { return thread_block{}; }
KG_INLINE void sync(const thread_block&, KG_LINE) { kgemu::rt.barrier(kgemu::cu::SYNCTHREADS, kg_line); }
template <unsigned N> struct thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a tile of a block has a power of two of lanes, at most 32");
  static constexpr unsigned num_threads() { return N; }
  static constexpr unsigned size() { return N; }
  KG_INLINE unsigned thread_rank() const { return kgemu::cu::ti()->thread_index_in_threadgroup % N; }
  KG_INLINE unsigned meta_group_rank() const { return kgemu::cu::ti()->thread_index_in_threadgroup / N; }
  KG_INLINE unsigned meta_group_size() const { return (thread_block{}.size() + N - 1) / N; }
  // the tile's lanes in its warp
  KG_INLINE unsigned mask() const { return N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (kgemu::cu::lane_id() / N * N); }
  KG_INLINE void sync(KG_LINE) const { __syncwarp(mask(), kg_line); }
  template <class T> KG_INLINE T shfl(T v, int src, KG_LINE) const { return __shfl_sync(mask(), v, src, (int)N, kg_line); }
  template <class T> KG_INLINE T shfl_xor(T v, int m, KG_LINE) const { return __shfl_xor_sync(mask(), v, m, (int)N, kg_line); }
  template <class T> KG_INLINE T shfl_down(T v, unsigned d, KG_LINE) const { return __shfl_down_sync(mask(), v, d, (int)N, kg_line); }
  template <class T> KG_INLINE T shfl_up(T v, unsigned d, KG_LINE) const { return __shfl_up_sync(mask(), v, d, (int)N, kg_line); }
  KG_INLINE int any(int p, KG_LINE) const { return __any_sync(mask(), p, kg_line); }
  KG_INLINE int all(int p, KG_LINE) const { return __all_sync(mask(), p, kg_line); }
  KG_INLINE unsigned ballot(int p, KG_LINE) const { return __ballot_sync(mask(), p, kg_line) >> (kgemu::cu::lane_id() / N * N); }
};
template <unsigned N, class Parent> KG_INLINE thread_block_tile<N> tiled_partition(const Parent&) { return thread_block_tile<N>{}; }
template <class T = void> struct grid_group {
  static_assert(kgemu::cu::always_false<T>, "cooperative_groups::this_grid() is not supported by the emulator (a grid-wide group)");
};
template <class T = void> KG_INLINE grid_group<T> this_grid() { return grid_group<T>{}; }
}  // namespace cooperative_groups
#undef KG_LINE

// ---------------------------------------------------------------- MLX's device utilities
// The part of mlx/backend/cuda/device/utils.cuh (and config.h) a custom kernel's body may
// call, with MLX 0.32's meaning; the rest is not provided.
#define MAX_NDIM 10
#define WARP_SIZE 32
namespace mlx {
namespace core {
namespace cu {
using Shape = cuda::std::array<int32_t, MAX_NDIM>;
using Strides = cuda::std::array<int64_t, MAX_NDIM>;
template <class T, int N> struct alignas(sizeof(T) * N) AlignedVector {
  T val[N];
  KG_INLINE T& operator[](int i) { return val[i]; }
  KG_INLINE T operator[](int i) const { return val[i]; }
};
template <int N, class T> KG_INLINE bool is_aligned(T* x) { return ((uintptr_t)(const void*)x) % (N * sizeof(T)) == 0; }
template <int N, class T> KG_INLINE AlignedVector<T, N> unsafe_load_vector(const T* ptr, uint32_t offset) {
  return ((const AlignedVector<T, N>*)ptr)[offset];
}
template <int N, class T> KG_INLINE AlignedVector<T, N> load_vector(const T* ptr, uint32_t offset) {
  if (is_aligned<N>(ptr)) return ((const AlignedVector<T, N>*)ptr)[offset];
  AlignedVector<T, N> v;
  for (int i = 0; i < N; ++i) v[i] = ptr[offset * N + i];
  return v;
}
template <int N, class T, class SizeT> KG_INLINE AlignedVector<T, N> load_vector(const T* ptr, uint32_t offset, SizeT size, T fallback) {
  if (is_aligned<N>(ptr) && (offset + 1) * N <= size) return ((const AlignedVector<T, N>*)ptr)[offset];
  AlignedVector<T, N> v;
  for (int i = 0; i < N; ++i) v[i] = (N * offset + i) < size ? ptr[offset * N + i] : fallback;
  return v;
}
template <int N, class T> KG_INLINE void unsafe_store_vector(T* ptr, uint32_t offset, const AlignedVector<T, N>& v) {
  ((AlignedVector<T, N>*)ptr)[offset] = v;
}
template <int N, class T> KG_INLINE void store_vector(T* ptr, uint32_t offset, const AlignedVector<T, N>& v) {
  if (is_aligned<N>(ptr)) {
    ((AlignedVector<T, N>*)ptr)[offset] = v;
    return;
  }
  for (int i = 0; i < N; ++i) ptr[offset * N + i] = v[i];
}
template <int N, class T, class SizeT> KG_INLINE void store_vector(T* ptr, uint32_t offset, const AlignedVector<T, N>& v, SizeT size) {
  if (is_aligned<N>(ptr) && (offset + 1) * N <= size) {
    ((AlignedVector<T, N>*)ptr)[offset] = v;
    return;
  }
  for (int i = 0; (offset * N + i) < size && i < N; ++i) ptr[offset * N + i] = v[i];
}
template <class T, class = void> struct Limits {
  static constexpr T max() { return cuda::std::numeric_limits<T>::max(); }
  static constexpr T min() { return cuda::std::numeric_limits<T>::min(); }
  static constexpr T finite_max() { return cuda::std::numeric_limits<T>::max(); }
  static constexpr T finite_min() { return cuda::std::numeric_limits<T>::min(); }
};
template <class T>
struct Limits<T, cuda::std::enable_if_t<cuda::std::is_floating_point_v<T>>> {
  static constexpr T max() { return cuda::std::numeric_limits<T>::infinity(); }
  static constexpr T min() { return -cuda::std::numeric_limits<T>::infinity(); }
  static constexpr T finite_max() { return cuda::std::numeric_limits<T>::max(); }
  static constexpr T finite_min() { return cuda::std::numeric_limits<T>::lowest(); }
};
template <class IdxT = int64_t> KG_INLINE IdxT elem_to_loc(IdxT elem, const int* shape, const int64_t* strides, int ndim) {
  IdxT loc = 0;
  for (int i = ndim - 1; i >= 0 && elem > 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}
template <int NDIM, class IdxT = int64_t> KG_INLINE IdxT elem_to_loc_nd(IdxT elem, const int* shape, const int64_t* strides) {
  IdxT loc = 0;
  for (int i = NDIM - 1; i >= 0; --i) {
    loc += (elem % shape[i]) * IdxT(strides[i]);
    elem /= shape[i];
  }
  return loc;
}
}  // namespace cu
}  // namespace core
}  // namespace mlx

// ---------------------------------------------------------------- casts, shared memory, entry
namespace kgemu {
namespace cu {
template <class T> struct strip { typedef T type; };
template <class T> struct strip<const T> { typedef T type; };
template <class T> struct strip<volatile T> { typedef T type; };
template <class T> struct strip<const volatile T> { typedef T type; };
template <class T> struct strip<T&> : strip<T> {};
template <class T> struct strip<T&&> : strip<T> {};
template <class T, size_t N> struct strip<T[N]> { typedef T* type; };
template <class T> struct strip<T[]> { typedef T* type; };
template <class T> struct depth { static constexpr int value = 0; };
template <class T> struct depth<T*> { static constexpr int value = 1 + depth<typename strip<T>::type>::value; };
template <class T> constexpr bool integer_like = metal::is_integral<T>::value || __is_enum(T);
template <class T> struct is_ref { static constexpr bool value = false; };
template <class T> struct is_ref<T&> { static constexpr bool value = true; };
template <class T> struct is_ref<T&&> { static constexpr bool value = true; };
// Whether a cast from `From` to `To` reads a pointer as an integer or makes one of an integer:
// directly, through a reference or pointer to a pointer's storage, or by reinterpreting an
// object (the rules of the Metal check: crates/msl/src/rules.rs).
template <class To, class From> constexpr bool converts_pointer_and_integer() {
  typedef typename strip<To>::type T;
  typedef typename strip<From>::type F;
  constexpr int t = depth<T>::value, f = depth<F>::value;
  if (is_ref<To>::value) return (t == 0) != (f == 0);
  if ((integer_like<T> && f > 0) || (integer_like<F> && t > 0)) return true;
  return t > 0 && f > 0 && t != f && (t >= 2 || f >= 2);
}
template <class To, class From> KG_INLINE To ccast(From&& v) {
  static_assert(!converts_pointer_and_integer<To, From>(),
                "this cast converts between a pointer and an integer (or reads a pointer's storage as data): a kernel may not");
  return (To)(v);
}
template <class To, class From> KG_INLINE To rcast(From&& v) {
  static_assert(!converts_pointer_and_integer<To, From>(),
                "this reinterpret_cast converts between a pointer and an integer (or reads a pointer's storage as data): a kernel may not");
  return reinterpret_cast<To>(v);
}
// `__shared__ T x[N];` (translate_cuda.rs): this block's array, through the threadgroup
// allocation every Metal `threadgroup` array takes (poisoned, guarded, canaries, limited).
template <class T, size_t A> KG_INLINE T* shared(uint32_t site, uint32_t line, const char* name) {
  return (T*)rt.tg_alloc(site, sizeof(T), A > alignof(T) ? A : alignof(T), sizeof(typename element_of<T>::type), line, name);
}
// A kernel parameter from its buffer: a pointer is the buffer's data, a value is read from it.
struct Arg {
  void* p;
  template <class T> KG_INLINE operator T() const {
    if constexpr (metal::is_pointer<T>::value) return (T)p;
    else return *(const T*)p;
  }
};
}  // namespace cu
}  // namespace kgemu

#endif  // KGEMU_CUDA_H
