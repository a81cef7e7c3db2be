// kernelgen-msl: an address-space-aware stand-in for Apple's <metal_stdlib>, parsed by clang
// as C++ for OpenCL 2021 (-fsyntax-only only: declarations, plus definitions where constant
// evaluation needs them). Every <metal_*> header name resolves to this one file.
#ifndef KGMSL_METAL_STDLIB
#define KGMSL_METAL_STDLIB
#pragma clang system_header
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
// Function pointer types parse (MLX's fft.h passes codelets as template arguments); the
// rules reject run-time function pointers (section 1.5).
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable

// ---- Metal's predefined macros. __METAL_VERSION__ comes from the command line (-D).
#define __METAL__ 1
#define __METAL_MACOS__ 1
// bfloat is Metal 3.1's (MSL 2.1)
#if __METAL_VERSION__ >= 310
#define __HAVE_BFLOAT__ 1
#endif
#define __HAVE_SIMDGROUP_MATRIX__ 1
#define METAL_FUNC inline __attribute__((__always_inline__))
#define METAL_INTERNAL
#define __METAL_FAST_MATH__ true
#define __METAL_PRECISE_MATH__ false
#define __METAL_MAYBE_FAST_MATH__ false
// Metal 4's tensors: <metal_tensor>, <metal_cooperative_tensor> and MetalPerformancePrimitives
// (separate headers beside this one) declare nothing without it, as Apple's headers do.
#if __METAL_VERSION__ >= 400
#define __HAVE_TENSOR__ 1
#endif

// ---- Address spaces are OpenCL's, so clang keeps them as real qualifiers (member functions
// overload on them). `thread` is the default: OpenCL's generic space for pointers, references
// and `this` (a local `thread T x;` declaration is rewritten to plain `T x;`, private).
// clang converts named spaces to generic implicitly; the checker's rules reject every such
// conversion (Metal has none), except into the implicit copy and move members, which Metal
// gives every address space.
#define device __global
// `constant` objects are read-only (MSL 4.2): const, so a `const constant T` binds to `constant T&`
// (MLX, mistral.rs) and a table to `constant T*` (ggml); `const constant` repeats it, fine.
#define constant const __constant
#define threadgroup __local
#define thread __generic
#define threadgroup_imageblock __local
#define ray_data __private
#define object_data __global

// OpenCL keywords that are plain identifiers in MSL: rename them consistently.
#define global __kgmsl_id_global
#define local __kgmsl_id_local
#define generic __kgmsl_id_generic
#define read_only __kgmsl_id_read_only
#define write_only __kgmsl_id_write_only
#define read_write __kgmsl_id_read_write
#define pipe __kgmsl_id_pipe
#define vec_step __kgmsl_id_vec_step
#define __kernel __kgmsl_id___kernel
// Metal's `kernel` keyword is not OpenCL's (which forbids templates, and parameter types
// such as atomics, in a kernel): the rules find kernels in the source's tokens, `kernel void f`
// as `[[kernel]] void f` (where it leaves `[[]]`, an empty attribute list).
#define kernel

// ---- Scalars. `half` is OpenCL's native half; `bfloat` a distinct native 16-bit float.
typedef _Float16 bfloat;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
// MLX's preamble (utils.h, bf16.h) names these; redeclaring a typedef to the same type is fine.
typedef half float16_t;
#if __METAL_VERSION__ >= 310
typedef bfloat bfloat16_t;
#endif

#define KGMSL_VEC(T)                                         \
  typedef T T##2 __attribute__((ext_vector_type(2)));        \
  typedef T T##3 __attribute__((ext_vector_type(3)));        \
  typedef T T##4 __attribute__((ext_vector_type(4)));
KGMSL_VEC(char)
KGMSL_VEC(uchar)
KGMSL_VEC(short)
KGMSL_VEC(ushort)
KGMSL_VEC(int)
KGMSL_VEC(uint)
KGMSL_VEC(long)
KGMSL_VEC(ulong)
KGMSL_VEC(float)
KGMSL_VEC(half)
KGMSL_VEC(bfloat)
// clang 14 has no vectors of bool: Metal's boolN are modelled as char vectors.
typedef char bool2 __attribute__((ext_vector_type(2)));
typedef char bool3 __attribute__((ext_vector_type(3)));
typedef char bool4 __attribute__((ext_vector_type(4)));
// Packed vectors (MSL 2.2.3): aligned as their element, for every scalar type Metal packs.
#define KGMSL_PACKED(T)                                                                 \
  typedef T packed_##T##2 __attribute__((ext_vector_type(2), aligned(sizeof(T))));      \
  typedef T packed_##T##3 __attribute__((ext_vector_type(3), aligned(sizeof(T))));      \
  typedef T packed_##T##4 __attribute__((ext_vector_type(4), aligned(sizeof(T))));
KGMSL_PACKED(char)
KGMSL_PACKED(uchar)
KGMSL_PACKED(short)
KGMSL_PACKED(ushort)
KGMSL_PACKED(int)
KGMSL_PACKED(uint)
KGMSL_PACKED(long)
KGMSL_PACKED(ulong)
KGMSL_PACKED(float)
KGMSL_PACKED(half)
KGMSL_PACKED(bfloat)

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define MAXFLOAT 0x1.fffffep127f
#define FLT_MAX 0x1.fffffep127f
#define FLT_MIN 0x1.0p-126f
#define FLT_EPSILON 0x1.0p-23f
#define HALF_MAX 65504.0h
#define MAXHALF 65504.0h
#define HALF_MIN 0x1.0p-14h
#define HALF_EPSILON 0x1.0p-10h
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_PI_2_F 1.57079632679489661923132169163975144f
#define M_PI_4_F 0.785398163397448309615660845819875721f
#define M_1_PI_F 0.318309886183790671537767526745028724f
#define M_2_PI_F 0.636619772367581343075535053490057448f
#define M_2_SQRTPI_F 1.12837916709551257389615890312154517f
#define M_E_F 2.71828182845904523536028747135266250f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LOG10E_F 0.434294481903251827651128918916605082f
#define M_LN2_F 0.693147180559945309417232121458176568f
#define M_LN10_F 2.30258509299404568401799145468436421f
#define M_SQRT2_F 1.41421356237309504880168872420969808f
#define M_SQRT1_2_F 0.707106781186547524400844362104849039f
#define M_PI_H 3.14159265358979323846264338327950288h
#define CHAR_BIT 8
#define INT_MAX 2147483647
#define INT_MIN (-2147483647 - 1)
#define UINT_MAX 4294967295u
// assert (MSL 6.x, <metal_assert> through <metal_stdlib>): the condition is checked as an
// expression; what a failed one does at run time is the runtime's.
#define assert(condition) ((void)(bool)(condition))
// Memory coherence of a device object (MSL 4.8, Metal 3.2): `volatile coherent(device) uint*`
// is a device pointer (coherent memory is device memory: `coherent(system) device` repeats
// the space, which is fine); what coherence guarantees is not modelled.
#if __METAL_VERSION__ >= 320
#define coherent(scope) __global
#endif

