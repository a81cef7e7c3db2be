//! The Metal check from the command line: `kernelgen lint` and the check every emulator load
//! runs (`kernelgen emu`, `kernelgen run`, and the emulator backend inside `verify`), over the
//! invalid corpus of crates/msl/tests/invalid (each case cites its MSL section and carries
//! `// expect: LINE: fragment` lines: every expected line must be reported, with the fragment,
//! and nothing else).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kernelgen(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kernelgen"));
    c.current_dir(dir).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("kernelgen runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The invalid cases, as paths relative to the repository root (what problems name). Not the
/// ones invalid only below the Metal version these commands check at (a `// metal-version: N`
/// line: function pointers before 2.3, recursion before 2.4), which crates/msl's own tests check.
fn invalid_cases() -> Vec<String> {
    let dir = root().join("crates/msl/tests/invalid");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".metal"))
        .filter(|n| !std::fs::read_to_string(dir.join(n)).unwrap().contains("\n// metal-version:"))
        .map(|n| format!("crates/msl/tests/invalid/{n}"))
        .collect();
    out.sort();
    assert!(out.len() >= 30, "only {} invalid cases", out.len());
    out
}

/// `// expect: LINE: fragment` (or `LINE:COL: fragment`) lines of a case.
fn expectations(src: &str) -> Vec<(u32, String)> {
    src.lines()
        .filter_map(|l| l.trim().strip_prefix("// expect:"))
        .map(|rest| {
            let (line, frag) = rest.trim().split_once(':').expect("expect: LINE: fragment");
            let frag = frag.trim();
            // An optional column after the line.
            let frag = match frag.split_once(':') {
                Some((col, f)) if col.trim().parse::<u32>().is_ok() => f.trim(),
                _ => frag,
            };
            (line.trim().parse().expect("expect: LINE"), frag.to_string())
        })
        .collect()
}

/// Every expectation of `case` met in `output` (`case:LINE:COL: ...` lines containing the
/// fragment) and every `case:` problem line expected; a description of each miss.
fn misses(case: &str, output: &str) -> Vec<String> {
    let src = std::fs::read_to_string(root().join(case)).unwrap();
    let exp = expectations(&src);
    assert!(!exp.is_empty(), "{case} has no expectations");
    let prefix = format!("{case}:");
    let reported: Vec<(u32, &str)> = output
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (line, rest) = rest.split_once(':')?;
            Some((line.parse().ok()?, rest))
        })
        .collect();
    let mut out = Vec::new();
    for (line, frag) in &exp {
        if !reported.iter().any(|(l, m)| l == line && m.contains(frag.as_str())) {
            out.push(format!("{case}: nothing at line {line} containing {frag:?}"));
        }
    }
    for (l, m) in &reported {
        if !exp.iter().any(|(line, _)| line == l) {
            out.push(format!("{case}: unexpected problem at line {l}:{m}"));
        }
    }
    out
}

