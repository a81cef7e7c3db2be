// kernelgen-msl: a stand-in for Metal 4's <metal_tensor> and <metal_cooperative_tensor>
// (declarations for the front-end check, parsed by clang as C++ for OpenCL 2021 like
// metal_stdlib beside it). Nothing here runs: what a tensor operation computes, and every
// layout, is Apple's and is not emulated.
//
// Sources: the MetalPerformancePrimitives headers of Apple's SDK (MPPTensorOpsMatMul2d.h, its
// doc comment and its traits, which name these types and members), and the toolchain's
// metal_tensor / metal_cooperative_tensor as quoted in public notes on them; real kernels (MLX,
// llama.cpp's Metal 4 probes and others) for how they are called. Members nobody documents are
// not declared (a use is an error here); where a detail is inferred, a comment says so.
// Reference parameters whose type is deduced carry no `thread` (Apple's do): clang deduces
// nothing through OpenCL's generic space from a local (a private object there); once deduced
// such a reference is generic, which is what `thread` stands for.
#ifndef KGMSL_METAL_TENSOR
#define KGMSL_METAL_TENSOR
#pragma clang system_header
#include <metal_stdlib>

// Apple's headers declare nothing below Metal 4 (their `#if defined(__HAVE_TENSOR__)`): a use
// there fails as an undeclared name.
#if defined(__HAVE_TENSOR__)

