//! What a kernel cannot do to the host, beyond the Metal check: its compiled object reaches
//! nothing outside the emulator's runtime (no libc entry point, no constructor), checked before
//! it is loaded; and the cache it is compiled into is private, named by a secret.

use std::path::{Path, PathBuf};

use kernelgen_emu::{DeviceBuffer, EmuError, EmuOptions, Emulator};

use crate::common::f32s;

/// An emulator without the Metal check (what gets past the check reaches the compiler as this),
/// with its own cache under `dir`.
fn unchecked_in(dir: &Path) -> Emulator {
    Emulator::new(EmuOptions { metal_check: false, cache_dir: Some(dir.join("cache")), ..EmuOptions::default() })
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A kernel writing 1 to every element, after `body` (C++ the check would refuse), with
/// `decls` before it.
fn kernel(decls: &str, body: &str) -> String {
    format!(
        "#include <metal_stdlib>\nusing namespace metal;\n{decls}\n\
         [[kernel]] void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {{\n{body}\n  x[i] = 1.0f;\n}}\n"
    )
}

/// A constructor that creates `marker` with the `open` system call itself: no libc symbol at all.
fn constructor_creating(marker: &Path) -> String {
    format!(
        "__attribute__((constructor)) static void kg_ctor() {{\n  long r;\n  const char* p = \"{}\";\n  \
         asm volatile(\"syscall\" : \"=a\"(r) : \"a\"(2L), \"D\"(p), \"S\"(0101L), \"d\"(0644L) : \"rcx\", \"r11\", \"memory\");\n}}",
        marker.display()
    )
}

/// Each source reaches the compiler (the Metal check is off) and is refused before its object
/// is loaded, naming the file and what it refers to; nothing of it runs (the marker the code
/// would create is not there).
#[test]
fn an_object_reaching_outside_the_runtime_is_refused_before_it_loads() {
    let dir = tempfile::tempdir().unwrap();
    let emu = unchecked_in(dir.path());
    let marker = dir.path().join("marker");
    let touch = format!("if (i == 0) system(\"touch {}\");", marker.display());
    let cases: Vec<(&str, String, &str)> = vec![
        ("system", kernel("extern \"C\" int system(const char*);", &touch), "`system`"),
        (
            "getenv",
            kernel("extern \"C\" char* getenv(const char*);", "  if (getenv(\"KG_NO_SUCH\") != nullptr) return;"),
            "`getenv`",
        ),
        (
            "dlsym",
            kernel(
                "extern \"C\" void* dlsym(void*, const char*);",
                &format!("  typedef int (*F)(const char*);\n  if (i == 0) ((F)dlsym(nullptr, \"system\"))(\"touch {}\");", marker.display()),
            ),
            "`dlsym`",
        ),
        // an asm label names a libc function under another name
        ("asm label", kernel("extern \"C\" int run_it(const char*) asm(\"system\");", &touch.replace("system(", "run_it(")), "`system`"),
        ("constructor", kernel(&constructor_creating(&marker), ""), "constructor"),
        (
            "init_array entry",
            kernel(
                &format!(
                    "{}\n__attribute__((section(\".init_array\"), used)) static void (*kg_entry)() = kg_ctor2;",
                    constructor_creating(&marker).replace("__attribute__((constructor)) ", "").replace("kg_ctor", "kg_ctor2")
                ),
                "",
            ),
            "constructor",
        ),
    ];
    for (what, src, names) in &cases {
        let file = format!("{}.metal", what.replace(' ', "_"));
        match emu.load(src, &file) {
            Err(e @ EmuError::RefusedObject { .. }) => {
                let m = e.to_string();
                assert!(m.contains(&file) && m.contains(names), "{what}: {m}");
            }
            Err(e) => panic!("{what}: refused for another reason: {e}"),
            Ok(_) => panic!("{what}: the object loaded"),
        }
        assert!(!marker.exists(), "{what}: its code ran");
    }
}

/// A branch only g++ takes (the emulator compiles with g++, the Metal check runs clang) is
/// code the check never saw: a conditional on a compiler's own macro is refused by the check,
/// so the system call hidden there never runs.
#[test]
fn a_branch_only_the_emulators_compiler_takes_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let emu = Emulator::new(EmuOptions { cache_dir: Some(dir.path().join("cache")), ..EmuOptions::default() }).unwrap_or_else(|e| panic!("{e}"));
    let marker = dir.path().join("marker");
    let src = kernel(
        "",
        &format!(
            "#ifndef __clang__\n  long r;\n  const char* p = \"{}\";\n  \
             asm volatile(\"syscall\" : \"=a\"(r) : \"a\"(2L), \"D\"(p), \"S\"(0101L), \"d\"(0644L) : \"rcx\", \"r11\", \"memory\");\n#endif",
            marker.display()
        ),
    );
    match emu.load(&src, "hidden.metal") {
        Err(e @ EmuError::InvalidMetal { .. }) => assert!(e.to_string().contains("hidden.metal:5:"), "{e}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(p) => {
            let mut x = DeviceBuffer::zeroed(16);
            let _ = p.dispatch("k", &mut [&mut x], [4, 1, 1], [4, 1, 1]);
            panic!("the hidden branch loaded (and ran: the marker {})", if marker.exists() { "exists" } else { "does not exist" });
        }
    }
    assert!(!marker.exists());
}

