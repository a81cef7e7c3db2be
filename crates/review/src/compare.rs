//! Two generated trees compared kernel by kernel.

use kernelgen_contract::limits::MAX_THREADGROUP_MEMORY_BYTES;
use super::gpu::Gpu;
use super::udiff::{self, Hunk, Line};
use super::view::{read_manifest, BufferView, KernelView, Launch, SizeExpr, Sizes};
use super::{group, warnings, WarningKind};
use kernelgen_msl::lex::{tokenize_with, Directives, Kind};
use std::collections::{BTreeMap, BTreeSet};

/// A generated tree: relative path -> text, and what to call it (`HEAD`,
/// `the specs now`).
#[derive(Clone, Debug, Default)]
pub struct Tree {
    /// What the report calls the tree (`HEAD`, a folder, `the specs now`).
    pub label: String,
    /// Each file's text by its path relative to the tree's root.
    pub files: BTreeMap<String, String>,
}

/// How to evaluate and print costs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The GPU roofline times are given on (`--gpu`).
    pub gpu: &'static Gpu,
    /// The run-time sizes costs are evaluated at (`--size`).
    pub sizes: Sizes,
    /// Lines of context around each change of an MSL diff.
    pub context: usize,
}

/// How a kernel's source (its `.metal`, its `.cu`, or both together) changed; ordered from
/// no change to a code change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CodeChange {
    /// Byte for byte the same.
    Same,
    /// Only comments or whitespace differ (the tokens are the same).
    CommentsOnly,
    /// The tokens differ: the code changed.
    Code,
}

/// One line of a resource or contract change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// What changed: `grid`, `threadgroup memory`, a buffer by role and name, a cost.
    pub what: String,
    /// The old side's value, as shown.
    pub before: String,
    /// The new side's value, as shown (element counts and costs add the ratio to the old, `(x1.95)`).
    pub after: String,
}

/// A kernel on both sides: under one name, or renamed.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The kernel on the old side.
    pub old: KernelView,
    /// The kernel on the new side.
    pub new: KernelView,
    /// How its sources changed, the larger of [`Pair::metal_code`] and [`Pair::cuda_code`]
    /// ([`CodeChange::Same`] for a rename).
    pub code: CodeChange,
    /// How its `.metal` changed.
    pub metal_code: CodeChange,
    /// How its CUDA body changed: [`CodeChange::Code`] when one side has none.
    pub cuda_code: CodeChange,
    /// Its contract and resource changes; empty if there are none.
    pub changes: Vec<Change>,
}

/// A warning about a kernel of the new side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The name of the new-side kernel it is about.
    pub kernel: String,
    /// What is wrong, in a sentence for the reviewer.
    pub message: String,
    /// The old side had it too.
    pub before: bool,
}

/// Kernels whose source diffs (MSL, or CUDA) make the same edit, shown once.
#[derive(Clone, Debug)]
pub struct DiffGroup {
    /// The kernels making this edit, in the new tree's order; the first one's diff is shown.
    pub names: Vec<String>,
    /// The first kernel's old source path and the old tree's label, for
    /// the `---` line (`/dev/null` for a CUDA body the old side lacks).
    pub old_path: String,
    /// The first kernel's new source path and the new tree's label, for the `+++` line.
    pub new_path: String,
    /// The first kernel's hunks.
    pub hunks: Vec<Hunk>,
}

/// A file outside the kernels (launcher Rust, the catalog module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileChange {
    /// Only in the new tree.
    Added,
    /// Only in the old tree.
    Removed,
    /// In both trees, with different text.
    Changed,
}

/// Everything a reviewer is shown.
#[derive(Clone, Debug)]
pub struct Review {
    /// What the old tree is called ([`Tree::label`]).
    pub old_label: String,
    /// What the new tree is called.
    pub new_label: String,
    /// The GPU of the roofline times ([`Options::gpu`]).
    pub gpu: &'static Gpu,
    /// The run-time sizes costs were evaluated at ([`Options::sizes`]).
    pub sizes: Sizes,
    /// Kernels only the new tree has (renames aside), in its order.
    pub added: Vec<KernelView>,
    /// Kernels only the old tree has (renames aside), in its order.
    pub removed: Vec<KernelView>,
    /// The same code under a new name (`old.name != new.name`).
    pub renamed: Vec<Pair>,
    /// Under one name, something changed.
    pub changed: Vec<Pair>,
    /// How many kernels are byte for byte the same under the same name,
    /// contract included.
    pub unchanged: usize,
    /// The MSL diffs of the kernels whose Metal code changed, one per distinct edit.
    pub groups: Vec<DiffGroup>,
    /// The CUDA diffs of the kernels whose CUDA code changed (or that gained or lost a CUDA
    /// body), one per distinct edit.
    pub cuda_groups: Vec<DiffGroup>,
    /// Warnings on the added, renamed and changed kernels.
    pub warnings: Vec<Warning>,
    /// Files outside the kernels and `manifest.json` that were added, removed or changed, by path.
    pub other_files: Vec<(String, FileChange)>,
    /// `manifest.json` differs in what no kernel above explains (its format).
    pub manifest_format_changed: bool,
    /// The old manifest predates the cost model (no `cost`): its bytes per
    /// launch are derived from its buffers, its flops unknown.
    pub old_without_cost: bool,
    /// The trees are byte for byte the same.
    pub identical: bool,
}

