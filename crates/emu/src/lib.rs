//! The MSL CPU emulator: runs Metal Shading Language compute kernels on Linux x86-64.
//!
//! A `.metal` source is rewritten (line-preserving, in Rust: `translate.rs`), compiled as
//! C++17 by g++ against our own stand-in for `<metal_stdlib>` (`crates/emu/src/shim/`), loaded
//! with libloading and run by a fiber scheduler written in Rust: every GPU thread of a
//! threadgroup is a fiber, and the threadgroups of a dispatch run on a pool of worker
//! threads (see **Parallel threadgroups**).
//!
//! ```no_run
//! use kernelgen_emu::{DeviceBuffer, EmuOptions, Emulator};
//! let emu = Emulator::new(EmuOptions::default())?;
//! let prog = emu.load(
//!     "[[kernel]] void twice(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] *= 2.0f; }",
//!     "twice.metal",
//! )?;
//! let mut x = DeviceBuffer::from_bytes(&[0u8; 64]);
//! prog.dispatch("twice", &mut [&mut x], [16, 1, 1], [16, 1, 1])?;
//! # Ok::<(), kernelgen_emu::EmuError>(())
//! ```
//!
//! # kernelgen's launchers through the emulator
//!
//! [`EmuBackend`] is a `kernelgen` [`Backend`](kernelgen::backend::Backend)
//! over [`HostArray`]s, so the typed launchers a spec generates run here as
//! they do through MLX: the same launch checks, then the kernel's `.metal`
//! compiled once (and cached on disk) and dispatched. It needs x86-64 Linux
//! and g++; elsewhere [`EmuBackend::with_defaults`] returns
//! [`EmuError::Unsupported`].
//!
//! ```
//! use kernelgen::half::bf16;
//! use kernelgen::kernels::experts::TinyExpertQ4Bf16R4 as Tiny;
//! use kernelgen_emu::{EmuBackend, HostArray};
//! # if !cfg!(all(target_arch = "x86_64", target_os = "linux")) { return Ok(()); }
//!
//! // One expert (H = 256, I = 128) packed from its unpacked Q4 weights and row scales.
//! let (h, i) = (256, 128);
//! let q4 = |n: usize| (0..n).map(|k| (k % 16) as i8 - 8).collect::<Vec<i8>>();
//! let slot = Tiny::pack_slot(&q4(i * h), &q4(i * h), &q4(h * i), &vec![0.01; i], &vec![0.01; i], &vec![0.02; h])?;
//! let slot = HostArray::from_u8(vec![slot.len() as u64], slot.to_vec());
//!
//! let emu = EmuBackend::with_defaults()?;
//! let x = HostArray::from_bf16(vec![2, h as u64], &vec![bf16::from_f32(0.5); 2 * h]);
//! let mid = Tiny::gate_up(&emu, &x, &slot)?; // bf16 [2, 128]
//! let out = Tiny::down(&emu, &mid, &slot)?; // bf16 [2, 256]
//! assert_eq!(out.shape, [2, 256]);
//! assert!(out.to_f32().unwrap().iter().all(|v| v.is_finite()));
//!
//! // A wrong argument is refused before anything runs.
//! let e = Tiny::down(&emu, &x, &slot).unwrap_err();
//! assert!(e.to_string().contains("argument `mid`"), "{e}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The Metal check
//!
//! g++ accepts much that Apple's compiler rejects (here `device`, `constant`, `thread` and
//! `threadgroup` are empty macros). So every source [`Emulator::load`] and
//! [`Emulator::load_with`] get is first checked by kernelgen-msl (`crates/msl`: clang with
//! the address spaces as real qualifiers, MSL's language restrictions, kernel signatures),
//! with the load's include directories and defines; any problem fails the load with
//! [`EmuError::InvalidMetal`], listing every `file.metal:line:col: message`. Function
//! constants are declared as Metal declares them (valid MSL): the emulator runs them with
//! the values the load gives and refuses, at the reading line, a read of one without a value
//! (see **Function constants**). Results are cached on disk under the emulator's cache
//! (`<cache>/msl/results/`, named by a keyed hash of the checker version, clang, the source,
//! every header it includes, the include dirs and defines), so a source checks once (about 0.1 s for a
//! generated kernel) and a hit costs a hash and a file read. [`Emulator::new`] needs clang
//! (14 or newer; `$KERNELGEN_MSL_CLANG` names one): without it, it fails with
//! [`EmuError::MetalCheck`], one line saying what to install. [`EmuOptions::metal_check`]
//! turns the check off, for tests of the emulator itself on code Metal would reject.
//!
//! # Semantics (contracts that bit-exact reference models rely on)
//!
//! **Dispatch** follows MLX: `grid` counts threads (dispatchThreads); the threadgroup is
//! clamped per dimension to the grid; edge threadgroups may be partial; the product of the
//! *unclamped* threadgroup must be at most 1024 (else [`EmuError::Launch`]). A grid with a
//! zero dimension runs nothing. `buffers[i]` is `[[buffer(i)]]`, whatever its address space
//! (`device T*`, `constant T*`, `constant T&`); the number of buffers must be exactly one
//! more than the largest buffer index of the kernel.
//!
//! **Attributes** get their Metal values: `thread_position_in_grid`,
//! `threadgroup_position_in_grid`, `thread_position_in_threadgroup`, `threads_per_grid` and
//! `grid_size` (the grid), `threadgroups_per_grid` (ceil(grid / threadgroup)),
//! `dispatch_threads_per_threadgroup` (the clamped threadgroup), `threads_per_threadgroup`
//! (the size of *this* threadgroup, smaller at a partial edge), `grid_origin` (0),
//! `thread_index_in_threadgroup` (x + y·w + z·w·h with this threadgroup's w, h),
//! `thread_index_in_simdgroup` (that index % 32), `simdgroup_index_in_threadgroup`
//! (index / 32), `threads_per_simdgroup` and `thread_execution_width` (32),
//! `simdgroups_per_threadgroup` (ceil(threads of this threadgroup / 32)),
//! `dispatch_simdgroups_per_threadgroup` (the same for the clamped size), and the quad
//! attributes (width 4). Position attributes may be declared `uint3`, `uint2`, `uint`,
//! `ushort*` or `int`.
//!
//! **SIMD-groups** are 32 lanes: lane = linear thread index in the threadgroup % 32. A
//! collective (`simd_sum`, `simd_product`, `simd_max`, `simd_min`, `simd_and/or/xor`,
//! `simd_broadcast(_first)`, `simd_shuffle(_down/_up/_xor)`, `simd_prefix_*`,
//! `simd_any/all`, `simd_is_first`, `simd_ballot`) runs over the *active* lanes, i.e. the
//! lanes of the SIMD-group that have not returned. Reductions use ONE fixed order:
//! inactive lanes contribute the identity (`-0.0` for sums, `1` for products, -inf/+inf or
//! the integer limits for max/min), then for `off = 16, 8, 4, 2, 1`:
//! `v[i] = v[i] op v[i + off]` for `i < off`; every active lane receives `v[0]`. For
//! `half`/`bfloat` each `op` is the type's own (rounded) operation. Float `max`/`min` are
//! fmax/fmin (a NaN operand yields the other). Prefix sums run in lane order over the
//! active lanes. `simd_shuffle*` reading an inactive or out-of-range lane yields zero,
//! except `simd_shuffle_down/up`, whose lanes past the edge keep their own value.
//!
//! **Scheduling.** A fiber runs until it reaches a collective, a barrier, or returns. The
//! fibers of a threadgroup run in rounds, in [`RunOrder`]: forward, reverse, or a seeded
//! shuffle (a permutation per threadgroup, drawn from the seed and the threadgroup's linear
//! index); each ready fiber runs in turn, and when a round ends the next begins. A fiber hands
//! over to the next ready one directly. As soon as every live lane of a SIMD-group waits
//! (live: not returned), the SIMD-group is settled: if its live lanes all wait at the same
//! collective call site the collective is evaluated over them and they become ready (they
//! run when the round reaches them); lanes at different collective call sites, or some at a
//! collective and others at a barrier, are an [`EmuError::Divergence`] (reported for the
//! first SIMD-group to settle). `simdgroup_barrier` releases when every live lane of the
//! SIMD-group is at the same call site; `threadgroup_barrier` releases when every live
//! thread of the threadgroup is at the same call site; live threads waiting at different
//! barriers are an [`EmuError::Barrier`]. A call site is the `.metal` line
//! (`__builtin_LINE()`, g++ 12 has no `__builtin_COLUMN`): two collectives on one line
//! share a call site. A race between threads of a threadgroup (a missing barrier) therefore
//! shows as order-dependent results or poison reads.
//! Code that relies on implicit SIMD lockstep without a barrier behaves as a race, and
//! spin-waiting on atomics never ends (documented limits): see **Time limit**.
//!
//! **Time limit.** A dispatch that runs longer than [`EmuOptions::timeout`] (default
//! [`default_timeout`]: 60 s, or `$KERNELGEN_EMU_TIMEOUT` seconds, or `kernelgen
//! verify/run/emu --timeout SECS`) is stopped: a watchdog thread signals each worker running
//! it (a real-time signal, `SIGRTMAX - 3`, tagged), whose handler abandons the GPU thread on
//! the CPU the way a fault does, when that thread is in the kernel's own code (in the runtime
//! or a library it may hold a lock: the watchdog signals again 10 ms later); the workers
//! take no more threadgroups, and the dispatch returns [`EmuError::Timeout`] naming the
//! kernel and the threadgroups that were running. The process stays usable.
//!
//! **Parallel threadgroups.** The threadgroups of a dispatch run on worker threads: the
//! calling thread and up to `workers - 1` helpers from a process-wide pool, each with its
//! own fiber scheduler, fiber stacks, threadgroup memory and signal stack. The worker count
//! is [`EmuOptions::workers`] (or [`Program::dispatch_with`]); 0, the default, means the
//! count set with [`set_default_workers`] (`kernelgen verify/run/emu --workers N`), else
//! `$KERNELGEN_EMU_WORKERS`, else one per core ([`DispatchStats::workers`] says how many
//! ran). [`RunOrder`] is then the order in which threadgroups are *assigned* to workers
//! (each free worker takes the next one), and, as with one worker, the order of the fibers
//! within each threadgroup, which does not depend on the worker that runs it. A threadgroup
//! runs start to end on one worker, so a kernel whose threadgroups do not communicate
//! through device memory (every kernelgen kernel: each output element has one writer)
//! gives the same bits for every worker count and order it gives with one worker; a kernel
//! whose threadgroups race on device memory may not (it would not on a GPU either). Device
//! atomics are real atomics across workers (relaxed, as Metal's). Errors are deterministic:
//! a fault, barrier or divergence error, or threadgroup-memory corruption, of the earliest
//! threadgroup in assignment order is reported, exactly what one worker reports (workers
//! stop taking threadgroups after an error and finish those they hold, so every earlier
//! threadgroup has run). The one exception is a write into a buffer's head, slack or gap
//! bytes (not page-protected): it is found by the check after a threadgroup, and with
//! several workers that may be a threadgroup running beside the writer (the report says so;
//! one worker names the writer). Buffer contents after an error are unspecified (later
//! threadgroups may have run).
//!
//! **half and bfloat** (`half`, `float16_t`, `bfloat`, `bfloat16_t`) are 16-bit structs
//! that compute in float and round back (to nearest even) after every operation:
//! `T op T -> T`; `T op float -> float`; `float op T -> float`; `T op integer -> T` (the
//! integer converted to `T` first); comparisons in float. Conversions to and from float are
//! exact RNE (NaN stays NaN, made quiet); from integers via float. `metal::exp`, `abs`,
//! ... on `T` compute in float and round once. `cond ? half : float` is ambiguous in C++
//! (both convert implicitly): cast one side.
//!
//! **Math.** `metal::exp`, `metal::precise::exp` and `metal::fast::exp` all call
//! `__builtin_expf` (glibc `expf`); `rsqrt`/`precise::rsqrt` = `1.0f / __builtin_sqrtf(x)`;
//! `fma` = `__builtin_fmaf` (compiled with `-mfma` when the CPU has FMA: same result, an
//! FMA is exact); the rest via builtins. Flags: `-O3 -std=c++17 -ffp-contract=off
//! -fno-strict-aliasing -fno-fast-math -Wno-attributes -fvisibility=hidden
//! -fstack-clash-protection`. Unsuffixed
//! literals are `double` in C++ (suffix them with `f`).
//!
//! **Threadgroup memory.** `threadgroup T x[N];` becomes a reference into a per-threadgroup
//! allocation made by the runtime; each declaration gets its own block (16-byte aligned)
//! followed by a 64-byte redzone. Blocks are filled with the poison byte `0xFF` before each
//! threadgroup runs (an uninitialised float reads as NaN). After each threadgroup the
//! redzones are checked ([`EmuError::Corruption`] if a write ran past an array); under
//! `sanitize` they are ASan-poisoned, so the faulting write itself is reported. The total
//! must stay within Apple's 32 KiB.
//!
//! **Buffers and faults.** See [`DeviceBuffer`]: every buffer sits between two `PROT_NONE`
//! guard regions of reserved address space, 32 GiB before its start and 64 GiB past its
//! end (its end flush with the second), so every access `a[i]` with a 32-bit index, a
//! `uint` that wrapped around or a negative `int`, on elements up to 16 bytes, faults in the
//! buffer's own guard and is reported with the buffer and the byte offset, however far. A
//! guard page would only catch the next page: `a[2048]` of a 4-float buffer would land
//! wherever the next mapping is, and `a[-1]` in unprotected memory. Checking every access in the shim was the
//! alternative; it would cost a compare per load and store, change what the compiler may
//! vectorize, and need every cast of a device pointer rewritten, where reserved address space
//! costs nothing. Less than a page before the data (the *head*, none when the length is a
//! multiple of 4096) shares the data's first page: it holds poison, so a dispatch with such
//! a buffer runs twice ([`Placement::Both`], the default): end-placed, then with every
//! buffer's data flush with the guard *before* it (on copies made before the first run), so
//! that `a[-1]` faults as surely as `a[n]` (under sanitize both sides are ASan-poisoned and
//! one run does). [`Placement::End`] alone (one run) leaves the head readable as poison, a
//! write there an [`EmuError::Corruption`] with the buffer and the negative offset. A wild
//! 64-bit index past the canonical addresses, which the processor faults without an
//! address, is reported with the address and the access kind decoded from the faulting
//! instruction. Declared regions poison their gaps. Through the
//! backend ([`EmuBackend`]) a kernel's inputs are read-only while it runs, so a write to one
//! faults too. A GPU thread's stack (256 KiB) has a 64 KiB guard below it and kernels are
//! built with `-fstack-clash-protection`, so an overflowing frame faults in the guard.
//! SIGSEGV/SIGBUS/SIGFPE/SIGILL raised by a GPU thread are caught (on an alternate signal stack) and reported as [`EmuError::Fault`]
//! with the kernel, the thread's `thread_position_in_grid` and
//! `threadgroup_position_in_grid`, what was accessed (which buffer, how far past its end,
//! or which gap), and the `.metal` line, found from the faulting instruction with
//! `addr2line` on the object's line tables (`-g1`). With `-O3` a load can be folded into
//! the instruction that uses it, so the line is occasionally the one of that use (for
//! example `v = x[i]; y = v * 2` may report the second line).
//!
//! **Sanitize mode** (`EmuOptions::sanitize`) builds with
//! `-fsanitize=address,undefined -fsanitize-recover=address,undefined
//! -fno-omit-frame-pointer` (a separate cache entry). The process must have the ASan
//! runtime preloaded: see [`sanitizer_env`] and [`reexec_with_sanitizer_if_needed`]. The
//! first sanitizer report of a dispatch becomes an [`EmuError::Fault`] with the GPU thread
//! and the `.metal` line (the sanitizer's own report is printed to stderr as well).
//!
//! **The sanitizer lane.** `cargo test -p kernelgen-emu --test integration emu_sanitize::`
//! (part of `cargo test --workspace`) runs the sanitize-mode tests: each test re-runs itself
//! as a child process of the test binary with [`sanitizer_env`], so nothing has to be set
//! up by hand. A program that wants sanitize mode calls [`reexec_with_sanitizer_if_needed`]
//! first thing (it re-executes itself with that environment), or is started with it, e.g.
//! `LD_PRELOAD=$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)
//! ASAN_OPTIONS=detect_leaks=0:halt_on_error=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0
//! prog`. ASan is told about every fiber switch (`__sanitizer_start/finish_switch_fiber`);
//! threadgroup redzones, buffer gaps and alignment slack are ASan-poisoned while a
//! dispatch runs.
//!
//! **Preprocessing and include paths.** [`Emulator::load_with`] takes [`LoadOptions`]:
//! include directories (`-I`), predefined macros (`-D`) and function-constant values. A
//! source loaded with include directories or defines, or with any preprocessor
//! directive other than `#include <metal_*>`, `#pragma` and `#line` (a `#define`, a
//! conditional, a quoted include), first goes through `g++ -E` with every `<metal_*>`
//! header empty (so the address-space keywords stay visible), `__METAL__` and
//! `__METAL_VERSION__` = 310 predefined (a define of the same name replaces them), and
//! the `.metal` file's directory searched first for `"..."` includes. Everything below
//! then reads the expanded text: kernels and `host_name` instantiations made by macros
//! (MLX's `instantiate_kernel`) are found, code in `#if 0` is not. g++'s line markers
//! map every error, kernel line, `__builtin_LINE()` call site and debug line back to
//! the `.metal` file or the header it came from (an error in a header reads
//! `header.h:N: error: ... (included from file.metal)`). The cache key is the expanded
//! text, so a changed header recompiles.
//!
//! **Rewrites for MSL that is not C++.** On top of the ones in `translate.rs`'s header:
//! (1) declarations that differ only in address spaces are *twins* once the keywords
//! are erased (complex.h's `complex_t() thread` / `complex_t() threadgroup`, its
//! `operator+=(thread complex_t&)` / `(device complex_t&)`, steel's
//! `pointer_element<device T*>`): in each scope (file, namespace, class) the twin that
//! names only `thread` (else the first) is kept and the others are blanked, lines kept.
//! Every object is in one memory on the CPU; a twin whose body differs from the kept
//! one (MLX has none) would silently lose its own behaviour. (2) `template <>` inside a
//! class body (member specializations, clang accepts them, g++ does not) becomes a
//! plain overload. (3) An address-space keyword directly inside `[[ ]]`
//! (`[[threadgroup(0)]]` on a helper's parameter) is renamed, so g++ ignores the
//! attribute. (4) Buffer parameters (device or constant pointers and references)
//! without `[[buffer(n)]]` take, in order, the lowest index no other buffer parameter
//! uses, as Metal assigns them. (5) A templated kernel whose signature cannot be bound
//! is an error only when a `host_name` instantiation uses it.
//!
//! **Function constants.** A program-scope `constant T name [[function_constant(i)]];`
//! (T: bool, an integer type, float, half, bfloat) becomes `static constexpr T name =
//! value;` (`static const` for half and bfloat) with the value of index `i` in
//! [`LoadOptions::function_constants`] (checked against T: a bool for bool, an integer
//! in range for integer types, a float or integer for floating types), as MLX sets them
//! when it creates a pipeline; each set of values is its own compiled object. Without a
//! value, `name` becomes a stand-in whose every *read* fails to compile with
//! "function constant NAME [[function_constant(i)]] is read but has no value" at the
//! reading line; `is_function_constant_defined(name)` is false for it (and true
//! otherwise). Never a silent zero; but stricter than Metal, which lets a kernel read it
//! behind `if (is_function_constant_defined(name))`: here that read fails to compile too, so
//! give every constant a value. A given index that the program does not declare is
//! an error. A kernel parameter `[[buffer(n), function_constant(c)]]` exists only when
//! bool constant `c` is true: otherwise it is left out of the signature (its slot, if
//! not the last, must still be filled at dispatch; the kernel sees a null pointer).
//! [`Program::function_constants`] lists the declarations and their values.
//!
//! **What MLX's headers need from the shim** (crates/emu/MLX_KERNELS.md lists the
//! kernels that run): `METAL_FUNC`, `__METAL_*_MATH__`, the `__metal_*` builtins that
//! bf16_math.h calls (computed with the float functions; fast and precise math are the
//! same here), `metal::` type traits, `metal::array`, `os_log` (messages dropped), and
//! constexpr half/bfloat conversions and arithmetic (complex.h static_asserts them;
//! run time still uses F16C). The shim's own bfloat math overloads are templates, so
//! MLX's bf16_math.h overloads (compute in float, round once) take precedence where it
//! is included, as they do on a Mac. A collective reached through one of those wrappers
//! (`simd_sum(bfloat16_t)`) has the wrapper's line as its call site.
//!
//! **Quad-groups, rotate and fill shuffles, simdgroup matrices.** `quad_sum`,
//! `quad_product`, `quad_max`, `quad_min` reduce each group of 4 lanes (inactive lanes
//! give the identity; `v[i] op v[i + 2]`, then `v[0] op v[1]`); `quad_broadcast`,
//! `quad_shuffle(_down/_up/_xor)` index within the quad like their simd versions. They
//! synchronise the whole SIMD-group (stricter than Metal, which needs only the quad).
//! `simd_shuffle_rotate_down/up` read lane `(i ± delta) % 32`;
//! `simd_shuffle_and_fill_down/up(data, filling, delta[, modulo = 32])` read `data` of
//! lane `i ± delta` within each segment of `modulo` lanes and, past its edge, `filling`
//! of the lane as far in from the segment's other end. `simdgroup_matrix<T, 8, 8>` holds
//! two elements per lane in the layout MLX's steel/gemm/mma.h assumes (lane l: row
//! `(l / 4 & 4) + (l / 2) % 4`, columns `(l / 4 & 2) * 2 + (l % 2) * 2` and the next),
//! reached through `thread_elements()`; `simdgroup_multiply_accumulate(D, A, B, C)` is a
//! collective computing each element as `C[i][j]` plus `A[i][k]·B[k][j]` for k = 0..7
//! in float, one fma per k in k order, converted to D's type (Apple documents no
//! order). `simdgroup_load`/`simdgroup_store` and other sizes are not provided.
//!
//! **Limits.** x86-64 Linux and g++ only. No textures, samplers, `simdgroup_load`/
//! `store`, `[[threadgroup(n)]]` kernel parameters, tensor (`mpp`) operations or `rgba`
//! swizzles. One threadgroup variable per declaration statement. A kernel that
//! never returns (a spin-wait on an atomic) is stopped at the time limit. Fibers serialise the lanes
//! of a SIMD-group, so code relying on implicit lockstep without a barrier behaves as a
//! race.
//!
//! **Build cache.** The object is `<cache>/<hmac>.so`, named by an HMAC-SHA-256 under the
//! cache's own secret (`<cache>/key`, created `0600`) of (prepared source, shim, flags, g++
//! version): a hit does no compile, and a file planted under a name computed from the source
//! alone is never found. Cache dir: [`EmuOptions::cache_dir`], else `$KERNELGEN_EMU_CACHE`,
//! else `kernelgen-emu/` under the nearest ancestor of the current executable named `target`,
//! else `emu/` in the user's cache (`$XDG_CACHE_HOME/kernelgen`, `~/.cache/kernelgen`). It is
//! created `0700`; one another user owns, or that a group or other users can write (it or a
//! subfolder in use), is refused ([`EmuError::Io`]). Objects are written atomically (temp
//! name + rename) so concurrent processes are safe. The shim is precompiled once per flag set.
//!
//! **What a kernel object may reach.** A kernel runs as native code in this process, so what
//! it can link to is limited twice. The Metal check refuses what Metal cannot express and a host
//! could run (functions declared and never defined, `asm`, GNU attributes such as `constructor`,
//! casts between pointers and integers). And every object is linked without the C runtime's
//! start files (`-nostdlib -z defs`, libm and libc for the math and copies g++ emits), then read
//! before it is loaded (constructors run at `dlopen`): one that refers to any symbol but libm's
//! float functions and `memcpy`, `memmove`, `memset` (in sanitize mode also the sanitizers'
//! entry points and `dlsym`, which the shim's report wrappers need), that has a constructor, a
//! destructor, an IFUNC, or needs another library, is refused with
//! [`EmuError::RefusedObject`], naming the file and each symbol, and none of it runs.

