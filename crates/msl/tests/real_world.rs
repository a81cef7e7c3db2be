//! Real-world MSL: the `.metal` files of public projects that Apple's compiler builds (in their
//! CI or at run time), unmodified, fetched from crates.io at pinned versions by
//! `tests/corpus/fetch.sh` (`make deps` runs it; never committed). Each translation unit is
//! checked as its project compiles it (the files it compiles, include folders, macros, Metal
//! version, read from the project's own build code where it has some), and every one must pass:
//! a file Apple accepts and the check refuses is a bug of the check.
//!
//! Skips with a message when the corpus was not fetched, and fails instead when
//! `KERNELGEN_MLX_METAL_REQUIRED` is set (as `make test` sets it, after `make deps`).
use crate::common;

use std::path::{Path, PathBuf};

/// One translation unit: a file, or a text standing for it, checked with these flags.
struct Unit {
    /// `project version: file [configuration]`, for messages.
    label: String,
    path: PathBuf,
    /// The text checked, when it is not the file's (ggml's embedded library).
    text: Option<String>,
    include_dirs: Vec<PathBuf>,
    defines: Vec<kernelgen_msl::Define>,
}

/// The pinned crates' source folders, as fetch.sh lists them: (name, version, folder).
fn crates() -> Option<Vec<(String, String, PathBuf)>> {
    let list = std::env::var_os("KERNELGEN_MSL_CORPUS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::crate_dir().join("../../target/msl-corpus"))
        .join("crates.tsv");
    let parsed: Option<Vec<_>> = std::fs::read_to_string(&list).ok().map(|t| {
        t.lines()
            .filter_map(|l| {
                let mut it = l.split('\t');
                Some((it.next()?.to_string(), it.next()?.to_string(), PathBuf::from(it.next()?)))
            })
            .collect()
    });
    if let Some(c) = parsed.filter(|c| !c.is_empty() && c.iter().all(|(_, _, d)| d.is_dir())) {
        return Some(c);
    }
    let why = format!(
        "the real-world MSL corpus is not fetched ({} is missing or stale: run crates/msl/tests/corpus/fetch.sh, as \
         `make deps` does)",
        list.display()
    );
    if std::env::var_os("KERNELGEN_MLX_METAL_REQUIRED").is_some_and(|v| !v.is_empty()) {
        panic!("{why}; KERNELGEN_MLX_METAL_REQUIRED is set, so this test must not skip");
    }
    println!("skipping: {why}");
    None
}

/// The quoted names of a `const NAME: [&str; N] = [...]` in a project's build code (the files
/// its build script compiles).
fn string_array(code: &str, name: &str) -> Vec<String> {
    let Some(start) = code.find(&format!("const {name}:")) else { return Vec::new() };
    let rest = &code[start..];
    let Some(open) = rest.find("= [") else { return Vec::new() };
    let body = &rest[open + 3..];
    let body = &body[..body.find("];").unwrap_or(body.len())];
    body.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

fn version(v: u32) -> kernelgen_msl::Define {
    ("__METAL_VERSION__".to_string(), Some(v.to_string()))
}

fn define(name: &str) -> kernelgen_msl::Define {
    (name.to_string(), Some("1".to_string()))
}

fn unit(project: &str, ver: &str, path: PathBuf, config: &str, include_dirs: Vec<PathBuf>, defines: Vec<kernelgen_msl::Define>) -> Unit {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let label = format!("{project} {ver}: {name}{}", if config.is_empty() { String::new() } else { format!(" [{config}]") });
    Unit { label, path, text: None, include_dirs, defines }
}

/// Every translation unit of the pinned crates, as their projects build them.
fn units(crates: &[(String, String, PathBuf)]) -> Vec<Unit> {
    let mut out = Vec::new();
    for (name, ver, dir) in crates {
        match name.as_str() {
            // candle compiles each source its source.rs embeds (`include_str!`) alone, at run
            // time (`new_library_with_source`, no include path, no macros), at the OS's default
            // Metal version (3.1 on macOS 14, the oldest candle's bfloat code builds on).
            "candle-metal-kernels" => {
                let source = common::read(&dir.join("src/source.rs"));
                let files: Vec<&str> = source.split("include_str!(\"").skip(1).filter_map(|s| s.split('"').next()).collect();
                assert!(files.len() >= 10, "candle's source.rs lists {} sources", files.len());
                for f in files {
                    out.push(unit("candle-metal-kernels", ver, dir.join("src").join(f), "", vec![], vec![version(310)]));
                }
            }
            // mistral.rs's build scripts run `xcrun metal -std=metal3.1 -c` over each source
            // they name (quotes resolve next to the file).
            "mistralrs-quant" => {
                let build = common::read(&dir.join("build.rs"));
                let files: Vec<String> =
                    string_array(&build, "METAL_SOURCES").into_iter().chain(string_array(&build, "HEADER_SOURCES")).collect();
                assert!(files.len() >= 15, "mistralrs-quant's build.rs compiles {} sources", files.len());
                for f in files {
                    let p = dir.join("src/metal_kernels").join(format!("{f}.metal"));
                    out.push(unit("mistralrs-quant", ver, p, "", vec![], vec![version(310)]));
                }
            }
            "mistralrs-paged-attn" => {
                let build = common::read(&dir.join("build.rs"));
                let mut files = string_array(&build, "METAL_SOURCES");
                assert!(files.len() >= 4, "mistralrs-paged-attn's build.rs compiles {} sources", files.len());
                // compiled beside them (`compile_air_cmd.arg(sources.join("utils.metal"))`)
                files.extend(["utils".to_string(), "float8".to_string()]);
                for f in files {
                    let p = dir.join("src/metal/kernels").join(format!("{f}.metal"));
                    out.push(unit("mistralrs-paged-attn", ver, p, "", vec![], vec![version(310)]));
                }
            }
            // ggml compiles ggml-metal.metal at run time (`newLibraryWithSource`) with
            // GGML_METAL_HAS_BF16 on devices with bfloat, either from the file beside
            // ggml-common.h or, embedded (GGML_METAL_EMBED_LIBRARY), from the text its CMake
            // makes by pasting ggml-common.h and ggml-metal-impl.h into it.
            "llama-cpp-sys-2" => {
                let src = dir.join("llama.cpp/ggml/src");
                let metal = src.join("ggml-metal/ggml-metal.metal");
                out.push(unit("ggml (llama-cpp-sys-2)", ver, metal.clone(), "file", vec![src.clone()], vec![version(310)]));
                let mut embedded = unit(
                    "ggml (llama-cpp-sys-2)",
                    ver,
                    metal.clone(),
                    "embedded, GGML_METAL_HAS_BF16",
                    vec![],
                    vec![version(310), define("GGML_METAL_EMBED_LIBRARY"), define("GGML_METAL_HAS_BF16")],
                );
                embedded.text = Some(ggml_embedded(&common::read(&metal), &src));
                out.push(embedded);
            }
            other => panic!("tests/corpus/Cargo.toml pins {other}, which this test does not know how to build"),
        }
    }
    out
}

/// What ggml's CMake makes of ggml-metal.metal for GGML_METAL_EMBED_LIBRARY: the line
/// `__embed_ggml-common.h__` replaced by ggml-common.h, `#include "ggml-metal-impl.h"` by that
/// file (two `sed` commands in ggml-metal's CMakeLists.txt).
fn ggml_embedded(metal: &str, src: &Path) -> String {
    let common_h = common::read(&src.join("ggml-common.h"));
    let impl_h = common::read(&src.join("ggml-metal/ggml-metal-impl.h"));
    let mut out = String::new();
    for line in metal.lines() {
        if line.contains("__embed_ggml-common.h__") {
            out.push_str(&common_h);
        } else if line.contains("#include \"ggml-metal-impl.h\"") {
            out.push_str(&impl_h);
        } else {
            out.push_str(line);
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// Units the check still refuses though Apple's compiler builds them: false positives of the
/// check, each with its cause (crates/msl/README.md, "What only a Mac can tell"). The test fails
/// on a refusal not listed here, and on a listed unit that passes (take it off the list).
const KNOWN_FALSE_POSITIVES: &[(&str, &str)] = &[
];

/// 85 s of clang on two cores (ggml's file alone is a 245 MB AST dump): `make test-slow`.
#[test]
#[ignore]
fn every_real_world_file_passes() {
    let Some(crates) = crates() else { return };
    let units = units(&crates);
    let c = common::checker();
    let results = common::par_map(&units, |u| {
        let text = u.text.clone().unwrap_or_else(|| common::read(&u.path));
        let name = u.path.display().to_string();
        match c.check_with(&text, &name, &u.include_dirs, &u.defines) {
            Ok(()) => None,
            Err(p) => Some((u.label.clone(), format!("{}: refused:\n  {}", u.label, p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n  ")))),
        }
    });
    let known = |label: &str| KNOWN_FALSE_POSITIVES.iter().any(|(k, _)| *k == label);
    let refused: Vec<&String> = results.iter().flatten().filter(|(l, _)| !known(l)).map(|(_, m)| m).collect();
    let listed: Vec<&str> = results.iter().flatten().map(|(l, _)| l.as_str()).collect();
    let now_passing: Vec<&str> = KNOWN_FALSE_POSITIVES.iter().map(|(k, _)| *k).filter(|k| !listed.contains(k)).collect();
    assert!(now_passing.is_empty(), "these pass now: take them off KNOWN_FALSE_POSITIVES: {now_passing:?}");
    println!(
        "{} translation units of {} pinned crates ({}), {} refused ({} known false positives, {} new)",
        units.len(),
        crates.len(),
        crates.iter().map(|(n, v, _)| format!("{n} {v}")).collect::<Vec<_>>().join(", "),
        listed.len(),
        listed.len() - refused.len(),
        refused.len()
    );
    assert!(refused.is_empty(), "{} of {} real-world units refused:\n{}", refused.len(), units.len(), refused.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n"));
}
