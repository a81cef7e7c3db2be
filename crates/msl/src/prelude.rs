//! The stand-in for Metal's headers: written once into a directory (named by a hash of its
//! content and of the flags) together with a precompiled header, so a check parses only the
//! user's code.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::cache::{hash_hex, publish, temp_name, write_new};
use crate::clang::Clang;
use crate::private_dir::PrivateDir;

pub const HEADER: &str = include_str!("prelude/metal_stdlib.h");

/// Metal 4's tensors (`<metal_tensor>`, `<metal_cooperative_tensor>`) and the
/// MetalPerformancePrimitives tensor operations: separate headers, parsed only by the checks
/// that include them (not part of the precompiled prelude). Both declare nothing unless
/// `__HAVE_TENSOR__` is defined, as Apple's headers do; the prelude defines it from
/// `__METAL_VERSION__` 400 (Metal 4) on.
pub const TENSOR_HEADER: &str = include_str!("prelude/metal_tensor.h");
pub const MPP_HEADER: &str = include_str!("prelude/MetalPerformancePrimitives.h");

/// The other headers in the prelude directory, beside `metal_stdlib` and [`METAL_HEADERS`]:
/// (include name, content).
pub const MODEL_HEADERS: [(&str, &str); 4] = [
    ("metal_tensor", TENSOR_HEADER),
    ("metal_cooperative_tensor", "#include <metal_tensor>\n"),
    ("MetalPerformancePrimitives/MetalPerformancePrimitives.h", MPP_HEADER),
    // The umbrella's matmul2d header, which some code includes directly.
    ("MetalPerformancePrimitives/MPPTensorOpsMatMul2d.h", "#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>\n"),
];

/// Whether `#include <name>` names one of Metal 4's tensor headers (empty below Metal 4).
pub fn is_tensor_header(name: &str) -> bool {
    MODEL_HEADERS.iter().any(|(n, _)| *n == name)
}

/// Whether `#include <name>` names one of Metal's headers that the prelude provides.
pub fn is_metal_header(name: &str) -> bool {
    METAL_HEADERS.contains(&name) || MODEL_HEADERS.iter().any(|(n, _)| *n == name)
}

/// Header names that Metal's `#include <...>` accepts; each resolves to the one prelude.
pub const METAL_HEADERS: [&str; 25] = [
    "metal_stdlib",
    "metal_limits",
    "metal_quadgroup",
    "metal_array",
    "metal_uniform",
    "metal_utility",
    "metal_initializer_list",
    "metal_texture",
    "metal_graphics",
    "metal_imageblocks",
    "metal_math",
    "metal_simdgroup",
    "metal_simdgroup_matrix",
    "metal_common",
    "metal_integer",
    "metal_atomic",
    "metal_compute",
    "metal_logging",
    "metal_types",
    "metal_relational",
    "metal_geometric",
    "metal_type_traits",
    "metal_numeric",
    "metal_pack",
    "metal_matrix",
];

pub struct Prelude {
    /// Directory holding `metal_stdlib` and the other names (passed with -isystem).
    pub dir: PathBuf,
    pub pch: PathBuf,
    /// Every macro a check's environment defines before the source's first line (clang's own
    /// and the prelude's), and those Metal 4's model headers define: the kernelgen emulator's
    /// g++ defines them differently, or not at all.
    pub macros: std::collections::HashSet<String>,
}

/// The flag sets kernelgen's emulator compiles with (crates/emu's compile.rs: C++17, -O3, the
/// x86 FMA and F16C extensions, AddressSanitizer and UBSan when sanitizing): each changes what
/// g++ predefines, so the macros of every one of them count.
const GPP_FLAG_SETS: [&[&str]; 3] = [
    &["-std=c++17", "-O3"],
    &["-std=c++17", "-O3", "-mfma", "-mf16c"],
    &["-std=c++17", "-O3", "-fsanitize=address,undefined"],
];

/// Every macro g++ predefines with one of the emulator's flag sets ([`GPP_FLAG_SETS`]), asked
/// of g++ once a process; `None` without g++ (then no emulator runs, and the rule on
/// conditionals takes every reserved name as one g++ may define).
pub fn gpp_macros() -> Option<&'static std::collections::HashSet<String>> {
    static MACROS: std::sync::OnceLock<Option<std::collections::HashSet<String>>> = std::sync::OnceLock::new();
    MACROS
        .get_or_init(|| {
            let mut all = std::collections::HashSet::new();
            let mut any = false;
            for flags in GPP_FLAG_SETS {
                let Ok(out) = std::process::Command::new("g++")
                    .env_remove("LD_PRELOAD")
                    .args(["-x", "c++"])
                    .args(flags)
                    .args(["-dM", "-E", "-"])
                    .stdin(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .output()
                else {
                    continue;
                };
                // a flag set this g++ does not take (-mfma off x86) defines nothing of its own
                if out.status.success() {
                    any = true;
                    all.extend(defined_names(&String::from_utf8_lossy(&out.stdout)));
                }
            }
            any.then_some(all)
        })
        .as_ref()
}

