//! `kernelgen diff` end to end, on scratch git repositories: a template
//! comment edit (comment-only), a geometry added, a buffer doubled, a
//! threadgroup memory near the limit, a rename, `--against DIR`, exit codes,
//! and Markdown whose tables and fences are well formed. Also `kernelgen
//! list`'s cost columns and portable-limit warning.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kernelgen(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kernelgen")).current_dir(dir).args(args).output().expect("kernelgen runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=kernelgen-test", "-c", "user.email=test@kernelgen.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {args:?}: {}", text(&o));
}

/// The gated RMS norm family copied as the project's own family `rmsfix`
/// (so a test can edit its template), one spec of it, and the bundled affine
/// spec's family through a spec of our own.
const RMS_SPEC: &str = "family = \"rmsfix\"\n[axes]\ndtype = [\"bf16\"]\n\n[geometry.head128]\nD = 128\neps = 1e-6\n\n[geometry.odd200]\nD = 200\neps = 1e-5\n";
const AFFINE_SPEC: &str = "family = \"affine\"\n[axes]\nbits = [4]\ndtype = [\"bf16\"]\n\n[geometry.small]\nK = 512\nN = 128\n";

/// A scratch repository with `specs/`, `families/` and a committed `generated/`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    fs::create_dir_all(p.join("specs")).unwrap();
    fs::create_dir_all(p.join("families")).unwrap();
    let family = fs::read_to_string(root().join("crates/codegen/families/gated_rms_norm.toml")).unwrap();
    fs::write(p.join("families/rmsfix.toml"), family.replace("family = \"gated_rms_norm\"", "family = \"rmsfix\"")).unwrap();
    fs::copy(root().join("crates/codegen/families/gated_rms_norm.metal.tera"), p.join("families/rmsfix.metal.tera")).unwrap();
    fs::write(p.join("specs/rms.toml"), RMS_SPEC).unwrap();
    fs::write(p.join("specs/affine.toml"), AFFINE_SPEC).unwrap();
    let o = kernelgen(p, &["generate"]);
    assert!(o.status.success(), "{}", text(&o));
    git(p, &["init", "-q"]);
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "base"]);
    dir
}

fn edit(path: &Path, from: &str, to: &str) {
    let t = fs::read_to_string(path).unwrap();
    assert!(t.contains(from), "{} has no `{from}`", path.display());
    fs::write(path, t.replacen(from, to, 1)).unwrap();
}

fn diff(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    let o = kernelgen(dir, &all);
    (o.status.code(), text(&o))
}

/// A section of the text output: from its title line to the next blank line.
fn section<'a>(out: &'a str, title: &str) -> &'a str {
    let start = out.find(&format!("\n{title}")).unwrap_or_else(|| panic!("no section `{title}` in:\n{out}"));
    let rest = &out[start + 1..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

#[test]
fn nothing_changed_exits_0() {
    let dir = project();
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no changes"), "{out}");
    let (code, out) = diff(dir.path(), &["--format", "markdown"]);
    assert_eq!(code, Some(0), "{out}");
    check_markdown(&out);
}

#[test]
fn a_template_comment_edit_is_comment_only() {
    let dir = project();
    edit(&dir.path().join("families/rmsfix.metal.tera"), "// {{ kernel }}: gated RMS norm over rows", "// {{ kernel }}: the gated RMS norm over rows");
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("2 changed (0 code, 2 comments or whitespace only), 0 added, 0 removed, 0 renamed, 1 unchanged"), "{out}");
    let comments = section(&out, "Comments or whitespace only");
    assert!(comments.contains("head128_rmsfix_bf16") && comments.contains("odd200_rmsfix_bf16"), "{out}");
    assert!(!out.contains("MSL diff") && !out.contains("Resource and contract changes"), "{out}");
    // The launcher sources hold the .metal text: they changed too, and say so.
    assert!(out.contains("changed: rust/rms.rs"), "{out}");
    let (_, md) = diff(dir.path(), &["--format", "markdown"]);
    check_markdown(&md);
    assert!(md.contains("### Comments or whitespace only (2)"), "{md}");
}

