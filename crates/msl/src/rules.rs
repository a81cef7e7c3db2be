//! Metal's rules that clang does not enforce by itself: MSL's language restrictions
//! (section 1.5), kernel signatures (address spaces, chapter 4; attributes, 5.2), and
//! function constants (not supported by kernelgen).

use std::collections::{HashMap, HashSet};

use crate::{Problem, ProblemKind};
use crate::ast::{Ast, Fact, Function};
use crate::lex::{Kind, Token, define_body, matching, tokenize};
use crate::vocab::{Attribute, PARAMETER_ATTRIBUTES};

fn problem(file: &str, line: u32, col: u32, message: impl Into<String>) -> Problem {
    Problem { file: file.to_string(), line, col, message: message.into(), kind: ProblemKind::Metal }
}

/// Keyword-level restrictions of section 1.5, on one file's tokens.
pub fn tokens(
    file: &str,
    src: &str,
    reject_function_constants: bool,
    out: &mut Vec<Problem>,
) {
    let toks = tokenize(src);
    for (i, t) in toks.iter().enumerate() {
        let prev = if i > 0 { toks[i - 1].text.as_str() } else { "" };
        let next = toks.get(i + 1).map_or("", |n| n.text.as_str());
        let p = |m: &str| problem(file, t.line, t.col, m);
        // (an #include of a foreign <header> is clang's #error where it is live: sources.rs)
        if t.kind != Kind::Ident {
            continue;
        }
        let msg = match t.text.as_str() {
            "dynamic_cast" => "dynamic_cast is not supported in MSL (section 1.5)",
            "typeid" => "typeid (run-time type information) is not supported in MSL (section 1.5)",
            "new" => "the new operator is not supported in MSL (section 1.5)",
            "delete" if prev != "=" => "the delete operator is not supported in MSL (section 1.5)",
            // The noexcept *specifier* is fine (MLX's headers use it); the operator is not.
            "noexcept"
                if !matches!(
                    prev,
                    ")" | "const" | "thread" | "device" | "threadgroup" | "constant" | "volatile" | "&" | "&&" | "]"
                ) =>
            {
                "the noexcept operator is not supported in MSL (section 1.5)"
            }
            "goto" => "goto is not supported in MSL (section 1.5)",
            "register" => "the register storage class is not supported in MSL (section 1.5)",
            "thread_local" => "thread_local is not supported in MSL (section 1.5)",
            "virtual" => "virtual functions are not supported in MSL (section 1.5)",
            "throw" | "try" | "catch" => "exceptions (throw, try, catch) are not supported in MSL (section 1.5)",
            "long" if next == "long" => "long long is not a Metal type (MSL 2.1: long is Metal's 64-bit integer); use long",
            "long" if prev == "long" => continue,
            "double" if prev == "long" => continue,
            "double" => "double is not supported in MSL (section 1.5); use float",
            "long" if next == "double" => "long double is not supported in MSL (section 1.5); use float",
            "std" if next == "::" => {
                "the C++ standard library is not available in MSL (section 1.5): use metal:: instead of std::"
            }
            "function_constant" if reject_function_constants && (prev == "[" || prev == ",") => {
                "function constants ([[function_constant(n)]], MSL 5.8) are not supported by kernelgen: pass the value as a buffer or a template argument"
            }
            _ => continue,
        };
        out.push(p(msg));
    }
}

/// One `[[...]]` attribute: its name, its argument text, and position.
#[derive(Clone, Debug)]
pub struct Attr {
    pub name: String,
    pub arg: Option<String>,
    pub line: u32,
    pub col: u32,
    /// Where the `]]` ends (line, col just past it).
    pub end: (u32, u32),
    /// Token index of the first `[`.
    pub first: usize,
}

fn attributes(toks: &[Token]) -> Vec<Attr> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < toks.len() {
        if !(toks[i].is("[") && toks[i + 1].is("[")) {
            i += 1;
            continue;
        }
        let Some(close) = matching(toks, i) else { break };
        let end_tok = &toks[close];
        let end = (end_tok.line, end_tok.col + 1);
        let mut j = i + 2;
        while j < close.saturating_sub(1) {
            let t = &toks[j];
            if t.kind == Kind::Ident {
                // `ns::name` keeps the last part.
                let mut name = t.text.clone();
                let mut k = j + 1;
                while toks.get(k).is_some_and(|x| x.is("::")) && toks.get(k + 1).is_some_and(|x| x.kind == Kind::Ident)
                {
                    name = toks[k + 1].text.clone();
                    k += 2;
                }
                let mut arg = None;
                if toks.get(k).is_some_and(|x| x.is("("))
                    && let Some(c) = matching(toks, k)
                {
                    arg = Some(toks[k + 1..c].iter().map(|x| x.text.as_str()).collect::<Vec<_>>().join(""));
                    k = c + 1;
                }
                out.push(Attr { name, arg, line: t.line, col: t.col, end, first: i });
                j = k;
            } else {
                j += 1;
            }
        }
        i = close + 1;
    }
    out
}

fn before(a: (u32, u32), b: (u32, u32)) -> bool {
    a <= b
}

