//! The invalid corpus (tests/invalid/*.metal) and the valid one (tests/valid/*.metal).
//!
//! Each invalid case is MSL that g++ with the emulator's macros accepts and Metal rejects. It
//! cites the MSL specification section it breaks and carries `// expect: LINE: fragment`
//! (or `LINE:COL:`) lines: every expectation must be met by a reported problem, and every
//! reported problem must be on an expected line.
use crate::common;

struct Expect {
    line: u32,
    col: Option<u32>,
    fragment: String,
}

fn expectations(src: &str) -> Vec<Expect> {
    src.lines()
        .filter_map(|l| l.trim().strip_prefix("// expect:"))
        .map(|rest| {
            let mut parts = rest.trim().splitn(3, ':');
            let line = parts.next().and_then(|s| s.trim().parse().ok()).expect("expect: LINE: fragment");
            let second = parts.next().unwrap_or("").to_string();
            match (second.trim().parse::<u32>().ok(), parts.next()) {
                (Some(col), Some(frag)) => Expect { line, col: Some(col), fragment: frag.trim().to_string() },
                _ => {
                    let frag = match parts.next() {
                        Some(more) => format!("{second}:{more}"),
                        None => second,
                    };
                    Expect { line, col: None, fragment: frag.trim().to_string() }
                }
            }
        })
        .collect()
}

/// `// metal-version: N` in a case checks it at `__METAL_VERSION__` N, else at `default`.
fn version_defines(src: &str, default: Option<u32>) -> Vec<kernelgen_msl::Define> {
    let v = src
        .lines()
        .find_map(|l| l.trim().strip_prefix("// metal-version:").and_then(|v| v.trim().parse::<u32>().ok()))
        .or(default);
    v.map(|v| vec![("__METAL_VERSION__".to_string(), Some(v.to_string()))]).unwrap_or_default()
}