#![warn(missing_docs)]
// Off x86-64 Linux the runtime is a stand-in that answers every load with
// `Unsupported`: the guard pages and sanitizer hooks it would drive still compile
// there (so the crate type-checks for a Mac, where the CLI builds), unused.
#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(dead_code, unused_variables, unreachable_code)
)]

pub mod backend;
mod buffer;
mod compile;
mod elf;
pub mod host;
// The fiber scheduler's context switch and fault handling are written for x86-64
// Linux; elsewhere a stand-in answers every load with `EmuError::Unsupported`.
#[cfg_attr(not(all(target_arch = "x86_64", target_os = "linux")), path = "runtime_unsupported.rs")]
mod runtime;
mod sanitize;
mod translate;
pub mod verify;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use backend::{EmuBackend, RunConfig};
pub use buffer::{DeviceBuffer, POISON};
pub use host::{GUARDED_MIN_BYTES, HostArray, HostData};
pub use sanitize::{SANITIZED_MARKER, reexec_with_sanitizer_if_needed, sanitizer_active, sanitizer_env};
/// One problem the Metal check found: `file:line:col: message` (see "The Metal check").
pub use kernelgen_msl::Problem as MetalProblem;

/// Set the worker count of every dispatch whose [`EmuOptions::workers`] is 0 (automatic),
/// in this process, overriding `$KERNELGEN_EMU_WORKERS`; 0 restores the automatic count.
/// This is what `kernelgen verify/run/emu --workers N` call.
pub fn set_default_workers(n: usize) {
    runtime::set_default_workers(n)
}