// One-argument vector constructors (see rewrite.rs): `half2(float2_value)` converts element by
// element in Metal (a functional cast between vector types of different sizes is an error in
// clang), `float2(1)` splats; anything else is what the functional cast does.
template <typename E, int N> using __kgmsl_vector = E __attribute__((ext_vector_type(N)));
template <typename To, typename From> constexpr To __kgmsl_vcast(From x) { return To(x); }
template <typename To, typename E, int N>
constexpr To __kgmsl_vcast(__kgmsl_vector<E, N> x) { return __builtin_convertvector(x, To); }

// Named for the explicit-instantiation rewrite (see rewrite.rs): a reference to a
// threadgroup allocation made by the runtime.
template <typename T> T& __kgmsl_threadgroup_alloc();

// For the function-pointer-alias rewrite (rewrite.rs, 9): a pointer to the function type F made
// by adjusting a parameter of type F, which gives the pointee no address space (`F*` would give
// it OpenCL's __generic, which no function's address matches).
template <typename F> struct __kgmsl_adjusted_parameter;
template <typename P> struct __kgmsl_adjusted_parameter<void(P)> { using type = P; };
template <typename F> using __kgmsl_function_pointer = typename __kgmsl_adjusted_parameter<void(F)>::type;

namespace metal {

// ---- Type traits (the subset MLX uses, with Metal's names).
template <typename T, T v> struct integral_constant {
  static constexpr constant T value = v;
  typedef T value_type;
  typedef integral_constant type;
  constexpr operator value_type() const thread { return value; }
  constexpr value_type operator()() const thread { return value; }
};
template <bool B> using bool_constant = integral_constant<bool, B>;
typedef bool_constant<true> true_type;
typedef bool_constant<false> false_type;

template <bool B, typename T = void> struct enable_if {};
template <typename T> struct enable_if<true, T> { typedef T type; };
template <bool B, typename T = void> using enable_if_t = typename enable_if<B, T>::type;
template <bool B, typename T, typename F> struct conditional { typedef T type; };
template <typename T, typename F> struct conditional<false, T, F> { typedef F type; };
template <bool B, typename T, typename F> using conditional_t = typename conditional<B, T, F>::type;
// Metal's internal helpers, which MLX's atomic.h uses.
template <typename... B> struct _disjunction : false_type {};
template <typename B1, typename... B> struct _disjunction<B1, B...> : conditional_t<bool(B1::value), B1, _disjunction<B...>> {};
template <typename... B> struct _conjunction : true_type {};
template <typename B1, typename... B> struct _conjunction<B1, B...> : conditional_t<bool(B1::value), _conjunction<B...>, B1> {};
template <typename B> struct _negation : bool_constant<!bool(B::value)> {};

template <typename T, typename U> struct is_same : false_type {};
template <typename T> struct is_same<T, T> : true_type {};
template <typename T, typename U> constexpr constant bool is_same_v = is_same<T, U>::value;

template <typename T> struct remove_const { typedef T type; };
template <typename T> struct remove_const<const T> { typedef T type; };
template <typename T> struct remove_volatile { typedef T type; };
template <typename T> struct remove_volatile<volatile T> { typedef T type; };
template <typename T> struct remove_cv { typedef typename remove_volatile<typename remove_const<T>::type>::type type; };
template <typename T> using remove_const_t = typename remove_const<T>::type;
template <typename T> using remove_volatile_t = typename remove_volatile<T>::type;
template <typename T> using remove_cv_t = typename remove_cv<T>::type;
template <typename T> struct remove_reference { typedef T type; };
template <typename T> struct remove_reference<T&> { typedef T type; };
template <typename T> struct remove_reference<T&&> { typedef T type; };
template <typename T> using remove_reference_t = typename remove_reference<T>::type;
template <typename T> struct remove_pointer { typedef T type; };
template <typename T> struct remove_pointer<T*> { typedef T type; };
template <typename T> struct remove_pointer<T* const> { typedef T type; };
template <typename T> using remove_pointer_t = typename remove_pointer<T>::type;
template <typename T> struct remove_addrspace { typedef T type; };
template <typename T> struct remove_addrspace<device T> { typedef T type; };
// (`__constant`, not `constant`, which is `const __constant`: a deduced `__constant int` is not const)
template <typename T> struct remove_addrspace<__constant T> { typedef T type; };
template <typename T> struct remove_addrspace<threadgroup T> { typedef T type; };
template <typename T> struct remove_addrspace<__private T> { typedef T type; };
template <typename T> struct remove_addrspace<__generic T> { typedef T type; };
template <typename T> using remove_addrspace_t = typename remove_addrspace<T>::type;
template <typename T> struct remove_extent { typedef T type; };
template <typename T> struct remove_extent<T[]> { typedef T type; };
template <typename T, size_t N> struct remove_extent<T[N]> { typedef T type; };
template <typename T> using remove_extent_t = typename remove_extent<T>::type;
template <typename T> struct add_const { typedef const T type; };
template <typename T> using add_const_t = typename add_const<T>::type;
template <typename T> struct decay { typedef remove_cv_t<remove_reference_t<T>> type; };
template <typename T> using decay_t = typename decay<T>::type;
template <typename T> T&& declval();

template <typename T> struct __kg_is_int : false_type {};
#define KGMSL_TRAIT(trait, T) template <> struct trait<T> : true_type {};
KGMSL_TRAIT(__kg_is_int, bool)
KGMSL_TRAIT(__kg_is_int, char)
KGMSL_TRAIT(__kg_is_int, signed char)
KGMSL_TRAIT(__kg_is_int, unsigned char)
KGMSL_TRAIT(__kg_is_int, short)
KGMSL_TRAIT(__kg_is_int, unsigned short)
KGMSL_TRAIT(__kg_is_int, int)
KGMSL_TRAIT(__kg_is_int, unsigned int)
KGMSL_TRAIT(__kg_is_int, long)
KGMSL_TRAIT(__kg_is_int, unsigned long)
KGMSL_TRAIT(__kg_is_int, long long)
KGMSL_TRAIT(__kg_is_int, unsigned long long)
template <typename T> struct __kg_is_float : false_type {};
KGMSL_TRAIT(__kg_is_float, half)
KGMSL_TRAIT(__kg_is_float, bfloat)
KGMSL_TRAIT(__kg_is_float, float)
template <typename T> struct is_integral : __kg_is_int<remove_cv_t<T>> {};
template <typename T> struct is_floating_point : __kg_is_float<remove_cv_t<T>> {};
template <typename T> struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <typename T, bool = is_arithmetic<T>::value> struct __kg_signed : false_type {};
template <typename T> struct __kg_signed<T, true> : bool_constant<(T(-1) < T(0))> {};
template <typename T> struct is_signed : __kg_signed<remove_cv_t<T>> {};
template <typename T> struct is_unsigned : bool_constant<is_arithmetic<T>::value && !__kg_signed<remove_cv_t<T>>::value> {};
template <typename T> struct is_pointer : false_type {};
template <typename T> struct is_pointer<T*> : true_type {};
template <typename T> struct is_pointer<T* const> : true_type {};
template <typename T> struct is_reference : false_type {};
template <typename T> struct is_reference<T&> : true_type {};
template <typename T> struct is_reference<T&&> : true_type {};
template <typename T> struct is_const : false_type {};
template <typename T> struct is_const<const T> : true_type {};
template <typename T> struct is_void : is_same<remove_cv_t<T>, void> {};
template <typename T> struct is_scalar : bool_constant<is_arithmetic<T>::value || is_pointer<T>::value> {};
template <typename T> struct is_vector : false_type {};
template <typename T> struct is_vector<T __attribute__((ext_vector_type(2)))> : true_type {};
template <typename T> struct is_vector<T __attribute__((ext_vector_type(3)))> : true_type {};
template <typename T> struct is_vector<T __attribute__((ext_vector_type(4)))> : true_type {};
template <typename B, typename D> struct is_base_of : bool_constant<__is_base_of(B, D)> {};
template <typename F, typename T> struct is_convertible : bool_constant<__is_convertible_to(F, T)> {};
template <typename T> struct is_trivially_copyable : bool_constant<__is_trivially_copyable(T)> {};
template <typename T> struct is_class : bool_constant<__is_class(T)> {};
template <typename T> struct is_enum : bool_constant<__is_enum(T)> {};
template <typename T> struct make_unsigned;
template <typename T> struct make_signed;
#define KGMSL_SIGN(S, U) \
  template <> struct make_unsigned<S> { typedef U type; }; \
  template <> struct make_unsigned<U> { typedef U type; }; \
  template <> struct make_signed<S> { typedef S type; };   \
  template <> struct make_signed<U> { typedef S type; };
KGMSL_SIGN(signed char, unsigned char)
KGMSL_SIGN(short, unsigned short)
KGMSL_SIGN(int, unsigned int)
KGMSL_SIGN(long, unsigned long)
template <> struct make_unsigned<char> { typedef unsigned char type; };
template <> struct make_signed<char> { typedef signed char type; };
template <typename T> using make_unsigned_t = typename make_unsigned<T>::type;
template <typename T> using make_signed_t = typename make_signed<T>::type;

template <typename T> constexpr constant bool is_integral_v = is_integral<T>::value;
template <typename T> constexpr constant bool is_floating_point_v = is_floating_point<T>::value;
template <typename T> constexpr constant bool is_arithmetic_v = is_arithmetic<T>::value;
template <typename T> constexpr constant bool is_signed_v = is_signed<T>::value;
template <typename T> constexpr constant bool is_unsigned_v = is_unsigned<T>::value;
template <typename T> constexpr constant bool is_pointer_v = is_pointer<T>::value;
template <typename T> constexpr constant bool is_reference_v = is_reference<T>::value;
template <typename T> constexpr constant bool is_const_v = is_const<T>::value;
template <typename T> constexpr constant bool is_void_v = is_void<T>::value;
template <typename T> constexpr constant bool is_scalar_v = is_scalar<T>::value;
template <typename T> constexpr constant bool is_vector_v = is_vector<T>::value;
template <typename B, typename D> constexpr constant bool is_base_of_v = is_base_of<B, D>::value;
template <typename F, typename T> constexpr constant bool is_convertible_v = is_convertible<F, T>::value;
template <typename T> constexpr constant bool is_trivially_copyable_v = is_trivially_copyable<T>::value;
template <typename T> constexpr constant bool is_class_v = is_class<T>::value;

// ---- Vectors and fixed-size arrays.
template <typename T, int N> using vec = T __attribute__((ext_vector_type(N)));
// clang 14 has no vectors of bool (booln are char vectors, above), and `vec` must stay
// deducible (`vec<T, 2>` parameters, partial specializations): rewrite 10 (rewrite.rs) names the
// vector type of a typedef, an alias or a variable through this one, which maps bool to char
// (MLX's `typedef vec<T, N> frag_type;` of a bool mask tile), and the element argument of an
// alias template of `vec` named there through `__kgmsl_velem` (MLX's `dtype_frag_t<bool>`).
template <typename T> struct __kgmsl_vec_elem { typedef T type; };
template <> struct __kgmsl_vec_elem<bool> { typedef char type; };
template <typename T> using __kgmsl_velem = typename __kgmsl_vec_elem<T>::type;
template <typename T, int N> using __kgmsl_bvec = __kgmsl_vector<__kgmsl_velem<T>, N>;
template <typename T> struct __kg_scalar { typedef T type; };
template <typename T> struct __kg_scalar<T __attribute__((ext_vector_type(2)))> { typedef T type; };
template <typename T> struct __kg_scalar<T __attribute__((ext_vector_type(3)))> { typedef T type; };
template <typename T> struct __kg_scalar<T __attribute__((ext_vector_type(4)))> { typedef T type; };
template <typename T> using __kg_scalar_t = typename __kg_scalar<T>::type;
// Metal's own traits, which sources name (candle's reduce.metal): a vector's element count (0
// for a scalar), and whether simd functions take a type (scalars and vectors of numbers).
template <typename T> struct vec_elements : integral_constant<int, 0> {};
template <typename T> struct vec_elements<T __attribute__((ext_vector_type(2)))> : integral_constant<int, 2> {};
template <typename T> struct vec_elements<T __attribute__((ext_vector_type(3)))> : integral_constant<int, 3> {};
template <typename T> struct vec_elements<T __attribute__((ext_vector_type(4)))> : integral_constant<int, 4> {};
template <typename T> struct __is_valid_simdgroup_type
    : bool_constant<is_arithmetic<__kg_scalar_t<remove_cv_t<T>>>::value && !is_same<remove_cv_t<__kg_scalar_t<remove_cv_t<T>>>, bool>::value> {};

template <typename T, size_t N> struct array {
  T __elems[N > 0 ? N : 1];
  constexpr size_t size() const thread { return N; }
  thread T& operator[](size_t i) thread { return __elems[i]; }
  constexpr const thread T& operator[](size_t i) const thread { return __elems[i]; }
  threadgroup T& operator[](size_t i) threadgroup { return __elems[i]; }
  const threadgroup T& operator[](size_t i) const threadgroup { return __elems[i]; }
  device T& operator[](size_t i) device { return __elems[i]; }
  const device T& operator[](size_t i) const device { return __elems[i]; }
  constexpr const constant T& operator[](size_t i) const constant { return __elems[i]; }
};

// ---- Matrices (MSL 2.3): `matrix<T, Cols, Rows>` of half or float (floatCxR, halfCxR),
// column-major: `m[i]` is a column. What the operations compute is not modelled, only types.
template <typename T, int Cols, int Rows> struct matrix;
template <typename M> struct __kg_is_matrix : false_type {};
template <typename T, int C, int R> struct __kg_is_matrix<matrix<T, C, R>> : true_type {};
template <typename T, int Cols, int Rows> struct matrix {
  vec<T, Rows> columns[Cols];
  matrix() thread = default;
  explicit constexpr matrix(T diagonal) thread;
  template <typename... C, typename = enable_if_t<sizeof...(C) + 1 == Cols>>
  constexpr matrix(vec<T, Rows> first, C... rest) thread;
  // from a matrix of another element type, by value (deduces from any address space)
  template <typename M, typename = enable_if_t<__kg_is_matrix<M>::value>> explicit constexpr matrix(M other) thread;
  thread vec<T, Rows>& operator[](int i) thread { return columns[i]; }
  const thread vec<T, Rows>& operator[](int i) const thread { return columns[i]; }
  device vec<T, Rows>& operator[](int i) device { return columns[i]; }
  const device vec<T, Rows>& operator[](int i) const device { return columns[i]; }
  threadgroup vec<T, Rows>& operator[](int i) threadgroup { return columns[i]; }
  const threadgroup vec<T, Rows>& operator[](int i) const threadgroup { return columns[i]; }
  const constant vec<T, Rows>& operator[](int i) const constant { return columns[i]; }
};
template <typename T, int C, int R> matrix<T, C, R> operator+(matrix<T, C, R>, matrix<T, C, R>);
template <typename T, int C, int R> matrix<T, C, R> operator-(matrix<T, C, R>, matrix<T, C, R>);
template <typename T, int C, int R> matrix<T, C, R> operator*(matrix<T, C, R>, T);
template <typename T, int C, int R> matrix<T, C, R> operator*(T, matrix<T, C, R>);
template <typename T, int C, int R> vec<T, R> operator*(matrix<T, C, R>, vec<T, C>);
template <typename T, int C, int R> vec<T, C> operator*(vec<T, R>, matrix<T, C, R>);
template <typename T, int C, int K, int R> matrix<T, C, R> operator*(matrix<T, K, R>, matrix<T, C, K>);
template <typename T, int C, int R> matrix<T, R, C> transpose(matrix<T, C, R>);
template <typename T, int N> T determinant(matrix<T, N, N>);
#define KGMSL_MATRIX(T)                                                                          \
  typedef matrix<T, 2, 2> T##2x2; typedef matrix<T, 2, 3> T##2x3; typedef matrix<T, 2, 4> T##2x4; \
  typedef matrix<T, 3, 2> T##3x2; typedef matrix<T, 3, 3> T##3x3; typedef matrix<T, 3, 4> T##3x4; \
  typedef matrix<T, 4, 2> T##4x2; typedef matrix<T, 4, 3> T##4x3; typedef matrix<T, 4, 4> T##4x4;
KGMSL_MATRIX(float)
KGMSL_MATRIX(half)

// ---- numeric_limits (constexpr: MLX initialises program-scope constants from it). As in
// Metal's own header, the limits are _numeric_limits_impl's, which a source may specialize for
// its own types (candle's reduce.metal does, for its indexed<T>).
template <typename T> struct _numeric_limits_impl {
  static constexpr constant bool is_specialized = false;
};
template <typename T> struct numeric_limits : _numeric_limits_impl<T> {};
#define KGMSL_INT_LIMITS(T, MINV, MAXV, SIGNED, DIGITS)                   \
  template <> struct _numeric_limits_impl<T> {                            \
    static constexpr constant bool is_specialized = true;                \
    static constexpr constant bool is_integer = true;                    \
    static constexpr constant bool is_signed = SIGNED;                   \
    static constexpr constant int digits = DIGITS;                       \
    static constexpr T min() { return MINV; }                            \
    static constexpr T lowest() { return MINV; }                         \
    static constexpr T max() { return MAXV; }                            \
  };
KGMSL_INT_LIMITS(bool, false, true, false, 1)
KGMSL_INT_LIMITS(char, (char)-128, (char)127, true, 7)
KGMSL_INT_LIMITS(signed char, (signed char)-128, (signed char)127, true, 7)
KGMSL_INT_LIMITS(unsigned char, (unsigned char)0, (unsigned char)255, false, 8)
KGMSL_INT_LIMITS(short, (short)-32768, (short)32767, true, 15)
KGMSL_INT_LIMITS(unsigned short, (unsigned short)0, (unsigned short)65535, false, 16)
KGMSL_INT_LIMITS(int, -2147483647 - 1, 2147483647, true, 31)
KGMSL_INT_LIMITS(unsigned int, 0u, 4294967295u, false, 32)
KGMSL_INT_LIMITS(long, -9223372036854775807L - 1, 9223372036854775807L, true, 63)
KGMSL_INT_LIMITS(unsigned long, 0ul, 18446744073709551615ul, false, 64)
#define KGMSL_FLOAT_LIMITS(T, MINV, MAXV, EPS, DIGITS)                              \
  template <> struct _numeric_limits_impl<T> {                                       \
    static constexpr constant bool is_specialized = true;                           \
    static constexpr constant bool is_integer = false;                              \
    static constexpr constant bool is_signed = true;                                \
    static constexpr constant bool has_infinity = true;                             \
    static constexpr constant bool has_quiet_NaN = true;                            \
    static constexpr constant int digits = DIGITS;                                  \
    static constexpr T min() { return T(MINV); }                                    \
    static constexpr T lowest() { return T(-(MAXV)); }                              \
    static constexpr T max() { return T(MAXV); }                                    \
    static constexpr T epsilon() { return T(EPS); }                                 \
    static constexpr T infinity() { return T(__builtin_inff()); }                   \
    static constexpr T quiet_NaN() { return T(__builtin_nanf("")); }                \
    static constexpr T signaling_NaN() { return T(__builtin_nansf("")); }           \
    static constexpr T denorm_min() { return T(MINV); }                             \
  };
KGMSL_FLOAT_LIMITS(float, 0x1.0p-126f, 0x1.fffffep127f, 0x1.0p-23f, 24)
KGMSL_FLOAT_LIMITS(half, 0x1.0p-14f, 65504.0f, 0x1.0p-10f, 11)
KGMSL_FLOAT_LIMITS(bfloat, 0x1.0p-126f, 0x1.fep127f, 0x1.0p-7f, 8)

// ---- Reinterpretation.
template <typename T, typename U, typename = enable_if_t<sizeof(T) == sizeof(U)>>
constexpr T as_type(U x) {
  static_assert(!is_pointer<T>::value && !is_pointer<U>::value,
                "as_type reinterprets data, not pointers: MSL has no conversion between a pointer and an integer (chapter 2)");
  return __builtin_bit_cast(T, x);
}

// ---- Math. Non-template overloads for float and half (scalar and vector), as Metal has;
// bfloat gets none (MLX's bf16_math.h defines them). A template catches mixed-type calls.
#define KGMSL_F1(name)                                                          \
  float name(float); float2 name(float2); float3 name(float3); float4 name(float4); \
  half name(half); half2 name(half2); half3 name(half3); half4 name(half4);
#define KGMSL_F2(name)                                                                          \
  float name(float, float); float2 name(float2, float2); float3 name(float3, float3);           \
  float4 name(float4, float4); half name(half, half); half2 name(half2, half2);                 \
  half3 name(half3, half3); half4 name(half4, half4);
#define KGMSL_F3(name)                                                                          \
  float name(float, float, float); float2 name(float2, float2, float2);                         \
  float3 name(float3, float3, float3); float4 name(float4, float4, float4);                     \
  half name(half, half, half); half2 name(half2, half2, half2); half3 name(half3, half3, half3);\
  half4 name(half4, half4, half4);
#define KGMSL_MATH_SET                                                                   \
  KGMSL_F1(acos) KGMSL_F1(acosh) KGMSL_F1(asin) KGMSL_F1(asinh) KGMSL_F1(atan)           \
  KGMSL_F1(atanh) KGMSL_F1(ceil) KGMSL_F1(cos) KGMSL_F1(cosh) KGMSL_F1(cospi)            \
  KGMSL_F1(exp) KGMSL_F1(exp10) KGMSL_F1(exp2) KGMSL_F1(fabs) KGMSL_F1(floor)            \
  KGMSL_F1(fract) KGMSL_F1(log) KGMSL_F1(log10) KGMSL_F1(log2) KGMSL_F1(logb)            \
  KGMSL_F1(rint) KGMSL_F1(round) KGMSL_F1(rsqrt) KGMSL_F1(sin) KGMSL_F1(sinh)            \
  KGMSL_F1(sinpi) KGMSL_F1(sqrt) KGMSL_F1(tan) KGMSL_F1(tanh) KGMSL_F1(tanpi)            \
  KGMSL_F1(trunc) KGMSL_F1(saturate) KGMSL_F1(sign)                                      \
  KGMSL_F2(atan2) KGMSL_F2(copysign) KGMSL_F2(divide) KGMSL_F2(fdim) KGMSL_F2(fmax)      \
  KGMSL_F2(fmin) KGMSL_F2(fmod) KGMSL_F2(nextafter) KGMSL_F2(pow) KGMSL_F2(powr)         \
  KGMSL_F2(step) KGMSL_F3(fma) KGMSL_F3(fmax3) KGMSL_F3(fmin3) KGMSL_F3(fmedian3)        \
  KGMSL_F3(mix) KGMSL_F3(smoothstep)                                                     \
  float ldexp(float, int); half ldexp(half, int); float frexp(float, thread int&);       \
  half frexp(half, thread int&); float modf(float, thread float&); half modf(half, thread half&); \
  float sincos(float, thread float&); half sincos(half, thread half&);                   \
  int ilogb(float); int ilogb(half);
KGMSL_MATH_SET
// Metal 3.1's math functions take bfloat and return bfloat (MSL 6.5: T is half, float or
// bfloat), so `bfloat y = exp(x)` needs no conversion. Templates model that without clashing
// with MLX's bf16_math.h, whose non-template bfloat overloads win wherever they exist.
template <typename T> struct __kg_bf_ret {};
template <> struct __kg_bf_ret<bfloat> { typedef bfloat type; };
template <> struct __kg_bf_ret<bfloat2> { typedef bfloat2 type; };
template <> struct __kg_bf_ret<bfloat3> { typedef bfloat3 type; };
template <> struct __kg_bf_ret<bfloat4> { typedef bfloat4 type; };
template <typename T> using __kg_bf_ret_t = typename __kg_bf_ret<T>::type;
#define KGMSL_B1(name) template <typename T> __kg_bf_ret_t<T> name(T);
#define KGMSL_B2(name) template <typename T> __kg_bf_ret_t<T> name(T, T);
#define KGMSL_B3(name) template <typename T> __kg_bf_ret_t<T> name(T, T, T);
#define KGMSL_BF_SET                                                                     \
  KGMSL_B1(acos) KGMSL_B1(acosh) KGMSL_B1(asin) KGMSL_B1(asinh) KGMSL_B1(atan)           \
  KGMSL_B1(atanh) KGMSL_B1(ceil) KGMSL_B1(cos) KGMSL_B1(cosh) KGMSL_B1(cospi)            \
  KGMSL_B1(exp) KGMSL_B1(exp10) KGMSL_B1(exp2) KGMSL_B1(fabs) KGMSL_B1(floor)            \
  KGMSL_B1(fract) KGMSL_B1(log) KGMSL_B1(log10) KGMSL_B1(log2) KGMSL_B1(logb)            \
  KGMSL_B1(rint) KGMSL_B1(round) KGMSL_B1(rsqrt) KGMSL_B1(sin) KGMSL_B1(sinh)            \
  KGMSL_B1(sinpi) KGMSL_B1(sqrt) KGMSL_B1(tan) KGMSL_B1(tanh) KGMSL_B1(tanpi)            \
  KGMSL_B1(trunc) KGMSL_B1(saturate) KGMSL_B1(sign) KGMSL_B1(abs)                        \
  KGMSL_B2(atan2) KGMSL_B2(copysign) KGMSL_B2(divide) KGMSL_B2(fdim) KGMSL_B2(fmax)      \
  KGMSL_B2(fmin) KGMSL_B2(fmod) KGMSL_B2(nextafter) KGMSL_B2(pow) KGMSL_B2(powr)         \
  KGMSL_B2(step) KGMSL_B2(max) KGMSL_B2(min) KGMSL_B3(fma) KGMSL_B3(fmax3) KGMSL_B3(fmin3)\
  KGMSL_B3(fmedian3) KGMSL_B3(mix) KGMSL_B3(smoothstep) KGMSL_B3(clamp)
KGMSL_BF_SET
// An unsuffixed literal in a template is `double` to clang and `float` to Metal (which has no
// double), so `fmin(1, x / 6 + 0.5)` ties float and half overloads for clang where Metal picks
// float: arguments that are such literals or integers, one at least a literal, take the float
// overload. (`double` cannot be written here: the floating type of 8 bytes is it.)
template <typename T> struct __kg_lit_double : bool_constant<(__is_floating_point(T) && sizeof(T) == 8)> {};
template <typename T> struct __kg_lit_arg : bool_constant<__kg_lit_double<T>::value || is_integral<T>::value> {};
template <typename A, typename B, typename C = int> using __kg_lit_ret_t = enable_if_t<
    (__kg_lit_double<A>::value || __kg_lit_double<B>::value || __kg_lit_double<C>::value) &&
        __kg_lit_arg<A>::value && __kg_lit_arg<B>::value && __kg_lit_arg<C>::value, float>;
#define KGMSL_L2(name) template <typename A, typename B> __kg_lit_ret_t<A, B> name(A, B);
#define KGMSL_L3(name) template <typename A, typename B, typename C> __kg_lit_ret_t<A, B, C> name(A, B, C);
#define KGMSL_LIT_SET                                                                    \
  KGMSL_L2(atan2) KGMSL_L2(copysign) KGMSL_L2(divide) KGMSL_L2(fdim) KGMSL_L2(fmax)      \
  KGMSL_L2(fmin) KGMSL_L2(fmod) KGMSL_L2(nextafter) KGMSL_L2(pow) KGMSL_L2(powr)         \
  KGMSL_L2(step) KGMSL_L3(fma) KGMSL_L3(fmax3) KGMSL_L3(fmin3) KGMSL_L3(fmedian3)        \
  KGMSL_L3(mix) KGMSL_L3(smoothstep)
KGMSL_LIT_SET
namespace fast { KGMSL_MATH_SET KGMSL_BF_SET KGMSL_LIT_SET KGMSL_F1(abs) KGMSL_F2(max) KGMSL_F2(min) KGMSL_F3(clamp) }
namespace precise { KGMSL_MATH_SET KGMSL_BF_SET KGMSL_LIT_SET KGMSL_F1(abs) KGMSL_F2(max) KGMSL_F2(min) KGMSL_F3(clamp) }

// Integer and common functions, for every integer type (scalar and vector).
#define KGMSL_I_ALL(M) M(char) M(uchar) M(short) M(ushort) M(int) M(uint) M(long) M(ulong)
#define KGMSL_I1(T, name) T name(T); T##2 name(T##2); T##3 name(T##3); T##4 name(T##4);
#define KGMSL_I2(T, name) T name(T, T); T##2 name(T##2, T##2); T##3 name(T##3, T##3); T##4 name(T##4, T##4);
#define KGMSL_I3(T, name) T name(T, T, T); T##2 name(T##2, T##2, T##2); T##3 name(T##3, T##3, T##3); T##4 name(T##4, T##4, T##4);
#define KGMSL_INT_FUNCS(T)                                                                    \
  KGMSL_I1(T, abs) KGMSL_I1(T, clz) KGMSL_I1(T, ctz) KGMSL_I1(T, popcount)                    \
  KGMSL_I1(T, reverse_bits) KGMSL_I2(T, absdiff) KGMSL_I2(T, addsat) KGMSL_I2(T, hadd)        \
  KGMSL_I2(T, max) KGMSL_I2(T, min) KGMSL_I2(T, mulhi) KGMSL_I2(T, rhadd) KGMSL_I2(T, rotate) \
  KGMSL_I2(T, subsat) KGMSL_I3(T, clamp) KGMSL_I3(T, mad24) KGMSL_I3(T, madhi)                \
  KGMSL_I3(T, madsat) KGMSL_I3(T, max3) KGMSL_I3(T, min3) KGMSL_I3(T, median3)                \
  KGMSL_I2(T, mul24)                                                                          \
  T extract_bits(T, uint, uint); T insert_bits(T, T, uint, uint);
KGMSL_I_ALL(KGMSL_INT_FUNCS)
KGMSL_F1(abs) KGMSL_F2(max) KGMSL_F2(min) KGMSL_F3(clamp) KGMSL_F3(max3) KGMSL_F3(min3) KGMSL_F3(median3)
// Mixed-type calls (max(half, float), clamp(x, 0, 1)): Metal's templates promote.
template <typename T, typename U, typename = enable_if_t<!is_same_v<T, U> && is_arithmetic_v<T> && is_arithmetic_v<U>>>
decltype(declval<T>() + declval<U>()) max(T, U);
template <typename T, typename U, typename = enable_if_t<!is_same_v<T, U> && is_arithmetic_v<T> && is_arithmetic_v<U>>>
decltype(declval<T>() + declval<U>()) min(T, U);
template <typename T, typename U, typename = enable_if_t<!is_same_v<T, U> && is_arithmetic_v<T> && is_arithmetic_v<U>>>
decltype(declval<T>() + declval<U>()) fmax(T, U);
template <typename T, typename U, typename = enable_if_t<!is_same_v<T, U> && is_arithmetic_v<T> && is_arithmetic_v<U>>>
decltype(declval<T>() + declval<U>()) fmin(T, U);
template <typename T, typename U, typename = enable_if_t<!is_same_v<T, U> && is_arithmetic_v<T> && is_arithmetic_v<U>>>
decltype(declval<T>() + declval<U>()) pow(T, U);
template <typename T, typename U, typename V, typename = enable_if_t<!(is_same_v<T, U> && is_same_v<U, V>) && is_arithmetic_v<T>>>
T clamp(T, U, V);

// Relational and geometric.
template <typename T> bool isnan(T); template <typename T> bool isinf(T);
template <typename T> bool isfinite(T); template <typename T> bool isnormal(T);
template <typename T> bool signbit(T);
template <typename T> bool all(T); template <typename T> bool any(T);
template <typename T, typename C> T select(T, T, C);
// dot is Metal's overloads for floating vectors, not a template: a source's own `template <typename
// T> float dot(T, T)` (mistral.rs's paged attention) is then no tie for its own types.
#define KGMSL_DOT(T) T dot(T##2, T##2); T dot(T##3, T##3); T dot(T##4, T##4);
KGMSL_DOT(float) KGMSL_DOT(half) KGMSL_DOT(bfloat)
template <typename T> __kg_scalar_t<T> length(T);
template <typename T> __kg_scalar_t<T> length_squared(T);
template <typename T> __kg_scalar_t<T> distance(T, T);
template <typename T> T normalize(T);
template <typename T> T cross(T, T);
template <typename T> T reflect(T, T);

// ---- Synchronisation.
enum mem_flags : uint {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(uint(a) | uint(b)); }
void threadgroup_barrier(mem_flags);
void simdgroup_barrier(mem_flags);

// ---- SIMD-group and quad-group functions (templates: every scalar and vector type).
struct simd_vote {
  typedef ulong vote_t;
  explicit constexpr simd_vote(vote_t v = 0) thread : __v(v) {}
  explicit constexpr operator vote_t() const thread { return __v; }
  bool all() const thread; bool any() const thread;
  vote_t __v;
};
#define KGMSL_SIMD(p)                                                                     \
  template <typename T> T p##_sum(T); template <typename T> T p##_product(T);             \
  template <typename T> T p##_max(T); template <typename T> T p##_min(T);                 \
  template <typename T> T p##_and(T); template <typename T> T p##_or(T);                  \
  template <typename T> T p##_xor(T);                                                     \
  template <typename T> T p##_prefix_exclusive_sum(T);                                    \
  template <typename T> T p##_prefix_inclusive_sum(T);                                    \
  template <typename T> T p##_prefix_exclusive_product(T);                                \
  template <typename T> T p##_prefix_inclusive_product(T);                                \
  template <typename T> T p##_broadcast(T, ushort);                                       \
  template <typename T> T p##_broadcast_first(T);                                         \
  template <typename T> T p##_shuffle(T, ushort);                                         \
  template <typename T> T p##_shuffle_down(T, ushort);                                    \
  template <typename T> T p##_shuffle_up(T, ushort);                                      \
  template <typename T> T p##_shuffle_xor(T, ushort);                                     \
  template <typename T> T p##_shuffle_rotate_down(T, ushort);                             \
  template <typename T> T p##_shuffle_rotate_up(T, ushort);                               \
  template <typename T> T p##_shuffle_and_fill_down(T, T, ushort);                        \
  template <typename T> T p##_shuffle_and_fill_down(T, T, ushort, ushort);                \
  template <typename T> T p##_shuffle_and_fill_up(T, T, ushort);                          \
  template <typename T> T p##_shuffle_and_fill_up(T, T, ushort, ushort);                  \
  bool p##_all(bool); bool p##_any(bool); bool p##_is_first();                            \
  simd_vote p##_ballot(bool); simd_vote p##_active_threads_mask();
KGMSL_SIMD(simd)
KGMSL_SIMD(quad)

// ---- Atomics.
enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel, memory_order_seq_cst };
enum thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };
template <typename T> struct atomic { T __v; atomic() = delete; };
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float;
typedef atomic<ulong> atomic_ulong;
// What Metal's atomic functions take (MSL 6.15): the bitwise ones (and, or, xor) integers only;
// on a threadgroup atomic_float, no read-modify-write (Metal's float atomics are device memory's).
// Each check is a default template argument, so a call that breaks it stops at a static_assert
// saying why, where the call is.
template <typename T> struct __kg_atomic_bitwise {
  static_assert(is_integral<T>::value, "the bitwise atomic functions (fetch_and, fetch_or, fetch_xor) take atomic integers only, not atomic_float (MSL 6.15)");
  typedef void type;
};
// (the threadgroup one is checked in the body of the threadgroup variants below: deduction
// succeeds for a device pointer too, so a default template argument would fire for every call)
#define KGMSL_ATOMIC_TG_FLOAT_RMW(name)                                                                    \
  template <typename T, typename U> T name(volatile threadgroup atomic<T>*, U, memory_order) {             \
    static_assert(!is_same<T, float>::value, "atomic_float supports atomic read-modify-write functions "  \
                  "in device memory only, not threadgroup memory (MSL 6.15)");                             \
    return T();                                                                                            \
  }
