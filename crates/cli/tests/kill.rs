//! `generate` killed at any moment (SIGKILL, nothing to clean up after it)
//! leaves the output directory exactly as the old tree or exactly as the new
//! one, never a mix; what it leaves beside the directory, the next run
//! removes. Concurrent runs serialize.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn generate(dir: &Path, specs: &str, out: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kernelgen"));
    c.current_dir(dir).args(["generate", "--specs", specs, "--out", out]).stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Every entry under `dir`: files with their bytes, links and folders marked.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else if m.is_file() {
                out.insert(rel, fs::read(&p).unwrap());
            } else {
                out.insert(rel, b"<not a file>".to_vec());
            }
        }
    }
    out
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A project with two spec sets whose trees differ in most files: `a` (the
/// bundled specs) and `b` (one spec fewer, one geometry changed, one added).
fn two_spec_sets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for set in ["a", "b"] {
        fs::create_dir(dir.path().join(set)).unwrap();
        for entry in fs::read_dir(root().join("specs")).unwrap() {
            let path = entry.unwrap().path();
            fs::copy(&path, dir.path().join(set).join(path.file_name().unwrap())).unwrap();
        }
    }
    let b = dir.path().join("b");
    fs::remove_file(b.join("delta.toml")).unwrap();
    let experts = fs::read_to_string(b.join("experts.toml")).unwrap();
    fs::write(b.join("experts.toml"), format!("{experts}\n[geometry.killtest]\nhidden = 512\nintermediate = 256\n")).unwrap();
    fs::write(b.join("extra.toml"), "family = \"expert\"\n[axes]\nquant = [\"q4\"]\n[geometry.extra]\nhidden = 256\nintermediate = 128\n").unwrap();
    for (set, out) in [("a", "ref_a"), ("b", "ref_b")] {
        let o = generate(dir.path(), set, out).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    dir
}

/// What may be beside the output directory after a kill: the lock and the
/// temporary trees, which the next run removes.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !["a", "b", "ref_a", "ref_b", "out"].contains(&n.as_str()))
        .collect();
    v.sort();
    v
}

