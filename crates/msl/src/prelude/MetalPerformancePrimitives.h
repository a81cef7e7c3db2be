// kernelgen-msl: a stand-in for Apple's <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
// (Metal 4, macOS/iOS 26.2 SDKs): the matmul2d tensor operation, declared for the front-end
// check. What an operation computes, its layouts and its performance are Apple's: not
// emulated, and only a Mac can tell whether a kernel using it runs as intended.
//
// Source: MPPTensorOpsMatMul2d.h of Apple's SDK (declarations, doc comment and the data-type
// table), its __impl traits; convolution2d (MPPTensorOpsConvolution2d.h) is not modelled.
#ifndef KGMSL_METAL_PERFORMANCE_PRIMITIVES
#define KGMSL_METAL_PERFORMANCE_PRIMITIVES
#pragma clang system_header
#include <metal_stdlib>
#include <metal_tensor>

#if defined(__HAVE_TENSOR__)

namespace mpp {
namespace tensor_ops {

enum class reduction_operation {
  sum,
  max,
  min,
};

// kernelgen-msl: Apple's matmul2d takes the descriptor itself as its first template argument
// (a non-type template parameter of class type, C++20). C++ for OpenCL 2021 is C++17, so here
// the descriptor converts, constexpr, to a key that holds every field: a scoped enumeration
// that nothing else converts to and that converts to nothing. `matmul2d<desc, Scope>` reads
// and checks as Apple's does (a descriptor that is not a constant expression is rejected).
// 128 bits: each dimension whole (any int: -1 is dynamic), then the flags.
enum class __kgmsl_matmul2d_key : unsigned __int128 {};

struct matmul2d_descriptor {
  enum class mode {
    multiply,
    multiply_accumulate,
  };

  int m, n, k;
  bool transpose_left, transpose_right;
  bool relaxed_precision;
  mode matmul_mode;

public:
  constexpr matmul2d_descriptor(int __m, int __n, int __k = static_cast<int>(metal::dynamic_extent),
                                bool __transpose_left = false, bool __transpose_right = false,
                                bool __relaxed_precision = false, mode __matmul_mode = mode::multiply) thread
      : m(__m), n(__n), k(__k), transpose_left(__transpose_left), transpose_right(__transpose_right),
        relaxed_precision(__relaxed_precision), matmul_mode(__matmul_mode) {}