#define KGMSL_ATOMIC_AS(AS)                                                                                           \
  template <typename T, typename U> void atomic_store_explicit(volatile AS atomic<T>*, U, memory_order);             \
  template <typename T> T atomic_load_explicit(const volatile AS atomic<T>*, memory_order);                          \
  template <typename T, typename U> T atomic_exchange_explicit(volatile AS atomic<T>*, U, memory_order);              \
  template <typename T, typename U> bool atomic_compare_exchange_weak_explicit(volatile AS atomic<T>*, thread T*, U,  \
                                                                               memory_order, memory_order);           \
  template <typename T, typename U> bool atomic_compare_exchange_strong_explicit(volatile AS atomic<T>*, thread T*, U,\
                                                                                 memory_order, memory_order);         \
  KGMSL_ATOMIC_RMW_##AS(atomic_fetch_add_explicit)             \
  KGMSL_ATOMIC_RMW_##AS(atomic_fetch_sub_explicit)             \
  template <typename T, typename U, typename = typename __kg_atomic_bitwise<T>::type> T atomic_fetch_and_explicit(volatile AS atomic<T>*, U, memory_order);             \
  template <typename T, typename U, typename = typename __kg_atomic_bitwise<T>::type> T atomic_fetch_or_explicit(volatile AS atomic<T>*, U, memory_order);              \
  template <typename T, typename U, typename = typename __kg_atomic_bitwise<T>::type> T atomic_fetch_xor_explicit(volatile AS atomic<T>*, U, memory_order);             \
  KGMSL_ATOMIC_RMW_##AS(atomic_fetch_min_explicit)             \
  KGMSL_ATOMIC_RMW_##AS(atomic_fetch_max_explicit)