impl Review {
    /// Code changes and comment-only changes among [`Review::changed`].
    pub fn counts(&self) -> (usize, usize) {
        let code = self.changed.iter().filter(|p| p.code == CodeChange::Code).count();
        let comments = self.changed.iter().filter(|p| p.code == CodeChange::CommentsOnly).count();
        (code, comments)
    }

    /// Every pair whose contract or resources changed.
    pub fn resource_changes(&self) -> impl Iterator<Item = &Pair> {
        self.renamed.iter().chain(&self.changed).filter(|p| !p.changes.is_empty())
    }
}

/// The kernels of a tree.
pub fn kernels(tree: &Tree) -> Result<Vec<KernelView>, String> {
    let manifest = tree.files.get("manifest.json").ok_or_else(|| format!("{} has no manifest.json", tree.label))?;
    read_manifest(manifest, &|p| tree.files.get(p).cloned()).map_err(|e| format!("{}: {e}", tree.label))
}

/// Compares `old` with `new`.
pub fn review(old: &Tree, new: &Tree, opts: &Options) -> Result<Review, String> {
    let old_kernels = kernels(old)?;
    let new_kernels = kernels(new)?;
    let old_by_name: BTreeMap<&str, &KernelView> = old_kernels.iter().map(|k| (k.name.as_str(), k)).collect();
    let new_names: BTreeSet<&str> = new_kernels.iter().map(|k| k.name.as_str()).collect();

    let mut changed = Vec::new();
    let mut unchanged = 0;
    let mut added_candidates = Vec::new();
    for k in &new_kernels {
        match old_by_name.get(k.name.as_str()) {
            Some(o) => {
                let pair = pair(o, k, opts);
                if pair.code == CodeChange::Same && pair.changes.is_empty() {
                    unchanged += 1;
                } else {
                    changed.push(pair);
                }
            }
            None => added_candidates.push(k),
        }
    }
    let mut removed: Vec<&KernelView> = old_kernels.iter().filter(|k| !new_names.contains(k.name.as_str())).collect();

    // Renamed: an added kernel with the code of a removed one (each kernel's
    // own name, which its source spells, taken out).
    let mut renamed = Vec::new();
    let mut added = Vec::new();
    // `None` where a source file is missing: such a kernel is no rename.
    let normal = |k: &KernelView| -> Option<(Code, Option<Code>)> {
        let of = |text: &str| code(&text.replace(&k.name, "\u{1}kernel\u{1}"));
        let cuda = match &k.cuda {
            None => None,
            Some(c) => Some(of(c.text.as_deref()?)),
        };
        Some((of(k.metal.as_deref()?), cuda))
    };
    let removed_normal: Vec<_> = removed.iter().map(|k| normal(k)).collect();
    let mut taken = vec![false; removed.len()];
    for k in added_candidates {
        let n = normal(k);
        let hit = (0..removed.len()).find(|&i| !taken[i] && removed[i].family == k.family && n.is_some() && removed_normal[i] == n);
        match hit {
            Some(i) => {
                taken[i] = true;
                let mut p = pair(removed[i], k, opts);
                (p.code, p.metal_code, p.cuda_code) = (CodeChange::Same, CodeChange::Same, CodeChange::Same);
                renamed.push(p);
            }
            None => added.push(k.clone()),
        }
    }
    let mut i = 0;
    removed.retain(|_| {
        i += 1;
        !taken[i - 1]
    });

    // Warnings of the kernels a reviewer is shown.
    let mut warns = Vec::new();
    for k in &added {
        for (_, message) in warnings(k, &opts.sizes) {
            warns.push(Warning { kernel: k.name.clone(), message, before: false });
        }
    }
    for p in renamed.iter().chain(&changed) {
        let before: Vec<WarningKind> = warnings(&p.old, &opts.sizes).into_iter().map(|w| w.0).collect();
        for (kind, message) in warnings(&p.new, &opts.sizes) {
            warns.push(Warning { kernel: p.new.name.clone(), message, before: before.contains(&kind) });
        }
        for (_, message) in specialization(&p.old, &p.new) {
            warns.push(Warning { kernel: p.new.name.clone(), message, before: false });
        }
    }

    let groups = diff_groups(&changed, Language::Metal, old, new, opts.context);
    let cuda_groups = diff_groups(&changed, Language::Cuda, old, new, opts.context);

    // Files outside the kernels.
    let kernel_files: BTreeSet<&str> = old_kernels
        .iter()
        .chain(&new_kernels)
        .flat_map(|k| std::iter::once(k.metal_path.as_str()).chain(k.cuda.as_ref().map(|c| c.path.as_str())))
        .chain(["manifest.json"])
        .collect();
    let mut other_files = Vec::new();
    let paths: BTreeSet<&String> = old.files.keys().chain(new.files.keys()).collect();
    for p in paths {
        if kernel_files.contains(p.as_str()) {
            continue;
        }
        match (old.files.get(p), new.files.get(p)) {
            (None, Some(_)) => other_files.push((p.clone(), FileChange::Added)),
            (Some(_), None) => other_files.push((p.clone(), FileChange::Removed)),
            (Some(a), Some(b)) if a != b => other_files.push((p.clone(), FileChange::Changed)),
            _ => {}
        }
    }
    let identical = old.files == new.files;
    let kernel_level = !added.is_empty() || !removed.is_empty() || !renamed.is_empty() || !changed.is_empty();
    let manifest_format_changed = !kernel_level && old.files.get("manifest.json") != new.files.get("manifest.json");

    Ok(Review {
        old_label: old.label.clone(),
        new_label: new.label.clone(),
        gpu: opts.gpu,
        sizes: opts.sizes.clone(),
        added,
        removed: removed.into_iter().cloned().collect(),
        renamed,
        changed,
        unchanged,
        groups,
        cuda_groups,
        warnings: warns,
        other_files,
        manifest_format_changed,
        old_without_cost: old_kernels.iter().any(|k| k.cost.is_none()),
        identical,
    })
}