/// The address space of a pointer's or reference's pointee in clang's spelling of a type
/// (`const __global float *`), or None when the type is neither.
fn pointee_space(ty: &str) -> Option<&'static str> {
    let ty = &outside_template_args(ty);
    let head = ty.split(['*', '&']).next()?;
    if !ty.contains('*') && !ty.contains('&') {
        return None;
    }
    Some(if head.contains("__global") {
        "device"
    } else if head.contains("__constant") {
        "constant"
    } else if head.contains("__local") {
        "threadgroup"
    } else {
        "thread"
    })
}

/// The address space an lvalue or a pointer's pointee is in, from clang's spelling of its
/// type: the first space named before any `*` or `&` (private and generic are both `thread`).
fn space_class(ty: &str) -> &'static str {
    let outer = outside_template_args(ty);
    let head = outer.split(['*', '&']).next().unwrap_or("");
    if head.contains("__global") {
        "device"
    } else if head.contains("__constant") {
        "constant"
    } else if head.contains("__local") {
        "threadgroup"
    } else {
        "thread"
    }
}

/// A Metal 4 tensor handle over device or constant memory (`tensor<device half, dextents<int,
/// 2>>`): bound to a buffer index like a buffer (`[[buffer(n)]]`).
fn tensor_handle(ty: &str) -> bool {
    let mut t = ty;
    for q in ["const ", "__private ", "const ", "metal::"] {
        t = t.trim_start_matches(q);
    }
    let Some(args) = t.strip_prefix("tensor<") else { return false };
    let first = args.split(',').next().unwrap_or("");
    let handle = !args.contains("tensor_inline");
    handle && (first.contains("__global") || first.contains("__constant"))
}