#define KGMSL_ATOMIC_RMW_device(name) template <typename T, typename U> T name(volatile device atomic<T>*, U, memory_order);
#define KGMSL_ATOMIC_RMW_threadgroup(name) KGMSL_ATOMIC_TG_FLOAT_RMW(name)
KGMSL_ATOMIC_AS(device)
KGMSL_ATOMIC_AS(threadgroup)
void atomic_thread_fence(mem_flags, memory_order, thread_scope = thread_scope_device);

// ---- SIMD-group matrices (the 8x8 float, half and bfloat ones MLX's steel uses).
template <typename T, int Cols, int Rows> struct simdgroup_matrix {
  static_assert(is_same<T, float>::value || is_same<T, half>::value || is_same<T, bfloat>::value,
                "simdgroup_matrix holds float, half or bfloat elements only (MSL 6.7)");
  static_assert(Cols == 8 && Rows == 8, "simdgroup_matrix is 8x8 only (MSL 6.7)");
  typedef T value_type;
  simdgroup_matrix() thread = default;
  explicit simdgroup_matrix(T) thread;
  thread vec<T, 2>& thread_elements() thread;
  const thread vec<T, 2>& thread_elements() const thread;
};
template <typename T, int C, int R = C> simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T);
// `a * b` multiplies (MSL 6.7: as simdgroup_multiply), `a + b` adds.
template <typename T, int M, int N, int K>
simdgroup_matrix<T, N, M> operator*(const simdgroup_matrix<T, K, M>&, const simdgroup_matrix<T, N, K>&);
template <typename T, int C, int R>
simdgroup_matrix<T, C, R> operator+(const simdgroup_matrix<T, C, R>&, const simdgroup_matrix<T, C, R>&);
#define KGMSL_SGM_AS(AS)                                                                                  \
  template <typename T, typename U, int C, int R>                                                         \
  void simdgroup_load(simdgroup_matrix<T, C, R>&, const AS U*, size_t = C, ulong2 = 0, bool = false); \
  template <typename T, typename U, int C, int R>                                                         \
  void simdgroup_store(simdgroup_matrix<T, C, R>, AS U*, size_t = C, ulong2 = 0, bool = false);
