//! Stage 3: expand validated specs into concrete kernels: the cartesian
//! product of each spec's axes for each geometry, minus exclusions, each
//! planned by its family and checked against Apple GPU limits. Names spell
//! every axis: `<geometry>_<family>_<axis values>[_<part>]`.

use crate::diag::{Diagnostic, Diagnostics};
use crate::family::FamilyDef;
use crate::model::{AxisValue, Blame, Dtype, Geometry, KernelPlan, Source, Variant};
use crate::names::Spelled;
use crate::spec::{Span, SpecSource};
use crate::validate::SpecModel;
use std::collections::BTreeMap;
use std::sync::Arc;

use kernelgen_contract::limits::{MAX_BUFFERS, MAX_THREADGROUP_MEMORY_BYTES, MAX_THREADS_PER_THREADGROUP};

/// One concrete kernel: a family, one value per axis, one geometry, one part.
#[derive(Clone)]
pub struct Kernel {
    /// The kernel's name (`<geometry>_<family>_<axis values>[_<part>]`).
    pub name: String,
    /// The name without the part: the kernels of one variant and geometry
    /// share it, and their launcher type is its CamelCase form.
    pub launcher: String,
    /// Its family.
    pub family: Arc<FamilyDef>,
    /// The spec it was expanded from.
    pub source: Arc<SpecSource>,
    /// The geometry's name.
    pub geometry: String,
    /// One value per axis.
    pub variant: Variant,
    /// Buffers, sizes and launch geometry, evaluated.
    pub plan: KernelPlan,
}

/// Expands every spec; kernel names must be unique across all of them.
pub fn expand(models: &[SpecModel]) -> Result<Vec<Kernel>, Diagnostics> {
    let mut diags = Diagnostics::default();
    let mut kernels = Vec::new();
    // Each kernel name: the spec, geometry and variant that spelled it first.
    let mut seen: BTreeMap<String, (Arc<SpecSource>, String, Variant)> = BTreeMap::new();
    for model in models {
        // The Rust names of this spec's module, with the geometry that defined each.
        let mut items = RustNames { scopes: crate::names::RustScopes::launcher_module(), geometries: BTreeMap::new() };
        let all = variants(model);
        // An empty axis list is reported by validation; exclusions that leave
        // nothing are reported here: a spec that generates no kernel is a mistake.
        if all.is_empty() && model.axes.iter().all(|c| !c.values.is_empty()) {
            if let Some(span) = &model.exclude_span {
                diags.push(Diagnostic {
                    source: model.source.clone(),
                    span: span.clone(),
                    field: "exclude".into(),
                    message: "the exclusions remove every combination of axis values, so this spec would generate no kernel".into(),
                    help: Some("remove an exclusion, or list more axis values".into()),
                });
            }
        }
        for g in &model.geometries {
            for variant in &all {
                let axes: Vec<(&str, &AxisValue)> = variant.values.iter().map(|(a, v)| (a.as_str(), v)).collect();
                match model.family.plan(&axes, g) {
                    Err(violations) => {
                        for v in violations {
                            let (span, field) = blame(model, g, variant, &v.blame);
                            diags.push(Diagnostic { source: model.source.clone(), span, field, message: v.message, help: Some(v.help) });
                        }
                    }
                    Ok(plans) => {
                        for plan in plans {
                            let launcher = kernel_name(&model.family, g, variant, None);
                            let name = match &plan.part {
                                Some(part) => format!("{launcher}_{part}"),
                                None => launcher.clone(),
                            };
                            check_limits(model, g, variant, &name, &plan, &mut diags);
                            check_rust_names(model, g, variant, &launcher, &name, &plan, &mut items, &mut diags);
                            match seen.get(&name) {
                                // one spec and geometry, two combinations of axis values
                                Some((first, geometry, other)) if Arc::ptr_eq(first, &model.source) && *geometry == g.name && other != variant => {
                                    diags.push(values_clash(model, g, variant, other, &name));
                                }
                                Some((first, _, _)) => diags.push(Diagnostic {
                                    source: model.source.clone(),
                                    span: g.span.clone(),
                                    field: format!("geometry.{}", g.name),
                                    message: format!("kernel name `{name}` is already generated from {}", first.display),
                                    help: Some("rename this geometry: kernel names must be unique across all specs".into()),
                                }),
                                None => {
                                    seen.insert(name.clone(), (model.source.clone(), g.name.clone(), variant.clone()));
                                }
                            }
                            kernels.push(Kernel {
                                name,
                                launcher,
                                family: model.family.clone(),
                                source: model.source.clone(),
                                geometry: g.name.clone(),
                                variant: variant.clone(),
                                plan,
                            });
                        }
                    }
                }
            }
        }
    }
    if diags.is_empty() { Ok(kernels) } else { Err(diags) }
}