/// A type's spelling without its template argument lists: the address spaces that qualify the
/// type itself remain (`tensor<__global half, ...> &` is a reference to a thread object). Read
/// on desugared types only: an alias (`ptr<__global float>` for `__global float *`) keeps the
/// type's own space inside its argument list.
fn outside_template_args(ty: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::with_capacity(ty.len());
    for c in ty.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn plain_type(ty: &str) -> String {
    let t = ty.replace("__private", "").replace("__generic", "").replace("const ", "").replace("metal::", "");
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A thread attribute parameter's type in Metal's spelling (`uint3`), from clang's desugared
/// spelling (so `uint32_t`, a typedef or `vec<uint, 3>` is what it names), or `None` for a
/// type that depends on a template parameter (checked by Metal where it is instantiated).
fn position_type(desugared: &str) -> Option<String> {
    let t = plain_type(desugared);
    let (base, lanes) = match t.split_once(" __attribute__((ext_vector_type(") {
        Some((base, rest)) => (base.trim().to_string(), rest.trim_end_matches(")))").to_string()),
        None => (t.clone(), String::new()),
    };
    let base = match base.as_str() {
        "unsigned int" | "uint" => "uint",
        "unsigned short" | "ushort" => "ushort",
        // one identifier that is no builtin type: a template parameter
        b if !b.contains(' ') && b.chars().next().is_some_and(|c| c.is_ascii_uppercase()) => return None,
        b => b,
    };
    Some(format!("{base}{lanes}"))
}

/// Kernel signatures in one file: address spaces of pointer parameters (MSL 4), attribute
/// parameter types (5.2.1), unique buffer indices; returns the kernels found (by id).
pub fn kernels(file: &str, src: &str, functions: &[&Function], out: &mut Vec<Problem>) -> HashSet<String> {
    let toks = tokenize(src);
    let attrs = attributes(&toks);
    let mut kernels = HashSet::new();
    let mut done = HashSet::new();
    // Not the `[[kernel]]` of an explicit instantiation (`template [[host_name(..)]] [[kernel]]
    // ...`, whose pattern is checked where it is declared) nor one inside a #define.
    let instantiation = |a: &Attr| {
        let mut j = a.first;
        while j >= 2 && toks[j - 1].is("]") && toks[j - 2].is("]") {
            let Some(open) = (0..j - 1).rev().find(|&k| {
                toks[k].is("[") && k + 1 < toks.len() && toks[k + 1].is("[") && matching(&toks, k) == Some(j - 1)
            }) else {
                break;
            };
            j = open;
        }
        j > 0 && toks[j - 1].is("template")
    };
    // `kernel void f(...)`, the keyword, marks a kernel as `[[kernel]]` does (not the
    // `kernel` inside `[[kernel]]`): a mark that ends where the keyword starts, since the
    // declaration clang reports may start at it.
    let keywords: Vec<Attr> = toks
        .iter()
        .enumerate()
        .filter(|&(i, t)| t.kind == Kind::Ident && t.text == "kernel" && !t.pp && !(i > 0 && toks[i - 1].is("[")))
        .map(|(i, t)| Attr { name: "kernel".into(), arg: None, line: t.line, col: t.col, end: (t.line, t.col), first: i })
        .collect();
    let mut marks: Vec<&Attr> = attrs.iter().filter(|a| a.name == "kernel").chain(&keywords).collect();
    marks.sort_by_key(|a| (a.line, a.col));
    // kernels by name: a second kernel of a name with other parameters overloads it
    let mut by_name: HashMap<String, Vec<String>> = HashMap::new();
    for a in marks.into_iter().filter(|a| !toks[a.first].pp && !instantiation(a)) {
        // The kernel is the first function declared after the attribute (clang drops the
        // attribute, so the declaration starts after it).
        let Some(f) = functions
            .iter()
            .filter(|f| before(a.end, (f.begin.line, f.begin.col)) && f.begin.line > 0)
            .min_by_key(|f| (f.begin.line, f.begin.col))
        else {
            continue;
        };
        // Every instantiation of a template kernel shares the position of its pattern.
        let instances: Vec<&Function> = functions.iter().copied().filter(|g| g.loc.line == f.loc.line && g.loc.col == f.loc.col && g.id != f.id).collect();
        kernels.insert(f.id.clone());
        kernels.extend(instances.iter().map(|g| g.id.clone()));
        if !done.insert((f.loc.line, f.loc.col)) {
            continue;
        }
        // (function templates may share a name: each instantiation has its own host name)
        let template = a.first > 0 && (toks[a.first - 1].is(">") || toks[a.first - 1].is(">>"));
        let params: Vec<String> = f.params.iter().map(|p| p.desugared.clone()).collect();
        match by_name.get(&f.name).filter(|_| !template) {
            Some(first) if *first != params => out.push(problem(
                file,
                f.loc.line,
                f.loc.col,
                format!("kernel '{}' is overloaded: kernel functions cannot be overloaded (MSL 1.5); give it another name", f.name),
            )),
            Some(_) => {}
            None if !template => {
                by_name.insert(f.name.clone(), params);
            }
            None => {}
        }
        check_kernel(file, &toks, &attrs, f, &instances, out);
    }
    duplicate_host_names(file, &toks, &attrs, out);
    kernels
}

/// A `[[host_name("x")]]` naming a function another one in the same branch of the file's
/// conditionals already names (MSL 5.1.11: a host name names one function of a library).
fn duplicate_host_names(file: &str, toks: &[Token], attrs: &[Attr], out: &mut Vec<Problem>) {
    // each token's branch: the chain of conditional groups it sits in (one id per #if, #elif,
    // #else), so that the two branches of an #if may each name the same function
    let mut branch: Vec<Vec<u32>> = Vec::with_capacity(toks.len());
    let (mut stack, mut next) = (Vec::<u32>::new(), 0u32);
    for t in toks {
        if t.kind == Kind::Directive {
            let d = crate::sources::logical_line(&t.text);
            let word: String = d.trim_start_matches('#').trim_start().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            match word.as_str() {
                "if" | "ifdef" | "ifndef" => {
                    next += 1;
                    stack.push(next);
                }
                "elif" | "else" | "elifdef" | "elifndef" => {
                    next += 1;
                    if let Some(top) = stack.last_mut() {
                        *top = next;
                    }
                }
                "endif" => {
                    stack.pop();
                }
                _ => {}
            }
        }
        branch.push(stack.clone());
    }
    let mut seen: Vec<(String, &Vec<u32>)> = Vec::new();
    for a in attrs.iter().filter(|a| a.name == "host_name" && !toks[a.first].pp) {
        let Some(name) = a.arg.as_deref().filter(|n| n.starts_with('"')) else { continue };
        let here = &branch[a.first];
        // one branch holds the other: both are compiled together
        if seen.iter().any(|(n, b)| n == name && (here.starts_with(b) || b.starts_with(here))) {
            out.push(problem(
                file,
                a.line,
                a.col,
                format!("[[host_name({name})]] names a second function: a host name names one function of a library (MSL 5.1.11)"),
            ));
        } else {
            seen.push((name.to_string(), here));
        }
    }
}

/// Function constants are scalars or vectors (MSL 5.8): `[[function_constant(n)]]` on a
/// variable whose type (from `globals`: line, name, desugared type, at namespace scope) is a
/// structure or an array is a problem at the attribute.
pub fn function_constant_types(file: &str, src: &str, globals: &[(u32, &str, &str)], out: &mut Vec<Problem>) {
    let toks = tokenize(src);
    for a in attributes(&toks).iter().filter(|a| a.name == "function_constant" && !toks[a.first].pp) {
        // the declared name: the identifier before the attribute, `]` of an array's extent skipped
        let mut j = a.first;
        let mut array = false;
        while j > 0 && toks[j - 1].is("]") {
            array = true;
            let Some(open) = (0..j - 1).rev().find(|&k| toks[k].is("[")) else { break };
            j = open;
        }
        let Some(name) = j.checked_sub(1).map(|k| &toks[k]).filter(|t| t.kind == Kind::Ident) else { continue };
        let Some((_, _, ty)) = globals.iter().find(|(line, n, _)| *line == name.line && *n == name.text) else { continue };
        let element = plain_type(ty.split('[').next().unwrap_or(ty)).replace("__constant", "");
        let element = element.trim();
        let scalar = SCALAR_TYPES.contains(&element)
            || element.split(" __attribute__((ext_vector_type(").next().is_some_and(|e| SCALAR_TYPES.contains(&e.trim()));
        if array || ty.contains('[') || !scalar {
            out.push(problem(
                file,
                a.line,
                a.col,
                format!(
                    "function constant '{}' has type '{}': a function constant is a scalar or a vector (MSL 5.8)",
                    name.text,
                    crate::diag::reword(ty).replace("const constant ", "")
                ),
            ));
        }
    }
}

/// Metal's scalar types as clang spells them desugared.
const SCALAR_TYPES: [&str; 14] = [
    "bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
    "unsigned long", "half", "float", "_Float16", "bfloat",
];

/// `f`'s checks; `instances`, a template kernel's instantiations, give the types of the
/// parameters whose type is a template parameter.
fn check_kernel(file: &str, toks: &[Token], attrs: &[Attr], f: &Function, instances: &[&Function], out: &mut Vec<Problem>) {
    // a template's return type is its instantiations'
    let returned = if instances.is_empty() { vec![(&f.ret, &f.ret_desugared)] } else { instances.iter().map(|g| (&g.ret, &g.ret_desugared)).collect() };
    if let Some((ty, _)) = returned.into_iter().find(|(_, d)| d.as_str() != "void") {
        out.push(problem(file, f.loc.line, f.loc.col, format!("kernel '{}' returns '{ty}'; a kernel function must return void (MSL 5.1.3)", f.name)));
    }
    let mut buffers: HashMap<String, String> = HashMap::new();
    for (k, p) in f.params.iter().enumerate() {
        // The type Metal refuses for a thread attribute allowing `ok`, as a message names it:
        // as written, or where it depends on a template parameter, the first instantiation's.
        let refused = |ok: &[&str]| -> Option<String> {
            match position_type(&p.desugared) {
                Some(t) => (!ok.contains(&t.as_str())).then(|| plain_type(&p.ty)),
                None => instances.iter().filter_map(|g| g.params.get(k)).filter_map(|q| position_type(&q.desugared)).find(|t| !ok.contains(&t.as_str())),
            }
        };
        // The parameter's attribute follows its name.
        let name_idx = toks.iter().position(|t| t.line == p.loc.line && t.col == p.loc.col);
        let attr = name_idx.and_then(|i| attrs.iter().find(|a| a.first == i + 1));
        let space = pointee_space(&p.desugared);
        let at = |m: String| problem(file, p.loc.line, p.loc.col, m);
        if space == Some("thread") {
            out.push(at(format!(
                "kernel parameter '{}' is a pointer or reference in the thread address space; kernel pointer and reference parameters must be declared device, constant or threadgroup (MSL 4)",
                p.name
            )));
        }
        let Some(a) = attr else { continue };
        let aat = |m: String| problem(file, a.line, a.col, m);
        if let Some(thread) = Attribute::from_name(&a.name) {
            let allowed = thread.allowed_types();
            if let Some(ty) = refused(allowed) {
                let (last, rest) = allowed.split_last().unwrap_or((&"", &[]));
                out.push(aat(format!(
                    "[[{}]] parameter '{}' has type '{ty}'; Metal allows {} or {last} (MSL 5.2.3.6)",
                    a.name,
                    p.name,
                    rest.join(", ")
                )));
            }
            continue;
        }
        match a.name.as_str() {
            "buffer" => {
                let text = a.arg.clone().unwrap_or_default();
                // the index's value (`1` and `0x1` are one index); a macro's name stays text
                let value = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                    Some(hex) => i64::from_str_radix(hex, 16).ok(),
                    None => text.parse::<i64>().ok(),
                };
                if value.is_some_and(|v| !(0..=30).contains(&v)) {
                    out.push(aat(format!("[[buffer({text})]] on '{}': Metal's buffer indices are 0 to 30 (MSL 5.2.1)", p.name)));
                }
                let idx = value.map_or(text, |v| v.to_string());
                if !matches!(space, Some("device" | "constant")) && !tensor_handle(&p.desugared) {
                    out.push(aat(format!(
                        "[[buffer({idx})]] parameter '{}' must be a device or constant pointer or reference (MSL 5.2.1)",
                        p.name
                    )));
                }
                if let Some(first) = buffers.get(&idx) {
                    out.push(aat(format!(
                        "buffer index {idx} is used twice in kernel '{}': by '{first}' and by '{}' (MSL 5.2.1)",
                        f.name, p.name
                    )));
                } else {
                    buffers.insert(idx, p.name.clone());
                }
            }
            "threadgroup" if space != Some("threadgroup") => out.push(aat(format!(
                "[[threadgroup({})]] parameter '{}' must be a threadgroup pointer or reference (MSL 5.2.1)",
                a.arg.clone().unwrap_or_default(),
                p.name
            ))),
            n if PARAMETER_ATTRIBUTES.contains(&n) => {}
            n => out.push(aat(format!("unknown kernel parameter attribute [[{n}]] on '{}' (MSL 5.2.1)", p.name))),
        }
    }
}

/// `thread T&` parameters of function templates (rewrite 7 blanked their `thread`): an
/// instantiation whose `T` carries the device, constant or threadgroup space bound an object of
/// that space to a thread reference, which Metal does not do (MSL 4).
pub fn deduced_thread_params(file: &str, params: &[(u32, u32)], functions: &[&Function], out: &mut Vec<Problem>) {
    if params.is_empty() {
        return;
    }
    for f in functions {
        for p in &f.params {
            if !params.contains(&(p.loc.line, p.loc.col)) {
                continue;
            }
            let space = space_class(&p.desugared);
            if space != "thread" {
                out.push(problem(
                    file,
                    p.loc.line,
                    p.loc.col,
                    format!(
                        "thread parameter '{}' of '{}' is bound to a {space} object (deduced as '{}'); Metal has no conversion between address spaces (MSL 4)",
                        p.name,
                        f.name,
                        crate::diag::reword(&p.ty)
                    ),
                ));
            }
        }
    }
}

/// Maps an AST location to the user's (file, line, col); None outside the user's files.
pub type LocMap<'a> = &'a dyn Fn(&crate::ast::Loc) -> Option<(String, u32, u32)>;

/// Rules on the AST: lambdas, recursion, derived classes, function pointers, address-space
/// casts, a function named main, threadgroup variables outside kernels.
pub fn ast(
    ast: &Ast,
    kernels: &HashSet<String>,
    metal_version: u32,
    map: LocMap,
    out: &mut Vec<Problem>,
) {
    let mut push = |l: &crate::ast::Loc, m: String| {
        if let Some((f, line, col)) = map(l) {
            out.push(Problem { file: f, line, col, message: m, kind: ProblemKind::Metal });
        }
    };
    let mut edges: HashMap<String, Vec<(String, String, crate::ast::Loc)>> = HashMap::new();
    for fact in &ast.facts {
        match fact {
            Fact::Lambda(l) if metal_version < LAMBDAS_FROM => {
                push(l, format!("lambda expressions are not supported in MSL before Metal 3.2 (section 1.5; {})", at_version(metal_version)));
            }
            Fact::Call { from, to, to_name, loc } => {
                edges.entry(ast.canonical(from)).or_default().push((ast.canonical(to), to_name.clone(), loc.clone()));
            }
            Fact::Base(l, class, base, virt) => {
                // Type-trait bases (integral_constant and its aliases) carry no state and are
                // what MLX's own headers derive from; Metal compiles them.
                let trait_base =
                    ["integral_constant", "bool_constant", "true_type", "false_type"].iter().any(|b| base.contains(b));
                if *virt || !trait_base {
                    push(
                        l,
                        format!(
                            "derived classes are not supported in MSL (section 1.5): '{class}' derives from '{base}'"
                        ),
                    );
                }
            }
            Fact::FunctionPointer(l, ty) if metal_version < FUNCTION_POINTERS_FROM => {
                push(
                    l,
                    format!(
                        "function pointers are not supported in MSL before Metal 2.3 (section 1.5; {}): '{}'",
                        at_version(metal_version),
                        crate::diag::reword(ty)
                    ),
                );
            }
            // A reinterpreting cast into the thread space (`reinterpret_cast<thread ulong&>(p)`,
            // `(thread ulong*)&p`) is one address-space conversion to clang: reading a pointer's
            // storage as an integer is what is wrong with it.
            Fact::AddressSpaceCast { loc, from, to, from_desugared, to_desugared, .. }
                if pointer_depth(from_desugared) != pointer_depth(to_desugared) =>
            {
                push(loc, pointer_integer_message(false, from, to));
            }
            Fact::AddressSpaceCast { loc, from, to, from_desugared, to_desugared, exempt }
                if !*exempt && space_class(from_desugared) != space_class(to_desugared) =>
            {
                push(
                    loc,
                    format!(
                        "conversion from '{}' to '{}' changes the address space; Metal has no conversion between address spaces (MSL 4)",
                        crate::diag::reword(from),
                        crate::diag::reword(to)
                    ),
                );
            }
            Fact::Attr(l, kind) => {
                if let Some(m) = attribute_problem(kind) {
                    push(l, m);
                }
            }
            Fact::Asm(l) => push(
                l,
                "inline assembly (asm) is not part of MSL (section 1.5: Metal is C++14 without it; a kernel runs only Metal code)".into(),
            ),
            Fact::PointerCast { loc, cast_kind, from, to, from_desugared, to_desugared }
                if converts_pointer_and_integer(cast_kind, from_desugared, to_desugared) =>
            {
                push(loc, pointer_integer_message(cast_kind == "__builtin_bit_cast", from, to));
            }
            Fact::BfloatConversion { loc, from, to, .. } => push(
                loc,
                format!(
                    "implicit conversion from '{}' to '{}': between floating types, bfloat converts implicitly only to float; write the conversion (`{}(x)`) (MSL 2.1, 2.22)",
                    crate::diag::reword(from),
                    crate::diag::reword(to),
                    crate::diag::reword(&plain_type(to))
                ),
            ),
            Fact::StaticConstantLocal(l, name) => push(
                l,
                format!(
                    "static constant variable '{name}' inside a function: constant variables are declared at program scope (MSL 4.2); move it out of the function"
                ),
            ),
            Fact::MemoryOrder(l, function, order) => push(
                l,
                format!("{function} takes memory_order_relaxed only, not {order} (MSL 6.15.1: Metal's atomic functions are relaxed)"),
            ),
            Fact::AtomicType(l, element) => push(
                l,
                format!(
                    "atomic<{}> is not a Metal atomic type: Metal has atomic<int>, atomic<uint>, atomic<bool>, atomic<float> and 64-bit atomic<ulong> (MSL 2.6)",
                    crate::diag::reword(element)
                ),
            ),
            Fact::Union(l, name, fields) if fields.len() > 1 && fields.iter().any(|f| pointer_depth(f) > 0) => {
                let name = if name.is_empty() { "an anonymous union".to_string() } else { format!("union '{name}'") };
                push(
                    l,
                    format!(
                        "{name} holds a pointer beside other members: reading one as the other converts between a \
                         pointer and an integer, which MSL does not have (chapter 2)"
                    ),
                );
            }
            _ => {}
        }
    }
    for (d, what) in undefined(&ast.decls) {
        push(
            &d.loc,
            format!(
                "{what} '{}' is declared but never defined in this source: a Metal kernel uses only what its source \
                 defines and Metal's standard library (MSL section 1.5 and chapter 6; kernelgen links no other code)",
                d.name
            ),
        );
    }
    for f in &ast.functions {
        if f.name == "main" {
            push(&f.loc, "a function named main is not allowed in MSL (section 1.5)".into());
        }
    }
    // Recursion: every call edge inside a cycle of the call graph.
    let mut reported = HashSet::new();
    for (from, calls) in edges.iter().filter(|_| metal_version < RECURSION_FROM) {
        for (to, name, loc) in calls {
            if reaches(&edges, to, from) && reported.insert((loc.line, loc.col, loc.file.to_string())) {
                push(
                    loc,
                    format!(
                        "recursive function calls are not supported in MSL before Metal 2.4 (section 1.5; {}): '{name}' is called recursively",
                        at_version(metal_version)
                    ),
                );
            }
        }
    }
    // Threadgroup variables (rewritten into references, which may land in a struct or at
    // program scope from a macro) must sit in a kernel.
    for fact in &ast.facts {
        let Fact::ThreadgroupVar(l, name, func) = fact else { continue };
        let Some((file, line, col)) = map(l) else { continue };
        let in_kernel = func.as_ref().is_some_and(|id| kernels.contains(id) || kernels.contains(&ast.canonical(id)));
        if !in_kernel {
            out.push(Problem {
                file,
                line,
                col,
                message: format!("threadgroup variable '{name}' declared outside a kernel function; threadgroup variables may be declared only in kernel functions (MSL 4.4)"),
                kind: ProblemKind::Metal,
            });
        }
    }
}

/// The Metal versions from which section 1.5 allows what it once listed as unsupported:
/// function pointers from Metal 2.3, recursive calls from 2.4 (in kernels, the only functions
/// kernelgen checks), lambda expressions from 3.2.
const FUNCTION_POINTERS_FROM: u32 = 230;
const RECURSION_FROM: u32 = 240;
const LAMBDAS_FROM: u32 = 320;

fn at_version(metal_version: u32) -> String {
    format!("this check is at __METAL_VERSION__ {metal_version}")
}

fn reaches(edges: &HashMap<String, Vec<(String, String, crate::ast::Loc)>>, start: &str, goal: &str) -> bool {
    let mut stack = vec![start.to_string()];
    let mut seen = HashSet::new();
    while let Some(n) = stack.pop() {
        if n == goal {
            return true;
        }
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(next) = edges.get(&n) {
            stack.extend(next.iter().map(|(t, _, _)| t.clone()));
        }
    }
    false
}

/// The GNU and C++ attributes (by clang's kind) a Metal source may carry besides Metal's own
/// `[[...]]` ones: inlining (MLX's `METAL_FUNC` is `inline __attribute__((__always_inline__))`),
/// layout, warnings, loop hints (`#pragma clang loop`, `#pragma unroll`), and the `kernel`
/// keyword (OpenCL's, to clang). Nothing among them runs code or names a host symbol.
const ALLOWED_ATTRIBUTES: [&str; 15] = [
    "AlwaysInlineAttr",
    "NoInlineAttr",
    "AlignedAttr",
    "PackedAttr",
    "UnusedAttr",
    "LikelyAttr",
    "UnlikelyAttr",
    "FallThroughAttr",
    "WarnUnusedResultAttr",
    "DeprecatedAttr",
    "CXX11NoReturnAttr",
    "FinalAttr",
    "OverrideAttr",
    "LoopHintAttr",
    "OpenCLKernelAttr",
];

/// The problem with an attribute the source wrote (clang's kind `kind`), if any.
fn attribute_problem(kind: &str) -> Option<String> {
    if ALLOWED_ATTRIBUTES.contains(&kind) {
        return None;
    }
    if kind == "AsmLabelAttr" {
        return Some(
            "an asm label (`asm(\"name\")` after a declaration) names a symbol outside the source; MSL has no asm \
             (section 1.5)"
                .into(),
        );
    }
    // clang's kind without `Attr`, lowercased: the GNU spelling of most (`ConstructorAttr`:
    // constructor, `IFuncAttr`: ifunc)
    let name = kind.strip_suffix("Attr").unwrap_or(kind).to_ascii_lowercase();
    Some(format!(
        "the attribute '{name}' is not part of MSL (Metal's attributes are its [[...]] ones, chapter 5; the GNU \
         attributes kernelgen accepts are always_inline, noinline, aligned, packed and unused)"
    ))
}

fn pointer_integer_message(bit_cast: bool, from: &str, to: &str) -> String {
    format!(
        "{} from '{}' to '{}' converts between a pointer and an integer; MSL has no such conversion (chapter 2: a \
         pointer converts only to a pointer of its address space, and as_type only between data types)",
        if bit_cast { "__builtin_bit_cast" } else { "a cast" },
        crate::diag::reword(from),
        crate::diag::reword(to)
    )
}

/// Pointer levels of a type in clang's spelling (`__global float *__private *` has two), not
/// counting pointers inside template arguments.
fn pointer_depth(ty: &str) -> usize {
    outside_template_args(ty).matches('*').count()
}

/// Whether a cast (clang's `cast_kind`, desugared types) reads a pointer as an integer or makes
/// one of an integer: directly, through a reference or pointer to the pointer's storage
/// (`reinterpret_cast<thread ulong&>(p)`, `*(thread ulong*)&p`), or by `__builtin_bit_cast`.
fn converts_pointer_and_integer(cast_kind: &str, from: &str, to: &str) -> bool {
    let (f, t) = (pointer_depth(from), pointer_depth(to));
    match cast_kind {
        "PointerToIntegral" | "IntegralToPointer" => true,
        "__builtin_bit_cast" => f > 0 || t > 0,
        // pointer to pointer: the pointees differ in pointer levels when one is a pointer's storage
        "BitCast" => f != t && f.max(t) >= 2,
        // an lvalue reinterpreted as another type (the types are the objects')
        "LValueBitCast" => (f == 0) != (t == 0),
        _ => false,
    }
}

/// Functions (and `extern` variables) the source declares and defines nowhere, each once, with
/// "function" or "variable"; a redeclaration of something outside the source (Metal's
/// standard library) is not one.
fn undefined(decls: &[crate::ast::Decl]) -> Vec<(&crate::ast::Decl, &'static str)> {
    let by_id: HashMap<&str, &crate::ast::Decl> = decls.iter().map(|d| (d.id.as_str(), d)).collect();
    // the first declaration of each one's chain, or None when the chain leaves the source
    let root = |d: &crate::ast::Decl| -> Option<String> {
        let mut cur = d;
        for _ in 0..decls.len() + 1 {
            match &cur.previous {
                None => return Some(cur.id.clone()),
                Some(p) => cur = by_id.get(p.as_str())?,
            }
        }
        None
    };
    let mut groups: HashMap<String, Vec<&crate::ast::Decl>> = HashMap::new();
    for d in decls {
        if let Some(r) = root(d) {
            groups.entry(r).or_default().push(d);
        }
    }
    // A template whose pattern has no body links when every specialization it lists is one the
    // source wrote (`template <> int f<int>() {...}`, candle's indexing.metal, ggml's elu_approx);
    // one clang made from the bodiless pattern would not.
    let mut explicit_only: HashMap<&str, bool> = HashMap::new();
    for (pattern, written) in decls.iter().filter_map(|d| d.specializes.as_ref()) {
        *explicit_only.entry(pattern.as_str()).or_insert(true) &= *written;
    }
    let mut out = Vec::new();
    for group in groups.values() {
        if group.iter().any(|d| d.defined || explicit_only.get(d.id.as_str()) == Some(&true)) {
            continue;
        }
        if let Some(first) = group.iter().filter(|d| !d.instantiated).min_by_key(|d| (d.loc.file.clone(), d.loc.line, d.loc.col)) {
            out.push((*first, if first.variable { "variable" } else { "function" }));
        }
    }
    out
}

/// Macros a conditional may test besides the source's own: the ones a Metal compile and
/// kernelgen's emulator define alike (the emulator sets `__METAL_VERSION__` and `__METAL__` as
/// the check does, and `__HAVE_BFLOAT__` from Metal 3.1 on, as Metal does: candle's and
/// mistral.rs's kernels test it; both compile C++17), and the feature macro MLX's headers test.
const SHARED_MACROS: [&str; 7] =
    ["defined", "true", "false", "__METAL_VERSION__", "__METAL__", "__HAVE_BFLOAT__", "__cplusplus"];
const SHARED_FEATURE_MACROS: [&str; 1] = ["__cpp_variable_templates"];

/// A name the implementation reserves (`__x`, `_X`): the compilers' own macros are such.
fn reserved(name: &str) -> bool {
    name.starts_with("__") || (name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()))
}