/// A Metal source's tokens without their positions, every directive opened: two sources
/// are the same code, comments and whitespace aside, when theirs are equal.
type Code = Vec<(Kind, String, bool)>;

fn code(src: &str) -> Code {
    tokenize_with(src, Directives::AllOpen).into_iter().map(|t| (t.kind, t.text, t.pp)).collect()
}

/// How one source changed between two sides (a file missing on both is no change).
fn source_change(old: Option<&str>, new: Option<&str>) -> CodeChange {
    match (old, new) {
        (Some(a), Some(b)) if a == b => CodeChange::Same,
        (Some(a), Some(b)) if code(a) == code(b) => CodeChange::CommentsOnly,
        (None, None) => CodeChange::Same,
        _ => CodeChange::Code,
    }
}

fn pair(old: &KernelView, new: &KernelView, opts: &Options) -> Pair {
    let metal_code = source_change(old.metal.as_deref(), new.metal.as_deref());
    let cuda_code = match (&old.cuda, &new.cuda) {
        (None, None) => CodeChange::Same,
        (Some(a), Some(b)) => source_change(a.text.as_deref(), b.text.as_deref()),
        _ => CodeChange::Code,
    };
    let mut changes = contract_changes(old, new, opts);
    if old.metal.is_none() || new.metal.is_none() {
        let presence = |k: &KernelView| if k.metal.is_some() { "present".to_string() } else { format!("missing: {}", k.metal_path) };
        changes.push(Change { what: ".metal file".into(), before: presence(old), after: presence(new) });
    }
    let cuda = |k: &KernelView| match &k.cuda {
        None => "none (Metal only)".to_string(),
        Some(c) if c.text.is_none() => format!("missing: {}", c.path),
        Some(_) => "present".to_string(),
    };
    if cuda(old) != cuda(new) {
        changes.push(Change { what: "CUDA body".into(), before: cuda(old), after: cuda(new) });
    }
    if let (Some(a), Some(b)) = (&old.cuda, &new.cuda) {
        if a.threadgroup != b.threadgroup {
            let block = |t: [u64; 3]| format!("{} ({}x{}x{})", t.iter().product::<u64>(), t[0], t[1], t[2]);
            changes.push(Change { what: "threads per CUDA block".into(), before: block(a.threadgroup), after: block(b.threadgroup) });
        }
    }
    Pair { old: old.clone(), new: new.clone(), code: metal_code.max(cuda_code), metal_code, cuda_code, changes }
}

/// `512 (32x16x1)`
fn threads(k: &KernelView) -> String {
    let [x, y, z] = k.threadgroup;
    format!("{} ({x}x{y}x{z})", k.threads())
}

/// `21,760 B (11,008 B headroom)`
fn memory(k: &KernelView) -> String {
    let m = k.threadgroup_memory;
    if m > MAX_THREADGROUP_MEMORY_BYTES {
        format!("{} B (over the limit by {} B)", group(m), group(m - MAX_THREADGROUP_MEMORY_BYTES))
    } else {
        format!("{} B ({} B headroom)", group(m), group(MAX_THREADGROUP_MEMORY_BYTES - m))
    }
}

fn bytes_text(l: &Launch) -> String {
    match (l.bytes(), l.bytes_read, l.bytes_written) {
        (Some(t), Some(r), Some(w)) => format!("{} B (read {}, written {}){}", group(t), group(r), group(w), if l.derived { ", from the buffers" } else { "" }),
        _ => "?".into(),
    }
}

fn ratio(before: Option<u64>, after: Option<u64>) -> String {
    match (before, after) {
        (Some(b), Some(a)) if b > 0 && a != b => format!(" (x{:.2})", a as f64 / b as f64),
        _ => String::new(),
    }
}