/// The worker count of a dispatch whose [`EmuOptions::workers`] is 0: the count set with
/// [`set_default_workers`], else `$KERNELGEN_EMU_WORKERS`, else one per core.
pub fn default_workers() -> usize {
    runtime::default_workers()
}

/// A dispatch's worker count: `workers`, or [`default_workers`] for 0 (automatic).
pub(crate) fn workers_or_default(workers: usize) -> usize {
    if workers == 0 { runtime::default_workers() } else { workers }
}

/// The process-wide time limit set with [`set_default_timeout`], in nanoseconds (0: none).
static DEFAULT_TIMEOUT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Set the time limit of every dispatch whose [`EmuOptions::timeout`] is `None`, in this
/// process, overriding `$KERNELGEN_EMU_TIMEOUT`. This is what `kernelgen
/// verify/run/emu --timeout SECS` call.
pub fn set_default_timeout(limit: Duration) {
    let nanos = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX).max(1);
    DEFAULT_TIMEOUT.store(nanos, std::sync::atomic::Ordering::Relaxed);
}

/// The time limit of a dispatch whose [`EmuOptions::timeout`] is `None`: the one set with
/// [`set_default_timeout`], else `$KERNELGEN_EMU_TIMEOUT` (seconds, as [`parse_timeout`]
/// reads them; ignored when it does not), else 60 s.
pub fn default_timeout() -> Duration {
    static FROM_ENV: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    match DEFAULT_TIMEOUT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => *FROM_ENV.get_or_init(|| {
            let env = std::env::var("KERNELGEN_EMU_TIMEOUT").ok();
            env.and_then(|v| parse_timeout(&v).ok()).unwrap_or(Duration::from_secs(60))
        }),
        nanos => Duration::from_nanos(nanos),
    }
}