namespace metal {

// ---- Execution scopes (Apple's __exec/units.h): the threads that run a tensor operation
// together. `execution_threads` exists for one thread only; `execution_simdgroups<N>` is N
// SIMD-groups. (The run-time sized `execution_dsimdgroups` is not modelled.)
template <size_t Size> class execution_simdgroups {
  static_assert(Size != 0, "execution_simgroups<0> is not supported");

public:
  static constexpr constant size_t static_size = Size;
  constexpr uint size() const thread { return static_size; }
};
template <size_t Size> class execution_threads {
  static_assert(Size == 1, "Only execution_thread<1> is supported");

public:
  static constexpr constant size_t static_size = Size;
  constexpr uint size() const thread { return static_size; }
};
using execution_simdgroup = execution_simdgroups<1>;
using execution_thread = execution_threads<1>;
template <typename T> struct is_execution_simdgroups : false_type {};
template <size_t N> struct is_execution_simdgroups<execution_simdgroups<N>> : true_type {};
template <typename T> struct is_execution_thread : false_type {};
template <> struct is_execution_thread<execution_threads<1>> : true_type {};
template <typename T> constexpr constant bool is_execution_simdgroups_v = is_execution_simdgroups<T>::value;
template <typename T> constexpr constant bool is_execution_thread_v = is_execution_thread<T>::value;

// ---- Extents, as std::extents (C++23): a rank and, per dimension, a static extent or
// dynamic_extent (known at run time).
constexpr constant size_t dynamic_extent = static_cast<size_t>(-1);

namespace __kgmsl_tensor {
template <class To, class... From> constexpr bool all_convertible() { return (__is_convertible_to(From, To) && ...); }
// A static extent may only come from the same static extent; a dynamic one from anything.
template <size_t To, size_t From> constexpr bool extent_convertible() { return To == dynamic_extent || From == dynamic_extent || To == From; }
template <size_t To, size_t From> constexpr bool extent_implicit() { return To == dynamic_extent || To == From; }
} // namespace __kgmsl_tensor

template <class IndexType, size_t... Extents> class extents {
  static_assert(is_integral_v<IndexType>, "extents: IndexType must be an integral type");

public:
  using index_type = IndexType;
  using size_type = make_unsigned_t<IndexType>;
  using rank_type = size_t;
  static constexpr rank_type rank() { return sizeof...(Extents); }
  static constexpr rank_type rank_dynamic() { return (rank_type(0) + ... + rank_type(Extents == dynamic_extent)); }
  static constexpr size_t static_extent(rank_type r) {
    const size_t e[] = {Extents..., 0};
    return e[r];
  }
  // The run-time value of one extent.
  index_type extent(rank_type r) const thread;

  constexpr extents() thread = default;
  // One value per dynamic extent, or one per extent.
  template <class... OtherIndexTypes,
            typename = enable_if_t<(sizeof...(OtherIndexTypes) == rank_dynamic() || sizeof...(OtherIndexTypes) == rank()) &&
                                   __kgmsl_tensor::all_convertible<index_type, OtherIndexTypes...>()>>
  constexpr explicit extents(OtherIndexTypes...) thread {}
  template <class OtherIndexType, size_t N,
            typename = enable_if_t<(N == rank_dynamic() || N == rank()) && __is_convertible_to(OtherIndexType, index_type)>>
  constexpr explicit extents(const array<OtherIndexType, N>&) thread {}
  // From other extents of the same rank: implicit when no static extent comes from a dynamic
  // one (static to dynamic), explicit otherwise.
  template <class OtherIndexType, size_t... OtherExtents,
            enable_if_t<sizeof...(OtherExtents) == sizeof...(Extents) &&
                            (__kgmsl_tensor::extent_implicit<Extents, OtherExtents>() && ...), int> = 0>
  constexpr extents(const extents<OtherIndexType, OtherExtents...>&) thread {}
  template <class OtherIndexType, size_t... OtherExtents,
            enable_if_t<sizeof...(OtherExtents) == sizeof...(Extents) &&
                            (__kgmsl_tensor::extent_convertible<Extents, OtherExtents>() && ...) &&
                            !(__kgmsl_tensor::extent_implicit<Extents, OtherExtents>() && ...), int> = 0>
  constexpr explicit extents(const extents<OtherIndexType, OtherExtents...>&) thread {}
};

namespace __kgmsl_tensor {
template <class I, size_t R, size_t... E> struct dext { using type = typename dext<I, R - 1, dynamic_extent, E...>::type; };
template <class I, size_t... E> struct dext<I, 0, E...> { using type = extents<I, E...>; };
} // namespace __kgmsl_tensor
// Rank `Rank`, every extent dynamic.
template <class IndexType, size_t Rank> using dextents = typename __kgmsl_tensor::dext<IndexType, Rank>::type;

// ---- Tensors: tensor<ElementType, Extents, Descriptor, Tags...>. ElementType carries the
// address space of the elements (`tensor<device half, dextents<int32_t, 2>>`). The descriptor
// is tensor_handle (a tensor the host binds, a kernel argument) or tensor_inline (a view over
// memory the shader holds); tensor_offset is a tag a slice of a handle carries.
struct tensor_inline {};
struct tensor_handle {};
struct tensor_offset {};

namespace __kgmsl_tensor {
template <class T> struct space { static constexpr constant int value = 0; }; // thread
template <class T> struct space<__private T> { static constexpr constant int value = 0; };
template <class T> struct space<__generic T> { static constexpr constant int value = 0; };
template <class T> struct space<device T> { static constexpr constant int value = 1; };
template <class T> struct space<__constant T> { static constexpr constant int value = 2; };
template <class T> struct space<threadgroup T> { static constexpr constant int value = 3; };
template <class T> constexpr bool is_thread() { return space<T>::value == 0; }
template <class T> constexpr bool is_device() { return space<T>::value == 1; }
template <class T> constexpr bool is_constant() { return space<T>::value == 2; }
template <class T> constexpr bool is_threadgroup() { return space<T>::value == 3; }
template <class D> constexpr bool is_descriptor() { return is_same_v<D, tensor_handle> || is_same_v<D, tensor_inline>; }
} // namespace __kgmsl_tensor

template <class ElementType, class Extents, class Descriptor = tensor_handle, class... Tags> struct tensor {
  static_assert(__kgmsl_tensor::is_descriptor<Descriptor>(),
                "tensor: Descriptor template parameter must be one of tensor_handle or tensor_inline");
};

// What every tensor has. The slice of a handle is a handle with the tensor_offset tag; the
// slice of an inline tensor is inline again (inferred: Apple allows the tag on handles only).
// `slice(i...)` moves the origin (one coordinate per dimension, x first) and keeps dynamic
// extents; `slice<E...>(i...)` also gives the view static extents (dynamic_extent keeps one).
#define KGMSL_TENSOR_COMMON(SLICE_DESCRIPTOR, ...)                                                                   \
  using element_type = ElementType;                                                                                 \
  using value_type = remove_cv_t<remove_addrspace_t<ElementType>>;                                                  \
  using extents_type = Extents;                                                                                     \
  using index_type = typename Extents::index_type;                                                                  \
  using size_type = typename Extents::size_type;                                                                    \
  using rank_type = typename Extents::rank_type;                                                                    \
  static constexpr rank_type get_rank() { return Extents::rank(); }                                                 \
  template <size_t... SliceExtents, class... OtherIndexTypes,                                                        \
            typename = enable_if_t<sizeof...(SliceExtents) == Extents::rank() &&                                    \
                                   sizeof...(OtherIndexTypes) == Extents::rank() &&                                 \
                                   __kgmsl_tensor::all_convertible<index_type, OtherIndexTypes...>()>>              \
  tensor<ElementType, extents<index_type, SliceExtents...>, SLICE_DESCRIPTOR, ##__VA_ARGS__> slice(                 \
      OtherIndexTypes...) const thread;                                                                             \
  template <class... OtherIndexTypes,                                                                               \
            typename = enable_if_t<sizeof...(OtherIndexTypes) == Extents::rank() &&                                 \
                                   __kgmsl_tensor::all_convertible<index_type, OtherIndexTypes...>()>>              \
  tensor<ElementType, dextents<index_type, Extents::rank()>, SLICE_DESCRIPTOR, ##__VA_ARGS__> slice(                \
      OtherIndexTypes...) const thread;

