//! Sanitize mode: the environment that preloads g++'s ASan/UBSan runtimes, re-exec,
//! and the ASan entry points the runtime calls (found with dlsym, so an uninstrumented
//! process simply has none).

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;

/// Set in the environment by [`sanitizer_env`]: marks a process started for sanitize mode.
pub const SANITIZED_MARKER: &str = "KERNELGEN_EMU_SANITIZED";

fn runtime_lib(name: &str) -> Option<String> {
    let cxx = std::env::var("KERNELGEN_EMU_CXX").unwrap_or_else(|_| "g++".to_string());
    let out = super::compile::tool_command(&cxx).arg(format!("-print-file-name={name}")).output().ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let path = std::path::Path::new(&p);
    if !path.is_absolute() || !path.exists() {
        return None;
    }
    Some(std::fs::canonicalize(path).map(|c| c.display().to_string()).unwrap_or(p))
}

/// The environment a process needs for sanitize mode: `LD_PRELOAD` of g++'s libasan and
/// libubsan (found with `g++ -print-file-name=libasan.so`), `ASAN_OPTIONS` (leak detection
/// off, recover after a report, SIGSEGV/SIGBUS/SIGFPE/SIGILL left to the emulator's
/// handler), `UBSAN_OPTIONS`, and [`SANITIZED_MARKER`]. Compilers and tools the emulator
/// spawns never inherit the preload.
pub fn sanitizer_env() -> Vec<(String, String)> {
    let mut preload = Vec::new();
    for lib in ["libasan.so", "libubsan.so"] {
        if let Some(p) = runtime_lib(lib) {
            preload.push(p);
        }
    }
    vec![
        ("LD_PRELOAD".into(), preload.join(":")),
        (
            "ASAN_OPTIONS".into(),
            "detect_leaks=0:halt_on_error=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:\
             allow_user_segv_handler=1:detect_stack_use_after_return=0:verify_asan_link_order=0"
                .into(),
        ),
        ("UBSAN_OPTIONS".into(), "halt_on_error=0:print_stacktrace=0".into()),
        (SANITIZED_MARKER.into(), "1".into()),
    ]
}

/// Whether the ASan runtime is loaded in this process (sanitize mode can work).
pub fn sanitizer_active() -> bool {
    fns().is_some()
}

/// Call first thing in a binary that wants sanitize mode: unless the ASan runtime is
/// already loaded, re-exec the current executable with [`sanitizer_env`] (same arguments).
/// Returns `Ok(())` in the (re-executed) sanitized process, an error if the runtime could
/// not be preloaded.
pub fn reexec_with_sanitizer_if_needed() -> std::io::Result<()> {
    if sanitizer_active() {
        return Ok(());
    }
    if std::env::var_os(SANITIZED_MARKER).is_some() {
        return Err(std::io::Error::other(
            "sanitize mode: the process was started with the sanitizer environment but the ASan runtime is not loaded \
             (is g++'s libasan installed?)",
        ));
    }
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1));
    cmd.envs(sanitizer_env());
    use std::os::unix::process::CommandExt;
    Err(cmd.exec())
}

type PoisonFn = unsafe extern "C" fn(*const c_void, usize);
type StartSwitchFn = unsafe extern "C" fn(*mut *mut c_void, *const c_void, usize);
type FinishSwitchFn = unsafe extern "C" fn(*mut c_void, *mut *const c_void, *mut usize);
type ReportCbSetter = unsafe extern "C" fn(Option<unsafe extern "C" fn(*const libc::c_char)>);

pub(crate) struct AsanFns {
    pub poison: PoisonFn,
    pub unpoison: PoisonFn,
    pub start_switch: StartSwitchFn,
    pub finish_switch: FinishSwitchFn,
    pub set_report_callback: Option<ReportCbSetter>,
}

fn sym(name: &CStr) -> *mut c_void {
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

pub(crate) fn fns() -> Option<&'static AsanFns> {
    static F: OnceLock<Option<AsanFns>> = OnceLock::new();
    F.get_or_init(|| {
        if sym(c"__asan_init").is_null() {
            return None;
        }
        let p = sym(c"__asan_poison_memory_region");
        let u = sym(c"__asan_unpoison_memory_region");
        let s = sym(c"__sanitizer_start_switch_fiber");
        let f = sym(c"__sanitizer_finish_switch_fiber");
        let cb = sym(c"__asan_set_error_report_callback");
        if p.is_null() || u.is_null() || s.is_null() || f.is_null() {
            return None;
        }
        unsafe {
            Some(AsanFns {
                poison: std::mem::transmute::<*mut c_void, PoisonFn>(p),
                unpoison: std::mem::transmute::<*mut c_void, PoisonFn>(u),
                start_switch: std::mem::transmute::<*mut c_void, StartSwitchFn>(s),
                finish_switch: std::mem::transmute::<*mut c_void, FinishSwitchFn>(f),
                set_report_callback: (!cb.is_null()).then(|| std::mem::transmute::<*mut c_void, ReportCbSetter>(cb)),
            })
        }
    })
    .as_ref()
}

pub(crate) fn asan_poison(addr: usize, len: usize) {
    if let Some(f) = fns() {
        if len > 0 {
            unsafe { (f.poison)(addr as *const c_void, len) };
        }
    }
}

pub(crate) fn asan_unpoison(addr: usize, len: usize) {
    if let Some(f) = fns() {
        if len > 0 {
            unsafe { (f.unpoison)(addr as *const c_void, len) };
        }
    }
}