/// A time limit in seconds (`--timeout SECS`, `$KERNELGEN_EMU_TIMEOUT`): a positive number,
/// fractions allowed, at most a million.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 1e6 => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!("`{text}` is not a time limit: give a number of seconds above 0 and at most 1000000 (e.g. 60, 0.5)")),
    }
}

/// Options of an [`Emulator`].
#[derive(Clone, Debug)]
pub struct EmuOptions {
    /// Where compiled objects are cached (see the module docs for the default).
    pub cache_dir: Option<PathBuf>,
    /// Build with AddressSanitizer and UBSan (needs the runtime preloaded: [`sanitizer_env`]).
    pub sanitize: bool,
    /// Order in which fibers of a threadgroup run, and threadgroups are assigned to workers.
    pub order: RunOrder,
    /// Keep the page after each buffer `PROT_NONE` and the gap protection armed during
    /// dispatch (default true; the far guard regions stay reserved either way).
    pub guard_pages: bool,
    /// Worker threads that run the threadgroups of a dispatch; 0 (the default) means
    /// `$KERNELGEN_EMU_WORKERS` if set, else one per core. Results do not depend on it.
    pub workers: usize,
    /// Check every loaded source as Metal first (default true; see "The Metal check"). Off
    /// only for tests of the emulator itself on code that Metal would reject.
    pub metal_check: bool,
    /// Where each buffer's data sits in its pages while a kernel runs, so which accesses
    /// just outside it fault (default [`Placement::Both`]: all of them).
    pub placement: Placement,
    /// The time a dispatch may run (both runs of [`Placement::Both`] together) before it is
    /// stopped with [`EmuError::Timeout`]; `None` (the default) means [`default_timeout`].
    pub timeout: Option<Duration>,
}

