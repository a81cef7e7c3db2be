//! The seed kernels (TypeScript diffs holding MSL bodies, in ../shared/seeds next to the
//! repo; never copied into it), assembled as MLX 0.32 assembles a custom kernel: MLX's
//! preamble (its kernels' utils.h, from the fetched wheel; without it `<metal_stdlib>` stands
//! in), the header, `template <...>`, `[[kernel]] void name(params) { body }` and the explicit
//! instantiation. Skips with a message when the seeds are absent.
use crate::common;

use std::path::PathBuf;

/// One `new MetalKernel({...})` of a seed module, resolved to its MSL.
struct Kernel {
    name: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    header: String,
    body: String,
    ints: Vec<String>,
    dtypes: Vec<String>,
}

/// The diff's added lines, without their `+`, split by module (`package/...` lines).
fn modules(diff: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in diff.lines() {
        if line.starts_with("package/") {
            out.push(String::new());
        } else if let (Some(m), Some(added)) = (out.last_mut(), line.strip_prefix('+')) {
            m.push_str(added);
            m.push('\n');
        }
    }
    out
}

/// `const NAME = String.raw`...`` blocks.
fn raw_blocks(module: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = module;
    while let Some(i) = rest.find("String.raw`") {
        let before = &rest[..i];
        let name = before.trim_end().trim_end_matches('=').trim_end().rsplit(' ').next().unwrap_or("").to_string();
        let after = &rest[i + "String.raw`".len()..];
        let Some(end) = after.find('`') else { break };
        out.push((name, after[..end].to_string()));
        rest = &after[end + 1..];
    }
    out
}

/// The text of a balanced `{...}` or `[...]` starting at `open`.
fn balanced(s: &str, open: usize) -> &str {
    let (o, c) = if s[open..].starts_with('[') { ('[', ']') } else { ('{', '}') };
    let mut depth = 0;
    for (k, ch) in s[open..].char_indices() {
        if ch == o {
            depth += 1;
        } else if ch == c {
            depth -= 1;
            if depth == 0 {
                return &s[open..open + k + 1];
            }
        }
    }
    &s[open..]
}

