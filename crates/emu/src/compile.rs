//! Compilation of prepared sources with g++ into cached shared objects.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use super::EmuError;

pub(crate) const SHIM: &str = include_str!("shim/kgemu_shim.h");

/// Headers a source may include; each resolves to the shim.
pub(crate) const METAL_HEADERS: [&str; 16] = [
    "metal_stdlib",
    "metal_simdgroup",
    "metal_simdgroup_matrix",
    "metal_math",
    "metal_integer",
    "metal_atomic",
    "metal_compute",
    "metal_common",
    "metal_relational",
    "metal_geometric",
    "metal_logging",
    "metal_types",
    "metal_type_traits",
    "metal_numeric",
    "metal_pack",
    "metal_matrix",
];

/// Macros every Metal compile predefines (a user `define` of the same name replaces
/// the value): `__METAL__`, and `__METAL_VERSION__` of Metal 3.1, the language of
/// macOS 14, the oldest system MLX 0.32's wheels support.
pub(crate) const PREDEFINED: [(&str, &str); 2] = [("__METAL__", "1"), ("__METAL_VERSION__", "310")];

pub(crate) struct Builder {
    cache: PathBuf,
    flags: Vec<String>,
    shim_dir: PathBuf,
    /// Headers of the preprocessing pass: every `<metal_*>` header is empty there,
    /// so the shim (and its keyword macros) stay out of the preprocessed text.
    pre_dir: PathBuf,
    key_prefix: Vec<u8>,
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

pub(crate) fn default_cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("KERNELGEN_EMU_CACHE") {
        return PathBuf::from(p);
    }
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent();
        while let Some(d) = dir {
            if d.file_name().is_some_and(|n| n == "target") {
                return d.join("kernelgen-emu");
            }
            dir = d.parent();
        }
    }
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("kernelgen-emu-{uid}"))
}

pub(crate) fn base_flags(sanitize: bool) -> Vec<String> {
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
    if sanitize {
        f.extend(
            ["-fsanitize=address,undefined", "-fsanitize-recover=address,undefined", "-fno-omit-frame-pointer"]
                .iter()
                .map(|s| s.to_string()),
        );
    }
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

impl Builder {
    pub fn new(cache_dir: Option<PathBuf>, sanitize: bool) -> Result<Builder, EmuError> {
        let cache = cache_dir.unwrap_or_else(default_cache_dir);
        std::fs::create_dir_all(&cache).map_err(io(format!("cannot create the emulator cache {}", cache.display())))?;
        let flags = base_flags(sanitize);
        let cid = compiler_id()?;
        let mut h = Sha256::new();
        h.update(b"kgemu-shim-v1\0");
        h.update(SHIM.as_bytes());
        h.update(flags.join(" ").as_bytes());
        h.update(cid.as_bytes());
        let shim_hash = hex(&h.finalize());
        let shim_dir = cache.join(format!("shim-{}", &shim_hash[..16]));
        std::fs::create_dir_all(&shim_dir).map_err(io(format!("cannot create {}", shim_dir.display())))?;
        write_atomic(&shim_dir.join("kgemu_shim.h"), SHIM.as_bytes())?;
        let pre_dir = shim_dir.join("pre");
        std::fs::create_dir_all(&pre_dir).map_err(io(format!("cannot create {}", pre_dir.display())))?;
        for name in METAL_HEADERS {
            write_atomic(&shim_dir.join(name), b"#pragma once\n#include \"kgemu_shim.h\"\n")?;
            write_atomic(&pre_dir.join(name), b"#pragma once\n")?;
        }
        let gch = shim_dir.join("kgemu_shim.h.gch");
        if !gch.exists() {
            // The precompiled shim only speeds compiles up: if it cannot be built, g++
            // reads the header text instead.
            let tmp = tmp_name(&shim_dir, "kgemu_shim.h.gch", "");
            let ok = tool(&compiler())
                .args(&flags)
                .arg("-x")
                .arg("c++-header")
                .arg(shim_dir.join("kgemu_shim.h"))
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
        let mut key_prefix = Vec::new();
        key_prefix.extend_from_slice(b"kgemu-object-v1\0");
        key_prefix.extend_from_slice(shim_hash.as_bytes());
        Ok(Builder { cache, flags, shim_dir, pre_dir, key_prefix })
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
    ) -> Result<String, EmuError> {
        use std::io::Write;
        let mut cmd = tool(&compiler());
        cmd.args(["-E", "-x", "c++", "-std=c++17", "-nostdinc", "-Wno-attributes"]);
        for (name, value) in PREDEFINED {
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
        // `#include "x.h"` looks next to the .metal file first, as the Metal compiler does.
        if let Some(parent) = Path::new(file_name).parent().filter(|p| !p.as_os_str().is_empty() && p.is_dir()) {
            cmd.arg("-iquote").arg(parent);
        }
        for dir in include_dirs {
            if !dir.is_dir() {
                return Err(EmuError::Compile {
                    file: file_name.to_string(),
                    message: format!("include directory {} does not exist", dir.display()),
                });
            }
            cmd.arg("-I").arg(dir);
        }
        cmd.arg("-I").arg(&self.pre_dir);
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
            msg = msg.replace(&format!("{}/", self.pre_dir.display()), "");
            return Err(EmuError::Compile { file: file_name.to_string(), message: msg.trim_end().to_string() });
        }
        String::from_utf8(out.stdout).map_err(|_| EmuError::Compile {
            file: file_name.to_string(),
            message: format!("{file_name}: the preprocessed source is not UTF-8"),
        })
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache
    }

    pub fn build(&self, cpp: &str, file_name: &str) -> Result<Built, EmuError> {
        let mut h = Sha256::new();
        h.update(&self.key_prefix);
        h.update(cpp.as_bytes());
        let key = hex(&h.finalize());
        let so_path = self.cache.join(format!("{key}.so"));
        if so_path.exists() {
            return Ok(Built { so_path, compiled: false });
        }
        let cpp_path = self.cache.join(format!("{key}.cpp"));
        write_atomic(&cpp_path, cpp.as_bytes())?;
        let tmp = tmp_name(&self.cache, &key, ".so");
        let out = tool(&compiler())
            .args(&self.flags)
            .arg("-shared")
            .arg("-I")
            .arg(&self.shim_dir)
            .arg("-x")
            .arg("c++")
            .arg(&cpp_path)
            .arg("-o")
            .arg(&tmp)
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
        std::fs::rename(&tmp, &so_path).map_err(io(format!("cannot rename into {}", so_path.display())))?;
        Ok(Built { so_path, compiled: true })
    }
}