#[test]
fn every_invalid_case_is_rejected_at_its_lines() {
    let files = common::files(&common::crate_dir().join("tests/invalid"), "metal");
    assert!(files.len() >= 30, "only {} invalid cases", files.len());
    for f in &files {
        let src = common::read(f);
        let name = f.file_name().unwrap().to_string_lossy();
        assert!(
            src.contains("MSL specification section") || src.contains("MSL specification chapter"),
            "{name} cites no section"
        );
    }
    let failures = rejected_at_their_lines(&files, None);
    println!("{} invalid cases", files.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Metal 4 cases (tensors, MetalPerformancePrimitives), checked at `__METAL_VERSION__` 400
/// unless they say otherwise. Not in tests/invalid: kernelgen's emulator has no Metal 4
/// tensors, so the g++ and `kernelgen emu` comparisons made there mean nothing for them.
/// Each cites what it breaks: the MSL specification or Apple's headers.
#[test]
fn every_metal4_invalid_case_is_rejected_at_its_lines() {
    let files = common::files(&common::crate_dir().join("tests/invalid_metal4"), "metal");
    assert!(files.len() >= 5, "only {} Metal 4 invalid cases", files.len());
    for f in &files {
        assert!(common::read(f).contains("Cites:"), "{} cites nothing", f.display());
    }
    let failures = rejected_at_their_lines(&files, Some(400));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every expectation of every case met, and every problem expected.
fn rejected_at_their_lines(files: &[std::path::PathBuf], version: Option<u32>) -> Vec<String> {
    let c = common::checker();
    common::par_map(files, |f| {
        let mut failures = Vec::new();
        let src = common::read(f);
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let exp = expectations(&src);
        assert!(!exp.is_empty(), "{name} has no expectations");
        let problems = match c.check_with(&src, &name, &[], &version_defines(&src, version)) {
            Ok(()) => {
                failures.push(format!("{name}: accepted"));
                return failures;
            }
            Err(p) => p,
        };
        for e in &exp {
            let hit = problems
                .iter()
                .any(|p| p.line == e.line && e.col.is_none_or(|c| p.col == c) && p.message.contains(&e.fragment));
            if !hit {
                failures.push(format!(
                    "{name}: no problem at line {} containing {:?}; got:\n  {}",
                    e.line,
                    e.fragment,
                    problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n  ")
                ));
            }
        }
        for p in &problems {
            if !exp.iter().any(|e| e.line == p.line) {
                failures.push(format!("{name}: unexpected problem {p}"));
            }
        }
        failures
    })
    .concat()
}

#[test]
fn every_valid_case_passes() {
    valid_cases_pass("tests/valid", None);
}

/// Metal 4's tensors and matmul2d as Apple's headers document them and kernels call them.
#[test]
fn every_metal4_valid_case_passes() {
    valid_cases_pass("tests/valid_metal4", Some(400));
}

fn valid_cases_pass(dir: &str, version: Option<u32>) {
    let files = common::files(&common::crate_dir().join(dir), "metal");
    assert!(!files.is_empty());
    let c = common::checker();
    let failures: Vec<String> = common::par_map(&files, |f| {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let src = common::read(f);
        // `// include: mlx`: the case includes MLX's headers (from the mlx-metal wheel)
        let include = if src.lines().any(|l| l.starts_with("// include: mlx")) {
            match common::mlx_include() {
                Some(d) => vec![d],
                None => return Vec::new(),
            }
        } else {
            Vec::new()
        };
        match c.check_with(&src, &name, &include, &version_defines(&src, version)) {
            Ok(()) => Vec::new(),
            Err(p) => p.iter().map(|p| p.to_string()).collect(),
        }
    })
    .concat();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn problems_display_as_file_line_col() {
    let c = common::checker();
    let src = "#include <metal_stdlib>\n[[kernel]] void k(device float* y [[buffer(0)]]) {\n  double d = 1;\n  y[0] = d;\n}\n";
    let p = c.check(src, "d.metal", &[]).unwrap_err();
    assert_eq!(p[0].to_string(), "d.metal:3:3: double is not supported in MSL (section 1.5); use float");
}

/// The point of the invalid corpus: the emulator's compiler (g++ with the emulator's shim for
/// `<metal_stdlib>`, where `device` and friends are empty macros) accepts all but the few
/// cases listed, at least 30 of them. Skips when g++ or the shim is absent (a packaged crate).
#[test]
fn gpp_with_the_emulator_shim_accepts_the_invalid_cases() {
    let root = common::crate_dir().join("../..");
    let Some(shim) = ["src/emu/shim/kgemu_shim.h", "crates/emu/src/shim/kgemu_shim.h"]
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.is_file())
    else {
        println!("skipping: the emulator's kgemu_shim.h is not in this checkout");
        return;
    };
    if std::process::Command::new("g++").arg("--version").output().is_err() {
        println!("skipping: no g++");
        return;
    }
    let inc = std::env::temp_dir().join(format!("kgmsl-gpp-{}", std::process::id()));
    std::fs::create_dir_all(&inc).unwrap();
    std::fs::write(inc.join("metal_stdlib"), format!("#include \"{}\"\n", shim.display())).unwrap();
    // Cases g++ rejects too, with the emulator's shim: invalid Metal all the same, but not
    // among those that show what g++ lets through.
    const GPP_REJECTS_TOO: [&str; 12] = [
        "atomic_float_fetch_or.metal",    // the shim's fetch_or computes `old | v`, not defined for float
        "bfloat_to_half_implicit.metal",  // the shim's bfloat has no conversion to half at all
        "memory_order_acquire.metal",     // the shim declares memory_order_relaxed only
        "simdgroup_matrix_16x16.metal",   // the shim static_asserts 8x8 matrices
        "threadgroup_attr_on_device_pointer.metal", // the shim cannot parse [[threadgroup(0)]] parameters (an emulator blocker)
        "main_function.metal",            // the shim's kernels are inline: "cannot declare ::main to be inline"
        "typeid.metal",                   // "must #include <typeinfo> before using typeid"
        "thread_ref_substitution_failure.metal", // any C++ compiler's error: a control of the check's __generic deductions
        "constexpr_not_constant.metal",   // any C++ compiler's error: a control of the check's reason-less constexpr filter
        "vector_constructor_too_few.metal", // the shim's vec has no two-argument float4 constructor
        "functional_vector_cast_lanes.metal", // the shim's vec has no constructor from a vector of another length
        "vector_length_conversion.metal", // nor a float3 from a float4
    ];
    let files = common::files(&common::crate_dir().join("tests/invalid"), "metal");
    // -x c++: g++ takes a .metal file for linker input otherwise, and checks nothing
    let results = common::par_map(&files, |f| {
        let out = std::process::Command::new("g++")
            .args(["-x", "c++", "-std=c++17", "-fsyntax-only", "-Wno-attributes", "-w", "-I"])
            .arg(&inc)
            .arg(f)
            .output()
            .unwrap();
        (f.file_name().unwrap().to_string_lossy().into_owned(), out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    });
    let (mut accepted, mut rejected) = (Vec::new(), Vec::new());
    for (name, ok, stderr) in results {
        if ok {
            accepted.push(name);
        } else {
            rejected.push((name, stderr));
        }
    }
    let _ = std::fs::remove_dir_all(&inc);
    let unexpected: Vec<String> = rejected.iter().filter(|(n, _)| !GPP_REJECTS_TOO.contains(&n.as_str())).map(|(n, e)| format!("{n}: {e}")).collect();
    assert!(unexpected.is_empty(), "g++ rejects these too, so they show nothing g++ lets through (list them in GPP_REJECTS_TOO):\n{}", unexpected.join("\n"));
    let now_accepted: Vec<&String> = accepted.iter().filter(|n| GPP_REJECTS_TOO.contains(&n.as_str())).collect();
    assert!(now_accepted.is_empty(), "g++ accepts these now: remove them from GPP_REJECTS_TOO: {now_accepted:?}");
    assert!(accepted.len() >= 30, "only {} invalid cases that g++ accepts", accepted.len());
}