/// What the runtime legitimately needs is not refused: math from libm, memcpy, a kernel with
/// helper functions and a struct copy.
#[test]
fn an_object_using_math_and_copies_loads() {
    let dir = tempfile::tempdir().unwrap();
    let emu = unchecked_in(dir.path());
    let src = kernel(
        "struct P { float a[64]; };\nstatic float f(float v) { return metal::exp(v) + metal::tanh(v) + metal::pow(v, 2.5f) + metal::sin(v); }",
        "  P p; for (int j = 0; j < 64; ++j) p.a[j] = f(float(j));\n  P q = p;\n  if (q.a[3] < 0.0f) return;",
    );
    let p = emu.load(&src, "math.metal").unwrap_or_else(|e| panic!("{e}"));
    let mut x = DeviceBuffer::zeroed(16);
    p.dispatch("k", &mut [&mut x], [4, 1, 1], [4, 1, 1]).unwrap();
    assert_eq!(f32s(&x), [1.0; 4]);
}

/// A cache folder others can write (or another user owns) is refused, not used.
#[test]
fn a_cache_folder_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Emulator::new(EmuOptions { cache_dir: Some(open.clone()), ..EmuOptions::default() }).err().expect("a world-writable cache was used");
    assert!(e.to_string().contains("other users") && e.to_string().contains(&open.display().to_string()), "{e}");
    // a subfolder the emulator uses, made writable by others, is refused too
    let cache = dir.path().join("cache");
    drop(Emulator::new(EmuOptions { cache_dir: Some(cache.clone()), ..EmuOptions::default() }).unwrap());
    let msl = cache.join("msl");
    std::fs::set_permissions(&msl, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Emulator::new(EmuOptions { cache_dir: Some(cache.clone()), ..EmuOptions::default() }).err().expect("a world-writable subfolder was used");
    assert!(e.to_string().contains("other users") && e.to_string().contains(&msl.display().to_string()), "{e}");
}

/// A `.so` planted under the name the emulator chose in another cache (for the same source,
/// the same compiler and flags: the name every user would compute) is not loaded: names are
/// keyed by each cache's secret.
#[test]
fn a_planted_object_is_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let src = kernel("", "");
    let first = unchecked_in(&dir.path().join("a")).load(&src, "k.metal").unwrap_or_else(|e| panic!("{e}"));
    let name: PathBuf = first.object_path().file_name().unwrap().into();
    // the victim's cache, with an object that would create a marker when loaded under that name
    let victim = unchecked_in(&dir.path().join("b"));
    let marker = dir.path().join("planted-ran");
    let planted = dir.path().join("planted.cpp");
    std::fs::write(&planted, constructor_creating(&marker).replace("static ", "")).unwrap();
    let cache = dir.path().join("b/cache");
    let out = std::process::Command::new("g++")
        .args(["-shared", "-fPIC", "-o"])
        .arg(cache.join(&name))
        .arg(&planted)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p = victim.load(&src, "k.metal").unwrap_or_else(|e| panic!("{e}"));
    assert!(p.was_compiled(), "the planted object was taken as the compiled kernel");
    assert!(!marker.exists(), "the planted object ran");
    let mut x = DeviceBuffer::zeroed(16);
    p.dispatch("k", &mut [&mut x], [4, 1, 1], [4, 1, 1]).unwrap();
    assert_eq!(f32s(&x), [1.0; 4]);
}