KGMSL_SGM_AS(device)
KGMSL_SGM_AS(threadgroup)
// The matrices are thread objects: parameters without an address space (the generic one
// once deduced), so locals (private in the OpenCL model) and thread references both deduce.
template <typename T, typename U, typename V, typename W, int M, int N, int K>
void simdgroup_multiply_accumulate(simdgroup_matrix<T, N, M>&, const simdgroup_matrix<U, K, M>&,
                                   const simdgroup_matrix<V, N, K>&, const simdgroup_matrix<W, N, M>&);
template <typename T, typename U, typename V, int M, int N, int K>
void simdgroup_multiply(simdgroup_matrix<T, N, M>&, const simdgroup_matrix<U, K, M>&,
                        const simdgroup_matrix<V, N, K>&);
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

// ---- Misc.
template <typename T> struct uniform {
  T __v;
  constexpr uniform(T v) thread : __v(v) {}
  constexpr operator T() const thread { return __v; }
};
// By reference, so that a `constant` argument deduces its value type.
template <typename T> constexpr uniform<remove_cv_t<remove_addrspace_t<T>>> make_uniform(const T& v) {
  return uniform<remove_cv_t<remove_addrspace_t<T>>>(v);
}

// is_function_constant_defined(name) (MSL 5.8.1): whether the pipeline gave a function constant a
// value; a constant expression (a program-scope constant may be initialised with it).
template <typename T> constexpr bool is_function_constant_defined(const T&) { return true; }