/// The cartesian product of the spec's axis values, in family axis order,
/// without the excluded combinations.
fn variants(model: &SpecModel) -> Vec<Variant> {
    let mut out = vec![Variant { values: Vec::new() }];
    for choice in &model.axes {
        out = out
            .into_iter()
            .flat_map(|v| {
                choice.values.iter().map(move |(value, _)| {
                    let mut v = v.clone();
                    v.values.push((choice.axis.name.clone(), value.clone()));
                    v
                })
            })
            .collect();
    }
    out.retain(|v| !model.excludes.iter().any(|pattern| pattern.iter().all(|(axis, value)| v.get(axis) == value)));
    out
}

/// The kernel's name: geometry, family, every axis value as spelled, then the part.
pub fn kernel_name(family: &FamilyDef, g: &Geometry, v: &Variant, part: Option<&str>) -> String {
    let mut parts = vec![g.name.clone(), family.name.clone()];
    for (axis, value) in &v.values {
        let spelled = family.axis(axis).map(|def| def.spell(value)).unwrap_or_default();
        if !spelled.is_empty() {
            parts.push(spelled);
        }
    }
    parts.extend(part.map(str::to_string));
    parts.join("_")
}

fn blame(model: &SpecModel, g: &Geometry, v: &Variant, b: &Blame) -> (Span, String) {
    match b {
        Blame::Field(path) => {
            let span = g.fields.get(path).map_or(g.span.clone(), |(_, s)| s.clone());
            (span, format!("geometry.{}.{path}", g.name))
        }
        Blame::Axis(axis) => {
            let value: &AxisValue = v.get(axis);
            let span = model
                .axes
                .iter()
                .find(|c| c.axis.name == *axis)
                .and_then(|c| c.values.iter().find(|(x, _)| x == value))
                .map_or(model.family_span.clone(), |(_, s)| s.clone());
            (span, format!("axes.{axis}"))
        }
        Blame::Geometry => (g.span.clone(), format!("geometry.{}", g.name)),
    }
}

/// Two combinations of axis values that spell one kernel name (`a_b` + `c` and `a` + `b_c`):
/// blamed on this variant's first value that differs, where the spec lists it.
fn values_clash(model: &SpecModel, g: &Geometry, v: &Variant, other: &Variant, name: &str) -> Diagnostic {
    let spell = |v: &Variant| v.values.iter().map(|(a, x)| format!("{a} = {x}")).collect::<Vec<_>>().join(", ");
    let differ: Vec<&(String, AxisValue)> = v.values.iter().filter(|(a, x)| other.get(a) != x).collect();
    let axis = differ.first().map_or_else(String::new, |(a, _)| a.clone());
    let (span, field) = blame(model, g, v, &Blame::Axis(axis));
    let values: Vec<String> = differ.iter().flat_map(|(a, x)| [format!("`{x}`"), format!("`{}`", other.get(a))]).collect();
    Diagnostic {
        source: model.source.clone(),
        span,
        field,
        message: format!("kernel name `{name}` is spelled by two combinations of axis values: {} and {}", spell(other), spell(v)),
        help: Some(format!(
            "rename one of the values {} in family `{}` (a value with `_` can join the next one's spelling), or list only one of the combinations",
            values.join(", "),
            model.family.name
        )),
    }
}