/// The identifiers of a preprocessor expression (not the letters of a number's suffix).
fn pp_identifiers(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_ascii_digit() {
            while chars.peek().is_some_and(|(_, d)| d.is_ascii_alphanumeric() || matches!(d, '_' | '.' | '\'')) {
                chars.next();
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_ascii_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(expr[i..end].to_string());
        }
    }
    out
}

/// Conditional compilation the emulator could decide otherwise than the check: kernelgen's
/// emulator preprocesses the source with g++, whose own macros (`__GNUC__`, `__x86_64__`; not
/// `__clang__`, `__aarch64__`, the OpenCL ones or the prelude's) differ from the check's clang,
/// so a conditional on one of those, directly or through the source's macros (or built by `##`
/// in one), would compile a branch the check never saw. Each such `#if`, `#ifdef`, `#ifndef` or
/// `#elif` is a problem at its line; `env` holds the check's own macros, `gpp` g++'s (with the
/// emulator's flags; `None` when unknown: then every reserved name is taken as one g++ may
/// define). A reserved name neither compiler defines (`__CUDACC__` in ggml's headers) is
/// undefined for both alike.
pub fn conditionals(
    files: &[(&str, &str)],
    defines: &[crate::Define],
    env: &HashSet<String>,
    gpp: Option<&HashSet<String>>,
    out: &mut Vec<Problem>,
) {
    // every definition of every macro the source (or -D) defines: its body's identifiers,
    // and whether it pastes or stringifies
    let mut macros: HashMap<String, Vec<(Vec<String>, bool)>> = HashMap::new();
    for (_, src) in files {
        let toks = tokenize(src);
        for i in 0..toks.len() {
            let Some((name, body)) = define_body(&toks, i) else { continue };
            let name = &toks[name];
            let body = &toks[body];
            let idents = body.iter().filter(|b| b.kind == Kind::Ident).map(|b| b.text.clone()).collect();
            let pastes = body.iter().any(|b| b.kind == Kind::Punct && b.text.starts_with('#'));
            macros.entry(name.text.clone()).or_default().push((idents, pastes));
        }
    }
    for (name, value) in defines {
        let v = value.clone().unwrap_or_default();
        macros.entry(name.clone()).or_default().push((pp_identifiers(&v), v.contains('#')));
    }
    for (file, src) in files {
        for t in tokenize(src).iter().filter(|t| t.kind == Kind::Directive) {
            let text = crate::sources::logical_line(&t.text);
            let rest = text.trim_start_matches('#').trim_start();
            let keyword: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if !matches!(keyword.as_str(), "if" | "ifdef" | "ifndef" | "elif" | "elifdef" | "elifndef") {
                continue;
            }
            let mut stack = pp_identifiers(&rest[keyword.len()..]);
            let mut seen: HashSet<String> = HashSet::new();
            let mut why = None;
            while let Some(id) = stack.pop() {
                if !seen.insert(id.clone()) || SHARED_MACROS.contains(&id.as_str()) || SHARED_FEATURE_MACROS.contains(&id.as_str()) {
                    continue;
                }
                // `__has_include(...)` and the like are operators each compiler answers its own way
                let builtin = id.starts_with("__has_") || id.starts_with("__is_") || id == "__building_module";
                if env.contains(&id) || (reserved(&id) && (builtin || gpp.is_none_or(|g| g.contains(&id)))) {
                    why = Some(format!("'{id}', which kernelgen's emulator (g++) and Metal's compiler do not define alike"));
                    break;
                }
                for (idents, pastes) in macros.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
                    if *pastes {
                        why = Some(format!("the macro '{id}', whose # or ## could build any name"));
                        break;
                    }
                    stack.extend(idents.iter().cloned());
                }
                if why.is_some() {
                    break;
                }
            }
            if let Some(why) = why {
                out.push(problem(
                    file,
                    t.line,
                    t.col,
                    format!(
                        "#{keyword} depends on {why}: the emulator, which compiles this source with g++, would take a \
                         branch the Metal check did not see; test only macros the source or -D defines, \
                         __METAL_VERSION__, __METAL__, __HAVE_BFLOAT__ or __cplusplus (kernelgen's Metal check)"
                    ),
                ));
            }
        }
    }
}