/// What differs between two kernels' contracts and resources.
fn contract_changes(old: &KernelView, new: &KernelView, opts: &Options) -> Vec<Change> {
    let mut out = Vec::new();
    let mut push = |what: &str, before: String, after: String| {
        if before != after {
            out.push(Change { what: what.into(), before, after });
        }
    };
    push("family", old.family.clone(), new.family.clone());
    push("spec", old.spec.clone(), new.spec.clone());
    push("run-time sizes", list_or_none(&old.sizes), list_or_none(&new.sizes));
    push("threads per threadgroup", threads(old), threads(new));
    push("threadgroup memory", memory(old), memory(new));
    push("grid", old.grid.join(", "), new.grid.join(", "));
    // Buffers by role and name, in the new order, then the removed ones.
    let role = |k: &KernelView| -> Vec<(String, BufferView)> {
        k.inputs.iter().map(|b| (format!("input `{}`", b.name), b.clone())).chain(k.outputs.iter().map(|b| (format!("output `{}`", b.name), b.clone()))).collect()
    };
    let (ob, nb) = (role(old), role(new));
    let (old_values, new_values) = (opts.sizes.values(&old.sizes), opts.sizes.values(&new.sizes));
    let regions = |b: &BufferView| b.regions.iter().map(|(n, o, s)| format!("{n} {}+{}", group(*o), group(*s))).collect::<Vec<_>>().join(", ");
    for (label, b) in &nb {
        match ob.iter().find(|(l, _)| l == label) {
            Some((_, o)) => {
                let elems = |n: Option<u64>| n.map(|e| format!(", {} elements", group(e))).unwrap_or_default();
                let (before, after) = (o.elements(&old_values), b.elements(&new_values));
                if o.describe() != b.describe() {
                    push(label, format!("{}{}", o.describe(), elems(before)), format!("{}{}{}", b.describe(), elems(after), ratio(before, after)));
                }
                push(&format!("{label} regions"), regions(o), regions(b));
            }
            None => push(label, "(none)".into(), b.describe()),
        }
    }
    for (label, o) in &ob {
        if !nb.iter().any(|(l, _)| l == label) {
            push(label, o.describe(), "(removed)".into());
        }
    }
    let (lo, ln) = (old.launch(&opts.sizes), new.launch(&opts.sizes));
    let at = if new.sizes.is_empty() && old.sizes.is_empty() { String::new() } else { format!(" at {}", opts.sizes.describe(&union(&old.sizes, &new.sizes))) };
    let bytes_changed = lo.bytes() != ln.bytes();
    if bytes_changed {
        push(&format!("bytes per launch{at}"), bytes_text(&lo), format!("{}{}", bytes_text(&ln), ratio(lo.bytes(), ln.bytes())));
    }
    // The formulas, where they depend on run-time sizes (a constant is the
    // value above): a change can leave the value at these sizes alone.
    if let (Some(a), Some(b)) = (&old.cost, &new.cost) {
        let sized = |t: &Option<SizeExpr>| t.as_ref().is_some_and(SizeExpr::depends_on_sizes);
        let text = |t: &Option<SizeExpr>| t.as_ref().map_or_else(|| "(not stated)".into(), |t| t.text.clone());
        for (what, x, y) in [
            ("bytes read (formula)", Some(a.bytes_read.clone()), Some(b.bytes_read.clone())),
            ("bytes written (formula)", Some(a.bytes_written.clone()), Some(b.bytes_written.clone())),
            ("flops (formula)", a.flops.clone(), b.flops.clone()),
        ] {
            if sized(&x) || sized(&y) {
                push(what, text(&x), text(&y));
            }
        }
    }
    let flops = |l: &Launch, k: &KernelView| match (l.flops, &k.cost) {
        (Some(f), _) => group(f),
        (None, None) => "(old manifest: no cost)".into(),
        (None, Some(c)) if c.flops.is_none() => "(not stated)".into(),
        (None, Some(_)) => "?".into(),
    };
    let flops_changed = lo.flops != ln.flops && !(lo.flops.is_none() && old.cost.is_none());
    if flops_changed {
        push(&format!("flops per launch{at}"), flops(&lo, old), format!("{}{}", flops(&ln, new), ratio(lo.flops, ln.flops)));
    }
    if bytes_changed || flops_changed {
        let r = |l: &Launch| l.bytes().map(|b| opts.gpu.roofline(b, l.flops).describe()).unwrap_or_else(|| "?".into());
        push(&format!("roofline on {}{at}", opts.gpu.key), r(&lo), r(&ln));
    }
    // Fields a review does not model, compared as they are written.
    const MODELLED: [&str; 16] = [
        "name", "family", "spec", "metal", "mlx_name", "sha256", "cuda", "sizes", "inputs", "outputs", "grid", "threadgroup", "threads_per_threadgroup", "threadgroup_memory_bytes", "cost", "generator",
    ];
    let keys: BTreeSet<&String> = old.entry.keys().chain(new.entry.keys()).filter(|k| !MODELLED.contains(&k.as_str())).collect();
    for key in keys {
        let show = |v: Option<&serde_json::Value>| v.map(|v| v.to_string()).unwrap_or_else(|| "(none)".into());
        push(key, show(old.entry.get(key)), show(new.entry.get(key)));
    }
    // Buffers compared as data, beyond their shapes (where a size is held, host ints, limits).
    for (label, b) in &nb {
        if let Some((_, o)) = ob.iter().find(|(l, _)| l == label) {
            let (ov, nv) = (raw_buffer(old, &o.name), raw_buffer(new, &b.name));
            if ov != nv && o.describe() == b.describe() && regions(o) == regions(b) {
                push(&format!("{label} (manifest entry)"), ov, nv);
            }
        }
    }
    out
}