impl Default for EmuOptions {
    fn default() -> Self {
        EmuOptions {
            cache_dir: None,
            sanitize: false,
            order: RunOrder::Forward,
            guard_pages: true,
            metal_check: true,
            workers: 0,
            placement: Placement::Both,
            timeout: None,
        }
    }
}

/// Where a buffer's data sits in its read-write pages during a dispatch. Page protection
/// works by whole pages (4 KiB) and a buffer's length is rarely a multiple of one: with
/// the data flush with the guard after it, the bytes before its start on its first page
/// (the *head*) cannot fault, and with it flush with the guard before it, the bytes after
/// its end on its last page (the *slack*) cannot. Those bytes hold poison either way (a
/// read returns it, a write is an [`EmuError::Corruption`] found after the threadgroup).
/// Under sanitize both are ASan-poisoned, so one run catches every access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// Both, one after the other: every dispatch with a buffer that has a head runs once
    /// end-placed on the buffers given, then once start-placed on copies of them (made
    /// before it; inputs bound read-only are moved, not copied), so every access outside a
    /// buffer, before or after, read or write, faults naming the buffer and the offset. The
    /// first run's error is reported, except a write into a head, for which the second
    /// run's fault (the thread and the line) is. Twice the time of one run.
    Both,
    /// One run, each buffer's data flush with the guard after it: every access past the
    /// end faults; one before the start faults only from the page boundary on.
    End,
    /// One run, each buffer's data flush with the guard before it: every access before the
    /// start faults; one past the end faults only from the next page on.
    Start,
}

/// Run order of the fibers of a threadgroup (in every scheduling round), and the order in
/// which the threadgroups of a grid are assigned to workers (the order they run in with one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOrder {
    /// Fibers and threadgroups in index order.
    Forward,
    /// Fibers and threadgroups in reverse index order.
    Reverse,
    /// A permutation drawn from this seed (per threadgroup for fibers).
    Shuffle(u64),
}

/// Metal thread attributes a kernel parameter can carry (Metal's vocabulary, shared with the
/// generator and the Metal check).
pub use kernelgen_msl::vocab::Attribute;

/// Where a kernel parameter's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Binding {
    /// `[[buffer(i)]]`: bound to `buffers[i]` of [`Program::dispatch`].
    Buffer(u32),
    /// A thread attribute (`[[thread_position_in_grid]]`, ...).
    Attribute(Attribute),
}

/// Metal address spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddressSpace {
    /// `device`: buffers the kernel reads and writes.
    Device,
    /// `constant`: read-only buffers.
    Constant,
    /// `threadgroup`: memory shared by one threadgroup.
    Threadgroup,
    /// Also what attribute parameters (plain values) report.
    Thread,
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name.
    pub name: String,
    /// What it is bound to.
    pub binding: Binding,
    /// The pointee (or value) C type as written, e.g. `float`, `uint32_t`, `uint3`;
    /// template parameters are replaced by the instantiation's arguments.
    pub type_name: String,
    /// The address space of the pointee (`thread` for values).
    pub address_space: AddressSpace,
    /// Whether the pointee is `const`.
    pub is_const: bool,
    /// `constant T& x` (a reference), as opposed to a pointer.
    pub is_reference: bool,
}

/// A kernel of a loaded program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignature {
    /// The name `dispatch` takes: the function name, or the `host_name` of an explicit
    /// instantiation of a templated kernel.
    pub name: String,
    /// The C++ callee (`f` or `f<1, float>`).
    pub function: String,
    /// Line of the declaration (or of the instantiation) in the `.metal` file.
    pub metal_line: u32,
    /// The parameters, in declaration order.
    pub params: Vec<Param>,
}

impl KernelSignature {
    /// Number of buffers `dispatch` expects (largest buffer index + 1).
    pub fn buffer_count(&self) -> usize {
        self.params
            .iter()
            .filter_map(|p| match p.binding {
                Binding::Buffer(i) => Some(i as usize + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}

/// Counters of one dispatch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// GPU threads run (the grid's size).
    pub threads: u64,
    /// Threadgroups run.
    pub threadgroups: u64,
    /// Fiber context switches into GPU threads.
    pub switches: u64,
    /// Worker threads that ran threadgroups (fewer than asked for when the grid has fewer
    /// threadgroups or the process's pool of helper threads is exhausted).
    pub workers: usize,
    /// Wall-clock time of the dispatch.
    pub elapsed: Duration,
}

/// One waiting GPU thread, as reported by barrier and divergence errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// The waiting thread's `thread_position_in_grid`.
    pub thread_position_in_grid: [u32; 3],
    /// `threadgroup_barrier`, `simdgroup_barrier`, `simd_sum`, ...
    pub at: String,
    /// The `.metal` file and line it waits at, when known.
    pub metal_line: Option<(String, u32)>,
}

impl fmt::Display for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "thread {} waits at {}", ids(self.thread_position_in_grid), self.at)?;
        if let Some((file, line)) = &self.metal_line {
            write!(f, " ({file}:{line})")?;
        }
        Ok(())
    }
}

fn ids(v: [u32; 3]) -> String {
    format!("({}, {}, {})", v[0], v[1], v[2])
}

fn line_of(l: &Option<(String, u32)>) -> String {
    match l {
        Some((f, n)) => format!("at {f}:{n}"),
        None => "at an unknown line".into(),
    }
}

