//! Fuzzing of specs: mutations of the bundled specs (their text, bytes, keys,
//! numbers, geometry names, file and folder names) through the generator in
//! this process (many cases) and through the `kernelgen` binary (fewer).
//! Asserts: no panic; exit codes 0, 1 or 2 only; every exit 2 (and every spec
//! error) names a `file:line:col`; every success is deterministic and fresh
//! by `check`, and its `.metal` files declare one kernel each.
//!
//! Time-bounded: `KERNELGEN_FUZZ_SECS` (default 8, split between the two
//! phases), seeded by `KERNELGEN_FUZZ_SEED` (default: the clock; the seed is
//! printed and a failing case is kept under the temporary directory).
//! `make fuzz` runs it for five minutes.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// kernelgen's one generator, with the picks a mutation needs.
struct Rng(kernelgen_reference::SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const NUMBERS: &[&str] = &[
    "0", "-1", "1", "2", "3", "7", "31", "32", "33", "64", "100", "127", "128", "129", "4096", "65536", "2147483647", "2147483648",
    "4294967296", "9223372036854775807", "-9223372036854775808", "99999999999999999999", "1.5", "1e308", "-0.0", "inf", "nan", "0x10",
    "\"12\"", "true", "[]", "{}",
];
const STRINGS: &[&str] = &["\"q4\"", "\"q8\"", "\"q3\"", "\"bf16\"", "\"f16\"", "\"f32\"", "\"\"", "\"ü\"", "\"expert\"", "\"affine\"", "\"delta\"", "1", "[\"q4\", \"q4\"]"];
const NAMES: &[&str] = &[
    "a", "v2", "v_2", "w", "w_", "w__", "tiny", "glm52", "fn", "type", "self", "mod", "_x", "X", "1a", "é", "a-b", "a.b", "\"q\"", "k\u{202e}",
];
const JUNK: &[&[u8]] = &[
    b"\n", b"[", b"]", b"{", b"}", b"=", b"\"", b"'", b",", b"#", b"\\", b"\xff", b"\xc3", b"\x00", b"\r\n", b"[geometry.x]\n", b"[[axes]]\n",
    b"exclude = [{}]\n", b"family = \"expert\"\n", b"\"\"\"", b"\xe2\x80\xae", b"\t",
];
const FOLDERS: &[&str] = &["sub", "x\nkernel void evil() {}\n#define Z ", "sp\u{e9}cs", "a\\b", "q\"uote", "tab\there", "\u{202e}rtl", " "];
const STEMS: &[&str] = &["fn", "mod", "type", "Self", "self", "gen", "1x", "a-b", "ok_name", "\u{e9}t\u{e9}", "union"];

fn bundled() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(root().join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

/// Byte ranges of the ASCII tokens of `text` for which `is` holds.
fn tokens(text: &[u8], is: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if is(text[i]) {
            let start = i;
            while i < text.len() && is(text[i]) {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

fn lines(text: &[u8]) -> Vec<Vec<u8>> {
    text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
}

/// One to three mutations of `text`.
fn mutate(rng: &mut Rng, mut text: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(3) {
        match rng.below(11) {
            0 | 1 => {
                let nums = tokens(&text, |b| b.is_ascii_digit());
                if let Some(&(a, b)) = nums.get(rng.below(nums.len())).filter(|_| !nums.is_empty()) {
                    text.splice(a..b, rng.pick(NUMBERS).bytes());
                }
            }
            2 => {
                let strings = tokens(&text, |b| b.is_ascii_alphanumeric() || b == b'"');
                let quoted: Vec<_> = strings.into_iter().filter(|(a, b)| text[*a] == b'"' && text[b - 1] == b'"' && b - a > 1).collect();
                if !quoted.is_empty() {
                    let (a, b) = quoted[rng.below(quoted.len())];
                    text.splice(a..b, rng.pick(STRINGS).bytes());
                }
            }
            3 => {
                let mut l = lines(&text);
                if !l.is_empty() {
                    l.remove(rng.below(l.len()));
                }
                text = l.join(&b'\n');
            }
            4 => {
                let mut l = lines(&text);
                let i = rng.below(l.len());
                let copy = l[i].clone();
                l.insert(rng.below(l.len() + 1), copy);
                text = l.join(&b'\n');
            }
            5 => {
                let at = rng.below(text.len() + 1);
                text.splice(at..at, rng.pick(JUNK).iter().copied());
            }
            6 => {
                text.truncate(rng.below(text.len() + 1));
            }
            7 => {
                let words = tokens(&text, |b| b.is_ascii_lowercase() || b == b'_');
                if !words.is_empty() {
                    let (a, b) = words[rng.below(words.len())];
                    let other = words[rng.below(words.len())];
                    let with: Vec<u8> = if rng.below(2) == 0 { text[other.0..other.1].to_vec() } else { rng.pick(NAMES).as_bytes().to_vec() };
                    text.splice(a..b, with);
                }
            }
            8 => {
                // A new geometry, copying the body of the first one.
                let name = rng.pick(NAMES);
                let body = String::from_utf8_lossy(&text).split("[geometry.").nth(1).map(|g| g.split_once('\n').map_or("", |x| x.1).to_string()).unwrap_or_default();
                let body = body.split("\n[").next().unwrap_or("").to_string();
                text.extend(format!("\n[geometry.{name}]\n{body}\n").bytes());
            }
            9 => {
                if !text.is_empty() {
                    let i = rng.below(text.len());
                    text[i] ^= 1 << rng.below(8);
                }
            }
            _ => {
                // An exclusion of a listed value.
                text.extend(format!("\nexclude = [{{ {} = {} }}]\n", rng.pick(&["quant", "dtype", "bits", "masked"]), rng.pick(STRINGS)).bytes());
            }
        }
    }
    text
}

/// One case: a folder of specs (one mutated bundled spec, sometimes with a
/// second, unmutated one), sometimes under a hostile folder, sometimes with
/// a hostile file name.
fn case(rng: &mut Rng, specs: &[(String, Vec<u8>)], dir: &Path) -> PathBuf {
    let specs_dir = dir.join("specs");
    let _ = fs::remove_dir_all(&specs_dir);
    let (stem, text) = rng.pick(specs);
    let folder = if rng.below(6) == 0 { specs_dir.join(rng.pick(FOLDERS)) } else { specs_dir.clone() };
    fs::create_dir_all(&folder).unwrap();
    let name = if rng.below(8) == 0 { rng.pick(STEMS).to_string() } else { stem.clone() };
    fs::write(folder.join(format!("{name}.toml")), mutate(rng, text.clone())).unwrap();
    if rng.below(4) == 0 {
        let (other, text) = rng.pick(specs);
        if other != stem {
            fs::write(specs_dir.join(format!("{other}.toml")), text).unwrap();
        }
    }
    specs_dir
}

/// `file.toml:line:col` somewhere in `text`.
fn has_location(text: &str) -> bool {
    text.match_indices(".toml:").any(|(i, m)| {
        let rest = &text[i + m.len()..];
        let line = rest.bytes().take_while(u8::is_ascii_digit).count();
        line > 0 && rest[line..].starts_with(':') && rest[line + 1..].bytes().next().is_some_and(|b| b.is_ascii_digit())
    })
}

fn budget() -> Duration {
    Duration::from_secs_f64(std::env::var("KERNELGEN_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(8.0))
}

fn seed() -> u64 {
    std::env::var("KERNELGEN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64)
}

/// Keeps a failing case for inspection and fails with its seed.
fn fail(seed: u64, n: usize, dir: &Path, what: String) -> ! {
    let keep = std::env::temp_dir().join(format!("kernelgen-fuzz-{seed}-{n}"));
    let _ = Command::new("cp").arg("-r").arg(dir).arg(&keep).status();
    panic!("fuzz case {n} (KERNELGEN_FUZZ_SEED={seed}, kept in {}): {what}", keep.display());
}

fn one_kernel_each(files: impl Iterator<Item = (String, String)>) -> Result<(), String> {
    for (path, text) in files.filter(|(p, _)| p.ends_with(".metal")) {
        if !text.is_ascii() || !text.starts_with("// Generated by kernelgen from ") {
            return Err(format!("{path}: not ASCII, or no first-line comment"));
        }
        let kernels = text.lines().filter(|l| !l.trim_start().starts_with("//") && (l.contains("kernel void") || l.contains("[[kernel]]"))).count();
        if kernels != 1 {
            return Err(format!("{path}: {kernels} kernels declared outside comments"));
        }
    }
    Ok(())
}

#[test]
fn mutated_specs_never_panic_and_every_error_has_a_location() {
    let seed = seed();
    eprintln!("fuzz: KERNELGEN_FUZZ_SEED={seed}, {:?}", budget());
    let specs = bundled();
    let mut rng = Rng(kernelgen_reference::SplitMix64::new(seed));
    let dir = tempfile::tempdir().unwrap();
    let (mut ok, mut bad) = (0usize, 0usize);

    // Phase 1, in this process: many cases through read_specs and generate.
    let phase = Instant::now();
    let mut n = 0;
    while phase.elapsed() < budget() / 2 || n < 50 {
        n += 1;
        let specs_dir = case(&mut rng, &specs, dir.path());
        let run = || kernelgen_codegen::read_specs(std::slice::from_ref(&specs_dir)).and_then(kernelgen_codegen::generate);
        match catch_unwind(AssertUnwindSafe(run)) {
            Err(_) => fail(seed, n, dir.path(), "the generator panicked".into()),
            Ok(Ok(g)) => {
                ok += 1;
                let again = kernelgen_codegen::read_specs(std::slice::from_ref(&specs_dir)).and_then(kernelgen_codegen::generate);
                if !again.is_ok_and(|a| a.files == g.files) {
                    fail(seed, n, dir.path(), "two generations differ".into());
                }
                if let Err(e) = one_kernel_each(g.files.into_iter()) {
                    fail(seed, n, dir.path(), e);
                }
            }
            Ok(Err(kernelgen_codegen::Error::Spec(d))) => {
                bad += 1;
                for diag in &d.0 {
                    let (line, col) = diag.line_col();
                    if line == 0 || col == 0 || diag.span.start > diag.source.text.len() || !has_location(&diag.headline()) {
                        fail(seed, n, dir.path(), format!("a problem without a location: {}", diag.headline()));
                    }
                }
                let _ = d.render();
            }
            Ok(Err(e)) => fail(seed, n, dir.path(), format!("not a spec error: {e}")),
        }
    }
    eprintln!("fuzz: {n} cases in process ({ok} generated, {bad} rejected)");

    // Phase 2, the binary: exit codes and messages as users see them.
    let phase = Instant::now();
    let mut m = 0;
    while phase.elapsed() < budget() / 2 || m < 10 {
        m += 1;
        let specs_dir = case(&mut rng, &specs, dir.path());
        for out in ["out", "out2"] {
            let _ = fs::remove_dir_all(dir.path().join(out));
        }
        let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir.path()).args(args).output().unwrap();
        let specs_arg = specs_dir.to_str().unwrap();
        let o = run(&["generate", "--specs", specs_arg, "--out", "out"]);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        if stderr.contains("panicked") {
            fail(seed, n + m, dir.path(), format!("panicked: {stderr}"));
        }
        match o.status.code() {
            Some(0) => {
                let check = run(&["check", "--specs", specs_arg, "--out", "out"]);
                if check.status.code() != Some(0) {
                    fail(seed, n + m, dir.path(), format!("check after generate: {}", String::from_utf8_lossy(&check.stdout)));
                }
                let again = run(&["generate", "--specs", specs_arg, "--out", "out2"]);
                if again.status.code() != Some(0) || files(&dir.path().join("out")) != files(&dir.path().join("out2")) {
                    fail(seed, n + m, dir.path(), "two generations differ".into());
                }
            }
            Some(2) if has_location(&stderr) => {}
            Some(2) => fail(seed, n + m, dir.path(), format!("exit 2 without file:line:col: {stderr}")),
            other => fail(seed, n + m, dir.path(), format!("exit {other:?}: {stderr}")),
        }
    }
    eprintln!("fuzz: {m} cases through the binary");
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