template <class ElementType, class Extents, class... Tags> struct tensor<ElementType, Extents, tensor_handle, Tags...> {
  static_assert(__kgmsl_tensor::is_device<ElementType>() || __kgmsl_tensor::is_constant<ElementType>(),
                "tensor: the elements of a tensor_handle are in the device or constant address space");
  static_assert((is_same_v<Tags, tensor_offset> && ...), "tensor: tensor_offset is the only tag of a tensor_handle");
  KGMSL_TENSOR_COMMON(tensor_handle, tensor_offset)
  // The host makes handles (kernel arguments).
  tensor() thread = default;
};

template <class ElementType, class Extents, class... Tags> struct tensor<ElementType, Extents, tensor_inline, Tags...> {
  static_assert(sizeof...(Tags) == 0, "tensor: a tensor_inline has no tags (tensor_offset applies to tensor_handle)");
  KGMSL_TENSOR_COMMON(tensor_inline)
  // Over `data`: packed (the first dimension contiguous) or with one stride per dimension.
  tensor(ElementType* data, const thread extents_type& e) thread;
  template <class OtherIndexType, typename = enable_if_t<__is_convertible_to(OtherIndexType, index_type)>>
  tensor(ElementType* data, const thread extents_type& e, const array<OtherIndexType, Extents::rank()>& strides) thread;
};
#undef KGMSL_TENSOR_COMMON

template <class ElementType, class Extents> tensor(ElementType*, Extents) -> tensor<ElementType, Extents, tensor_inline>;
template <class ElementType, class Extents, class OtherIndexType, size_t N>
tensor(ElementType*, Extents, array<OtherIndexType, N>) -> tensor<ElementType, Extents, tensor_inline>;

template <class T> struct is_tensor_handle : false_type {};
template <class E, class X, class... Tags> struct is_tensor_handle<tensor<E, X, tensor_handle, Tags...>> : true_type {};
template <class T> struct is_tensor_inline : false_type {};
template <class E, class X, class... Tags> struct is_tensor_inline<tensor<E, X, tensor_inline, Tags...>> : true_type {};
template <class T> struct has_tensor_offset : false_type {};
template <class E, class X, class D, class... Tags>
struct has_tensor_offset<tensor<E, X, D, Tags...>> : bool_constant<(is_same_v<Tags, tensor_offset> || ...)> {};
template <class T> constexpr constant bool is_tensor_handle_v = is_tensor_handle<T>::value;
template <class T> constexpr constant bool is_tensor_inline_v = is_tensor_inline<T>::value;
template <class T> constexpr constant bool has_tensor_offset_v = has_tensor_offset<T>::value;

