//! A compiled kernel object: its entry points, and the table of runtime callbacks
//! (`Rt`) it is handed at load, the ABI shared with the shim (`kgemu_shim.h`).

use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};

use crate::EmuError;

use super::faults::{rt_asan_note, rt_ubsan_note};
use super::racecheck::rt_tg_access;
use super::sched::{rt_barrier, rt_collective};
use super::tg_memory::{region, rt_tg_alloc, rt_tg_param};
use super::warp::{rt_cuda_ub, rt_live_lanes, rt_tg_dynamic, rt_thread_info, rt_warp};

/// The shim ABI this runtime implements (`kgemu_init` answers the one it was built with).
const ABI_VERSION: u32 = 7;

/// Mirrors `kgemu::ThreadInfo` in the shim.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct ThreadInfo {
    pub(super) thread_position_in_grid: [u32; 4],
    pub(super) threadgroup_position_in_grid: [u32; 4],
    pub(super) thread_position_in_threadgroup: [u32; 4],
    pub(super) threads_per_threadgroup: [u32; 4],
    pub(super) threads_per_grid: [u32; 4],
    pub(super) threadgroups_per_grid: [u32; 4],
    pub(super) dispatch_threads_per_threadgroup: [u32; 4],
    pub(super) grid_origin: [u32; 4],
    pub(super) thread_index_in_simdgroup: u32,
    pub(super) simdgroup_index_in_threadgroup: u32,
    pub(super) thread_index_in_threadgroup: u32,
    pub(super) threads_per_simdgroup: u32,
    pub(super) simdgroups_per_threadgroup: u32,
    pub(super) dispatch_simdgroups_per_threadgroup: u32,
    pub(super) thread_execution_width: u32,
    pub(super) thread_index_in_quadgroup: u32,
    pub(super) quadgroup_index_in_threadgroup: u32,
    pub(super) quadgroups_per_threadgroup: u32,
    pub(super) dispatch_quadgroups_per_threadgroup: u32,
    pub(super) pad: [u32; 1],
}

pub(super) type CollFn = unsafe extern "C" fn(*const *mut c_void, u32);
pub(super) type ThreadFn = unsafe extern "C" fn(*const *mut u8, *const ThreadInfo);

/// Mirrors `kgemu::Rt` in the shim.
#[repr(C)]
pub(super) struct Rt {
    abi: u32,
    thread_info_size: u32,
    collective: unsafe extern "C" fn(*mut c_void, CollFn, u32, u32),
    barrier: unsafe extern "C" fn(u32, u32),
    tg_alloc: unsafe extern "C" fn(u32, u64, u64, u64, u32, *const c_char) -> *mut c_void,
    asan_note: unsafe extern "C" fn(usize, u64, u32, usize),
    ubsan_note: unsafe extern "C" fn(*const c_char, *const c_char, u32, u32, usize, *const c_char, usize, u32),
    tg_access: unsafe extern "C" fn(usize, u64, u32, usize),
    tg_base: usize,
    tg_span: usize,
    // CUDA's (`warp`)
    thread_info: unsafe extern "C" fn() -> *const ThreadInfo,
    warp: unsafe extern "C" fn(*mut c_void, CollFn, u32, u32),
    live_lanes: unsafe extern "C" fn() -> u32,
    tg_dynamic: unsafe extern "C" fn(u32, u64, u64, u32, *const c_char) -> *mut c_void,
    cuda_ub: unsafe extern "C" fn(u32, u32, u32, u32, u32),
    tg_param: unsafe extern "C" fn(u32, u32, u64, u64, u32, *const c_char) -> *mut c_void,
}

/// The table every object gets: the threadgroup memory region is reserved first (its bounds
/// are in the table, for the threadgroup-memory check's hooks).
fn rt() -> Result<&'static Rt, EmuError> {
    static RT: std::sync::OnceLock<Rt> = std::sync::OnceLock::new();
    let region = region()?;
    Ok(RT.get_or_init(|| Rt {
        abi: ABI_VERSION,
        thread_info_size: std::mem::size_of::<ThreadInfo>() as u32,
        collective: rt_collective,
        barrier: rt_barrier,
        tg_alloc: rt_tg_alloc,
        asan_note: rt_asan_note,
        ubsan_note: rt_ubsan_note,
        tg_access: rt_tg_access,
        tg_base: region.base(),
        tg_span: region.span(),
        thread_info: rt_thread_info,
        warp: rt_warp,
        live_lanes: rt_live_lanes,
        tg_dynamic: rt_tg_dynamic,
        cuda_ub: rt_cuda_ub,
        tg_param: rt_tg_param,
    }))
}