#[test]
fn a_template_code_edit_is_one_section_for_every_geometry() {
    let dir = project();
    edit(&dir.path().join("families/rmsfix.metal.tera"), "acc += value * value;", "acc = metal::fma(value, value, acc);");
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("2 changed (2 code, 0 comments"), "{out}");
    assert!(out.contains("MSL diff: 2 kernels whose code changed, 1 distinct edit"), "{out}");
    assert!(out.contains("=== head128_rmsfix_bf16 and 1 more kernel with the same edit ==="), "{out}");
    assert!(out.contains("-      acc += value * value;\n+      acc = metal::fma(value, value, acc);"), "{out}");
    assert!(out.contains("--- a/generated/metal/rms/head128_rmsfix_bf16.metal (") && out.contains("+++ b/generated/metal/rms/head128_rmsfix_bf16.metal (the specs now)"), "{out}");
    let (_, md) = diff(dir.path(), &["--format", "markdown"]);
    check_markdown(&md);
    assert!(md.contains("```diff\n--- a/generated/metal/rms/head128_rmsfix_bf16.metal"), "{md}");
    assert!(md.contains("Kernels: `head128_rmsfix_bf16`, `odd200_rmsfix_bf16`"), "{md}");
}

/// A CUDA template given to a family: each kernel gains a `.cu` (a contract row and a diff
/// against /dev/null, in the CUDA section); once committed, an edit of it is a CUDA code change
/// grouped as a Metal one is. `list` says which bodies each kernel has.
#[test]
fn a_cuda_body_added_then_edited_is_reported_like_a_metal_one() {
    let dir = project();
    let bodies = |kernel: &str| {
        let o = kernelgen(dir.path(), &["list"]);
        let t = text(&o);
        assert!(o.status.success() && t.lines().next().is_some_and(|h| h.contains("BODIES")), "{t}");
        t.lines().find(|l| l.starts_with(&format!("{kernel} "))).unwrap_or_else(|| panic!("{kernel}: {t}")).split_whitespace().nth(2).unwrap().to_string()
    };
    assert_eq!(bodies("head128_rmsfix_bf16"), "metal");
    let cuda = dir.path().join("families/rmsfix.cuda.tera");
    fs::write(&cuda, "  // {{ kernel }}: one block per row of {{ D }}\n  out[blockIdx.x] = x[blockIdx.x];\n").unwrap();
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("2 changed (2 code, 0 comments or whitespace only), 0 added"), "{out}");
    let rows = section(&out, "Resource and contract changes");
    assert!(rows.contains("head128_rmsfix_bf16") && rows.contains("CUDA body") && rows.contains("none (Metal only)  ->  present"), "{rows}");
    assert!(out.contains("CUDA diff: 2 kernels whose code changed, 2 distinct edits") && !out.contains("MSL diff"), "{out}");
    assert!(out.contains("--- /dev/null\n+++ b/generated/cuda/rms/head128_rmsfix_bf16.cu (the specs now)"), "{out}");
    assert!(!out.contains("added: cuda/"), "a .cu is a kernel's, not another file: {out}");
    let o = kernelgen(dir.path(), &["generate"]);
    assert!(o.status.success(), "{}", text(&o));
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "cuda"]);
    edit(&cuda, "out[blockIdx.x] = x[blockIdx.x];", "out[blockIdx.x] = x[blockIdx.x] * weight[0];");
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("CUDA diff: 2 kernels whose code changed, 1 distinct edit") && !out.contains("MSL diff"), "{out}");
    assert!(out.contains("=== head128_rmsfix_bf16 and 1 more kernel with the same edit ==="), "{out}");
    assert!(out.contains("-  out[blockIdx.x] = x[blockIdx.x];\n+  out[blockIdx.x] = x[blockIdx.x] * weight[0];"), "{out}");
    assert!(out.contains("--- a/generated/cuda/rms/head128_rmsfix_bf16.cu (HEAD ("), "{out}");
    let (_, md) = diff(dir.path(), &["--format", "markdown"]);
    check_markdown(&md);
    assert!(md.contains("### CUDA diff: 2 kernels whose code changed, 1 distinct edit") && md.contains("```diff\n--- a/generated/cuda/rms/head128_rmsfix_bf16.cu"), "{md}");
    assert_eq!(bodies("head128_rmsfix_bf16"), "metal,cuda");
    assert_eq!(bodies("small_affine_q4_bf16"), "metal,cuda", "the bundled affine family has a CUDA body");
}