fn strings_in(list: &str) -> Vec<String> {
    list.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

/// The keys of the object literal after `key:` (or `const key =`), in order.
fn keys_after(module: &str, key: &str) -> Vec<String> {
    let pats = [format!("{key}: {{"), format!("const {key} = {{")];
    for p in &pats {
        if let Some(i) = module.find(p.as_str()) {
            let obj = balanced(module, i + p.len() - 1);
            return obj
                .trim_matches(['{', '}'])
                .split(',')
                .filter_map(|kv| kv.split(':').next().map(|k| k.trim().to_string()))
                .filter(|k| !k.is_empty())
                .collect();
        }
    }
    Vec::new()
}

fn kernels(module: &str) -> Vec<Kernel> {
    let blocks = raw_blocks(module);
    let block = |name: &str| blocks.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone());
    let ints = keys_after(module, "templateInts");
    let dtypes = keys_after(module, "templateDtypes");
    let mut out = Vec::new();
    let mut rest = module;
    while let Some(i) = rest.find("new MetalKernel(") {
        let open = i + rest[i..].find('{').unwrap_or(0);
        let obj = balanced(rest, open).to_string();
        rest = &rest[open + obj.len()..];
        let field = |k: &str| {
            let at = obj.find(&format!("{k}:"))? + k.len() + 1;
            Some(obj[at..].trim_start().to_string())
        };
        let name =
            field("name").map(|v| v.trim_start_matches(['"', '`']).split(['"', '`']).next().unwrap_or("").to_string());
        let list = |k: &str| field(k).map(|v| strings_in(balanced(&v, 0))).unwrap_or_default();
        let source = field("source").unwrap_or_default();
        let ident: String = source.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.').collect();
        // `SOURCE.replace("a", "b")`: the seed derives a variant from a block.
        let mut bodies: Vec<String> = Vec::new();
        if let Some(b) = block(&ident) {
            bodies.push(b);
        } else if let Some(b) = ident.strip_suffix(".replace").and_then(block) {
            let args = strings_in(&source[..source.find(')').unwrap_or(source.len())]);
            bodies.push(if args.len() == 2 { b.replace(&args[0], &args[1]) } else { b });
        } else if let Some(f) = ident.strip_prefix("spec.") {
            // `spec.gateUpSource`: every block named like GATE_UP_SOURCE (Q4 and Q8 variants).
            let snake: String = f
                .trim_end_matches("Source")
                .chars()
                .flat_map(|c| if c.is_uppercase() { vec!['_', c] } else { vec![c.to_ascii_uppercase()] })
                .collect();
            bodies
                .extend(blocks.iter().filter(|(n, _)| n.contains(&format!("{snake}_SOURCE"))).map(|(_, t)| t.clone()));
        }
        let header = field("header")
            .map(|h| h.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
            .and_then(|h| block(&h))
            .unwrap_or_default();
        for (k, body) in bodies.into_iter().enumerate() {
            out.push(Kernel {
                name: format!(
                    "{}{}",
                    name.clone().unwrap_or_else(|| "seed".into()).replace("${spec.kernelPrefix}", "expert"),
                    if k > 0 { format!("_{k}") } else { String::new() }
                ),
                inputs: list("inputNames"),
                outputs: list("outputNames"),
                header: header.clone(),
                body,
                ints: ints.clone(),
                dtypes: dtypes.clone(),
            });
        }
    }
    out
}

/// Buffer element types the seed engine passes for arguments that are not of the kernel's
/// template dtype (read off the seeds' call sites).
fn arg_type(name: &str, first_dtype: &str) -> (&'static str, bool) {
    match name {
        "slot" => ("uint8_t", false),
        "w" => ("uint32_t", false),
        "Tin" => ("int32_t", true), // a 1-element input: MLX passes it as constant
        "lengths" => ("int32_t", false),
        "mask" => ("bool", false),
        "g" | "state_in" | "state_out" => ("float", false),
        _ if first_dtype.is_empty() => ("float", false),
        _ => ("T", false),
    }
}

const POSITION: [&str; 9] = [
    "dispatch_threads_per_threadgroup",
    "grid_origin",
    "grid_size",
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threadgroups_per_grid",
    "threads_per_grid",
    "threads_per_threadgroup",
];
const INDEX: [&str; 7] = [
    "simdgroup_index_in_threadgroup",
    "simdgroups_per_threadgroup",
    "thread_execution_width",
    "thread_index_in_quadgroup",
    "thread_index_in_simdgroup",
    "thread_index_in_threadgroup",
    "threads_per_simdgroup",
];

/// The source MLX compiles for this kernel at template dtype `dt`.
fn assemble(k: &Kernel, preamble: &str, dt: &str) -> String {
    let first = k.dtypes.first().map(String::as_str).unwrap_or("");
    let mut params = Vec::new();
    for (i, name) in k.inputs.iter().chain(&k.outputs).enumerate() {
        let (ty, small) = arg_type(name, first);
        let ty = if ty == "T" { first } else { ty };
        let is_input = i < k.inputs.len();
        params.push(match (is_input, small) {
            (true, true) => format!("  const constant {ty}* {name} [[buffer({i})]]"),
            (true, false) => format!("  const device {ty}* {name} [[buffer({i})]]"),
            _ => format!("  device {ty}* {name} [[buffer({i})]]"),
        });
    }
    // Attributes: found by a substring search of the body, in alphabetical order.
    let mut attrs: Vec<(&str, &str)> =
        POSITION.iter().map(|a| (*a, "uint3")).chain(INDEX.iter().map(|a| (*a, "uint"))).collect();
    attrs.sort();
    for (a, ty) in attrs {
        if k.body.contains(a) {
            params.push(format!("  {ty} {a} [[{a}]]"));
        }
    }
    let kernel = format!("custom_kernel_{}", k.name);
    let mut targs: Vec<String> = k.ints.iter().map(|n| format!("int {n}")).collect();
    targs.extend(k.dtypes.iter().map(|n| format!("typename {n}")));
    let mut vals: Vec<String> =
        k.ints.iter().map(|n| if n == "BITS" { "4".to_string() } else { "64".to_string() }).collect();
    vals.extend(k.dtypes.iter().enumerate().map(|(j, _)| if j == 0 { dt.to_string() } else { "float".to_string() }));
    let mut s = format!("{preamble}\n{}\n", k.header);
    if !targs.is_empty() {
        s.push_str(&format!("template <{}>\n", targs.join(", ")));
    }
    s.push_str(&format!("[[kernel]] void {kernel}(\n{}) {{\n{}\n}}\n", params.join(",\n"), k.body));
    if !targs.is_empty() {
        let a = vals.join(", ");
        s.push_str(&format!(
            "template [[host_name(\"{kernel}\")]] [[kernel]] decltype({kernel}<{a}>) {kernel}<{a}>;\n"
        ));
    }
    s
}

#[test]
fn seed_kernels_pass_as_mlx_assembles_them() {
    let dir = std::env::var_os("KGMSL_SEEDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::crate_dir().join("../../../shared/seeds"));
    let seeds = common::files(&dir, "txt");
    if seeds.is_empty() {
        println!("skipping: no seed kernels in {}", dir.display());
        return;
    }
    let (preamble, dirs) = if let Some(inc) = common::mlx_include() {
        ("#include \"mlx/backend/metal/kernels/utils.h\"".to_string(), vec![inc])
    } else {
        println!("MLX headers absent: <metal_stdlib> stands in for MLX's preamble");
        ("#include <metal_stdlib>\nusing namespace metal;".to_string(), vec![])
    };
    let c = common::checker();
    let mut sources = Vec::new();
    for seed in &seeds {
        let diff = common::read(seed);
        for m in modules(&diff) {
            for k in kernels(&m) {
                for dt in ["bfloat16_t", "float"] {
                    if k.dtypes.is_empty() && dt != "float" {
                        continue;
                    }
                    let src = assemble(&k, &preamble, dt);
                    if let Some(d) = std::env::var_os("KGMSL_SEEDS_DUMP") {
                        let _ = std::fs::write(PathBuf::from(d).join(format!("{}_{dt}.metal", k.name)), &src);
                    }
                    sources.push((format!("{}_{dt}.metal", k.name), src));
                }
            }
        }
    }
    let count = sources.len();
    let failures: Vec<String> = common::par_map(&sources, |(name, src)| {
        c.check(src, name, &dirs).err().map(|p| {
            format!("{name}:\n  {}", p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n  "))
        })
    })
    .into_iter()
    .flatten()
    .collect();
    println!("{count} seed kernel sources checked");
    // A control: the same assembly with one bad line is rejected at that line.
    if let Some(k) = seeds.iter().flat_map(|f| modules(&common::read(f))).flat_map(|m| kernels(&m)).next() {
        let mut bad =
            Kernel { body: format!("  device float* nowhere = nullptr; thread float* p = nowhere;\n{}", k.body), ..k };
        bad.name.push_str("_control");
        let src = assemble(&bad, &preamble, "float");
        let line = src.lines().position(|l| l.contains("nowhere = nullptr")).unwrap() as u32 + 1;
        let p = c.check(&src, "control.metal", &dirs).expect_err("the control kernel passed");
        assert!(p.iter().any(|p| p.line == line && p.message.contains("changes the address space")), "{p:?}");
    }
    assert!(count >= 10, "only {count} seed kernels found: the seed format changed?");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