/// The names the generated Rust of one spec defines, by scope, and the geometry of each.
struct RustNames {
    scopes: crate::names::RustScopes,
    geometries: BTreeMap<(String, String), String>,
}

/// The Rust names a kernel adds to its spec's module must not coincide with any other's in
/// their scope (launcher types are CamelCase, so geometries `v2` and `v_2`, or `w` and `w_`,
/// would both generate `V2...`; a boolean axis's word can end a kernel's static as a packed
/// buffer ends a layout's; a launcher type can be an imported name). Also checks that the
/// kernel's file name fits the file system.
#[allow(clippy::too_many_arguments)]
fn check_rust_names(model: &SpecModel, g: &Geometry, v: &Variant, launcher: &str, name: &str, plan: &KernelPlan, items: &mut RustNames, diags: &mut Diagnostics) {
    let (span, field) = blame(model, g, v, &Blame::Geometry);
    let file = format!("{name}.metal");
    if file.len() > crate::names::MAX_FILE_NAME_LEN {
        diags.push(Diagnostic {
            source: model.source.clone(),
            span: span.clone(),
            field: field.clone(),
            message: format!("kernel file name `{}...` is {} bytes long, above the limit of {}", &file[..32], file.len(), crate::names::MAX_FILE_NAME_LEN),
            help: Some("use a shorter geometry name".into()),
        });
    }
    let part = plan.part.as_deref().map(|p| (model.family.parts.iter().position(|x| x.part.as_deref() == Some(p)).unwrap_or(0), p));
    let names = crate::names::KernelNames {
        launcher,
        kernel: name,
        part,
        outputs: plan.outputs.iter().map(|b| b.name.as_ref()).collect(),
        packed: plan.packed.iter().map(|l| (l.name.as_ref(), l.regions.iter().map(|r| r.name.as_ref()).collect())).collect(),
    };
    let mut collided: Vec<String> = Vec::new();
    for item in crate::names::kernel_items(&names) {
        if item.owner().is_some_and(|o| collided.iter().any(|c| c == o)) {
            continue; // (inside an item already reported)
        }
        let key = (item.scope.clone(), item.name.clone());
        match items.scopes.define(item.clone()) {
            Ok(()) => {
                items.geometries.entry(key).or_insert_with(|| g.name.clone());
            }
            Err(other) => {
                collided.push(item.name.clone());
                let geometry = items.geometries.get(&key).filter(|o| **o != g.name);
                let both_variants = matches!((&item.spelled, &other.spelled), (Spelled::Variant(_), Spelled::Variant(_)));
                let help = match geometry {
                    Some(o) if both_variants => format!("rename geometry `{}` or `{o}` so they differ after CamelCase, which drops `_`", g.name),
                    _ => crate::names::collision_help(&item, other),
                };
                diags.push(Diagnostic {
                    source: model.source.clone(),
                    span: span.clone(),
                    field: field.clone(),
                    message: format!(
                        "`{}`, {}, is also {}{}: the generated Rust would not compile",
                        item.name,
                        item.what,
                        other.what,
                        geometry.map_or(String::new(), |o| format!(" (geometry `{o}`)"))
                    ),
                    help: Some(help),
                });
            }
        }
    }
}