// ---- Cooperative tensors (<metal_cooperative_tensor>): a tensor whose elements are spread
// over the threads of an operation's execution scope, each thread owning `get_capacity()` of
// them in registers, in a layout the operation that made it chooses (Layout; opaque here).
// Made by an operation (matmul2d's get_*_cooperative_tensor), not by the shader.
// The index types (thread_index_type, thread_size_type) are not documented: 16-bit, as the
// loops in Apple's examples and the operations' element counts are (inferred).
template <class ElementType, class Extents, class Layout> struct cooperative_tensor {
  static_assert(__kgmsl_tensor::is_thread<ElementType>(), "cooperative_tensor: the elements are the thread's own");
  using element_type = ElementType;
  using value_type = remove_cv_t<ElementType>;
  using extents_type = Extents;
  using index_type = typename Extents::index_type;
  using rank_type = typename Extents::rank_type;
  using layout = Layout;
  using thread_index_type = ushort;
  using thread_size_type = ushort;
  using reference = thread element_type&;
  using const_reference = const thread element_type&;

  class const_iterator;
  class iterator {
  public:
    reference operator*() const thread;
    iterator& operator++() thread;
    iterator operator++(int) thread;
    bool operator==(const thread iterator&) const thread;
    bool operator!=(const thread iterator&) const thread;
    bool is_valid_element() const thread;
  private:
    thread cooperative_tensor* _ct;
    thread_index_type _idx;
  };
  class const_iterator {
  public:
    const_iterator(const thread iterator&) thread;
    const_reference operator*() const thread;
    const_iterator& operator++() thread;
    const_iterator operator++(int) thread;
    bool operator==(const thread const_iterator&) const thread;
    bool operator!=(const thread const_iterator&) const thread;
    bool is_valid_element() const thread;
  private:
    const thread cooperative_tensor* _ct;
    thread_index_type _idx;
  };

  static constexpr rank_type get_rank() { return Extents::rank(); }
  // How many elements this thread holds (not all need be valid: see is_valid_element).
  thread_size_type get_capacity() const thread;
  bool is_valid_element(thread_index_type idx) const thread;
  bool is_valid_element(const_iterator it) const thread;
  bool is_valid_element(const thread element_type* ptr) const thread;
  // The coordinates, in the tensor's extents, of this thread's element idx.
  array<index_type, Extents::rank()> get_multidimensional_index(thread_index_type idx) const thread;
  array<index_type, Extents::rank()> get_multidimensional_index(const_iterator it) const thread;
  array<index_type, Extents::rank()> get_multidimensional_index(const thread element_type* ptr) const thread;
  // Unchecked access to this thread's element idx; get() and set() skip invalid elements.
  reference operator[](thread_index_type idx) thread;
  const_reference operator[](thread_index_type idx) const thread;
  value_type get(thread_index_type idx) const thread;
  void set(thread_index_type idx, value_type v) thread;
  // Between a cooperative tensor and a tensor of the same value type (no conversion), of rank 1
  // or 2, over device or threadgroup memory: what the load and store of Apple's matmul2d layouts
  // (the only layouts modelled) assert ("Source tensor must be rank 1 or 2", "Unsupported address
  // space" for any other space, constant memory included).
  template <class T, class E, class... Tags,
            typename = enable_if_t<is_same_v<value_type, typename tensor<T, E, tensor_handle, Tags...>::value_type>>>
  void load(tensor<T, E, tensor_handle, Tags...> t) thread { __transfer<T, E>(); }
  template <class T, class E, class... Tags,
            typename = enable_if_t<is_same_v<value_type, typename tensor<T, E, tensor_inline, Tags...>::value_type>>>
  void load(const tensor<T, E, tensor_inline, Tags...>& t) thread { __transfer<T, E>(); }
  template <class T, class E, class... Tags,
            typename = enable_if_t<is_same_v<value_type, typename tensor<T, E, tensor_handle, Tags...>::value_type>>>
  void store(tensor<T, E, tensor_handle, Tags...> t) const thread { __transfer<T, E>(); }
  template <class T, class E, class... Tags,
            typename = enable_if_t<is_same_v<value_type, typename tensor<T, E, tensor_inline, Tags...>::value_type>>>
  void store(const tensor<T, E, tensor_inline, Tags...>& t) const thread { __transfer<T, E>(); }
  iterator begin() thread;
  iterator end() thread;
  const_iterator begin() const thread;
  const_iterator end() const thread;

private:
  template <class T, class E> static void __transfer() {
    static_assert(E::rank() == 1 || E::rank() == 2, "cooperative_tensor load/store: Tensor must be rank 1 or 2");
    static_assert(__kgmsl_tensor::is_device<T>() || __kgmsl_tensor::is_threadgroup<T>(),
                  "cooperative_tensor load/store: Unsupported address space: the tensor's elements are in device or "
                  "threadgroup memory");
  }

public:
  // (map_iterator, which maps an iterator of another cooperative tensor by the layouts'
  // interface, is not modelled.)
};

template <class T> struct __kgmsl_is_cooperative_tensor : false_type {};
template <class E, class X, class L> struct __kgmsl_is_cooperative_tensor<cooperative_tensor<E, X, L>> : true_type {};

} // namespace metal

#endif // __HAVE_TENSOR__
#endif // KGMSL_METAL_TENSOR