/// Names of the collective operation ids (`kgemu::Op` in the shim).
pub(super) fn op_name(op: u32) -> &'static str {
    const NAMES: [&str; 22] = [
        "?",
        "simd_sum",
        "simd_product",
        "simd_max",
        "simd_min",
        "simd_and",
        "simd_or",
        "simd_xor",
        "simd_broadcast",
        "simd_broadcast_first",
        "simd_shuffle",
        "simd_shuffle_down",
        "simd_shuffle_up",
        "simd_shuffle_xor",
        "simd_any",
        "simd_all",
        "simd_prefix_inclusive_sum",
        "simd_prefix_exclusive_sum",
        "simd_is_first",
        "simd_prefix_inclusive_product",
        "simd_prefix_exclusive_product",
        "simd_ballot",
    ];
    NAMES.get(op as usize).copied().unwrap_or("a collective")
}

pub(crate) struct Object {
    _lib: libloading::os::unix::Library,
    pub(super) entries: Vec<ThreadFn>,
    pub(super) path: PathBuf,
    /// Its executable code's addresses (the kernels and the shim's inline code).
    pub(super) code: std::ops::Range<usize>,
}

unsafe impl Send for Object {}
unsafe impl Sync for Object {}

impl Object {
    pub fn load(path: &Path, symbols: &[String], file_name: &str) -> Result<Object, EmuError> {
        let rt = rt()?;
        let lib = unsafe {
            libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_LOCAL)
        }
        .map_err(|e| EmuError::Compile {
            file: file_name.to_string(),
            message: format!("the compiled object {} does not load: {e}", path.display()),
        })?;
        let bad = |what: String| EmuError::Compile { file: file_name.to_string(), message: what };
        unsafe {
            let init: libloading::os::unix::Symbol<unsafe extern "C" fn(*const Rt) -> u32> =
                lib.get(b"kgemu_init\0").map_err(|e| bad(format!("object has no kgemu_init: {e}")))?;
            if init(rt) != ABI_VERSION {
                return Err(bad("the compiled object was built against a different shim ABI".into()));
            }
            let mut entries = Vec::new();
            for s in symbols {
                let f: libloading::os::unix::Symbol<ThreadFn> =
                    lib.get(s.as_bytes()).map_err(|e| bad(format!("object has no entry {s}: {e}")))?;
                entries.push(*f);
            }
            let code = code_of(*init as usize).ok_or_else(|| bad("the compiled object's code is not among the loaded objects".into()))?;
            Ok(Object { _lib: lib, entries, path: path.to_path_buf(), code })
        }
    }
}


/// The addresses of the executable segments of the loaded object that holds `addr`.
fn code_of(addr: usize) -> Option<std::ops::Range<usize>> {
    struct Search {
        addr: usize,
        found: Option<std::ops::Range<usize>>,
    }
    unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> libc::c_int {
        unsafe {
            let (info, search) = (&*info, &mut *(data as *mut Search));
            let segments = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            let base = info.dlpi_addr as usize;
            let range = |p: &libc::Elf64_Phdr| base + p.p_vaddr as usize..base + (p.p_vaddr + p.p_memsz) as usize;
            let loaded = segments.iter().filter(|p| p.p_type == libc::PT_LOAD);
            if !loaded.clone().any(|p| range(p).contains(&search.addr)) {
                return 0;
            }
            let code = loaded.filter(|p| p.p_flags & libc::PF_X != 0).map(range);
            search.found = code.reduce(|a, b| a.start.min(b.start)..a.end.max(b.end));
            1
        }
    }
    let mut search = Search { addr, found: None };
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut search as *mut Search as *mut c_void) };
    search.found
}