fn check_limits(model: &SpecModel, g: &Geometry, v: &Variant, name: &str, plan: &KernelPlan, diags: &mut Diagnostics) {
    let (span, field) = blame(model, g, v, &Blame::Geometry);
    let mut err = |message: String, help: &str| {
        diags.push(Diagnostic { source: model.source.clone(), span: span.clone(), field: field.clone(), message, help: Some(help.into()) });
    };
    // (each extent fits in 32 bits: the product of three in 128)
    let threads: u128 = plan.threadgroup.iter().map(|&t| u128::from(t)).product();
    if threads > u128::from(MAX_THREADS_PER_THREADGROUP) {
        err(format!("kernel `{name}` needs {threads} threads per threadgroup, above the limit of {MAX_THREADS_PER_THREADGROUP}"), "choose a smaller threadgroup (e.g. fewer rows per threadgroup)");
    }
    if plan.threadgroup_memory_bytes > MAX_THREADGROUP_MEMORY_BYTES {
        err(
            format!("kernel `{name}` needs {} bytes of threadgroup memory, above the limit of {MAX_THREADGROUP_MEMORY_BYTES}", plan.threadgroup_memory_bytes),
            "use a smaller geometry for this family",
        );
    }
    if plan.cuda_threadgroup != plan.threadgroup {
        let threads: u128 = plan.cuda_threadgroup.iter().map(|&t| u128::from(t)).product();
        let [x, y, z] = plan.cuda_threadgroup;
        let [mx, my, mz] = kernelgen_cuda::vocab::MAX_BLOCK_EXTENTS;
        if threads > u128::from(kernelgen_cuda::vocab::MAX_THREADS_PER_BLOCK) {
            err(
                format!("kernel `{name}`'s CUDA block [{x}, {y}, {z}] is {threads} threads, above CUDA's limit of {}", kernelgen_cuda::vocab::MAX_THREADS_PER_BLOCK),
                "choose a smaller cuda_threadgroup",
            );
        } else if x > mx || y > my || z > mz {
            err(format!("kernel `{name}`'s CUDA block [{x}, {y}, {z}] is above CUDA's block extents [{mx}, {my}, {mz}]"), "choose a smaller cuda_threadgroup");
        }
        // Along each axis of a fixed grid: no block wider than the grid (MLX's cuda_kernel cuts
        // a block to the grid, dim3 block(min(tx, gx), ...), so the body would run in blocks
        // other than its own), and the blocks (MLX rounds the division up) within CUDA's limits.
        for ((axis, d), (&block, limit)) in ["x", "y", "z"].iter().zip(&plan.grid).zip(plan.cuda_threadgroup.iter().zip(kernelgen_contract::CudaSource::MAX_GRID_BLOCKS)) {
            let Some(n) = d.as_fixed() else { continue };
            if n < block {
                err(
                    format!("kernel `{name}`'s CUDA block {axis} extent {block} is more than its grid's {n} threads: MLX's cuda_kernel cuts a block to the grid, so it would run in blocks of {n}"),
                    "choose a cuda_threadgroup within the grid",
                );
            }
            if n.div_ceil(block.max(1)) > limit {
                err(
                    format!("kernel `{name}`'s grid {axis} extent {n} in CUDA blocks of {block} is {} blocks, above CUDA's limit of {limit}", n.div_ceil(block.max(1))),
                    "use larger CUDA blocks (the family's cuda_threadgroup, or a spec field that sets it) or a smaller geometry",
                );
            }
        }
    }
    if plan.cuda_shared_memory_bytes > kernelgen_cuda::vocab::MAX_STATIC_SHARED_BYTES {
        err(
            format!(
                "kernel `{name}` needs {} bytes of static shared memory in its CUDA body, above CUDA's limit of {}",
                plan.cuda_shared_memory_bytes,
                kernelgen_cuda::vocab::MAX_STATIC_SHARED_BYTES
            ),
            "use a smaller geometry for this family",
        );
    }
    let buffers = plan.inputs.len() + plan.outputs.len();
    if buffers > MAX_BUFFERS {
        err(format!("kernel `{name}` binds {buffers} buffers, above Metal's limit of {MAX_BUFFERS}"), "bind fewer buffers");
    }
    for b in plan.inputs.iter().filter(|b| b.source == Source::HostInts && b.dtype != Dtype::I32) {
        err(format!("kernel `{name}`: host-integer input `{}` is {}, but launchers pass host integers as int32", b.name, b.dtype), "declare it int32");
    }
    for (axis, d) in ["x", "y", "z"].iter().zip(&plan.grid) {
        if let Some(n) = d.as_fixed().filter(|&n| n > u32::MAX as u64) {
            err(format!("kernel `{name}`'s grid {axis} extent {n} does not fit in 32 bits"), "use a smaller geometry");
        }
    }
}
