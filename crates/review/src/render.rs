//! A review as text (a terminal) or as Markdown (a pull-request comment:
//! headings, tables with escaped cells, one ```diff block per edit).

use kernelgen_contract::limits::MAX_THREADGROUP_MEMORY_BYTES;
use super::compare::{CodeChange, DiffGroup, FileChange, Review};
use super::udiff;
use super::view::KernelView;
use super::{group, human_bytes};

/// Markdown diff lines shown per section; the rest is left to a local run.
pub const MARKDOWN_DIFF_LINES: usize = 400;
/// Past this much Markdown, further sections list their kernels without a
/// diff (GitHub refuses comments over 65,536 characters).
pub const MARKDOWN_BUDGET: usize = 50_000;

fn summary(r: &Review) -> String {
    let (code, comments) = r.counts();
    let total = r.added.len() + r.renamed.len() + r.changed.len() + r.unchanged;
    format!(
        "{total} kernels: {} changed ({code} code, {comments} comments or whitespace only), {} added, {} removed, {} renamed, {} unchanged",
        r.changed.len(),
        r.added.len(),
        r.removed.len(),
        r.renamed.len(),
        r.unchanged
    )
}

fn conditions(r: &Review) -> String {
    let given: Vec<String> = r.sizes.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let sizes = if given.is_empty() { "every run-time size = 1".to_string() } else { format!("{}, every other run-time size = 1", given.join(", ")) };
    format!("Costs per launch at {sizes}; roofline on {}.", r.gpu.summary())
}

fn added_row(k: &KernelView, r: &Review) -> [String; 6] {
    let l = k.launch(&r.sizes);
    let bytes = l.bytes().map(|b| format!("{} ({} B)", human_bytes(b), group(b))).unwrap_or_else(|| "?".into());
    let roof = l.bytes().map(|b| r.gpu.roofline(b, l.flops).describe()).unwrap_or_else(|| "?".into());
    [
        k.name.clone(),
        k.family.clone(),
        k.threads().to_string(),
        format!("{} B ({} B headroom)", group(k.threadgroup_memory), group(MAX_THREADGROUP_MEMORY_BYTES.saturating_sub(k.threadgroup_memory))),
        bytes,
        roof,
    ]
}

fn file_change(c: FileChange) -> &'static str {
    match c {
        FileChange::Added => "added",
        FileChange::Removed => "removed",
        FileChange::Changed => "changed",
    }
}