/// Everything that can go wrong. `Display` gives a one-paragraph report.
#[derive(Debug)]
#[non_exhaustive]
pub enum EmuError {
    /// The source did not prepare or compile; `message` has g++'s diagnostics (already
    /// pointing at `file` lines).
    Compile {
        /// The `.metal` file name given to the load.
        file: String,
        /// g++'s diagnostics, or why the source could not be prepared.
        message: String,
    },
    /// The source is not valid Metal: the Metal check found these problems (each at its
    /// file, line and column) before anything was compiled.
    InvalidMetal {
        /// The `.metal` file name given to the load.
        file: String,
        /// Every problem found, in source order.
        problems: Vec<MetalProblem>,
    },
    /// The compiled object of `file` reaches outside the emulator's runtime (a symbol of libc
    /// or another library, a constructor, ...): refused before it was loaded, so none of it
    /// ran. The Metal check refuses such sources; this is what a source that got past it meets.
    RefusedObject {
        /// The `.metal` file name given to the load.
        file: String,
        /// Each reason, e.g. "it refers to `system`, outside the emulator's runtime ...".
        reasons: Vec<String>,
    },
    /// The Metal check cannot run (no clang: the message says what to install), or cannot
    /// check this source (one of its limits: the source's size, its nesting, the time clang
    /// may take): nothing is known about the source, and nothing was compiled.
    MetalCheck {
        /// What is missing and how to install it, or the limit the source met.
        message: String,
    },
    /// A GPU thread faulted (guard region, poisoned gap, read-only input, sanitizer report, trap).
    Fault {
        /// The kernel dispatched.
        kernel: String,
        /// What faulted: the access, and the buffer and offset when it hit a guard region.
        what: String,
        /// The `.metal` file and line of the faulting access, when known.
        metal_line: Option<(String, u32)>,
        /// The faulting thread.
        thread_position_in_grid: [u32; 3],
        /// Its threadgroup.
        threadgroup_position_in_grid: [u32; 3],
    },
    /// Live threads of a threadgroup wait at different barriers.
    Barrier {
        /// The kernel dispatched.
        kernel: String,
        /// The threadgroup concerned.
        threadgroup_position_in_grid: [u32; 3],
        /// One waiting thread.
        first: Box<Waiter>,
        /// A thread waiting at another barrier.
        second: Box<Waiter>,
    },
    /// Lanes of one SIMD-group wait at different collectives (or a collective and a barrier).
    Divergence {
        /// The kernel dispatched.
        kernel: String,
        /// The threadgroup concerned.
        threadgroup_position_in_grid: [u32; 3],
        /// The SIMD-group's index in the threadgroup.
        simdgroup: u32,
        /// One waiting lane.
        first: Box<Waiter>,
        /// A lane waiting elsewhere.
        second: Box<Waiter>,
    },
    /// Memory outside what a threadgroup or a buffer owns was found overwritten after a
    /// threadgroup ran (a threadgroup array's redzone, or a buffer's poisoned gap).
    Corruption {
        /// The kernel dispatched.
        kernel: String,
        /// What was overwritten.
        what: String,
        /// The `.metal` file and line concerned, when known.
        metal_line: Option<(String, u32)>,
        /// The threadgroup after which it was found.
        threadgroup_position_in_grid: [u32; 3],
    },
    /// Bad dispatch: unknown kernel, bad grid or threadgroup, wrong buffer count, limits.
    Launch {
        /// The kernel named in the dispatch.
        kernel: String,
        /// What is wrong with the dispatch.
        message: String,
    },
    /// A dispatch ran past its time limit ([`EmuOptions::timeout`]) and was stopped: the
    /// GPU threads on the CPU abandoned, as at a fault; the emulator stays usable.
    Timeout {
        /// The kernel dispatched.
        kernel: String,
        /// The limit.
        limit: Duration,
        /// The threadgroups that were running when it was stopped.
        threadgroups: Vec<[u32; 3]>,
        /// How many threadgroups had finished, of `total`.
        finished: u64,
        /// The dispatch's threadgroups.
        total: u64,
    },
    /// Memory a dispatch needs cannot be had: a buffer, fiber stacks, threadgroup memory, a
    /// signal stack (the address space or the memory is exhausted, or a limit such as
    /// `ulimit -v` is reached). Nothing ran, or the dispatch stopped; the emulator stays usable.
    Memory {
        /// What could not be mapped, and the system's reason.
        what: String,
    },
    /// Sanitize mode requested but the sanitizer runtime is not loaded in this process.
    Sanitizer {
        /// What is missing and how to start the process.
        message: String,
    },
    /// A file or process operation failed (the message says which and why).
    Io(std::io::Error),
    /// The emulator's fiber runtime has not been ported to this target.
    Unsupported {
        /// The target this build is for.
        target: String,
    },
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmuError::Compile { file, message } => write!(f, "{file} does not compile for the MSL emulator:\n{message}"),
            EmuError::InvalidMetal { file, problems } => {
                let n = problems.len();
                write!(f, "{file} is not valid Metal ({n} problem{} Apple's compiler would reject):", if n == 1 { "" } else { "s" })?;
                for p in problems {
                    write!(f, "\n{p}")?;
                }
                Ok(())
            }
            EmuError::RefusedObject { file, reasons } => write!(
                f,
                "the compiled kernel of {file} is refused before it is loaded (none of it ran): {}",
                reasons.join("; ")
            ),
            EmuError::MetalCheck { message } => write!(f, "{message} (the emulator checks every source as Metal first)"),
            EmuError::Fault { kernel, what, metal_line, thread_position_in_grid, threadgroup_position_in_grid } => write!(
                f,
                "kernel `{kernel}` faulted {}: {what}; GPU thread_position_in_grid {}, threadgroup_position_in_grid {}",
                line_of(metal_line),
                ids(*thread_position_in_grid),
                ids(*threadgroup_position_in_grid)
            ),
            EmuError::Barrier { kernel, threadgroup_position_in_grid, first, second } => write!(
                f,
                "kernel `{kernel}`: barrier mismatch in threadgroup {}: {first}, while {second}; every live thread of a threadgroup must reach the same barrier",
                ids(*threadgroup_position_in_grid)
            ),
            EmuError::Divergence { kernel, threadgroup_position_in_grid, simdgroup, first, second } => write!(
                f,
                "kernel `{kernel}`: divergent SIMD-group {simdgroup} in threadgroup {}: {first}, while {second}; all live lanes of a SIMD-group must reach the same collective",
                ids(*threadgroup_position_in_grid)
            ),
            EmuError::Corruption { kernel, what, metal_line, threadgroup_position_in_grid } => write!(
                f,
                "kernel `{kernel}` corrupted memory in threadgroup {} ({}): {what}",
                ids(*threadgroup_position_in_grid),
                line_of(metal_line).trim_start_matches("at ")
            ),
            EmuError::Launch { kernel, message } => write!(f, "cannot dispatch kernel `{kernel}`: {message}"),
            EmuError::Timeout { kernel, limit, threadgroups, finished, total } => {
                write!(f, "kernel `{kernel}` ran past the time limit of {} s and was stopped: ", limit.as_secs_f64())?;
                const SHOWN: usize = 8;
                match threadgroups.len() {
                    0 => write!(f, "no threadgroup was running at that moment")?,
                    n => {
                        let list: Vec<String> = threadgroups.iter().take(SHOWN).map(|t| ids(*t)).collect();
                        write!(f, "threadgroup{} {}", if n == 1 { "" } else { "s" }, list.join(", "))?;
                        if n > SHOWN {
                            write!(f, " and {} more", n - SHOWN)?;
                        }
                        write!(f, " {} still running", if n == 1 { "was" } else { "were" })?;
                    }
                }
                write!(
                    f,
                    " ({finished} of {total} had finished). A kernel that never ends hangs: an endless loop, or a wait on memory \
                     that no other thread changes while it spins (a GPU thread runs here until it waits at a barrier or a \
                     collective). If it only needs longer, raise the limit (--timeout SECS, $KERNELGEN_EMU_TIMEOUT, EmuOptions::timeout)."
                )
            }
            EmuError::Memory { what } => write!(f, "MSL emulator: out of memory: {what}"),
            EmuError::Sanitizer { message } => write!(f, "sanitize mode unavailable: {message}"),
            EmuError::Io(e) => write!(f, "MSL emulator: {e}"),
            EmuError::Unsupported { target } => write!(
                f,
                "the MSL emulator runs on x86-64 Linux (with g++); this is {target}: run emulator commands on such a machine or in CI"
            ),
        }
    }
}