/// The file beside the PCH listing [`Prelude::macros`] (one name a line).
const MACROS_FILE: &str = "macros";

/// The names `#define`d in a header's text.
fn defined_names(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().filter_map(|l| {
        let rest = l.trim_start().strip_prefix('#')?.trim_start().strip_prefix("define")?;
        let name: String = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        (!name.is_empty()).then_some(name)
    })
}

impl Prelude {
    pub fn prepare(clang: &Clang, cache: &PrivateDir, metal_version: u32) -> Result<Prelude, Error> {
        let flags = Clang::base_flags(metal_version);
        let key = hash_hex(&[HEADER, TENSOR_HEADER, MPP_HEADER, &flags.join(" "), &clang.version, crate::CHECKER_VERSION]);
        let dir = cache.subdir(format!("prelude-{}", &key[..16])).map_err(Error::Io)?;
        let pch = dir.join("metal_stdlib.pch");
        if pch.exists() {
            return Self::with_macros(clang, &flags, dir, pch);
        }
        // One build at a time in this process (checks at a new version start together); other
        // processes may build it too: every file is created once, whole, and never rewritten (a
        // PCH records its headers' modification times), the PCH too (the first one stays).
        static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
        if pch.exists() {
            return Self::with_macros(clang, &flags, dir, pch);
        }
        let io = |p: &Path, e: std::io::Error| Error::Io(format!("writing {}: {e}", p.display()));
        write_new(&dir.join("metal_stdlib"), HEADER.as_bytes()).map_err(|e| io(&dir, e))?;
        for name in &METAL_HEADERS[1..] {
            write_new(&dir.join(name), b"#include <metal_stdlib>\n").map_err(|e| io(&dir, e))?;
        }
        for (name, content) in MODEL_HEADERS {
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            }
            write_new(&path, content.as_bytes()).map_err(|e| io(&path, e))?;
        }
        // The PCH is built from a one-line file that includes the prelude from the -isystem
        // directory, so the prelude counts as a system header (no warnings from it).
        let root = dir.join("pch-root.h");
        write_new(&root, b"#include <metal_stdlib>\n").map_err(|e| io(&root, e))?;
        let tmp = temp_name(&pch);
        let out = clang
            .command()
            .args(&flags)
            .arg("-fsyntax-only")
            .arg("-isystem")
            .arg(&dir)
            .args(["-Xclang", "-emit-pch", "-Xclang", "-o", "-Xclang"])
            .arg(&tmp)
            .arg(&root)
            .output()
            .map_err(|e| Error::Io(format!("running {}: {e}", clang.path.display())))?;
        if !out.status.success() || !tmp.exists() {
            return Err(Error::Prelude(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        publish(&tmp, &pch).map_err(|e| io(&pch, e))?;
        Self::with_macros(clang, &flags, dir, pch)
    }

    /// The prelude at `dir` with its macros: listed beside the PCH, or asked of clang once
    /// (`-dM -E` of an empty source with the PCH) and listed there.
    fn with_macros(clang: &Clang, flags: &[String], dir: PathBuf, pch: PathBuf) -> Result<Prelude, Error> {
        let list = dir.join(MACROS_FILE);
        let text = match fs::read_to_string(&list) {
            Ok(t) => t,
            Err(_) => {
                let out = clang
                    .command()
                    .args(flags)
                    .arg("-isystem")
                    .arg(&dir)
                    .arg("-include-pch")
                    .arg(&pch)
                    .args(["-dM", "-E", "-"])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|e| Error::Io(format!("running {}: {e}", clang.path.display())))?;
                if !out.status.success() {
                    return Err(Error::Prelude(String::from_utf8_lossy(&out.stderr).into_owned()));
                }
                let names: Vec<String> = defined_names(&String::from_utf8_lossy(&out.stdout))
                    .map(|n| n.to_string())
                    .collect();
                let text = names.join("\n");
                write_new(&list, text.as_bytes()).map_err(|e| Error::Io(format!("writing {}: {e}", list.display())))?;
                text
            }
        };
        let mut macros: std::collections::HashSet<String> = text.lines().map(str::to_string).collect();
        macros.extend(defined_names(TENSOR_HEADER).chain(defined_names(MPP_HEADER)));
        Ok(Prelude { dir, pch, macros })
    }
}