/// A buffer's manifest object without the fields compared above.
fn raw_buffer(k: &KernelView, name: &str) -> String {
    for list in ["inputs", "outputs"] {
        if let Some(items) = k.entry.get(list).and_then(|v| v.as_array()) {
            for b in items {
                if b.get("name").and_then(|n| n.as_str()) == Some(name) {
                    let mut b = b.clone();
                    if let Some(o) = b.as_object_mut() {
                        for f in ["name", "dtype", "shape", "regions"] {
                            o.remove(f);
                        }
                    }
                    return b.to_string();
                }
            }
        }
    }
    String::new()
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out: Vec<String> = b.to_vec();
    for s in a {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// Run-time sizes that became compile-time (specialized), or the reverse.
fn specialization(old: &KernelView, new: &KernelView) -> Vec<(WarningKind, String)> {
    let mut out = Vec::new();
    for s in &old.sizes {
        if !new.sizes.contains(s) {
            out.push((
                WarningKind::Specialized(s.clone()),
                format!("run-time size `{s}` became specialized: the kernel no longer takes it at launch, so every value needs its own kernel (run-time sizes before: {}, now: {})", list_or_none(&old.sizes), list_or_none(&new.sizes)),
            ));
        }
    }
    for s in &new.sizes {
        if !old.sizes.contains(s) {
            out.push((
                WarningKind::Unspecialized(s.clone()),
                format!("`{s}` became a run-time size (it was specialized or absent): one kernel now serves every `{s}`, and what was a constant is read at launch (run-time sizes before: {}, now: {})", list_or_none(&old.sizes), list_or_none(&new.sizes)),
            ));
        }
    }
    out
}

/// A kernel's two languages: which source a diff section shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Language {
    Metal,
    Cuda,
}

impl Language {
    /// How the pair's source in this language changed.
    fn change(self, p: &Pair) -> CodeChange {
        match self {
            Language::Metal => p.metal_code,
            Language::Cuda => p.cuda_code,
        }
    }

    /// A kernel's source in this language (empty where it has none) and its path for a
    /// diff header (`/dev/null` where it has none).
    fn source(self, k: &KernelView, label: &str, side: char) -> (String, String) {
        let path = |p: &str| format!("{side}/{p} ({label})");
        match self {
            Language::Metal => (k.metal.clone().unwrap_or_default(), path(&k.manifest_metal)),
            Language::Cuda => match &k.cuda {
                Some(c) => (c.text.clone().unwrap_or_default(), path(&c.manifest_path)),
                None => (String::new(), "/dev/null".into()),
            },
        }
    }
}

/// The MSL (or CUDA) diffs of the kernels whose code changed, one section per distinct
/// edit. Two kernels share a section when their diffs remove and add the
/// same lines in the same order, each kernel's own name read as one
/// placeholder: a template edit that changes the same lines in every
/// geometry is one section listing the kernels. Context lines and hunk
/// positions are not compared (they show geometry-specific numbers next to
/// the edit, which is not the edit); the section shows the first kernel's
/// diff, with its context.
/// The lines a diff removes and adds, hunk by hunk: what a section is keyed on.
type EditKey = Vec<Vec<(char, String)>>;

fn diff_groups(changed: &[Pair], language: Language, old: &Tree, new: &Tree, context: usize) -> Vec<DiffGroup> {
    let mut groups: Vec<(EditKey, DiffGroup)> = Vec::new();
    for p in changed.iter().filter(|p| language.change(p) == CodeChange::Code) {
        let (a, old_path) = language.source(&p.old, &old.label, 'a');
        let (b, new_path) = language.source(&p.new, &new.label, 'b');
        let hunks = udiff::hunks(&a, &b, context);
        let key: EditKey = hunks
            .iter()
            .map(|h| h.lines.iter().filter(|l| !matches!(l, Line::Context(_))).map(|l| (l.marker(), l.text().replace(&p.new.name, "\u{1}kernel\u{1}"))).collect())
            .collect();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.names.push(p.new.name.clone()),
            None => groups.push((
                key,
                DiffGroup { names: vec![p.new.name.clone()], old_path, new_path, hunks },
            )),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{kernel, tree};
    use crate::{gpu, render};
    use serde_json::json;

    fn opts() -> Options {
        Options { gpu: gpu::find("m2-max").unwrap(), sizes: Sizes::default(), context: 3 }
    }

    #[test]
    fn identical_trees_are_no_change() {
        let t = tree("old", &[kernel("a", &[], &["8"], [32, 1, 1], 0, "  x;")]);
        let r = review(&t, &Tree { label: "new".into(), ..t.clone() }, &opts()).unwrap();
        assert!(r.identical && r.changed.is_empty() && r.unchanged == 1);
        assert!(render::text(&r).contains("no changes"));
    }

    #[test]
    fn a_size_that_became_specialized_and_back_is_a_warning() {
        let old = tree("old", &[kernel("a", &["M"], &["M", "8"], [32, 1, 1], 0, "  x;")]);
        let new = tree("new", &[kernel("a", &[], &["4", "8"], [32, 1, 1], 0, "  x;")]);
        let r = review(&old, &new, &opts()).unwrap();
        assert_eq!(r.changed.len(), 1);
        assert!(r.warnings.iter().any(|w| w.message.contains("run-time size `M` became specialized")), "{:?}", r.warnings);
        let back = review(&new, &old, &opts()).unwrap();
        assert!(back.warnings.iter().any(|w| w.message.contains("`M` became a run-time size")), "{:?}", back.warnings);
        let c = &r.changed[0].changes;
        assert!(c.iter().any(|c| c.what == "run-time sizes" && c.before == "M" && c.after == "(none)"), "{c:?}");
        assert!(c.iter().any(|c| c.what == "input `x`" && c.before.starts_with("f32[M, 8]") && c.after.contains("f32[4, 8], 32 elements (x4.00)")), "{c:?}");
    }

    #[test]
    fn limits_warn_and_say_whether_they_are_new() {
        let old = tree("old", &[kernel("a", &[], &["8"], [1024, 1, 1], 0, "  x;"), kernel("b", &[], &["8"], [32, 1, 1], 100, "  x;")]);
        let new = tree(
            "new",
            &[kernel("a", &[], &["8"], [1024, 1, 1], 0, "  x; // now commented"), kernel("b", &[], &["65536", "65537"], [32, 1, 1], 32 * 1024 - 128, "  y;")],
        );
        let r = review(&old, &new, &opts()).unwrap();
        let w = |k: &str, text: &str| r.warnings.iter().find(|w| w.kernel == k && w.message.contains(text)).unwrap_or_else(|| panic!("{k} {text}: {:?}", r.warnings)).before;
        assert!(w("a", "above the portable limit of 768"), "already so before");
        assert!(!w("b", "within 1,024 B of the 32,768 B limit (128 B headroom)"));
        assert!(!w("b", "buffer `x` has 4,295,032,832 elements, over 2^31"));
        assert_eq!(r.changed.iter().map(|p| (p.new.name.as_str(), p.code)).collect::<Vec<_>>(), [("a", CodeChange::CommentsOnly), ("b", CodeChange::Code)]);
        assert!(r.changed[1].changes.iter().any(|c| c.what == "threadgroup memory" && c.before == "100 B (32,668 B headroom)" && c.after == "32,640 B (128 B headroom)"));
    }

    #[test]
    fn renames_pair_the_same_code_and_diffs_group_by_edit() {
        let old = tree(
            "old",
            &[
                kernel("tiny_a", &[], &["8"], [32, 1, 1], 0, "  const uint n = 8u;\n  x = 1;"),
                kernel("big_a", &[], &["16"], [32, 1, 1], 0, "  const uint n = 16u;\n  x = 1;"),
                kernel("odd_a", &[], &["16"], [32, 1, 1], 0, "  const uint n = 16u;\n  x = 3;"),
                kernel("gone_a", &[], &["16"], [32, 1, 1], 0, "  gone();"),
            ],
        );
        let new = tree(
            "new",
            &[
                kernel("tiny_a", &[], &["8"], [32, 1, 1], 0, "  const uint n = 8u;\n  x = 2;"),
                kernel("big_a", &[], &["16"], [32, 1, 1], 0, "  const uint n = 16u;\n  x = 2;"),
                kernel("odd_a", &[], &["16"], [32, 1, 1], 0, "  const uint n = 16u;\n  x = 4;"),
                kernel("renamed_a", &[], &["16"], [32, 1, 1], 0, "  // a comment\n  gone();"),
                kernel("fresh_a", &[], &["16"], [32, 1, 1], 0, "  fresh();"),
            ],
        );
        let r = review(&old, &new, &opts()).unwrap();
        assert_eq!(r.renamed.iter().map(|p| (p.old.name.as_str(), p.new.name.as_str())).collect::<Vec<_>>(), [("gone_a", "renamed_a")]);
        assert_eq!(r.added.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["fresh_a"]);
        assert!(r.removed.is_empty());
        // tiny and big make the same edit (their context differs); odd another.
        assert_eq!(r.groups.iter().map(|g| g.names.clone()).collect::<Vec<_>>(), [vec!["tiny_a".to_string(), "big_a".into()], vec!["odd_a".into()]]);
        let text = render::text(&r);
        assert!(text.contains("=== tiny_a and 1 more kernel with the same edit ==="), "{text}");
        assert!(text.contains("-  x = 1;\n+  x = 2;"), "{text}");
        assert!(text.contains("gone_a  ->  renamed_a"), "{text}");
    }

    /// A CUDA body is compared as a `.metal` is: a code change, a comment-only change, a body
    /// gained (diffed against /dev/null, with a contract row), each in the CUDA diff, never in
    /// the MSL one or among the other files; a rename keeps both bodies.
    #[test]
    fn cuda_bodies_are_compared_like_metal_ones() {
        use crate::fixtures::{tree_with, with_cuda};
        let k = |name: &str| kernel(name, &[], &["8"], [32, 1, 1], 0, "  x;");
        let (a0, a0c) = with_cuda(k("a"), "  y = 1;");
        let (b0, b0c) = with_cuda(k("b"), "  z = 1;");
        let (r0, r0c) = with_cuda(k("old_r"), "  r = 1;");
        let old = tree_with("old", &[a0, b0, k("c"), r0], &[a0c, b0c, r0c]);
        let (a1, a1c) = with_cuda(k("a"), "  y = 2;");
        let (b1, b1c) = with_cuda(k("b"), "  z = 1; // now commented");
        let (c1, c1c) = with_cuda(k("c"), "  w = 1;");
        let (r1, r1c) = with_cuda(k("new_r"), "  r = 1;");
        let new = tree_with("new", &[a1, b1, c1, r1], &[a1c, b1c, c1c, r1c]);
        let r = review(&old, &new, &opts()).unwrap();
        let codes: Vec<_> = r.changed.iter().map(|p| (p.new.name.as_str(), p.code, p.metal_code, p.cuda_code)).collect();
        assert_eq!(
            codes,
            [
                ("a", CodeChange::Code, CodeChange::Same, CodeChange::Code),
                ("b", CodeChange::CommentsOnly, CodeChange::Same, CodeChange::CommentsOnly),
                ("c", CodeChange::Code, CodeChange::Same, CodeChange::Code),
            ]
        );
        assert_eq!(r.renamed.iter().map(|p| (p.old.name.as_str(), p.new.name.as_str())).collect::<Vec<_>>(), [("old_r", "new_r")]);
        let gained = &r.changed[2].changes;
        assert!(gained.iter().any(|c| c.what == "CUDA body" && c.before == "none (Metal only)" && c.after == "present"), "{gained:?}");
        assert!(r.groups.is_empty() && r.other_files.is_empty(), "{:?} {:?}", r.groups, r.other_files);
        assert_eq!(r.cuda_groups.iter().map(|g| g.names.clone()).collect::<Vec<_>>(), [vec!["a".to_string()], vec!["c".to_string()]]);
        let text = render::text(&r);
        assert!(text.contains("CUDA diff: 2 kernels whose code changed, 2 distinct edits") && !text.contains("MSL diff"), "{text}");
        assert!(text.contains("--- a/generated/cuda/s/a.cu (old)\n+++ b/generated/cuda/s/a.cu (new)") && text.contains("-  y = 1;\n+  y = 2;"), "{text}");
        assert!(text.contains("--- /dev/null\n+++ b/generated/cuda/s/c.cu (new)"), "{text}");
        assert!(render::markdown(&r).contains("### CUDA diff: 2 kernels whose code changed, 2 distinct edits"));
        // a rename whose CUDA body changed is no rename
        let (r2, r2c) = with_cuda(k("new_r"), "  r = 2;");
        let new = tree_with("new", &[r2], &[r2c]);
        let old = tree_with("old", &[with_cuda(k("old_r"), "  r = 1;").0], &[with_cuda(k("old_r"), "  r = 1;").1]);
        let r = review(&old, &new, &opts()).unwrap();
        assert!(r.renamed.is_empty() && r.added.len() == 1 && r.removed.len() == 1);
    }

    /// A CUDA block that changes shape (the family's `cuda_threadgroup`) is a contract change of
    /// its own; a manifest without the field (older trees) reads as the Metal threadgroup.
    #[test]
    fn a_cuda_block_of_another_shape_is_a_contract_change() {
        use crate::fixtures::{tree_with, with_cuda};
        let k = || kernel("a", &[], &["8"], [32, 16, 1], 0, "  x;");
        let (old_k, old_c) = with_cuda(k(), "  y = 1;");
        let ((mut new_entry, path, metal), new_c) = with_cuda(k(), "  y = 1;");
        new_entry["cuda"]["threadgroup"] = serde_json::json!([32, 4, 1]);
        let r = review(&tree_with("old", &[old_k], &[old_c]), &tree_with("new", &[(new_entry, path, metal)], &[new_c]), &opts()).unwrap();
        let changes = &r.changed[0].changes;
        assert!(changes.iter().any(|c| c.what == "threads per CUDA block" && c.before == "512 (32x16x1)" && c.after == "128 (32x4x1)"), "{changes:?}");
    }

    #[test]
    fn cost_formulas_over_sizes_are_shown_and_evaluated_at_the_given_sizes() {
        let with_cost = |read: &str, flops: &str| {
            let mut k = kernel("e", &["M"], &["M", "256"], [32, 4, 1], 0, "  x;");
            k.0["cost"] = json!({"bytes_read": read, "bytes_written": "16", "flops": flops});
            k
        };
        let old = tree("old", &[with_cost("512*M + 100", "1000*M")]);
        let new = tree("new", &[with_cost("1024*M + 100", "1000*M")]);
        let mut o = opts();
        o.sizes = Sizes([("M".to_string(), 4)].into());
        let r = review(&old, &new, &o).unwrap();
        let c = &r.changed[0].changes;
        let row = |what: &str| c.iter().find(|c| c.what.starts_with(what)).unwrap_or_else(|| panic!("{what}: {c:?}"));
        assert_eq!((row("bytes read (formula)").before.as_str(), row("bytes read (formula)").after.as_str()), ("512*M + 100", "1024*M + 100"));
        assert_eq!(row("bytes per launch").what, "bytes per launch at M=4");
        assert_eq!(row("bytes per launch").before, "2,164 B (read 2,148, written 16)");
        assert!(row("bytes per launch").after.starts_with("4,212 B (read 4,196, written 16) (x1.95)"), "{c:?}");
        assert!(row("roofline on m2-max at M=4").before.ends_with("(memory)"), "{c:?}");
        assert!(!c.iter().any(|c| c.what.starts_with("flops")), "the flops did not change: {c:?}");
    }

    fn same_code(a: &str, b: &str) -> bool {
        code(a) == code(b)
    }

    #[test]
    fn comments_and_whitespace_do_not_count() {
        assert!(same_code("int a = 1; // one\n", "int  a=1;   /* uno */\n\n"));
        assert!(same_code("// header\nkernel void f() {\n  x += 1;\n}\n", "kernel void f()\n{ x += 1; } // end"));
        assert!(same_code("a /* multi\nline */ b", "a b"));
        assert!(same_code("x = 1; // spliced \\\n still comment\ny", "x = 1;\ny"));
    }

    #[test]
    fn code_changes_count() {
        assert!(!same_code("int a = 1;", "int a = 2;"));
        assert!(!same_code("int a;", "inta;"));
        assert!(!same_code("a + +b", "a ++b"));
        assert!(!same_code("a - -b", "a --b"));
        assert!(!same_code("x = 1.0e-5f;", "x = 1.0e-6f;"));
        assert!(!same_code("x = 0x1p-3;", "x = 0x1p-4;"));
        assert!(!same_code("n = 1'000;", "n = 1'001;"));
        assert!(!same_code("aé", "a é"));
    }

    #[test]
    fn strings_keep_their_slashes() {
        // `//` inside a string is not a comment: the rest of the line is code.
        assert!(!same_code("s = \"a//b\"; x = 1;", "s = \"a//b\"; x = 2;"));
        assert!(!same_code("s = \"a/*b\"; x = 1; /* c */", "s = \"a/*b\"; x = 2; /* c */"));
        assert!(!same_code("s = \"a b\";", "s = \"a  b\";"));
        assert!(!same_code("c = '/'; x = 1;", "c = '/'; x = 2;"));
        assert!(!same_code("s = \"q\\\"//\"; x = 1;", "s = \"q\\\"//\"; x = 2;"));
        assert!(!same_code("s = R\"(a // b)\"; x = 1;", "s = R\"(a // b)\"; x = 2;"));
        assert!(same_code("s = R\"d(a )\" b)d\";  // c", "s = R\"d(a )\" b)d\";"));
        assert!(!same_code("s = u8\"x\";", "s = u8 \"x\";"));
    }

    #[test]
    fn directives_end_at_their_line() {
        assert!(!same_code("#define A 1\nint b;", "#define A 1 int b;"));
        assert!(!same_code("#define A 1\n#define B 2", "#define A 1 #define B 2"));
        assert!(same_code("#define A 1 // one\nint b;", "#  define   A 1\nint b; // two"));
        assert!(same_code("#define A \\\n 1\nint b;", "#define A 1\nint b;"));
        assert!(same_code("#include <metal_stdlib> // c\n#pragma once\nx", "#  include <metal_stdlib>\n#pragma  once /* c */\nx"));
        assert!(!same_code("#include <metal_stdlib>\nx", "#include < metal_stdlib >\nx"));
        assert!(!same_code("#pragma once\nx", "#pragma once x"));
        // A `#` that does not start a line is a token, not a directive.
        assert!(same_code("a # b\nc", "a # b c"));
    }

    #[test]
    fn a_missing_manifest_is_an_error() {
        let t = Tree { label: "HEAD".into(), files: BTreeMap::new() };
        let e = review(&t, &t, &opts()).unwrap_err();
        assert!(e.contains("HEAD has no manifest.json"), "{e}");
    }
}