// ---- Shader logging (<metal_logging>, Metal 3.2): a log object is a program-scope `constant`
// (its constructor is constexpr and constant-qualified); the messages are printf-style
// formats in the constant address space, the arguments any loggable values. What the
// runtime prints is not modelled; Apple documents `log` and the per-level `log_*` calls.
#if __METAL_VERSION__ >= 320
class os_log {
public:
  // (a constructor takes no const: the space alone)
  constexpr os_log(const constant char* subsystem, const constant char* category) __constant : __subsystem(subsystem), __category(category) {}
#define KGMSL_OS_LOG_CALL(name)                                                 \
  template <typename... Args> void name(const constant char* format, Args...) const constant; \
  template <typename... Args> void name(const constant char* format, Args...) const thread;
  KGMSL_OS_LOG_CALL(log) KGMSL_OS_LOG_CALL(log_debug) KGMSL_OS_LOG_CALL(log_info)
  KGMSL_OS_LOG_CALL(log_error) KGMSL_OS_LOG_CALL(log_fault)
#undef KGMSL_OS_LOG_CALL
private:
  const constant char* __subsystem;
  const constant char* __category;
};
// The default log (subsystem and category left to the runtime).
constant os_log os_log_default("", "");
#endif

} // namespace metal

// The global scalar and vector names are also members of namespace metal in Metal.
namespace metal {
using ::__kgmsl_vcast; using ::uchar; using ::ushort; using ::uint; using ::ulong; using ::bfloat; using ::size_t;
using ::int8_t; using ::uint8_t; using ::int16_t; using ::uint16_t; using ::int32_t; using ::uint32_t;
using ::int64_t; using ::uint64_t; using ::ptrdiff_t;
#define KGMSL_USE_VEC(T) using ::T##2; using ::T##3; using ::T##4;
KGMSL_USE_VEC(char) KGMSL_USE_VEC(uchar) KGMSL_USE_VEC(short) KGMSL_USE_VEC(ushort) KGMSL_USE_VEC(int)
KGMSL_USE_VEC(uint) KGMSL_USE_VEC(long) KGMSL_USE_VEC(ulong) KGMSL_USE_VEC(float) KGMSL_USE_VEC(half)
KGMSL_USE_VEC(bfloat) KGMSL_USE_VEC(bool)
}
// Matrices are global names too (declared in namespace metal above).
#define KGMSL_USE_MATRIX(T)                                                                      \
  using metal::T##2x2; using metal::T##2x3; using metal::T##2x4; using metal::T##3x2;            \
  using metal::T##3x3; using metal::T##3x4; using metal::T##4x2; using metal::T##4x3; using metal::T##4x4;