  // (A program-scope descriptor is a constant object.)
  constexpr operator __kgmsl_matmul2d_key() const thread {
    return __pack(m, n, k, transpose_left, transpose_right, relaxed_precision, matmul_mode);
  }
  constexpr operator __kgmsl_matmul2d_key() const constant {
    return __pack(m, n, k, transpose_left, transpose_right, relaxed_precision, matmul_mode);
  }

private:
  static constexpr __kgmsl_matmul2d_key __pack(int m, int n, int k, bool tl, bool tr, bool rp, mode md) {
    using u = unsigned __int128;
    return __kgmsl_matmul2d_key(__field(m) | (__field(n) << 32) | (__field(k) << 64) | (u(tl) << 96) | (u(tr) << 97) |
                                (u(rp) << 98) | (u(md == mode::multiply_accumulate) << 99));
  }
  static constexpr unsigned __int128 __field(int v) { return (unsigned __int128)(unsigned int)v; }
};

namespace __kgmsl_matmul2d {
constexpr int field(unsigned __int128 v, int at) { return int((unsigned int)(v >> at)); }
constexpr matmul2d_descriptor unpack(__kgmsl_matmul2d_key key) {
  const unsigned __int128 v = (unsigned __int128)key;
  return matmul2d_descriptor(field(v, 0), field(v, 32), field(v, 64), (v >> 96) & 1, (v >> 97) & 1, (v >> 98) & 1,
                             ((v >> 99) & 1) ? matmul2d_descriptor::mode::multiply_accumulate
                                             : matmul2d_descriptor::mode::multiply);
}
constexpr size_t extent(int v) { return v < 0 ? metal::dynamic_extent : size_t(v); }

template <class T> using plain_t = metal::remove_cv_t<metal::remove_addrspace_t<metal::remove_reference_t<T>>>;
template <class T> constexpr bool is_tensor() {
  return metal::is_tensor_handle_v<plain_t<T>> || metal::is_tensor_inline_v<plain_t<T>>;
}
template <class T> constexpr bool is_cooperative_tensor() { return metal::__kgmsl_is_cooperative_tensor<plain_t<T>>::value; }
template <class T> constexpr bool is_operand() { return is_tensor<T>() || is_cooperative_tensor<T>(); }
template <class T> constexpr bool is_unqualified() { return metal::is_same_v<T, plain_t<T>>; }
template <class T> using value_t = typename plain_t<T>::value_type;
// What Apple's __run asserts of every operand (MPPTensorOpsMatMul2dImpl.h): rank 2, and a
// tensor's elements in a space its dispatch has: device or threadgroup memory for SIMD-groups,
// device or thread memory for execution_thread; constant memory for none ("Unsupported address
// space"). Cooperative tensors are the thread's own registers.
template <class T> constexpr bool rank2() { return plain_t<T>::get_rank() == 2; }
template <class Scope, class T> constexpr bool space_supported() {
  if constexpr (is_cooperative_tensor<T>()) {
    return true;
  } else {
    constexpr int space = metal::__kgmsl_tensor::space<typename plain_t<T>::element_type>::value;
    return metal::is_execution_thread_v<metal::remove_cv_t<Scope>> ? (space == 0 || space == 1) : (space == 1 || space == 3);
  }
}

// The (left, right, destination) element types MPPTensorOpsMatMul2d.h lists, less the
// 2-, 4- and 8-bit formats (int4b_format, metal_fp8_e4m3_format, ...), not modelled.
template <class L, class R, class D> constexpr bool supported() {
  using metal::is_same_v;
#define KGMSL_MM(A, B, C) (is_same_v<L, A> && is_same_v<R, B> && is_same_v<D, C>) ||
  return KGMSL_MM(half, half, half) KGMSL_MM(half, int8_t, half) KGMSL_MM(half, uint8_t, half)
      KGMSL_MM(int8_t, half, half) KGMSL_MM(uint8_t, half, half) KGMSL_MM(half, half, float)
      KGMSL_MM(half, float, float) KGMSL_MM(half, int8_t, float) KGMSL_MM(half, uint8_t, float)
      KGMSL_MM(float, half, float) KGMSL_MM(float, float, float) KGMSL_MM(float, int8_t, float)
      KGMSL_MM(float, uint8_t, float) KGMSL_MM(int8_t, half, float) KGMSL_MM(uint8_t, half, float)
      KGMSL_MM(int8_t, float, float) KGMSL_MM(uint8_t, float, float) KGMSL_MM(int8_t, int8_t, int32_t)
      KGMSL_MM(uint8_t, uint8_t, int32_t) KGMSL_MM(bfloat, bfloat, bfloat) KGMSL_MM(bfloat, bfloat, float)
      KGMSL_MM(bfloat, float, float) KGMSL_MM(bfloat, int8_t, bfloat) KGMSL_MM(bfloat, int8_t, float)
      KGMSL_MM(float, bfloat, float) KGMSL_MM(int8_t, bfloat, bfloat) KGMSL_MM(int8_t, bfloat, float)
      KGMSL_MM(bfloat, half, bfloat) KGMSL_MM(bfloat, half, half) KGMSL_MM(bfloat, half, float)
      KGMSL_MM(half, bfloat, bfloat) KGMSL_MM(half, bfloat, half) KGMSL_MM(half, bfloat, float)
      KGMSL_MM(bfloat, uint8_t, bfloat) KGMSL_MM(bfloat, uint8_t, float) KGMSL_MM(uint8_t, bfloat, bfloat)
      KGMSL_MM(uint8_t, bfloat, float) false;
#undef KGMSL_MM
}

// The layouts of the cooperative tensors an operation makes: implementation-defined (opaque).
enum class operand { left, right, destination };
template <__kgmsl_matmul2d_key Descriptor, class Scope, operand Operand, class Left, class Right, class Element>
struct layout {};
// Their extents (inferred: x first, as tensors are indexed): left k x m, right n x k,
// destination n x m, static where the descriptor fixes them.
template <__kgmsl_matmul2d_key Descriptor, operand Operand, class CoordType>
using extents_t = metal::conditional_t<
    Operand == operand::left, metal::extents<CoordType, extent(unpack(Descriptor).k), extent(unpack(Descriptor).m)>,
    metal::conditional_t<Operand == operand::right,
                         metal::extents<CoordType, extent(unpack(Descriptor).n), extent(unpack(Descriptor).k)>,
                         metal::extents<CoordType, extent(unpack(Descriptor).n), extent(unpack(Descriptor).m)>>>;
template <__kgmsl_matmul2d_key Descriptor, class Scope, operand Operand, class Left, class Right, class Element,
          class CoordType>
using cooperative_t = metal::cooperative_tensor<Element, extents_t<Descriptor, Operand, CoordType>,
                                                layout<Descriptor, Scope, Operand, Left, Right, Element>>;
} // namespace __kgmsl_matmul2d

// C = A * B (+ C with mode::multiply_accumulate), run cooperatively by the threads of Scope
// (execution_thread, execution_simdgroup or execution_simdgroups<N>): every thread of the
// scope must call run. Operands are tensors (handle, slice of a handle, inline) or cooperative
// tensors this operation made.
template <__kgmsl_matmul2d_key Descriptor, typename Scope, class... Args> class matmul2d {
  static_assert(metal::is_execution_thread_v<metal::remove_cv_t<Scope>> ||
                    metal::is_execution_simdgroups_v<metal::remove_cv_t<Scope>>,
                "Scope template argument should be of op_scope type");

public:
  static constexpr constant matmul2d_descriptor descriptor = __kgmsl_matmul2d::unpack(Descriptor);
  using scope = Scope;

  matmul2d() thread = default;

  template <typename LeftOperandType, typename RightOperandType, typename DestinationOperandType,
            typename V = metal::enable_if_t<__kgmsl_matmul2d::is_operand<LeftOperandType>() &&
                                            __kgmsl_matmul2d::is_operand<RightOperandType>() &&
                                            __kgmsl_matmul2d::is_operand<DestinationOperandType>()>,
            typename... RunArgs>
  void run(LeftOperandType& left, RightOperandType& right, DestinationOperandType& destination) const thread {
    // (Apple's parameters are `thread LeftOperandType&` ...: clang deduces through no address
    // space here, so the operands' space is checked instead.)
    static_assert(metal::__kgmsl_tensor::is_thread<LeftOperandType>() && metal::__kgmsl_tensor::is_thread<RightOperandType>() &&
                      metal::__kgmsl_tensor::is_thread<DestinationOperandType>(),
                  "matmul2d::run: the operands are thread objects (tensors and cooperative tensors)");
    static_assert(__kgmsl_matmul2d::supported<__kgmsl_matmul2d::value_t<LeftOperandType>,
                                              __kgmsl_matmul2d::value_t<RightOperandType>,
                                              __kgmsl_matmul2d::value_t<DestinationOperandType>>(),
                  "matmul2d: unsupported combination of left, right and destination element types");
    static_assert(__kgmsl_matmul2d::rank2<LeftOperandType>() && __kgmsl_matmul2d::rank2<RightOperandType>() &&
                      __kgmsl_matmul2d::rank2<DestinationOperandType>(),
                  "matmul2d::run: Operand must have rank 2");
    static_assert(__kgmsl_matmul2d::space_supported<Scope, LeftOperandType>() &&
                      __kgmsl_matmul2d::space_supported<Scope, RightOperandType>() &&
                      __kgmsl_matmul2d::space_supported<Scope, DestinationOperandType>(),
                  "matmul2d::run: Unsupported address space: a tensor operand's elements are in device or threadgroup "
                  "memory (execution_simdgroups), device or thread memory (execution_thread), never constant memory");
    static_assert(!(metal::is_execution_thread_v<metal::remove_cv_t<Scope>> &&
                    __kgmsl_matmul2d::is_cooperative_tensor<DestinationOperandType>()),
                  "matmul2d::run: destination cannot be cooperative tensor with cooperative group of size 1");
  }

  template <typename LeftElementType, typename RightElementType, typename ElementType, typename CoordType = int,
            typename... CoopArgs>
  using cooperative_tensor_left_input_t =
      __kgmsl_matmul2d::cooperative_t<Descriptor, Scope, __kgmsl_matmul2d::operand::left, LeftElementType,
                                      RightElementType, LeftElementType, CoordType>;

  template <typename LeftElementType, typename RightElementType, typename ElementType, typename CoordType = int,
            typename U = metal::enable_if_t<__kgmsl_matmul2d::is_unqualified<LeftElementType>() &&
                                            __kgmsl_matmul2d::is_unqualified<RightElementType>() &&
                                            __kgmsl_matmul2d::is_unqualified<ElementType>() &&
                                            metal::is_integral_v<CoordType>>,
            typename... CoopArgs>
  cooperative_tensor_left_input_t<LeftElementType, RightElementType, ElementType, CoordType, CoopArgs...>
  get_left_input_cooperative_tensor() const thread {
    static_assert(metal::is_same_v<Scope, metal::execution_simdgroup>,
                  "Input cooperative tensors require a single SIMD group");
    static_assert(__kgmsl_matmul2d::supported<LeftElementType, RightElementType, ElementType>(),
                  "matmul2d: unsupported combination of left, right and destination element types");
    return {};
  }

  template <typename LeftElementType, typename RightElementType, typename ElementType, typename CoordType = int,
            typename... CoopArgs>
  using cooperative_tensor_right_input_t =
      __kgmsl_matmul2d::cooperative_t<Descriptor, Scope, __kgmsl_matmul2d::operand::right, LeftElementType,
                                      RightElementType, RightElementType, CoordType>;

  template <typename LeftElementType, typename RightElementType, typename ElementType, typename CoordType = int,
            typename U = metal::enable_if_t<__kgmsl_matmul2d::is_unqualified<LeftElementType>() &&
                                            __kgmsl_matmul2d::is_unqualified<RightElementType>() &&
                                            __kgmsl_matmul2d::is_unqualified<ElementType>() &&
                                            metal::is_integral_v<CoordType>>,
            typename... CoopArgs>
  cooperative_tensor_right_input_t<LeftElementType, RightElementType, ElementType, CoordType, CoopArgs...>
  get_right_input_cooperative_tensor() const thread {
    static_assert(metal::is_same_v<Scope, metal::execution_simdgroup>,
                  "Input cooperative tensors require a single SIMD group");
    static_assert(__kgmsl_matmul2d::supported<LeftElementType, RightElementType, ElementType>(),
                  "matmul2d: unsupported combination of left, right and destination element types");
    return {};
  }

  template <typename LeftOperand, typename RightOperand, typename ElementType, typename CoordType = int,
            typename... CoopArgs>
  using cooperative_tensor_destination_t =
      __kgmsl_matmul2d::cooperative_t<Descriptor, Scope, __kgmsl_matmul2d::operand::destination,
                                      __kgmsl_matmul2d::plain_t<LeftOperand>, __kgmsl_matmul2d::plain_t<RightOperand>,
                                      ElementType, CoordType>;

  template <typename LeftOperandType, typename RightOperandType, typename ElementType, typename CoordType = int,
            typename U = metal::enable_if_t<__kgmsl_matmul2d::is_operand<LeftOperandType>() &&
                                            __kgmsl_matmul2d::is_operand<RightOperandType>() &&
                                            __kgmsl_matmul2d::is_unqualified<ElementType>() &&
                                            metal::is_integral_v<CoordType>>,
            typename... CoopArgs>
  cooperative_tensor_destination_t<LeftOperandType, RightOperandType, ElementType, CoordType, CoopArgs...>
  get_destination_cooperative_tensor() const thread {
    static_assert(__kgmsl_matmul2d::supported<__kgmsl_matmul2d::value_t<LeftOperandType>,
                                              __kgmsl_matmul2d::value_t<RightOperandType>, ElementType>(),
                  "matmul2d: unsupported combination of left, right and destination element types");
    return {};
  }
};

// Reductions of a destination-shaped cooperative tensor along its rows or columns into another
// cooperative tensor of the same element type. The identity defaults to 0 whatever the
// operation (as Apple's does: pass reduction_operation_identity<T>::max_identity for max).
template <typename ElementType> struct reduction_operation_identity {
  static constexpr constant ElementType sum_identity = ElementType(0);
  static constexpr constant ElementType max_identity = metal::numeric_limits<ElementType>::lowest();
  static constexpr constant ElementType min_identity = metal::numeric_limits<ElementType>::max();
};
template <class ElementType, class SrcExtents, class DstExtents, class SrcLayout, class DstLayout>
void reduce_rows(metal::cooperative_tensor<ElementType, SrcExtents, SrcLayout>& source,
                 metal::cooperative_tensor<ElementType, DstExtents, DstLayout>& destination,
                 reduction_operation op = reduction_operation::sum,
                 ElementType identity = reduction_operation_identity<ElementType>::sum_identity);
template <class ElementType, class SrcExtents, class DstExtents, class SrcLayout, class DstLayout>
void reduce_columns(metal::cooperative_tensor<ElementType, SrcExtents, SrcLayout>& source,
                    metal::cooperative_tensor<ElementType, DstExtents, DstLayout>& destination,
                    reduction_operation op = reduction_operation::sum,
                    ElementType identity = reduction_operation_identity<ElementType>::sum_identity);

} // namespace tensor_ops
} // namespace mpp

#endif // __HAVE_TENSOR__
#endif // KGMSL_METAL_PERFORMANCE_PRIMITIVES