#[test]
fn lint_rejects_every_invalid_case_at_its_lines() {
    let cases = invalid_cases();
    let mut args = vec!["lint"];
    args.extend(cases.iter().map(String::as_str));
    let o = kernelgen(&root(), &args, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let failures: Vec<String> = cases.iter().flat_map(|c| misses(c, &out)).collect();
    assert!(failures.is_empty(), "{}\n--- output:\n{out}", failures.join("\n"));
    assert!(out.contains(&format!("in {} files", cases.len())), "{out}");
}

/// `kernelgen emu` refuses every case before compiling it, with the same problems (the
/// emulator's check and `lint` are one checker, sharing cached results).
#[test]
fn emu_rejects_every_invalid_case_at_its_lines() {
    let cases = invalid_cases();
    let out_dir = tempfile::tempdir().unwrap();
    let out_path = out_dir.path().display().to_string();
    let run = |part: &[String]| -> Vec<String> {
        let mut failures = Vec::new();
        for case in part {
            let args = ["emu", case.as_str(), "--grid", "1,1,1", "--threadgroup", "1,1,1", "--out", &out_path];
            let o = kernelgen(&root(), &args, &[]);
            let out = text(&o);
            if o.status.code() != Some(2) || !out.contains(&format!("error: {case} is not valid Metal")) {
                failures.push(format!("{case}: exit {:?}, not the Metal check's error:\n{out}", o.status.code()));
                continue;
            }
            failures.extend(misses(case, &out).into_iter().map(|m| format!("{m}\n{out}")));
        }
        failures
    };
    // Two at a time: two cores.
    let (a, b) = cases.split_at(cases.len() / 2);
    let failures = std::thread::scope(|s| {
        let ha = s.spawn(|| run(a));
        let mut f = run(b);
        f.extend(ha.join().unwrap());
        f
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(std::fs::read_dir(out_dir.path()).unwrap().next().is_none(), "emu wrote outputs for an invalid kernel");
}

#[test]
fn lint_passes_valid_files_and_mlx_kernels_with_include_dirs() {
    let o = kernelgen(
        &root(),
        &[
            "lint",
            "crates/msl/tests/valid/constructs.metal",
            "crates/msl/tests/valid/function_constant.metal",
            "crates/emu/tests/emu/semantics.metal",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("lint: 3 files ok"), "{}", text(&o));
    // MLX's own kernels from the unmodified headers, with -I (when fetched: see mlx_include).
    if let Some(inc) = mlx_include() {
        let inc = inc.display().to_string();
        let o = kernelgen(
            &root(),
            &["lint", "-I", &inc, "crates/emu/tests/mlx-metal/quantized.metal", "crates/emu/tests/mlx-metal/elementwise.metal"],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        // Without the include dir the headers are missing.
        let o = kernelgen(&root(), &["lint", "crates/emu/tests/mlx-metal/quantized.metal"], &[]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("crates/emu/tests/mlx-metal/quantized.metal:"), "{}", text(&o));
    }
}

#[test]
fn lint_defines_reach_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let src = "#include <metal_stdlib>\n#ifdef CONSTANT_X\n#define X_SPACE constant\n#else\n#define X_SPACE device\n#endif\n\
               [[kernel]] void k(X_SPACE float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  x[i] = 1.0f;\n}\n";
    std::fs::write(dir.path().join("d.metal"), src).unwrap();
    let o = kernelgen(dir.path(), &["lint", "d.metal"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for d in [&["-D", "CONSTANT_X"][..], &["--define", "CONSTANT_X=1"], &["-DCONSTANT_X"]] {
        let mut args = vec!["lint"];
        args.extend_from_slice(d);
        args.push("d.metal");
        let o = kernelgen(dir.path(), &args, &[]);
        assert_eq!(o.status.code(), Some(1), "{d:?}: {}", text(&o));
        assert!(text(&o).contains("d.metal:8:"), "{d:?}: {}", text(&o));
    }
}

#[test]
fn lint_usage_errors_and_a_missing_clang_exit_2() {
    let root = root();
    let valid = "crates/msl/tests/valid/constructs.metal";
    for (args, want) in [
        (&["lint"][..], "FILE.metal"),
        (&["lint", "-D", "1x", valid], "-D 1x"),
        (&["lint", "no/such/file.metal"], "no/such/file.metal"),
        // the emulator reads -D the same way (a bad name was clang's error at line 1)
        (&["emu", valid, "-D", "A B=1", "--grid", "1,1,1", "--threadgroup", "1,1,1", "--out", "/nonexistent"], "-D A B=1: expected NAME or NAME=VALUE"),
        (&["emu", valid, "-D", "=1", "--grid", "1,1,1", "--threadgroup", "1,1,1", "--out", "/nonexistent"], "-D =1: expected NAME or NAME=VALUE"),
    ] {
        let o = kernelgen(&root, args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    // Without clang: one line saying what to install, for lint and for the emulator.
    let no_clang = [("KERNELGEN_MSL_CLANG", "/nonexistent/clang")];
    let o = kernelgen(&root, &["lint", valid], &no_clang);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("apt-get install -y clang"), "{}", text(&o));
    assert_eq!(text(&o).trim().lines().count(), 1, "{}", text(&o));
    let out = tempfile::tempdir().unwrap();
    let out = out.path().display().to_string();
    let o = kernelgen(&root, &["emu", valid, "--grid", "1,1,1", "--threadgroup", "1,1,1", "--out", &out], &no_clang);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("apt-get install -y clang"), "{}", text(&o));
}

/// `#include "/etc/passwd"`: refused at its line, and nothing of the file is printed (clang
/// never reads it); nor does any message name the checker's scratch tree.
#[test]
fn lint_never_reads_or_echoes_a_file_outside_the_source_and_include_folders() {
    let dir = tempfile::tempdir().unwrap();
    let src = "#include <metal_stdlib>\n#include \"/etc/passwd\"\n#include \"../../../../../../../../etc/passwd\"\n\
               [[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  y[i] = 1.0f;\n}\n";
    std::fs::write(dir.path().join("k.metal"), src).unwrap();
    let o = kernelgen(dir.path(), &["lint", "k.metal"], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let fields: Vec<&str> = passwd.split([':', '\n', '/']).filter(|f| f.len() > 3).collect();
    assert!(fields.iter().all(|f| !out.contains(f)), "lint echoed /etc/passwd:\n{out}");
    assert!(!out.contains("kernelgen-emu") && !out.contains("check-"), "a message names the scratch tree:\n{out}");
    for line in [2, 3] {
        assert!(out.contains(&format!("k.metal:{line}:")), "line {line}:\n{out}");
    }
}

/// A file past one of the check's limits (here its size: 9 MiB of statements) is not a Metal
/// problem of the file: `lint` says the check cannot check it and exits 2, and so does `emu`,
/// at once, without calling it invalid Metal.
#[test]
fn a_file_past_the_checks_limits_is_an_error_of_the_check_not_a_metal_problem() {
    let dir = tempfile::tempdir().unwrap();
    let body = "  y[i] = y[i] + 1.0f;\n".repeat((9 << 20) / 22);
    let src = format!("#include <metal_stdlib>\n[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {{\n{body}}}\n");
    std::fs::write(dir.path().join("big.metal"), src).unwrap();
    let o = kernelgen(dir.path(), &["lint", "big.metal"], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("big.metal: the Metal check cannot check this file: it is 9.0 MiB"), "{out}");
    assert!(!out.contains("Metal would reject") && !out.contains("nested") && !out.contains("file ok"), "{out}");
    let o = kernelgen(dir.path(), &["emu", "big.metal", "--grid", "1,1,1", "--threadgroup", "1,1,1", "--out", "out"], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("the Metal check cannot check this file") && !out.contains("not valid Metal"), "{out}");
}

// ---- User families whose templates are not valid Metal.

/// Kernel bodies that g++ accepts and Metal does not, one per family: (family, template body
/// with the offending line marked `// BAD`, what the check says there). Cites: MSL
/// specification section 1.5 (Metal and C++), section 4 (address spaces).
const BAD_BODIES: &[(&str, &str, &str)] = &[
    ("bad_double", "  double twice = double(x[i]) * 2.0f; // BAD\n  out[i] = float(twice);\n", "double is not supported in MSL (section 1.5)"),
    ("bad_long_double", "  long double twice = x[i] * 2.0f; // BAD\n  out[i] = float(twice);\n", "long double is not supported"),
    ("bad_address_space", "  const thread float* p = x; // BAD\n  out[i] = p[i] * 2.0f;\n", "changes the address space"),
    ("bad_lambda", "  auto twice = [](float v) { return v * 2.0f; }; // BAD\n  out[i] = twice(x[i]);\n", "lambda expressions are not supported"),
    ("bad_goto", "  out[i] = x[i] * 2.0f;\n  goto done; // BAD\ndone:\n  return;\n", "goto is not supported"),
    ("bad_new", "  thread float* t = new float(2.0f); // BAD\n  out[i] = x[i] * *t;\n", "the new operator is not supported"),
    ("bad_register", "  register float t = x[i]; // BAD\n  out[i] = t * 2.0f;\n", "the register storage class"),
    ("bad_thread_local", "  static thread_local float t = 2.0f; // BAD\n  out[i] = x[i] * t;\n", "thread_local is not supported"),
    ("bad_exceptions", "  try { out[i] = x[i] * 2.0f; } catch (...) { } // BAD\n", "exceptions"),
    ("bad_std", "  out[i] = std::max(x[i], 0.0f) * 2.0f; // BAD\n", "use metal:: instead of std::"),
    ("bad_typeid", "  (void)typeid(x[i]); // BAD\n  out[i] = x[i] * 2.0f;\n", "typeid"),
    ("bad_delete", "  thread float* t = nullptr;\n  delete t; // BAD\n  out[i] = x[i] * 2.0f;\n", "the delete operator is not supported"),
    ("bad_noexcept", "  const bool nothrow = noexcept(x[i] * 2.0f); // BAD\n  out[i] = nothrow ? x[i] * 2.0f : 0.0f;\n", "the noexcept operator is not supported"),
    ("bad_virtual", "  struct V { virtual float f() const { return 2.0f; } }; // BAD\n  out[i] = x[i] * V().f();\n", "virtual functions are not supported"),
    ("bad_derived", "  struct A { float v; }; struct B : A { }; // BAD\n  B b; b.v = 2.0f;\n  out[i] = x[i] * b.v;\n", "derived classes are not supported"),
    (
        "bad_dynamic_cast",
        "  struct A { float v; }; A a{2.0f};\n  const thread A* p = dynamic_cast<const thread A*>(&a); // BAD\n  out[i] = x[i] * p->v;\n",
        "dynamic_cast is not supported",
    ),
    // (function pointers and recursion are Metal 2.3 and 2.4's: valid at the 3.1 these check at)
    ("bad_long_long", "  long long wide = long(x[i]); // BAD\n  out[i] = float(wide) * 2.0f;\n", "long long is not a Metal type"),
    (
        "bad_static_constant",
        "  static constant float two[1] = {2.0f}; // BAD\n  out[i] = x[i] * two[0];\n",
        "static constant variable 'two' inside a function",
    ),
];

/// A project: for each (family, body), families/FAMILY.{toml,metal.tera}, a minimal
/// elementwise family (out = x * 2, f32, one geometry `tiny`) with that template body, and
/// specs/FAMILY.toml.
fn user_family_project(bodies: &[(&str, &str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("specs")).unwrap();
    std::fs::create_dir_all(p.join("families")).unwrap();
    for (family, body, _) in bodies {
        std::fs::write(
            p.join(format!("families/{family}.toml")),
            format!(
                r#"family = "{family}"
summary = "every element doubled"

[axes.dtype]
doc = "dtype of x and out"
values = ["f32"]
default = ["f32"]

[fields]
N = {{ doc = "elements per row", range = [1, 1048576] }}

[let]
T = "metal_type(dtype)"

[sizes]
R = "rows"

[[kernel]]
doc = "every element doubled"
grid = ["R * N", 1, 1]
threadgroup = [32, 1, 1]
input = [{{ name = "x", dtype = "dtype", shape = ["R", "N"], doc = "input" }}]
output = [{{ name = "out", dtype = "dtype", shape = ["R", "N"], doc = "doubled" }}]
"#
            ),
        )
        .unwrap();
        let template = format!("  // {{{{ kernel }}}}: out = x * 2 over {{{{ N }}}} elements per row.\n  const uint i = thread_position_in_grid.x;\n{body}");
        std::fs::write(p.join(format!("families/{family}.metal.tera")), template).unwrap();
        std::fs::write(
            p.join(format!("specs/{family}.toml")),
            format!("family = \"{family}\"\ndescription = \"doubling\"\n\n[axes]\ndtype = [\"f32\"]\n\n[geometry.tiny]\nN = 64\n"),
        )
        .unwrap();
    }
    dir
}

/// `kernelgen generate`, then each family's (kernel name, generated .metal path relative to
/// the project, line of its `// BAD` line).
fn generated_bad_lines(dir: &Path, bodies: &[(&str, &str, &str)]) -> Vec<(String, String, u32)> {
    let o = kernelgen(dir, &["generate"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    bodies
        .iter()
        .map(|(family, _, _)| {
            let sub = dir.join("generated/metal").join(family);
            let files: Vec<PathBuf> = std::fs::read_dir(&sub).unwrap().map(|e| e.unwrap().path()).collect();
            assert_eq!(files.len(), 1, "{files:?}");
            let kernel = files[0].file_stem().unwrap().to_string_lossy().into_owned();
            let src = std::fs::read_to_string(&files[0]).unwrap();
            let line = src.lines().position(|l| l.contains("// BAD")).expect("the template's line") as u32 + 1;
            (kernel.clone(), format!("generated/metal/{family}/{kernel}.metal"), line)
        })
        .collect()
}

/// `kernelgen run` of a family's kernel goes through the emulator backend, whose load is
/// checked: exit 2 with the generated .metal's line.
#[test]
fn run_of_a_user_family_with_invalid_msl_reports_the_metal_line() {
    let bodies = &BAD_BODIES[..1];
    let dir = user_family_project(bodies);
    let (kernel, metal, line) = generated_bad_lines(dir.path(), bodies).remove(0);
    let x = dir.path().join("x.npy");
    write_f32_npy(&x, &[2, 64]);
    let o = kernelgen(dir.path(), &["run", &kernel, "--input", &format!("x={}", x.display()), "--out", "out"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let want = format!("{metal}:{line}:3: double is not supported in MSL (section 1.5)");
    assert!(text(&o).contains(&want), "want {want}:\n{}", text(&o));
    assert!(!dir.path().join("out").exists() || std::fs::read_dir(dir.path().join("out")).unwrap().next().is_none());
}

/// `kernelgen verify` loads every kernel before its property checks and references, so each
/// kernel whose template is not valid Metal fails with the Metal check's problem at the
/// generated .metal's line, and nothing runs.
#[test]
fn verify_of_user_families_with_invalid_msl_reports_the_metal_lines() {
    let dir = user_family_project(BAD_BODIES);
    let lines = generated_bad_lines(dir.path(), BAD_BODIES);
    let o = kernelgen(dir.path(), &["verify"], &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let mut failures = Vec::new();
    for ((kernel, metal, line), (_, _, fragment)) in lines.iter().zip(BAD_BODIES) {
        let failed = out.lines().any(|l| l.starts_with(&format!("FAILED {kernel}: {metal} is not valid Metal")));
        let at_line = out.lines().any(|l| l.starts_with(&format!("{metal}:{line}:")) && l.contains(fragment));
        if !failed || !at_line {
            failures.push(format!("{kernel}: want FAILED with {metal}:{line}: ... {fragment}"));
        }
    }
    assert!(failures.is_empty(), "{}\n--- output:\n{out}", failures.join("\n"));
    assert!(!out.contains("no verifier"), "{out}");
    assert!(out.contains(&format!("verify: 0 passed, {} failed", BAD_BODIES.len())), "{out}");

    // The same load through the library: EmuBackend::program of a rendered kernel.
    let config = kernelgen_codegen::Config::new().specs(dir.path().join("specs"));
    let generated = config.load().and_then(|input| config.generate(input)).unwrap();
    let (kernel, metal, line) = &lines[0];
    let r = generated.kernels.iter().find(|r| r.kernel.name == *kernel).expect("the family's kernel");
    let backend = kernelgen_emu::EmuBackend::new(kernelgen_emu::EmuOptions::default()).unwrap();
    let want = format!("{metal}:{line}:3: double is not supported in MSL (section 1.5)");
    match backend.program(&r.def) {
        Err(e @ kernelgen_emu::EmuError::InvalidMetal { .. }) => assert!(e.to_string().contains(&want), "want {want}:\n{e}"),
        Err(e) => panic!("expected the Metal check's error, got {e}"),
        Ok(_) => panic!("the invalid template loaded"),
    }
}

/// Metal's launch limits, checked by the generator before any kernel is written: a family
/// stating more than 32 KiB of threadgroup memory at some geometry, or more than 1024 threads
/// per threadgroup, is a spec error at generation (Metal would fail the pipeline). The
/// emulator enforces both again at launch (crates/emu: EmuError::Launch, the 32 KiB check).
#[test]
fn generate_rejects_threadgroups_beyond_metals_limits() {
    let bodies = &[("scale", "  out[i] = x[i] * 2.0f;\n", "")];
    let dir = user_family_project(bodies);
    let family = dir.path().join("families/scale.toml");
    let base = std::fs::read_to_string(&family).unwrap();
    let with = |from: &str, to: &str| std::fs::write(&family, base.replace(from, to)).unwrap();
    // 8192 floats: exactly 32 KiB, allowed.
    with("threadgroup = [32, 1, 1]\n", "threadgroup = [32, 1, 1]\nthreadgroup_memory = \"N * 4 * 128\"\n");
    let o = kernelgen(dir.path(), &["generate"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(dir.path().join("specs/scale.toml"), "family = \"scale\"\ndescription = \"doubling\"\n\n[axes]\ndtype = [\"f32\"]\n\n[geometry.tiny]\nN = 128\n").unwrap();
    let o = kernelgen(dir.path(), &["generate"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("needs 65536 bytes of threadgroup memory, above the limit of 32768"), "{}", text(&o));
    with("threadgroup = [32, 1, 1]\n", "threadgroup = [\"N * 16\", 1, 1]\n");
    let o = kernelgen(dir.path(), &["generate"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("needs 2048 threads per threadgroup, above the limit of 1024"), "{}", text(&o));
}

/// A float32 .npy of ones.
fn write_f32_npy(path: &Path, shape: &[usize]) {
    let n: usize = shape.iter().product();
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", dims.join(", "));
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for _ in 0..n {
        bytes.extend_from_slice(&1.0f32.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

/// MLX's `include/` (see crates/msl/tests/common: fetched by crates/emu/tests/mlx-metal/fetch.sh;
/// required when KERNELGEN_MLX_METAL_REQUIRED is set, as under `make test`).
fn mlx_include() -> Option<PathBuf> {
    let dir = std::env::var_os("KERNELGEN_MLX_METAL_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/mlx-metal/mlx-metal-0.32.2/include"));
    if dir.join("mlx/backend/metal/kernels/utils.h").is_file() {
        return Some(dir);
    }
    let why = format!("MLX's Metal headers are not in {} (crates/emu/tests/mlx-metal/fetch.sh)", dir.display());
    if std::env::var_os("KERNELGEN_MLX_METAL_REQUIRED").is_some_and(|v| !v.is_empty()) {
        panic!("{why}; KERNELGEN_MLX_METAL_REQUIRED is set");
    }
    println!("skipping the MLX part: {why}");
    None
}
