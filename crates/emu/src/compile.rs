//! Compilation of prepared sources with g++ into cached shared objects.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use kernelgen_msl::private_dir::PrivateDir;
use sha2::{Digest, Sha256};

use super::EmuError;
use crate::Language;

pub(crate) const SHIM: &str = include_str!("shim/kgemu_shim.h");
/// The CUDA stand-in (it includes the shim).
pub(crate) const CUDA_SHIM: &str = include_str!("shim/kgemu_cuda.h");
/// What a CUDA compile adds to the flags: no variable-length arrays (nvrtc has none; g++
/// would take `float a[warpSize]` as one).
const CUDA_FLAGS: [&str; 1] = ["-Werror=vla"];

/// Headers a source may include, those the Metal check accepts (`<metal_limits>` among them);
/// each resolves to the shim.
pub(crate) use kernelgen_msl::METAL_HEADERS;

/// Macros every Metal compile predefines (a user `define` of the same name replaces
/// the value): `__METAL__`, `__METAL_VERSION__` of Metal 3.1, the language of macOS 14, the
/// oldest system MLX 0.32's wheels support, and `__HAVE_BFLOAT__` (bfloat is Metal 3.1's), as
/// the Metal check's prelude defines it.
pub(crate) const PREDEFINED: [(&str, &str); 3] = [("__METAL__", "1"), ("__METAL_VERSION__", "310"), ("__HAVE_BFLOAT__", "1")];

pub(crate) struct Builder {
    /// Objects are named by this cache's secret (a `.so` planted under a name anyone could
    /// compute from the source is never found).
    cache: PrivateDir,
    flags: Vec<String>,
    shim_dir: PathBuf,
    /// Headers of the preprocessing pass: every `<metal_*>` header is empty there,
    /// so the shim (and its keyword macros) stay out of the preprocessed text.
    pre_dir: PathBuf,
    /// The same for a CUDA source: MLX's headers (`translate_cuda::stand_in_headers`) empty.
    pre_cuda_dir: PathBuf,
    key_prefix: Vec<u8>,
    build: Build,
}

/// What a kernel object is built for: a plain run, a run under AddressSanitizer and UBSan
/// (their runtimes preloaded), or the threadgroup-memory check (`-fsanitize=thread`'s
/// instrumentation, every hook the shim's own: no sanitizer runtime; see runtime/racecheck.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Build {
    Plain,
    Sanitize,
    Racecheck,
}

impl Build {
    /// The sanitizer runtimes are linked: their entry points and libraries are allowed.
    pub(crate) fn sanitizer_runtime(self) -> bool {
        self == Build::Sanitize
    }

    /// The instrumentation adds GCC's sanitizer module constructor (`_sub_I_00099_*`).
    pub(crate) fn instrumented(self) -> bool {
        self != Build::Plain
    }
}

pub(crate) struct Built {
    pub so_path: PathBuf,
    pub compiled: bool,
}

fn compiler() -> String {
    std::env::var("KERNELGEN_EMU_CXX").unwrap_or_else(|_| "g++".to_string())
}

/// A command without the sanitizer preload: compilers and tools never get it.
fn tool(program: &str) -> Command {
    let mut c = Command::new(program);
    c.env_remove("LD_PRELOAD").env_remove("ASAN_OPTIONS").env_remove("UBSAN_OPTIONS");
    c
}

pub(crate) fn tool_command(program: &str) -> Command {
    tool(program)
}

fn compiler_id() -> Result<String, EmuError> {
    static ID: OnceLock<Result<String, String>> = OnceLock::new();
    let r = ID.get_or_init(|| {
        let cxx = compiler();
        let out = tool(&cxx)
            .args(["-dumpfullversion", "-dumpmachine"])
            .output()
            .map_err(|e| format!("cannot run `{cxx}` (the emulator compiles kernels with g++): {e}"))?;
        if !out.status.success() {
            return Err(format!("`{cxx} -dumpfullversion` failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(format!("{cxx} {}", String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ")))
    });
    r.clone().map_err(|m| EmuError::Io(std::io::Error::new(std::io::ErrorKind::NotFound, m)))
}