#[test]
fn a_geometry_added_is_listed_with_its_cost() {
    let dir = project();
    fs::write(dir.path().join("specs/rms.toml"), format!("{RMS_SPEC}\n[geometry.wide]\nD = 4096\neps = 1e-6\n")).unwrap();
    let (code, out) = diff(dir.path(), &["--size", "R=8"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("0 changed (0 code, 0 comments or whitespace only), 1 added, 0 removed, 0 renamed, 3 unchanged"), "{out}");
    let added = section(&out, "Added (1)");
    // x and gate (8 x 4096 bf16 each) and the weight read, out written: 204,800 B at R = 8.
    assert!(added.contains("wide_rmsfix_bf16") && added.contains("1024") && added.contains("(204,800 B)"), "{added}");
    assert!(added.contains("ROOFLINE ON M2-MAX") && added.contains("512 ns (memory; no flops)"), "{added}");
    // 1024 threads: the portable-limit warning, new.
    let warnings = section(&out, "Warnings");
    assert!(warnings.contains("wide_rmsfix_bf16: 1024 threads per threadgroup, above the portable limit of 768") && warnings.contains("(new)"), "{warnings}");
    assert!(out.contains("Costs per launch at R=8, every other run-time size = 1"), "{out}");
    let (_, md) = diff(dir.path(), &["--format", "markdown", "--gpu", "m4-pro"]);
    check_markdown(&md);
    assert!(md.contains("### Added (1)") && md.contains("| `wide_rmsfix_bf16` | rmsfix |") && md.contains("roofline on m4-pro"), "{md}");
}

#[test]
fn a_doubled_buffer_shows_the_shapes_and_the_bytes() {
    let dir = project();
    edit(&dir.path().join("specs/affine.toml"), "N = 128", "N = 256");
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    // The affine kernel's code does not depend on N (the grid does): only its comments change.
    assert!(out.contains("1 changed (0 code, 1 comments or whitespace only)"), "{out}");
    assert!(!out.contains("MSL diff"), "{out}");
    let changes = section(&out, "Resource and contract changes");
    let row = |what: &str| changes.lines().find(|l| l.contains("small_affine_q4_bf16") && l.contains(what)).unwrap_or_else(|| panic!("no `{what}` row:\n{changes}"));
    assert!(row("input `w`").contains("u32[128, 64], 8,192 elements") && row("input `w`").contains("u32[256, 64], 16,384 elements (x2.00)"), "{changes}");
    assert!(row("output `y`").contains("(x2.00)"), "{changes}");
    // x (512 bf16), w (N x 64 u32), scales and biases (N x 8 bf16 each) read, y (N bf16) written.
    assert!(row("bytes per launch").contains("38,144 B (read 37,888, written 256)") && row("bytes per launch").contains("75,264 B (read 74,752, written 512) (x1.97)"), "{changes}");
    assert!(row("roofline on m2-max").contains("->"), "{changes}");
    assert!(row("grid").contains("32, 32, 1") && row("grid").contains("32, 64, 1"), "{changes}");
    // Constant formulas are the values above, not repeated.
    assert!(!changes.contains("(formula)"), "{changes}");
    let (_, md) = diff(dir.path(), &["--format", "markdown"]);
    check_markdown(&md);
    assert!(md.contains("| `small_affine_q4_bf16` | input `w` | u32\\[128, 64\\], 8,192 elements | u32\\[256, 64\\], 16,384 elements (x2.00) |"), "{md}");
}

#[test]
fn threadgroup_memory_near_the_limit_warns() {
    let dir = project();
    // K = 7680 stages 7680 x 4.25 = 32,640 bytes of the 32,768.
    fs::write(dir.path().join("specs/affine.toml"), format!("{AFFINE_SPEC}\n[geometry.k7680]\nK = 7680\nN = 128\n")).unwrap();
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    let warnings = section(&out, "Warnings");
    assert!(
        warnings.contains("k7680_affine_q4_bf16: threadgroup memory 32,640 B is within 1,024 B of the 32,768 B limit (128 B headroom) (new)"),
        "{warnings}"
    );
    assert!(section(&out, "Added (1)").contains("32,640 B (128 B headroom)"), "{out}");
    let (_, md) = diff(dir.path(), &["--format", "markdown"]);
    check_markdown(&md);
    assert!(md.contains("- `k7680_affine_q4_bf16`: threadgroup memory 32,640 B is within 1,024 B") && md.contains("**(new)**"), "{md}");
}

#[test]
fn a_renamed_geometry_is_a_rename() {
    let dir = project();
    edit(&dir.path().join("specs/rms.toml"), "[geometry.head128]", "[geometry.h128]");
    let (code, out) = diff(dir.path(), &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("0 added, 0 removed, 1 renamed"), "{out}");
    assert!(section(&out, "Renamed").contains("head128_rmsfix_bf16  ->  h128_rmsfix_bf16"), "{out}");
    // The geometry field of the manifest says so too.
    assert!(out.contains("geometry") && out.contains("\"head128\"") && out.contains("\"h128\""), "{out}");
    check_markdown(&diff(dir.path(), &["--format", "markdown"]).1);
}

#[test]
fn revisions_and_folders() {
    let dir = project();
    let p = dir.path();
    // A committed change: HEAD~1 is the old side, HEAD is now.
    edit(&p.join("specs/affine.toml"), "N = 128", "N = 256");
    assert!(kernelgen(p, &["generate"]).status.success());
    git(p, &["commit", "-qam", "wider"]);
    assert_eq!(diff(p, &[]).0, Some(0));
    let (code, out) = diff(p, &["HEAD~1"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("kernelgen diff: HEAD~1 (") && out.contains("1 changed (0 code, 1 comments"), "{out}");
    // From a subdirectory, with --specs and --out pointing up.
    fs::create_dir(p.join("sub")).unwrap();
    let (code, out) = diff(&p.join("sub"), &["HEAD~1", "--specs", "../specs", "--out", "../generated"]);
    assert_eq!(code, Some(1), "{out}");
    // --against a folder: a copy of the old tree.
    let old = tempfile::tempdir().unwrap();
    git(p, &["worktree", "add", "-q", old.path().join("wt").to_str().unwrap(), "HEAD~1"]);
    let (code, out) = diff(p, &["--against", old.path().join("wt/generated").to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("1 changed (0 code, 1 comments"), "{out}");
    let (code, out) = diff(p, &["--against", p.join("generated").to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    // Errors are exit 2, with a message.
    for (args, says) in [
        (&["no-such-rev"][..], "is not a commit"),
        (&["--against", "/no/such/dir"], "not a directory"),
        (&["HEAD", "--against", "x"], "cannot be used with"),
        (&["--gpu", "m9"], "unknown GPU `m9`"),
        (&["--size", "M"], "expected NAME=VALUE"),
        (&["--format", "html"], "invalid value"),
    ] {
        let (code, out) = diff(p, args);
        assert_eq!(code, Some(2), "{args:?}: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
    }
    // A revision without a generated tree.
    git(p, &["checkout", "-q", "--orphan", "empty"]);
    git(p, &["rm", "-rqf", "--cached", "."]);
    git(p, &["commit", "-q", "--allow-empty", "-m", "empty"]);
    let (code, out) = diff(p, &["empty"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("has no files under generated/"), "{out}");
    // Outside a repository.
    let bare = tempfile::tempdir().unwrap();
    fs::create_dir(bare.path().join("specs")).unwrap();
    fs::write(bare.path().join("specs/affine.toml"), AFFINE_SPEC).unwrap();
    let (code, out) = diff(bare.path(), &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--against DIR"), "{out}");
}

#[test]
fn an_old_manifest_without_cost_is_read() {
    let dir = project();
    let p = dir.path();
    // Take `cost` out of the committed manifest, as before the cost model.
    let manifest = p.join("generated/manifest.json");
    let mut json: serde_json::Value = serde_json::from_str(&fs::read_to_string(&manifest).unwrap()).unwrap();
    for k in json["kernels"].as_array_mut().unwrap() {
        k.as_object_mut().unwrap().remove("cost");
    }
    fs::write(&manifest, serde_json::to_string_pretty(&json).unwrap() + "\n").unwrap();
    let (code, out) = diff(p, &["--against", p.join("generated").to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    // Bytes derived from the buffers agree with the cost model: no kernel changed.
    assert!(out.contains("0 changed") && out.contains("3 unchanged"), "{out}");
    assert!(out.contains("manifest has no `cost` (it predates the cost model)"), "{out}");
    assert!(out.contains("manifest.json differs only in its format"), "{out}");
}

#[test]
fn list_shows_costs_and_the_portable_limit_warning() {
    let o = kernelgen(&root(), &["list"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("BYTES/LAUNCH") && t.contains("ROOFLINE M2-MAX"), "{t}");
    assert!(t.contains("warning: wide4096_gated_rms_norm_bf16: 1024 threads per threadgroup, above the portable limit of 768"), "{t}");
    let row = t.lines().find(|l| l.starts_with("glm52_expert_q4_bf16_r4_gate_up ")).unwrap();
    // 12288*1 + 12599296 read, 4096 written, at M = 1.
    assert!(row.contains("12.6 MB"), "{row}");
    let o = kernelgen(&root(), &["list", "--size", "M=1000", "--gpu", "m1"]);
    let t = text(&o);
    let row = t.lines().find(|l| l.starts_with("glm52_expert_q4_bf16_r4_gate_up ")).unwrap();
    // 12288*1000 + 12599296 + 4096*1000 = 28,983,296 B; 50.3 GFLOP on 2.6 TFLOPS.
    assert!(row.contains("29.0 MB") && row.contains("19.4 ms compute"), "{row}");
    let o = kernelgen(&root(), &["list", "--gpu", "help"]);
    assert!(o.status.success() && text(&o).contains("m4-max") && text(&o).contains("apple.com/newsroom"), "{}", text(&o));
}

/// Markdown a pull-request comment renders as meant: every table has a
/// header, a separator and rows of the same number of cells (no unescaped
/// `|` inside a cell), starts after a blank line; fences and `<details>`
/// are balanced; headings have text.
fn check_markdown(md: &str) {
    let mut fence: Option<String> = None;
    let mut table_cells: Option<usize> = None;
    let mut table_row = 0;
    let mut prev = "";
    let mut details = 0i32;
    for line in md.lines() {
        if let Some(f) = &fence {
            if line.trim_end() == f {
                fence = None;
            }
            prev = line;
            continue;
        }
        if line.starts_with("```") {
            let ticks = line.chars().take_while(|c| *c == '`').count();
            fence = Some("`".repeat(ticks));
            table_cells = None;
            prev = line;
            continue;
        }
        if line.starts_with('|') {
            assert!(line.ends_with('|'), "table row without a closing pipe: {line}");
            let cells = count_cells(line);
            match table_cells {
                None => {
                    assert!(prev.trim().is_empty(), "a table must follow a blank line: {prev:?} then {line}");
                    table_cells = Some(cells);
                    table_row = 1;
                }
                Some(n) => {
                    assert_eq!(cells, n, "row with {cells} cells in a table of {n}: {line}");
                    table_row += 1;
                    if table_row == 2 {
                        let ok = line.split('|').filter(|c| !c.is_empty()).all(|c| matches!(c.trim(), "---" | "---:" | ":---" | ":---:"));
                        assert!(ok, "second table line is not a separator: {line}");
                    }
                }
            }
        } else {
            if table_cells.is_some() {
                assert!(table_row >= 2, "a table of one line: {prev}");
            }
            table_cells = None;
        }
        if line.starts_with('#') {
            let text = line.trim_start_matches('#');
            assert!(text.starts_with(' ') && text.trim().len() > 1, "bad heading: {line}");
        }
        details += line.matches("<details>").count() as i32 - line.matches("</details>").count() as i32;
        prev = line;
    }
    assert!(fence.is_none(), "an unclosed code fence:\n{md}");
    assert_eq!(details, 0, "unbalanced <details>:\n{md}");
}

/// Cells of a table row: `|` separators that are not escaped (`\|`).
fn count_cells(line: &str) -> usize {
    let mut n = 0;
    let mut escaped = false;
    for c in line.chars() {
        if c == '\\' && !escaped {
            escaped = true;
            continue;
        }
        if c == '|' && !escaped {
            n += 1;
        }
        escaped = false;
    }
    n - 1
}