impl std::error::Error for EmuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EmuError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for EmuError {
    fn from(e: std::io::Error) -> Self {
        EmuError::Io(e)
    }
}

/// Compiles and caches kernel objects.
pub struct Emulator {
    opts: EmuOptions,
    builder: compile::Builder,
    /// The Metal check of every load (`None` when [`EmuOptions::metal_check`] is off).
    checker: Option<kernelgen_msl::Checker>,
}

impl Emulator {
    /// An emulator with these options: finds g++, sets up the cache directory and
    /// precompiles the Metal stand-in once per cache; compiles no kernel yet.
    pub fn new(opts: EmuOptions) -> Result<Emulator, EmuError> {
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        return Err(runtime::unsupported());
        if opts.sanitize && !sanitizer_active() {
            return Err(EmuError::Sanitizer {
                message: "the AddressSanitizer runtime is not preloaded in this process; start it with \
                          kernelgen_emu::sanitizer_env() (or call reexec_with_sanitizer_if_needed() first thing)"
                    .into(),
            });
        }
        let builder = compile::Builder::new(opts.cache_dir.clone(), opts.sanitize)?;
        let checker = if opts.metal_check { Some(checker_in(builder.cache_dir())?) } else { None };
        Ok(Emulator { opts, builder, checker })
    }

    /// The Metal check every load runs, on its own (what `kernelgen lint` uses): results
    /// cached under the emulator cache of `opts` (shared with the emulator's loads). Needs
    /// clang, not g++, and works on every target.
    pub fn metal_checker(opts: &EmuOptions) -> Result<kernelgen_msl::Checker, EmuError> {
        let cache = match &opts.cache_dir {
            Some(d) => d.clone(),
            None => compile::default_cache_dir()?,
        };
        // the emulator's cache folder is checked (and created) as the emulator's load does
        let cache = kernelgen_msl::private_dir::PrivateDir::open(&cache).map_err(compile::cache_error)?;
        checker_in(cache.path())
    }

    /// The options it was made with.
    pub fn options(&self) -> &EmuOptions {
        &self.opts
    }

    /// The cache directory in use.
    pub fn cache_dir(&self) -> &std::path::Path {
        self.builder.cache_dir()
    }

    /// Compile (or take from cache) one full .metal source. `file_name` is used for
    /// `#line` and messages. The same as [`Emulator::load_with`] with no options.
    pub fn load(&self, source: &str, file_name: &str) -> Result<Program, EmuError> {
        self.load_with(source, file_name, &LoadOptions::default())
    }

    /// [`Emulator::load`] with include directories, predefined macros and function
    /// constant values (see [`LoadOptions`] and "Preprocessing" in the crate docs).
    pub fn load_with(&self, source: &str, file_name: &str, opts: &LoadOptions) -> Result<Program, EmuError> {
        if let Some(checker) = &self.checker {
            checker.check_with(source, file_name, &opts.include_dirs, &opts.defines).map_err(|problems| {
                // a limit of the check (size, nesting, time) says nothing about the source
                match problems.iter().find(|p| p.is_not_checked()) {
                    Some(limit) => EmuError::MetalCheck { message: limit.to_string() },
                    None => EmuError::InvalidMetal { file: file_name.to_string(), problems },
                }
            })?;
        }
        let preprocessed = !opts.include_dirs.is_empty() || !opts.defines.is_empty() || translate::needs_preprocessing(source);
        let text;
        let source = if preprocessed {
            text = self.builder.preprocess(source, file_name, &opts.include_dirs, &opts.defines)?;
            text.as_str()
        } else {
            source
        };
        let topts = translate::Options { preprocessed, function_constants: &opts.function_constants };
        let prepared = translate::translate_with(source, file_name, &topts).map_err(|e| EmuError::Compile {
            file: file_name.to_string(),
            message: match (e.line, &e.file) {
                (0, _) => format!("{file_name}: error: {}", e.message),
                (l, Some(header)) => format!("{header}:{l}: error: {} (included from {file_name})", e.message),
                (l, None) => format!("{file_name}:{l}: error: {}", e.message),
            },
        })?;
        let built = self.builder.build(&prepared.cpp, file_name)?;
        let object = runtime::Object::load(&built.so_path, &prepared.symbols, file_name)?;
        let by_name = prepared.kernels.iter().enumerate().map(|(i, k)| (k.name.clone(), i)).collect();
        Ok(Program {
            inner: Arc::new(ProgramInner {
                kernels: prepared.kernels,
                by_name,
                object,
                file_name: file_name.to_string(),
                opts: self.opts.clone(),
                so_path: built.so_path,
                compiled: built.compiled,
                function_constants: prepared.function_constants,
            }),
        })
    }
}

/// The emulator's Metal check: function constants declared (the emulator runs them), results
/// cached in `<cache>/msl`.
fn checker_in(cache: &std::path::Path) -> Result<kernelgen_msl::Checker, EmuError> {
    let opts = kernelgen_msl::Options {
        cache_dir: Some(cache.join("msl")),
        cache_results: true,
        function_constants: kernelgen_msl::FunctionConstants::Declare,
        ..kernelgen_msl::Options::default()
    };
    kernelgen_msl::Checker::new(opts).map_err(|e| EmuError::MetalCheck { message: e.to_string() })
}

/// How [`Emulator::load_with`] builds a source, beyond the [`EmuOptions`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadOptions {
    /// Searched for `#include "..."` and `#include <...>` (g++ `-I`), in order, after
    /// the directory of `file_name` (for `"..."`). `<metal_*>` headers always resolve
    /// to the emulator's standard library.
    pub include_dirs: Vec<PathBuf>,
    /// Predefined macros, `-DNAME` (`None`) or `-DNAME=VALUE`, after the ones every
    /// Metal compile has (`__METAL__`, `__METAL_VERSION__` = 310); a define of the same
    /// name replaces those.
    pub defines: Vec<(String, Option<String>)>,
    /// Values of `[[function_constant(index)]]` declarations, by index, as MLX sets them
    /// when it creates a pipeline (`MTLFunctionConstantValues`). Each program is
    /// compiled with its values (a new set is a new object).
    pub function_constants: Vec<(u32, FunctionConstant)>,
}