/// Metal's address-space keywords, one of which every pointer type names (MSL 4).
const ADDRESS_SPACES: [&str; 7] = ["device", "constant", "thread", "threadgroup", "threadgroup_imageblock", "ray_data", "object_data"];

/// A pointer type written without an address space, as a local or program-scope variable, a
/// parameter of a function that is not a kernel (the kernel rule reports those) or a C-style
/// cast: Apple's compiler says "pointer type must have explicit address space qualifier" (MSL 4:
/// every pointer's pointee names its space). The type is read from the tokens where the AST says
/// it is written; one spelled through an alias, `auto` or `decltype` is left alone, and so are
/// templates, whose `T*` may carry its space in `T`.
pub fn pointer_types(ast: &Ast, kernels: &HashSet<String>, texts: &HashMap<String, Vec<Token>>, map: LocMap, out: &mut Vec<Problem>) {
    for fact in &ast.facts {
        let Fact::PointerType { begin, name, func } = fact else { continue };
        // a kernel's parameters are the kernel rule's
        let kernel_param = |f: &String| {
            kernels.contains(f)
                && ast.functions.iter().any(|g| g.id == *f && g.params.iter().any(|p| name.as_ref().is_some_and(|n| (p.loc.line, p.loc.col) == (n.line, n.col))))
        };
        if func.as_ref().is_some_and(kernel_param) {
            continue;
        }
        let Some((file, line, col)) = map(begin) else { continue };
        let Some(toks) = texts.get(&file) else { continue };
        let Some(mut first) = toks.iter().position(|t| (t.line, t.col) == (line, col)) else { continue };
        // clang begins a `thread const T* p` local at `const`: `thread` (OpenCL's __generic, the
        // default space) is left out of its range, so the qualifiers written before are read too
        while first > 0 && (ADDRESS_SPACES.iter().chain(&["const", "volatile"]).any(|w| toks[first - 1].is(w))) {
            first -= 1;
        }
        let span: &[Token] = match name {
            Some(n) => {
                let Some((_, nl, nc)) = map(n) else { continue };
                let end = toks[first..].iter().position(|t| (t.line, t.col) >= (nl, nc)).map_or(toks.len(), |e| first + e);
                &toks[first..end]
            }
            None if toks[first].is("(") => match matching(toks, first) {
                Some(close) => &toks[first + 1..close],
                None => continue,
            },
            None => continue,
        };
        let written = |w: &str| span.iter().any(|t| t.is(w));
        if written("*") && !ADDRESS_SPACES.iter().any(|s| written(s)) && !["auto", "decltype", "typename", "::", "<"].iter().any(|w| written(w)) {
            out.push(problem(
                &file,
                line,
                col,
                "pointer type must have explicit address space qualifier: write thread, device, constant or threadgroup before the pointee type (MSL 4)",
            ));
        }
    }
}
