//! `kernelgen verify` of a user's family with the threadgroup-memory bugs run orders do not
//! show (tests/rowsum: row sums through a threadgroup array reused every round), each caught
//! without `--sanitize`, with and without a reference, naming the array and the lines.

use crate::verify_families::{copy_project, verify};
use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> tempfile::TempDir {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/rowsum");
    copy_project(&fixture, &["families", "families/refs", "kernels"])
}

fn failure<'a>(text: &'a str, bug: &str) -> &'a str {
    let tag = format!("FAILED w256_rowsum_{bug}: ");
    text.lines().find_map(|l| l.strip_prefix(tag.as_str())).unwrap_or_else(|| panic!("no failure for `{bug}`:\n{text}"))
}

/// `path:line` of the first line of kernel `bug`'s generated `.metal` that contains `marker`.
fn line(dir: &Path, bug: &str, marker: &str) -> String {
    let path = format!("generated/metal/rowsum/w256_rowsum_{bug}.metal");
    let text = std::fs::read_to_string(dir.join(&path)).unwrap();
    let n = text.lines().position(|l| l.contains(marker)).unwrap_or_else(|| panic!("{path} has no `{marker}`")) + 1;
    format!("{path}:{n}")
}

#[test]
fn each_threadgroup_memory_bug_is_caught_with_and_without_a_reference() {
    let dir = project();
    let generate = Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir.path()).args(["generate", "--specs", "kernels"]).output().unwrap();
    assert!(generate.status.success(), "{}", String::from_utf8_lossy(&generate.stderr));
    let declared = |bug: &str| line(dir.path(), bug, "threadgroup float partial[2];");
    for args in [&[][..], &["--no-reference"][..]] {
        let (code, text) = verify(dir.path(), args);
        assert_eq!(code, 1, "{args:?}: {text}");
        assert!(text.contains("verify: 1 passed, 3 failed"), "{args:?}: {text}");

        // (a) a read one past the array's end (the check sees it before it happens)
        let past = failure(&text, "past_end");
        let read = line(dir.path(), "past_end", "total += partial[s];");
        assert!(past.contains(&format!("faulted at {read}: invalid read")), "{past}");
        assert!(past.contains(&format!("byte 8 of threadgroup array `partial`, past its end (8 bytes, declared at {})", declared("past_end"))), "{past}");

        // (b) a write-after-read race, one barrier per round: the collectives between the
        // read and the next round's write hide it in every run order
        let war = failure(&text, "war_race");
        let (read, write) = (line(dir.path(), "war_race", "partial[0] + partial[1]"), line(dir.path(), "war_race", "partial[sg] = v;"));
        assert!(war.contains(&format!("data race on element 0 of threadgroup array `partial` (declared at {})", declared("war_race"))), "{war}");
        assert!(war.contains(&format!("reads it at {read}, then thread (0, 0, 0) writes it at {write}")), "{war}");

        // (c) a missing barrier: a race naming the array and both lines
        let missing = failure(&text, "missing_barrier");
        let (read, write) = (line(dir.path(), "missing_barrier", "partial[0] + partial[1]"), line(dir.path(), "missing_barrier", "partial[sg] = v;"));
        assert!(missing.contains("data race on element 0 of threadgroup array `partial`"), "{missing}");
        assert!(missing.contains(&format!("writes it at {write}, then thread (1, 0, 0) reads it at {read}")), "{missing}");
    }
}

/// (d) `threadgroup_memory` other than what the template's arrays take: an error at the
/// family file's line (or at its `[[kernel]]` table when the key is left out), with both numbers.
#[test]
fn a_wrong_threadgroup_memory_is_an_error_at_the_family_file() {
    for (declared, at) in [(Some(0), "families/rowsum.toml:23:22"), (Some(416), "families/rowsum.toml:23:22"), (None, "families/rowsum.toml:19:1")] {
        let dir = project();
        let family = dir.path().join("families/rowsum.toml");
        let text = std::fs::read_to_string(&family).unwrap();
        let replaced = match declared {
            Some(bytes) => text.replace("threadgroup_memory = 8\n", &format!("threadgroup_memory = {bytes}\n")),
            None => text.replace("threadgroup_memory = 8\n", ""),
        };
        assert_ne!(replaced, text);
        std::fs::write(&family, replaced).unwrap();
        for args in [&["--filter", "*_none"][..], &["--filter", "*_none", "--no-reference"][..]] {
            let (code, text) = verify(dir.path(), args);
            assert_eq!(code, 1, "{args:?}: {text}");
            let f = failure(&text, "none");
            let declared = declared.unwrap_or(0);
            assert!(f.starts_with(&format!("{at}: threadgroup_memory: the family declares {declared} bytes of threadgroup memory, but the kernel's threadgroup arrays take 8 bytes")), "{f}");
            assert!(f.contains("(`partial`, 8 bytes, declared at generated/metal/rowsum/w256_rowsum_none.metal:"), "names the array: {f}");
        }
    }
}