#[test]
fn generate_killed_at_any_moment_leaves_the_old_or_the_new_tree() {
    let dir = two_spec_sets();
    let (ref_a, ref_b) = (tree(&dir.path().join("ref_a")), tree(&dir.path().join("ref_b")));
    assert_ne!(ref_a, ref_b);
    let out = dir.path().join("out");
    assert!(generate(dir.path(), "a", "out").status().unwrap().success());
    // How long a whole switch takes, to spread the kills over it: a run to the end, which
    // must leave exactly the new tree.
    let switch_to = |spec: char| {
        let start = Instant::now();
        assert!(generate(dir.path(), &spec.to_string(), "out").status().unwrap().success());
        assert!(tree(&out) == *if spec == 'a' { &ref_a } else { &ref_b }, "a whole run left another tree");
        start.elapsed()
    };
    let mut whole = switch_to('b');
    let mut current = 'b';
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut rng = Rng(seed);
    let (runs, budget) = (60, Duration::from_secs(10));
    let (mut old, mut new) = (0, 0);
    let began = Instant::now();
    for i in 0..runs {
        if began.elapsed() > budget && i >= 20 {
            break;
        }
        if i > 0 && i % 10 == 0 {
            // The load changes while the binary's other tests run beside this one: measure a
            // whole switch again.
            current = if current == 'a' { 'b' } else { 'a' };
            whole = switch_to(current);
        }
        let next = if current == 'a' { 'b' } else { 'a' };
        let mut child = generate(dir.path(), &next.to_string(), "out").spawn().unwrap();
        // Stratified: each run is killed somewhere in its own slice of [0, 1.2 x whole], the
        // slices taken in an order (7 and 60 are coprime) whose every prefix spreads over the
        // whole window, so a run cut short by the budget still straddles the switch.
        let slice = (i * 7) % runs;
        let at = whole.mul_f64(1.2 * (slice as f64 + rng.unit()) / runs as f64);
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let now = tree(&out);
        let (want_old, want_new) = if next == 'a' { (&ref_b, &ref_a) } else { (&ref_a, &ref_b) };
        if now == *want_new {
            new += 1;
            current = next;
        } else if now == *want_old {
            old += 1;
        } else {
            let only_now: Vec<&String> = now.keys().filter(|k| !want_old.contains_key(*k) && !want_new.contains_key(*k)).take(5).collect();
            panic!("seed {seed}, run {i}, killed after {at:?}: the output is neither the old nor the new tree (e.g. {only_now:?}); beside it: {:?}", leftovers(dir.path()));
        }
        for name in leftovers(dir.path()) {
            assert!(name.starts_with(".out.kernelgen-"), "seed {seed}, run {i}: {name} left beside the output");
        }
    }
    eprintln!("kills: {old} left the old tree, {new} the new one (a whole run takes {whole:?}; seed {seed})");
    assert!(old > 0 && new > 0, "seed {seed}: the kills did not straddle the switch ({old} old, {new} new)");
    // A run to the end cleans up what the killed ones left.
    let target = if current == 'a' { 'b' } else { 'a' };
    let o = generate(dir.path(), &target.to_string(), "out").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(tree(&out), if target == 'a' { ref_a } else { ref_b });
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir.path()).args(["check", "--specs", &target.to_string(), "--out", "out"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn concurrent_generate_runs_serialize() {
    let dir = two_spec_sets();
    let (ref_a, ref_b) = (tree(&dir.path().join("ref_a")), tree(&dir.path().join("ref_b")));
    let children: Vec<_> = (0..6).map(|i| generate(dir.path(), if i % 2 == 0 { "a" } else { "b" }, "out").spawn().unwrap()).collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let now = tree(&dir.path().join("out"));
    assert!(now == ref_a || now == ref_b, "a mix of the two trees");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

/// The steps of a switch, each with the tree a kill there must leave: `generate` (a debug
/// build) kills itself at the step `KERNELGEN_TEST_KILL_AT` names, so each point is hit
/// every run (but `link`: the two spec sets share no file). The marker's three steps are the
/// ones a timed kill finds only sometimes.
const KILL_POINTS: &[(&str, bool)] = &[
    ("lock", false),
    ("mkdir tmp", false),
    ("marker create", false),
    ("marker write", false),
    ("marker rename", false),
    ("mkdir", false),
    ("write", false),
    ("write#20", false),
    ("chmod", false),
    ("exchange", false),
    ("remove", true),
    ("remove#30", true),
    ("rmdir", true),
];

#[test]
fn generate_killed_at_each_step_leaves_the_old_or_the_new_tree_and_the_next_run_cleans_up() {
    use std::os::unix::process::ExitStatusExt;
    let dir = two_spec_sets();
    let refs = [tree(&dir.path().join("ref_a")), tree(&dir.path().join("ref_b"))];
    let out = dir.path().join("out");
    assert!(generate(dir.path(), "a", "out").status().unwrap().success());
    let mut current = 0;
    for (point, new) in KILL_POINTS {
        let next = 1 - current;
        let spec = ["a", "b"][next];
        let o = generate(dir.path(), spec, "out").env("KERNELGEN_TEST_KILL_AT", point).output().unwrap();
        assert_eq!(o.status.signal(), Some(9), "{point}: not killed there: {o:?}");
        let want = &refs[if *new { next } else { current }];
        assert!(tree(&out) == *want, "{point}: the output is not the {} tree; beside it: {:?}", if *new { "new" } else { "old" }, leftovers(dir.path()));
        for name in leftovers(dir.path()) {
            assert!(name.starts_with(".out.kernelgen-"), "{point}: {name} left beside the output");
        }
        // The next run finishes the switch and removes what the killed one left, without a word.
        let o = generate(dir.path(), spec, "out").output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && stderr.is_empty(), "{point}: {stderr}");
        assert!(tree(&out) == refs[next], "{point}: the next run left another tree");
        assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "{point}: the next run left these beside the output");
        current = next;
    }
}