/// `$KERNELGEN_EMU_CACHE`, else `kernelgen-emu` in the nearest ancestor of this executable
/// named `target` (cargo's target directory), else `emu` in the user's cache
/// (`$XDG_CACHE_HOME/kernelgen`, `~/.cache/kernelgen`); never a folder shared between users.
pub(crate) fn default_cache_dir() -> Result<PathBuf, EmuError> {
    if let Some(p) = std::env::var_os("KERNELGEN_EMU_CACHE") {
        return Ok(PathBuf::from(p));
    }
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent();
        while let Some(d) = dir {
            if d.file_name().is_some_and(|n| n == "target") {
                return Ok(d.join("kernelgen-emu"));
            }
            dir = d.parent();
        }
    }
    let root = kernelgen_msl::private_dir::default_root().map_err(cache_error)?;
    Ok(root.join("emu"))
}

/// A cache folder that cannot be used (another user's, writable by others, not creatable).
pub(crate) fn cache_error(message: String) -> EmuError {
    EmuError::Io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, message))
}

/// How a kernel object is linked: without the C runtime's start files and default libraries
/// (no constructor of the toolchain's own, no libstdc++), every symbol resolved at link time,
/// bound to the object's own definitions first, with a stack that is not executable. The
/// libraries follow the source ([`link_libraries`]); the object is then checked before it is
/// loaded (`elf.rs`).
const LINK_FLAGS: [&str; 5] = ["-shared", "-nostdlib", "-Wl,-z,defs", "-Wl,-Bsymbolic", "-Wl,-z,noexecstack"];

/// The libraries a kernel object links: the sanitizer runtimes in sanitize mode, libm, libc
/// (for memcpy and friends) and libgcc's static helpers.
fn link_libraries(build: Build) -> Vec<&'static str> {
    let mut l = if build.sanitizer_runtime() { vec!["-lasan", "-lubsan"] } else { Vec::new() };
    l.extend(["-lm", "-lc", "-lgcc"]);
    l
}