/// The diff sections, one per language: its name, how many kernels' code in it changed, and
/// its groups.
fn languages(r: &Review) -> [(&'static str, usize, &[DiffGroup]); 2] {
    let changed = |code: fn(&crate::compare::Pair) -> CodeChange| r.changed.iter().filter(|p| code(p) == CodeChange::Code).count();
    [("MSL", changed(|p| p.metal_code), &r.groups), ("CUDA", changed(|p| p.cuda_code), &r.cuda_groups)]
}

fn group_title(g: &DiffGroup) -> (String, String) {
    let first = g.names[0].clone();
    let more = match g.names.len() {
        1 => String::new(),
        2 => " and 1 more kernel with the same edit".into(),
        n => format!(" and {} more kernels with the same edit", n - 1),
    };
    (first, more)
}

/// Aligned columns, two spaces apart, the last column unpadded.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; n];
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (i, c) in row.iter().enumerate() {
            line.push_str(c);
            if i + 1 < row.len() {
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Names, wrapped at about 100 columns.
fn wrapped(names: &[String], indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for (i, n) in names.iter().enumerate() {
        let piece = if i + 1 < names.len() { format!("{n},") } else { n.clone() };
        if !line.is_empty() && line.len() + piece.len() + 1 > 100 {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&piece);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The review for a terminal.
pub fn text(r: &Review) -> String {
    let mut s = format!("kernelgen diff: {} -> {}\n", r.old_label, r.new_label);
    if r.identical {
        s.push_str(&format!("no changes: {} is exactly what the specs generate ({} kernels)\n", r.old_label, r.unchanged));
        return s;
    }
    s.push_str(&summary(r));
    s.push('\n');
    s.push_str(&conditions(r));
    s.push('\n');
    if !r.warnings.is_empty() {
        s.push_str("\nWarnings\n");
        for w in &r.warnings {
            s.push_str(&format!("  {}: {}{}\n", w.kernel, w.message, if w.before { " (already so before)" } else { " (new)" }));
        }
    }
    if !r.added.is_empty() {
        s.push_str(&format!("\nAdded ({})\n", r.added.len()));
        let mut rows = vec![["KERNEL", "FAMILY", "THREADS/TG", "TG MEMORY", "BYTES/LAUNCH", &format!("ROOFLINE ON {}", r.gpu.key.to_uppercase())].map(String::from).to_vec()];
        rows.extend(r.added.iter().map(|k| added_row(k, r).to_vec()));
        s.push_str(&columns(&rows));
    }
    if !r.removed.is_empty() {
        s.push_str(&format!("\nRemoved ({})\n", r.removed.len()));
        s.push_str(&columns(&r.removed.iter().map(|k| vec![k.name.clone(), format!("({})", k.family)]).collect::<Vec<_>>()));
    }
    if !r.renamed.is_empty() {
        s.push_str(&format!("\nRenamed: the same code under a new name ({})\n", r.renamed.len()));
        s.push_str(&columns(&r.renamed.iter().map(|p| vec![p.old.name.clone(), "->".into(), p.new.name.clone()]).collect::<Vec<_>>()));
    }
    let comments: Vec<String> = r.changed.iter().filter(|p| p.code == CodeChange::CommentsOnly).map(|p| p.new.name.clone()).collect();
    if !comments.is_empty() {
        s.push_str(&format!("\nComments or whitespace only, the code is the same ({})\n", comments.len()));
        s.push_str(&wrapped(&comments, "  "));
    }
    let changes: Vec<Vec<String>> =
        r.resource_changes().flat_map(|p| p.changes.iter().map(move |c| vec![p.new.name.clone(), c.what.clone(), c.before.clone(), "->".into(), c.after.clone()])).collect();
    if !changes.is_empty() {
        s.push_str("\nResource and contract changes\n");
        let mut rows = vec![["KERNEL", "WHAT", "BEFORE", "", "AFTER"].map(String::from).to_vec()];
        rows.extend(changes);
        s.push_str(&columns(&rows));
    }
    if !r.other_files.is_empty() {
        s.push_str("\nOther generated files\n");
        for (p, c) in &r.other_files {
            s.push_str(&format!("  {}: {p}\n", file_change(*c)));
        }
    }
    if r.manifest_format_changed {
        s.push_str("\nmanifest.json differs only in its format: no kernel's contract, resources or cost read differently\n");
    }
    if r.old_without_cost {
        s.push_str(&format!("{}'s manifest has no `cost` (it predates the cost model): its bytes per launch are derived from its buffers, its flops are unknown\n", r.old_label));
    }
    for (language, code, groups) in languages(r) {
        if groups.is_empty() {
            continue;
        }
        s.push_str(&format!("\n{language} diff: {code} kernel{} whose code changed, {} distinct edit{}\n", plural(code), groups.len(), plural(groups.len())));
        for g in groups {
            let (first, more) = group_title(g);
            s.push_str(&format!("\n=== {first}{more} ===\n"));
            if g.names.len() > 1 {
                s.push_str("kernels:\n");
                s.push_str(&wrapped(&g.names, "  "));
            }
            s.push_str(&udiff::unified(&g.old_path, &g.new_path, &g.hunks));
        }
    }
    s
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Text with Markdown's inline syntax escaped (and `|`, for table cells).
pub fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("<br>"),
            _ => out.push(c),
        }
    }
    out
}

/// Text whose `quoted` parts are code: those become code spans, the rest is
/// escaped (the review's messages quote names that way).
pub fn md_inline(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    if parts.len() % 2 == 0 {
        // An odd number of backticks: no pairing to trust.
        return md_escape(s);
    }
    parts.iter().enumerate().map(|(i, p)| if i % 2 == 1 { md_code(p) } else { md_escape(p) }).collect()
}

/// A code span that holds any text: delimited by one more backtick than its
/// longest run, `|` escaped for table cells (GitHub removes the backslash
/// before rendering the span).
pub fn md_code(s: &str) -> String {
    let longest = longest_run(s, '`');
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{}{pad}{fence}", s.replace('|', "\\|").replace('\n', " "))
}

fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for c in s.chars() {
        run = if c == ch { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

fn md_table(header: &[&str], align_right: &[bool], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n", header.join(" | "));
    s.push('|');
    for (i, _) in header.iter().enumerate() {
        s.push_str(if align_right.get(i).copied().unwrap_or(false) { " ---: |" } else { " --- |" });
    }
    s.push('\n');
    for row in rows {
        s.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    s
}

/// The review as a pull-request comment.
pub fn markdown(r: &Review) -> String {
    let mut s = format!("## kernelgen diff: {} → {}\n\n", md_code(&r.old_label), md_escape(&r.new_label));
    if r.identical {
        s.push_str(&format!("No changes: {} is exactly what the specs generate ({} kernels).\n", md_code(&r.old_label), r.unchanged));
        return s;
    }
    let (code, comments) = r.counts();
    s.push_str(&md_table(
        &["kernels", "count"],
        &[false, true],
        &[
            vec!["changed: code".into(), code.to_string()],
            vec!["changed: comments or whitespace only".into(), comments.to_string()],
            vec!["added".into(), r.added.len().to_string()],
            vec!["removed".into(), r.removed.len().to_string()],
            vec!["renamed (same code)".into(), r.renamed.len().to_string()],
            vec!["unchanged".into(), r.unchanged.to_string()],
        ],
    ));
    s.push('\n');
    s.push_str(&md_escape(&conditions(r)));
    s.push('\n');
    if !r.warnings.is_empty() {
        s.push_str("\n### Warnings\n\n");
        for w in &r.warnings {
            s.push_str(&format!("- {}: {}{}\n", md_code(&w.kernel), md_inline(&w.message), if w.before { " (already so before)" } else { " **(new)**" }));
        }
    }
    if !r.added.is_empty() {
        s.push_str(&format!("\n### Added ({})\n\n", r.added.len()));
        let rows: Vec<Vec<String>> = r
            .added
            .iter()
            .map(|k| {
                let [name, family, threads, mem, bytes, roof] = added_row(k, r);
                vec![md_code(&name), md_escape(&family), threads, md_escape(&mem), md_escape(&bytes), md_escape(&roof)]
            })
            .collect();
        let roof = format!("roofline on {}", r.gpu.key);
        s.push_str(&md_table(&["kernel", "family", "threads/TG", "TG memory", "bytes/launch", &roof], &[false, false, true, true, true, true], &rows));
    }
    if !r.removed.is_empty() {
        s.push_str(&format!("\n### Removed ({})\n\n", r.removed.len()));
        for k in &r.removed {
            s.push_str(&format!("- {} ({})\n", md_code(&k.name), md_escape(&k.family)));
        }
    }
    if !r.renamed.is_empty() {
        s.push_str(&format!("\n### Renamed: the same code under a new name ({})\n\n", r.renamed.len()));
        let rows: Vec<Vec<String>> = r.renamed.iter().map(|p| vec![md_code(&p.old.name), md_code(&p.new.name)]).collect();
        s.push_str(&md_table(&["before", "after"], &[], &rows));
    }
    let comments: Vec<String> = r.changed.iter().filter(|p| p.code == CodeChange::CommentsOnly).map(|p| md_code(&p.new.name)).collect();
    if !comments.is_empty() {
        s.push_str(&format!("\n### Comments or whitespace only ({})\n\nThe code of these kernels is the same; only comments or whitespace changed.\n\n", comments.len()));
        s.push_str(&format!("<details><summary>{} kernel{}</summary>\n\n{}\n\n</details>\n", comments.len(), plural(comments.len()), comments.join(", ")));
    }
    let changes: Vec<Vec<String>> = r
        .resource_changes()
        .flat_map(|p| p.changes.iter().map(move |c| vec![md_code(&p.new.name), md_inline(&c.what), md_inline(&c.before), md_inline(&c.after)]))
        .collect();
    if !changes.is_empty() {
        s.push_str("\n### Resource and contract changes\n\n");
        s.push_str(&md_table(&["kernel", "what", "before", "after"], &[], &changes));
    }
    if !r.other_files.is_empty() {
        s.push_str("\n### Other generated files\n\n");
        for (p, c) in &r.other_files {
            s.push_str(&format!("- {}: {}\n", file_change(*c), md_code(p)));
        }
    }
    if r.manifest_format_changed {
        s.push_str("\n`manifest.json` differs only in its format: no kernel's contract, resources or cost read differently.\n");
    }
    if r.old_without_cost {
        s.push_str(&format!("\n{}'s manifest has no `cost` (it predates the cost model): its bytes per launch are derived from its buffers, its flops are unknown.\n", md_code(&r.old_label)));
    }
    for (language, code, groups) in languages(r) {
        if groups.is_empty() {
            continue;
        }
        s.push_str(&format!("\n### {language} diff: {code} kernel{} whose code changed, {} distinct edit{}\n", plural(code), groups.len(), plural(groups.len())));
        for g in groups {
            let (first, more) = group_title(g);
            s.push_str(&format!("\n#### {}{}\n\n", md_code(&first), md_escape(&more)));
            if g.names.len() > 1 {
                s.push_str(&format!("Kernels: {}\n\n", g.names.iter().map(|n| md_code(n)).collect::<Vec<_>>().join(", ")));
            }
            if s.len() > MARKDOWN_BUDGET {
                s.push_str("(diff left out to keep the comment under GitHub's size limit: run `kernelgen diff` locally)\n");
                continue;
            }
            let diff = udiff::unified(&g.old_path, &g.new_path, &g.hunks);
            let lines: Vec<&str> = diff.lines().collect();
            let shown = &lines[..lines.len().min(MARKDOWN_DIFF_LINES)];
            let fence = "`".repeat(longest_run(&diff, '`').max(2) + 1);
            s.push_str(&format!("{fence}diff\n{}\n{fence}\n", shown.join("\n")));
            if lines.len() > shown.len() {
                s.push_str(&format!("\n({} more lines: run `kernelgen diff` locally)\n", lines.len() - shown.len()));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_spans_escape() {
        assert_eq!(md_escape("a|b*c_d"), "a\\|b\\*c\\_d");
        assert_eq!(md_escape("x\ny"), "x<br>y");
        assert_eq!(md_code("a|b"), "`a\\|b`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`a"), "`` `a ``");
        assert_eq!(md_inline("input `w|x` [M]"), "input `w\\|x` \\[M\\]");
        assert_eq!(md_inline("odd ` tick"), "odd \\` tick");
    }
}