impl LoadOptions {
    /// Options with one include directory (e.g. MLX's `include/`, for `#include "mlx/..."`).
    pub fn with_include_dir(dir: impl Into<PathBuf>) -> LoadOptions {
        LoadOptions { include_dirs: vec![dir.into()], ..LoadOptions::default() }
    }
}

/// The value of one function constant.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum FunctionConstant {
    /// For `bool` constants.
    Bool(bool),
    /// For integer constants (range-checked against the declared type), or float ones.
    Int(i64),
    /// For `float`, `half` and `bfloat` constants (rounded to the declared type).
    Float(f64),
}

impl FunctionConstant {
    /// Parses `true`/`false`, an integer (decimal or `0x` hex) or a float literal.
    pub fn parse(text: &str) -> Option<FunctionConstant> {
        let t = text.trim();
        match t {
            "true" => return Some(FunctionConstant::Bool(true)),
            "false" => return Some(FunctionConstant::Bool(false)),
            _ => {}
        }
        let (neg, digits) = match t.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, t),
        };
        if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
            let v = i64::from_str_radix(h, 16).ok()?;
            return Some(FunctionConstant::Int(if neg { -v } else { v }));
        }
        if let Ok(v) = t.parse::<i64>() {
            return Some(FunctionConstant::Int(v));
        }
        t.trim_end_matches(['f', 'F']).parse::<f64>().ok().map(FunctionConstant::Float)
    }

    /// `bool`, `integer` or `float`.
    pub fn kind(self) -> &'static str {
        match self {
            FunctionConstant::Bool(_) => "bool",
            FunctionConstant::Int(_) => "integer",
            FunctionConstant::Float(_) => "float",
        }
    }
}

/// A `constant T name [[function_constant(index)]];` declaration of a loaded program.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionConstantDecl {
    /// The constant's name.
    pub name: String,
    /// Its `[[function_constant(index)]]`.
    pub index: u32,
    /// The declared type, e.g. `bool`, `int`, `float`.
    pub type_name: String,
    /// The value it was compiled with; `None`: not given (reading it does not compile).
    pub value: Option<FunctionConstant>,
    /// Line of the declaration (in the `.metal` file or the header declaring it).
    pub metal_line: u32,
}

struct ProgramInner {
    kernels: Vec<KernelSignature>,
    by_name: HashMap<String, usize>,
    object: runtime::Object,
    file_name: String,
    opts: EmuOptions,
    so_path: PathBuf,
    compiled: bool,
    function_constants: Vec<FunctionConstantDecl>,
}

/// A loaded `.metal` file.
#[derive(Clone)]
pub struct Program {
    inner: Arc<ProgramInner>,
}

impl Program {
    /// Every `[[kernel]]` (and `host_name` instantiation) in the file; templated kernels
    /// themselves are not listed, only their instantiations.
    pub fn kernels(&self) -> &[KernelSignature] {
        &self.inner.kernels
    }

    /// The signature of one kernel.
    pub fn kernel(&self, name: &str) -> Option<&KernelSignature> {
        self.inner.by_name.get(name).map(|&i| &self.inner.kernels[i])
    }

    /// Path of the compiled object.
    pub fn object_path(&self) -> &std::path::Path {
        &self.inner.so_path
    }

    /// Every `[[function_constant(n)]]` the program declares, with the value it got.
    pub fn function_constants(&self) -> &[FunctionConstantDecl] {
        &self.inner.function_constants
    }

    /// Whether `load` compiled (false: the object came from the cache).
    pub fn was_compiled(&self) -> bool {
        self.inner.compiled
    }

    /// Run `kernel` over `grid` threads in threadgroups of `threadgroup` (MLX semantics).
    pub fn dispatch(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
    ) -> Result<DispatchStats, EmuError> {
        self.dispatch_with_order(kernel, buffers, grid, threadgroup, self.inner.opts.order)
    }

    /// [`Program::dispatch`] with a run order other than the emulator's.
    pub fn dispatch_with_order(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
        order: RunOrder,
    ) -> Result<DispatchStats, EmuError> {
        self.dispatch_with(kernel, buffers, grid, threadgroup, order, self.inner.opts.workers)
    }

    /// [`Program::dispatch`] with a run order and a worker count (0: automatic, see
    /// [`EmuOptions::workers`]) other than the emulator's.
    pub fn dispatch_with(
        &self,
        kernel: &str,
        buffers: &mut [&mut DeviceBuffer],
        grid: [u32; 3],
        threadgroup: [u32; 3],
        order: RunOrder,
        workers: usize,
    ) -> Result<DispatchStats, EmuError> {
        let mut bufs: Vec<runtime::Buf<'_>> = buffers.iter_mut().map(|b| runtime::Buf::Mut(&mut **b)).collect();
        self.dispatch_bufs(kernel, &mut bufs, grid, threadgroup, order, workers, POISON, self.inner.opts.placement)
    }

    /// The dispatch behind every other: buffers the kernel writes, reads, or reads in place.
    pub(crate) fn dispatch_bufs(
        &self,
        kernel: &str,
        buffers: &mut [runtime::Buf<'_>],
        grid: [u32; 3],
        threadgroup: [u32; 3],
        order: RunOrder,
        workers: usize,
        threadgroup_poison: u8,
        placement: Placement,
    ) -> Result<DispatchStats, EmuError> {
        let launch = |message: String| EmuError::Launch { kernel: kernel.to_string(), message };
        let Some(&idx) = self.inner.by_name.get(kernel) else {
            let names: Vec<&str> = self.inner.kernels.iter().map(|k| k.name.as_str()).collect();
            return Err(launch(format!("no such kernel in {}; kernels: {}", self.inner.file_name, names.join(", "))));
        };
        let sig = &self.inner.kernels[idx];
        if threadgroup.contains(&0) {
            return Err(launch(format!("threadgroup {threadgroup:?} has a zero dimension")));
        }
        let total: u64 = threadgroup.iter().map(|&t| t as u64).product();
        const MAX: u64 = kernelgen::contract::limits::MAX_THREADS_PER_THREADGROUP;
        if total > MAX {
            return Err(launch(format!("threadgroup {threadgroup:?} has {total} threads; at most {MAX}")));
        }
        let want = sig.buffer_count();
        if buffers.len() != want {
            return Err(launch(format!(
                "kernel binds buffers 0..{} ({} expected) but {} were given",
                want,
                want,
                buffers.len()
            )));
        }
        runtime::dispatch(runtime::DispatchArgs {
            object: &self.inner.object,
            entry: idx,
            kernel: sig,
            file_name: &self.inner.file_name,
            buffers,
            grid,
            threadgroup,
            order,
            threadgroup_poison,
            sanitize: self.inner.opts.sanitize,
            guard_pages: self.inner.opts.guard_pages,
            workers: workers_or_default(workers),
            placement,
            time_limit: self.inner.opts.timeout.unwrap_or_else(default_timeout),
        })
    }
}