pub(crate) fn base_flags(build: Build) -> Vec<String> {
    let mut f: Vec<String> = [
        "-std=c++17",
        "-O3",
        "-ffp-contract=off",
        "-fno-strict-aliasing",
        "-fno-fast-math",
        "-Wno-attributes",
        "-fvisibility=hidden",
        "-fPIC",
        "-fno-exceptions",
        // no guard calls into libstdc++ for function-local statics (the object links no C++
        // runtime: see LINK_FLAGS)
        "-fno-threadsafe-statics",
        "-g1",
        // a frame larger than a page touches every page on its way down, so a GPU thread
        // whose locals overflow its stack faults in the stack's guard, not beyond it
        "-fstack-clash-protection",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") {
            f.push("-mfma".into());
        }
        if std::arch::is_x86_feature_detected!("f16c") {
            f.push("-mf16c".into());
        }
    }
    let extra: &[&str] = match build {
        Build::Plain => &[],
        Build::Sanitize => &["-fsanitize=address,undefined", "-fsanitize-recover=address,undefined", "-fno-omit-frame-pointer"],
        // every load and store through a pointer calls the shim's `__tsan_*` hooks (no
        // function entry and exit hooks: nothing reads them)
        Build::Racecheck => &["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"],
    };
    f.extend(extra.iter().map(|s| s.to_string()));
    f
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn tmp_name(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{stem}.{}.{n}.tmp{ext}", std::process::id()))
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> EmuError {
    move |source| EmuError::Io(std::io::Error::new(source.kind(), format!("{context}: {source}")))
}

/// Write `bytes` to `path` atomically (temp file + rename) unless it already holds them.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EmuError> {
    if std::fs::read(path).is_ok_and(|b| b == bytes) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let stem = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = tmp_name(dir, stem, "");
    std::fs::write(&tmp, bytes).map_err(io(format!("cannot write {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io(format!("cannot rename into {}", path.display())))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Precompiles `dir/header` once (`header.gch` beside it). The precompiled header only speeds
/// compiles up: if it cannot be built, g++ reads the header's text instead.
fn precompile(dir: &Path, header: &str, flags: &[String]) {
    let gch = dir.join(format!("{header}.gch"));
    if gch.exists() {
        return;
    }
    let tmp = tmp_name(dir, &format!("{header}.gch"), "");
    let ok = tool(&compiler())
        .args(flags)
        .arg("-x")
        .arg("c++-header")
        .arg(dir.join(header))
        .arg("-o")
        .arg(&tmp)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        let _ = std::fs::rename(&tmp, &gch);
    } else {
        let _ = std::fs::remove_file(&tmp);
    }
}

impl Builder {
    pub fn new(cache_dir: Option<PathBuf>, build: Build) -> Result<Builder, EmuError> {
        let cache = PrivateDir::open(&match cache_dir {
            Some(d) => d,
            None => default_cache_dir()?,
        })
        .map_err(cache_error)?;
        let flags = base_flags(build);
        let cid = compiler_id()?;
        let mut h = Sha256::new();
        h.update(b"kgemu-shim-v1\0");
        h.update(SHIM.as_bytes());
        h.update(CUDA_SHIM.as_bytes());
        h.update(flags.join(" ").as_bytes());
        h.update(cid.as_bytes());
        let shim_hash = hex(&h.finalize());
        let shim_name = format!("shim-{}", &shim_hash[..16]);
        let shim_dir = cache.subdir(&shim_name).map_err(cache_error)?;
        write_atomic(&shim_dir.join("kgemu_shim.h"), SHIM.as_bytes())?;
        write_atomic(&shim_dir.join("kgemu_cuda.h"), CUDA_SHIM.as_bytes())?;
        let pre_dir = cache.subdir(Path::new(&shim_name).join("pre")).map_err(cache_error)?;
        for name in METAL_HEADERS {
            write_atomic(&shim_dir.join(name), b"#pragma once\n#include \"kgemu_shim.h\"\n")?;
            write_atomic(&pre_dir.join(name), b"#pragma once\n")?;
        }
        let pre_cuda_dir = cache.subdir(Path::new(&shim_name).join("pre-cuda")).map_err(cache_error)?;
        for path in crate::translate_cuda::stand_in_headers() {
            let file = pre_cuda_dir.join(path);
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
            }
            write_atomic(&file, b"#pragma once\n")?;
        }
        precompile(&shim_dir, "kgemu_shim.h", &flags);
        let mut key_prefix = Vec::new();
        key_prefix.extend_from_slice(b"kgemu-object-v2\0");
        key_prefix.extend_from_slice(shim_hash.as_bytes());
        key_prefix.extend_from_slice(LINK_FLAGS.join(" ").as_bytes());
        Ok(Builder { cache, flags, shim_dir, pre_dir, pre_cuda_dir, key_prefix, build })
    }

    /// Runs the g++ preprocessor over `source` (named `file_name`), with `include_dirs`
    /// searched for `#include` and `defines` (after the Metal predefines) set, every
    /// `<metal_*>` header empty. The result keeps g++'s line markers, so lines map
    /// back to the `.metal` file and the headers it includes.
    pub fn preprocess(
        &self,
        source: &str,
        file_name: &str,
        include_dirs: &[PathBuf],
        defines: &[(String, Option<String>)],
        language: Language,
    ) -> Result<String, EmuError> {
        use std::io::Write;
        let mut cmd = tool(&compiler());
        cmd.args(["-E", "-x", "c++", "-std=c++17", "-nostdinc", "-Wno-attributes"]);
        let predefined: &[(&str, &str)] = match language {
            Language::Metal => &PREDEFINED,
            Language::Cuda => &crate::translate_cuda::PREDEFINED,
        };
        for &(name, value) in predefined {
            if !defines.iter().any(|(n, _)| n == name) {
                cmd.arg(format!("-D{name}={value}"));
            }
        }
        for (name, value) in defines {
            match value {
                Some(v) => cmd.arg(format!("-D{name}={v}")),
                None => cmd.arg(format!("-D{name}")),
            };
        }
        // A CUDA source includes MLX's headers only (checked before), each an empty stand-in.
        if language == Language::Cuda {
            cmd.arg("-I").arg(&self.pre_cuda_dir);
        }
        // `#include "x.h"` looks next to the .metal file first, as the Metal compiler does.
        // Folders by their canonical paths, as the Metal check resolves includes: g++ then
        // reads the files the check read (it refuses includes through links).
        let parent = Path::new(file_name).parent().filter(|p| language == Language::Metal && !p.as_os_str().is_empty() && p.is_dir());
        if let Some(parent) = parent {
            cmd.arg("-iquote").arg(std::fs::canonicalize(parent).map_err(io(format!("cannot read {}", parent.display())))?);
        }
        for dir in include_dirs {
            if !dir.is_dir() {
                return Err(EmuError::Compile {
                    file: file_name.to_string(),
                    message: format!("include directory {} does not exist", dir.display()),
                });
            }
            cmd.arg("-I").arg(std::fs::canonicalize(dir).map_err(io(format!("cannot read {}", dir.display())))?);
        }
        if language == Language::Metal {
            cmd.arg("-I").arg(&self.pre_dir);
        }
        cmd.arg("-");
        cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().map_err(io(format!("cannot run {}", compiler())))?;
        let mut input = format!("#line 1 \"{}\"\n", file_name.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " "));
        input.push_str(source);
        if !input.ends_with('\n') {
            input.push('\n');
        }
        let mut stdin = child.stdin.take().expect("piped stdin");
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().map_err(io(format!("cannot run {}", compiler())))?;
        let _ = writer.join();
        if !out.status.success() {
            let mut msg = String::from_utf8_lossy(&out.stderr).into_owned();
            msg = msg.replace(&format!("{}/", self.pre_dir.display()), "").replace(&format!("{}/", self.pre_cuda_dir.display()), "");
            return Err(EmuError::Compile { file: file_name.to_string(), message: msg.trim_end().to_string() });
        }
        String::from_utf8(out.stdout).map_err(|_| EmuError::Compile {
            file: file_name.to_string(),
            message: format!("{file_name}: the preprocessed source is not UTF-8"),
        })
    }

    pub fn cache_dir(&self) -> &Path {
        self.cache.path()
    }

    pub fn build(&self, cpp: &str, file_name: &str, language: Language) -> Result<Built, EmuError> {
        let extra: &[&str] = match language {
            Language::Metal => &[],
            Language::Cuda => &CUDA_FLAGS,
        };
        let key = self.cache.keyed_name(&[&self.key_prefix, extra.join(" ").as_bytes(), cpp.as_bytes()]);
        let so_path = self.cache.path().join(format!("{key}.so"));
        if so_path.exists() {
            self.vet(&so_path, file_name)?;
            return Ok(Built { so_path, compiled: false });
        }
        if language == Language::Cuda {
            let flags: Vec<String> = self.flags.iter().cloned().chain(extra.iter().map(|f| f.to_string())).collect();
            precompile(&self.shim_dir, "kgemu_cuda.h", &flags);
        }
        let cpp_path = self.cache.path().join(format!("{key}.cpp"));
        write_atomic(&cpp_path, cpp.as_bytes())?;
        let tmp = tmp_name(self.cache.path(), &key, ".so");
        let out = tool(&compiler())
            .args(&self.flags)
            .args(extra)
            .args(LINK_FLAGS)
            .arg("-I")
            .arg(&self.shim_dir)
            .arg("-x")
            .arg("c++")
            .arg(&cpp_path)
            .arg("-o")
            .arg(&tmp)
            .args(link_libraries(self.build))
            .output()
            .map_err(io(format!("cannot run {}", compiler())))?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&tmp);
            let mut msg = String::from_utf8_lossy(&out.stderr).into_owned();
            let shim_prefix = format!("{}/", self.shim_dir.display());
            msg = msg.replace(&shim_prefix, "");
            let cpp_prefix = format!("{}", cpp_path.display());
            msg = msg.replace(&cpp_prefix, &format!("{file_name} (prepared)"));
            const MAX: usize = 12_000;
            if msg.len() > MAX {
                let mut cut = MAX;
                while !msg.is_char_boundary(cut) {
                    cut -= 1;
                }
                msg.truncate(cut);
                msg.push_str("\n[... more diagnostics cut ...]");
            }
            return Err(EmuError::Compile { file: file_name.to_string(), message: msg.trim_end().to_string() });
        }
        // a refused object never enters the cache
        if let Err(e) = self.vet(&tmp, file_name) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, &so_path).map_err(io(format!("cannot rename into {}", so_path.display())))?;
        Ok(Built { so_path, compiled: true })
    }

    /// Refuses the object at `path` (before anything loads it) when it reaches outside the
    /// emulator's runtime: see `elf.rs`.
    fn vet(&self, path: &Path, file_name: &str) -> Result<(), EmuError> {
        let bytes = std::fs::read(path).map_err(io(format!("cannot read {}", path.display())))?;
        let reasons = crate::elf::refusals(&bytes, self.build);
        if reasons.is_empty() {
            return Ok(());
        }
        Err(EmuError::RefusedObject { file: file_name.to_string(), reasons })
    }
}