KGMSL_USE_MATRIX(float) KGMSL_USE_MATRIX(half)
// (for a `vec` named unqualified without `using namespace metal`, as through `using metal::vec;`)
using metal::__kgmsl_bvec;
using metal::__kgmsl_velem;

// ---- Compiler builtins that Metal's own headers are written with (MLX's bf16_math.h calls them).
#define KGMSL_BUILTIN1(name) template <typename T> T __metal_##name(T, bool = false);
#define KGMSL_BUILTIN2(name) template <typename T> T __metal_##name(T, T, bool = false);
#define KGMSL_BUILTIN3(name) template <typename T> T __metal_##name(T, T, T, bool = false);
KGMSL_BUILTIN1(fabs) KGMSL_BUILTIN1(acos) KGMSL_BUILTIN1(acosh) KGMSL_BUILTIN1(asin) KGMSL_BUILTIN1(asinh)
KGMSL_BUILTIN1(atan) KGMSL_BUILTIN1(atanh) KGMSL_BUILTIN1(ceil) KGMSL_BUILTIN1(cos) KGMSL_BUILTIN1(cosh)
KGMSL_BUILTIN1(cospi) KGMSL_BUILTIN1(exp) KGMSL_BUILTIN1(exp10) KGMSL_BUILTIN1(exp2) KGMSL_BUILTIN1(floor)
KGMSL_BUILTIN1(fract) KGMSL_BUILTIN1(log) KGMSL_BUILTIN1(log10) KGMSL_BUILTIN1(log2) KGMSL_BUILTIN1(rint)
KGMSL_BUILTIN1(round) KGMSL_BUILTIN1(rsqrt) KGMSL_BUILTIN1(sin) KGMSL_BUILTIN1(sinh) KGMSL_BUILTIN1(sinpi)
KGMSL_BUILTIN1(sqrt) KGMSL_BUILTIN1(tan) KGMSL_BUILTIN1(tanh) KGMSL_BUILTIN1(tanpi) KGMSL_BUILTIN1(trunc)
KGMSL_BUILTIN2(atan2) KGMSL_BUILTIN2(divide) KGMSL_BUILTIN2(fmax) KGMSL_BUILTIN2(fmin) KGMSL_BUILTIN2(fmod)
KGMSL_BUILTIN2(pow) KGMSL_BUILTIN2(powr) KGMSL_BUILTIN2(nextafter) KGMSL_BUILTIN3(fma) KGMSL_BUILTIN3(fmax3)
KGMSL_BUILTIN3(fmin3) KGMSL_BUILTIN3(fmedian3)
template <typename T> T __metal_ldexp(T, int, bool = false);
template <typename T> T __metal_frexp(T, thread int*, bool = false);
#define KGMSL_SIMD_BUILTIN(name) template <typename T> T __metal_simd_##name(T);
KGMSL_SIMD_BUILTIN(sum) KGMSL_SIMD_BUILTIN(product) KGMSL_SIMD_BUILTIN(max) KGMSL_SIMD_BUILTIN(min)
KGMSL_SIMD_BUILTIN(and) KGMSL_SIMD_BUILTIN(or) KGMSL_SIMD_BUILTIN(xor)
KGMSL_SIMD_BUILTIN(prefix_exclusive_sum) KGMSL_SIMD_BUILTIN(prefix_inclusive_sum)
KGMSL_SIMD_BUILTIN(prefix_exclusive_product) KGMSL_SIMD_BUILTIN(prefix_inclusive_product)
template <typename T> T __metal_simd_broadcast(T, ushort);
template <typename T> T __metal_simd_shuffle(T, ushort);
template <typename T> T __metal_simd_shuffle_down(T, ushort);
template <typename T> T __metal_simd_shuffle_up(T, ushort);
template <typename T> T __metal_simd_shuffle_xor(T, ushort);
template <typename T> T __metal_simd_shuffle_rotate_down(T, ushort);
template <typename T> T __metal_simd_shuffle_rotate_up(T, ushort);
template <typename T> T __metal_simd_shuffle_and_fill_down(T, T, ushort, ushort);
template <typename T> T __metal_simd_shuffle_and_fill_up(T, T, ushort, ushort);
ushort __metal_get_simdgroup_size(ushort);
uint __metal_get_simdgroup_size(uint);
ushort __metal_get_thread_index_in_simdgroup(ushort);
uint __metal_get_thread_index_in_simdgroup(uint);

// ---- `p += x` and `p -= x` on a pointer, with `x` of a class that converts to an integer (MLX's
// `src += Int<1>{}`, its own integral_constant): Metal's compiler takes them; clang 14 finds no
// built-in candidate (it binds the pointer through a reference with no address space, which no
// OpenCL object is in), though `p + x` works. These stand in for the built-in as `p = p + x`:
// what that refuses, they do not take. (`P&` deduces the pointer object's space with it.)
template <typename P, typename C, typename = metal::enable_if_t<__is_class(C) && metal::is_pointer<metal::remove_addrspace_t<P>>::value>>
constexpr auto operator+=(P& p, C x) -> decltype(p = p + x) { return p = p + x; }
template <typename P, typename C, typename = metal::enable_if_t<__is_class(C) && metal::is_pointer<metal::remove_addrspace_t<P>>::value>>
constexpr auto operator-=(P& p, C x) -> decltype(p = p - x) { return p = p - x; }

#endif // KGMSL_METAL_STDLIB
