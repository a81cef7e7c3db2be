//! Finding clang and running it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Error;

/// Names tried on `PATH`, newest first; Debian's `clang` is clang 14 on bookworm.
const CANDIDATES: [&str; 8] =
    ["clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14", "clang++"];

pub struct Clang {
    pub path: PathBuf,
    /// First line of `clang --version`.
    pub version: String,
    pub major: u32,
}

impl Clang {
    /// `explicit` (from the options) or `$KERNELGEN_MSL_CLANG`, else the first candidate on PATH.
    pub fn find(explicit: Option<&Path>) -> Result<Clang, Error> {
        let env = std::env::var_os("KERNELGEN_MSL_CLANG").map(PathBuf::from);
        let tried: Vec<PathBuf> = match explicit.map(Path::to_path_buf).or(env) {
            Some(p) => vec![p],
            None => CANDIDATES.iter().map(PathBuf::from).collect(),
        };
        for p in &tried {
            if let Some(c) = Clang::probe(p) {
                if c.major < 14 {
                    continue;
                }
                return Ok(c);
            }
        }
        Err(Error::ClangNotFound(format!(
            "no clang (14 or newer) found (tried {}); install it with `apt-get install -y clang` or set KERNELGEN_MSL_CLANG",
            tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )))
    }

    fn probe(path: &Path) -> Option<Clang> {
        let out = Command::new(path).env_remove("LD_PRELOAD").arg("--version").output().ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text.lines().next()?.trim().to_string();
        let major = version.split("version ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
        Some(Clang { path: path.to_path_buf(), version, major })
    }

    /// Flags that make clang parse MSL: C++ for OpenCL 2021 (real address spaces) with the
    /// generic address space standing for Metal's `thread` default (every conversion into it
    /// from a named space shows in the AST, where the rules reject it), for AArch64 (native
    /// `half`, `_Float16` for bfloat), no system headers.
    pub fn base_flags(metal_version: u32) -> Vec<String> {
        [
            "-x",
            "clcpp",
            "-cl-std=clc++2021",
            "-target",
            "aarch64-unknown-linux-gnu",
            "-nostdinc",
            "-cl-no-stdinc",
            "-Xclang",
            "-cl-ext=+cl_khr_fp16,+__opencl_c_generic_address_space,+__cl_clang_function_pointers",
            // `%:include` would be an include the check does not see (Metal code has no digraphs)
            "-fno-digraphs",
            "-fno-color-diagnostics",
            "-fno-caret-diagnostics",
            "-fdiagnostics-show-option",
            "-ferror-limit=0",
            "-ftemplate-backtrace-limit=0",
            "-Wno-pragma-system-header-outside-header",
            // Metal accepts narrowing in vector and aggregate brace initialisers (`short2{a, b}`
            // with int values, as MLX's steel code writes).
            "-Wno-c++11-narrowing",
            // a program-scope constant whose initializer runs at run time (MSL 4.2)
            "-Werror=global-constructors",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("-D__METAL_VERSION__={metal_version}")])
        .collect()
    }

    /// A clang command, without the sanitizer runtime a sanitized emulator process preloads
    /// (clang is not built for it).
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.path);
        c.env_remove("LD_PRELOAD").env_remove("ASAN_OPTIONS").env_remove("UBSAN_OPTIONS");
        c
    }
}

/// What one run of clang printed: stdout up to a cap (`over` when it printed more: it is killed
/// then, and `stdout` holds the first `max_stdout` bytes) and all of stderr.
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The output passed the cap and clang was stopped.
    pub over: bool,
    /// clang ran past the timeout and was stopped.
    pub timed_out: bool,
}

/// Run `cmd`, passing its standard output through `filter` as it comes (chunk, output), keeping
/// at most `max_stdout` bytes of what the filter makes, and stopping it after `timeout`. clang's
/// JSON AST dump grows with the square of the nesting (each level indented two more spaces): an
/// expression of thousands of terms prints gigabytes, which would exhaust memory.
pub fn run_capped(
    cmd: &mut Command,
    max_stdout: u64,
    timeout: std::time::Duration,
    mut filter: impl FnMut(&[u8], &mut Vec<u8>),
) -> std::io::Result<Output> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let child = std::sync::Mutex::new(child);
    let kill = || {
        if let Ok(mut c) = child.lock() {
            let _ = c.kill();
        }
    };
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let kill = &kill;
    let (stdout, stderr, over, timed_out) = std::thread::scope(|s| {
        let watchdog = s.spawn(move || {
            let late = finished.recv_timeout(timeout) == Err(std::sync::mpsc::RecvTimeoutError::Timeout);
            if late {
                kill();
            }
            late
        });
        let errs = s.spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        let mut stdout = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let read = loop {
            match out.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => filter(&chunk[..n], &mut stdout),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            }
            if stdout.len() as u64 > max_stdout {
                break Ok(());
            }
        };
        let over = stdout.len() as u64 > max_stdout;
        if over {
            kill();
            stdout.truncate(max_stdout as usize);
        }
        drop(out);
        let stderr = errs.join().unwrap_or_default();
        let _ = done.send(());
        let timed_out = watchdog.join().unwrap_or(false);
        read.map(|_| (stdout, stderr, over, timed_out))
    })?;
    child.into_inner().unwrap_or_else(|p| p.into_inner()).wait()?;
    Ok(Output { stdout, stderr, over, timed_out })
}
