//! Source rewrites that let clang (C++ for OpenCL) parse MSL, with a map back to the original
//! lines and columns. Each rewrite keeps lines; a few insert characters within a line.
//!
//! 1. `float4(a, b)` and `short2 v(a, b);` (vector constructors with several arguments, which
//!    clang rejects as a functional cast) become `float4{a, b}` and `short2 v{a, b};` (the
//!    braces are recorded: too few components there is an error, unlike in braces the user
//!    wrote, which Metal value-initialises the rest of); with one
//!    argument, `half2(v)` becomes `__kgmsl_vcast<half2>(v)` (the prelude converts a vector
//!    element by element, as Metal does, or splats a scalar; a comma inside a template argument
//!    list, `float4(*reinterpret_cast<const device vec<T, 4>*>(p))`, separates no arguments).
//!    Names that alias vector types (`typedef float2 complex_T;`) count as vector types.
//! 2. The attribute lists of an explicit instantiation (`template [[host_name("f")]] [[kernel]]
//!    decltype(f<1>) f<1>;`, which Metal accepts and clang does not) are blanked.
//! 3. `threadgroup T x[N];` inside a function, or opening a statement in a macro's body,
//!    becomes a reference to a threadgroup allocation, `threadgroup T (&x)[N] =
//!    __kgmsl_threadgroup_alloc<threadgroup T[N]>();`: OpenCL allows `__local` variables only in
//!    OpenCL kernels, and a Metal kernel is not one. The rules find that initializer in the AST
//!    and check that each such declaration sits in a Metal kernel.
//! 5. `thread` opening a declaration inside a function body is blanked: a local variable is
//!    in the thread space already (elsewhere `thread` stands for OpenCL's generic space).
//! 4. A function constant `constant T x [[function_constant(n)]];` becomes `constant T x {};`:
//!    a program-scope constant (its value is chosen at pipeline build time in Metal).
//! 6. In a file with `using namespace metal;`, an unqualified `atomic_int`, `atomic_uint`,
//!    `atomic_float` or `memory_order` becomes `metal::atomic_uint` (...): clang predeclares
//!    OpenCL's own types of those names at global scope, so the plain name is ambiguous.
//! 7. `thread` in a function template's reference parameter whose type names one of its type
//!    parameters (`thread T& x`, `const thread vec<T, 4>& v`; of an out-of-line member
//!    definition `S<T>::g(...)`, not the class's, which the in-class declaration keeps) is
//!    blanked: clang cannot deduce through `__generic` from a local (a `__private` object in
//!    the OpenCL model), which Metal can. Without it `vec<T, 4>&` is generic again once deduced (a device argument shows
//!    as an address-space conversion), while a bare `T` deduces with the argument's space: those
//!    parameters are recorded, and a rule reports one whose `T` deduced a device, constant or
//!    threadgroup object (Metal does not bind those to thread references). A reference to an
//!    array, `const thread T (&k)[N]`, is one too. A bare `T` that another parameter deduces as
//!    well (`const threadgroup T (&q)[N]`, `T b`) becomes `__private T&` instead: blanked, it
//!    would deduce `__private X` from a local beside the other's `X`, two types where Metal sees
//!    one; `__private` deduces `X` and binds locals only (a thread object reached through a
//!    pointer is `__generic` to clang, and stays refused there).
//! 8. A template's non-type parameter of function pointer type, `void (*f)(A, B)`, is declared
//!    as a function, `void   f (A, B)` (the same type once adjusted): clang gives the spelt-out
//!    pointer a `__generic` pointee that no function's address matches.
//! 9. A kernel defined in a macro's body (`kernel void NAME(...) { ... }`, all of candle's) gets
//!    a marker first in its body, `constexpr int __kgmsl_macro_kernel = 0;`: the rules find
//!    other kernels by the position of their `kernel`, which says nothing of the functions a
//!    macro expands to; the AST names the function that declares the marker.
//! 10. Metal's `vec` naming the type of a typedef, of an alias that is no template, or of a
//!     variable or field (`typedef metal::vec<T, N> frag_type;`, `using V = vec<T, 4>;`,
//!     `vec<T, 2> v;`) becomes `__kgmsl_bvec`, the prelude's `vec` that maps bool to char (clang
//!     14 has no vectors of bool; Metal's `booln` are char vectors to the check). Elsewhere `vec`
//!     stays: a parameter's or a partial specialization's `vec<T, N>` must deduce `T`. So stays
//!     an alias template of `vec` (`template <typename U> using frag_t = vec<U, N>;`, whose
//!     `frag_t<T>&` parameters deduce `T`); where such a template names the type of a typedef,
//!     an alias or a variable (`typedef typename F::template frag_t<T> frag_type;`), its element
//!     argument becomes `::metal::__kgmsl_velem<T>` (bool to char) instead, so that a bool
//!     fragment is a char vector and deduces `T` = char (MLX's steel_attention_nax mask tile).
//! 11. An alias of a function pointer type, `using F = void (*)(A);`, names the prelude's pointer
//!     to that function type, `__kgmsl_function_pointer<void   (A)>`, for the same reason.

use crate::lex::{Kind, Token, define_body, matching, tokenize};

pub struct Rewritten {
    pub text: String,
    /// Parameters `thread T& name` of function templates whose `thread` was blanked (rewrite
    /// 7): original position of the name.
    pub deduced_thread_params: Vec<(u32, u32)>,
    /// The braces rewrite 1 made of a vector constructor's parentheses (original line and
    /// column of the `(`): clang's "too few elements" there is Metal's error too, while at
    /// braces the user wrote it is not (Metal value-initialises the rest).
    pub constructor_braces: Vec<(u32, u32)>,
    /// Per output line (0-based): (output column where a segment starts, original column).
    segments: Vec<Vec<(u32, u32)>>,
}

impl Rewritten {
    /// The original column of a column of the rewritten text (lines are unchanged).
    pub fn original_col(&self, line: u32, col: u32) -> u32 {
        let Some(segs) = self.segments.get(line.saturating_sub(1) as usize) else { return col };
        let mut best = (1, 1);
        for &(out, orig) in segs {
            if out <= col {
                best = (out, orig);
            }
        }
        (best.1 + col.saturating_sub(best.0)).max(1)
    }
}

struct Edit {
    offset: usize,
    delete: usize,
    insert: String,
}

fn is_vector_name(s: &str) -> bool {
    let s = s.strip_prefix("packed_").unwrap_or(s);
    let Some(base) = s.strip_suffix(['2', '3', '4']) else { return false };
    matches!(
        base,
        "bool"
            | "char"
            | "uchar"
            | "short"
            | "ushort"
            | "int"
            | "uint"
            | "long"
            | "ulong"
            | "float"
            | "half"
            | "bfloat"
    )
}

/// Index just past a balanced `<...>` starting at `i` (which must be `<`).
fn skip_angles(toks: &[Token], i: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, t) in toks.iter().enumerate().skip(i) {
        match t.text.as_str() {
            "<" => depth += 1,
            ">" => depth -= 1,
            ">>" => depth -= 2,
            "(" | "[" => {}
            ";" | "{" | "}" => return None,
            _ => {}
        }
        if depth <= 0 {
            return Some(j + 1);
        }
    }
    None
}

/// Whether the parentheses at `open`..`close` hold more than one argument. A template argument
/// list's commas are not the call's (`float4(*reinterpret_cast<const device vec<T, 4>*>(p))`, MLX's
/// dot.h, is one argument): a `<` right after a name (`a < b, c > (d)` is two comparisons) whose `>`
/// is followed by `(`, `{` or `::`.
fn has_top_level_comma(toks: &[Token], open: usize, close: usize) -> bool {
    let mut depth = 0i32;
    let mut k = open + 1;
    while k < close {
        match toks[k].text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "<" if toks[k - 1].kind == Kind::Ident && toks[k - 1].offset + toks[k - 1].text.len() == toks[k].offset => {
                if let Some(end) = skip_angles(toks, k).filter(|&e| e < close && ["(", "{", "::"].iter().any(|s| toks[e].is(s))) {
                    k = end;
                    continue;
                }
            }
            "," if depth == 0 => return true,
            _ => {}
        }
        k += 1;
    }
    false
}

/// Aliases of vector types that a file declares.
#[derive(Default)]
pub struct VectorAliases {
    /// `typedef float2 X;`, `using X = vec<T, 2>;`: vector names to rewrite 1.
    pub names: Vec<String>,
    /// `template <typename U> using X = vec<U, N>;`: the name, and the index of the template
    /// argument that is the element type (rewrite 10).
    pub templates: Vec<(String, usize)>,
}

impl VectorAliases {
    pub fn extend(&mut self, other: VectorAliases) {
        self.names.extend(other.names);
        self.templates.extend(other.templates);
    }
}

/// The vector aliases and alias templates of `vec` that `src` declares.
pub fn vector_aliases(src: &str) -> VectorAliases {
    let toks = tokenize(src);
    VectorAliases { names: vector_alias_names(&toks), templates: vec_alias_templates(&toks) }
}

/// `template <...> using X = [typename] [::][metal::]vec<U, ...>;`, U one of its type parameters:
/// X and the index of U among its parameters. Not where the file declares a `vec` of its own
/// and names this one unqualified.
fn vec_alias_templates(toks: &[Token]) -> Vec<(String, usize)> {
    let own_vec = declares_own_vec(toks);
    let mut out = Vec::new();
    for i in 0..toks.len() {
        if !(toks[i].is("template") && toks.get(i + 1).is_some_and(|t| t.is("<"))) {
            continue;
        }
        let Some(end) = skip_angles(toks, i + 1) else { continue };
        let at = |k: usize, s: &str| toks.get(k).is_some_and(|t| t.is(s));
        if !(at(end, "using") && toks.get(end + 1).is_some_and(|t| t.kind == Kind::Ident) && at(end + 2, "=")) {
            continue;
        }
        let mut j = end + 3 + usize::from(at(end + 3, "typename"));
        j += usize::from(at(j, "::"));
        let qualified = at(j, "metal") && at(j + 1, "::");
        if qualified {
            j += 2;
        } else if own_vec {
            continue;
        }
        let element = toks.get(j + 2).filter(|t| t.kind == Kind::Ident);
        let (Some(element), true) = (element, at(j, "vec") && at(j + 1, "<") && at(j + 3, ",")) else { continue };
        if !skip_angles(toks, j + 1).is_some_and(|k| at(k, ";")) {
            continue;
        }
        let params = template_arguments(toks, i + 1);
        let index = params.iter().position(|&(a, b)| {
            matches!(toks[a].text.as_str(), "typename" | "class")
                && toks[a..b].iter().take_while(|t| !t.is("=")).last().is_some_and(|t| t.text == element.text)
        });
        if let Some(index) = index {
            out.push((toks[end + 1].text.clone(), index));
        }
    }
    out
}

/// The arguments (or parameters) of the angle brackets at `open`, as token ranges.
fn template_arguments(toks: &[Token], open: usize) -> Vec<(usize, usize)> {
    skip_angles(toks, open).map_or_else(Vec::new, |end| parameter_ranges(toks, open, end - 1))
}

/// Whether a file declares a `vec` of its own (`struct vec`, `using vec =`, `typedef X vec;`;
/// not `using metal::vec;`): its unqualified `vec` is not Metal's.
fn declares_own_vec(toks: &[Token]) -> bool {
    toks.windows(3).any(|w| {
        w[1].is("vec") && (matches!(w[0].text.as_str(), "struct" | "class") || (w[0].is("using") && w[2].is("=")) || (!w[0].is("::") && w[2].is(";")))
    })
}

/// Names declared as aliases of vector types: `typedef float2 X;`, `using X = vec<T, 2>;`.
fn vector_alias_names(toks: &[Token]) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..toks.len() {
        let vector_at = |j: usize| {
            let j = if toks.get(j).is_some_and(|t| t.is("metal")) && toks.get(j + 1).is_some_and(|t| t.is("::")) {
                j + 2
            } else {
                j
            };
            toks.get(j)
                .is_some_and(|t| is_vector_name(&t.text) || (t.is("vec") && toks.get(j + 1).is_some_and(|n| n.is("<"))))
        };
        if toks[i].is("typedef")
            && (vector_at(i + 1) || (toks.get(i + 1).is_some_and(|t| t.is("typename")) && vector_at(i + 2)))
        {
            if let Some(semi) = toks[i..].iter().position(|t| t.is(";")) {
                let name = &toks[i + semi - 1];
                if name.kind == Kind::Ident {
                    out.push(name.text.clone());
                }
            }
        } else if toks[i].is("using")
            && toks.get(i + 1).is_some_and(|t| t.kind == Kind::Ident)
            && toks.get(i + 2).is_some_and(|t| t.is("="))
            && (vector_at(i + 3) || (toks.get(i + 3).is_some_and(|t| t.is("typename")) && vector_at(i + 4)))
        {
            out.push(toks[i + 1].text.clone());
        }
    }
    out
}

fn vector_constructors(toks: &[Token], aliases: &[String], edits: &mut Vec<Edit>, braces: &mut Vec<(u32, u32)>) {
    let in_body = function_bodies(toks);
    for i in 0..toks.len() {
        let t = &toks[i];
        if t.kind != Kind::Ident {
            continue;
        }
        let mut after = if is_vector_name(&t.text) || aliases.contains(&t.text) {
            i + 1
        } else if t.text == "vec" && toks.get(i + 1).is_some_and(|n| n.is("<")) {
            match skip_angles(toks, i + 1) {
                Some(j) => j,
                None => continue,
            }
        } else {
            continue;
        };
        // `short2 offset(a, b);`: a variable with constructor arguments, inside a function
        // body (elsewhere `T name(...)` declares a function).
        if in_body[i]
            && toks.get(after).is_some_and(|n| n.kind == Kind::Ident)
            && toks.get(after + 1).is_some_and(|n| n.is("("))
        {
            after += 1;
        }
        let Some(open) = toks.get(after).filter(|o| o.is("(")).map(|_| after) else { continue };
        let Some(close) = matching(toks, open) else { continue };
        if !has_top_level_comma(toks, open, close) {
            // `half2(v)`: one argument. Metal converts a vector of another element type
            // (clang's functional cast refuses vectors of different sizes) or splats a scalar:
            // the prelude's `__kgmsl_vcast<half2>(v)` does either. Not `operator float2()`,
            // nor a variable `float2 v(x)` (handled as a declaration above), nor `float2()`.
            let variable = after != i + 1 && toks[after - 1].kind == Kind::Ident && t.text != "vec";
            // The whole qualified name goes inside the angle brackets (`metal::float4(x)`).
            let mut start = i;
            while start >= 2 && toks[start - 1].is("::") && toks[start - 2].kind == Kind::Ident {
                start -= 2;
            }
            if start >= 1 && toks[start - 1].is("::") {
                start -= 1;
            }
            let prev = if start > 0 { toks[start - 1].text.as_str() } else { "" };
            if close > open + 1 && !variable && !matches!(prev, "operator" | "." | "->" | "typename") {
                edits.push(Edit { offset: toks[start].offset, delete: 0, insert: "__kgmsl_vcast<".into() });
                edits.push(Edit { offset: toks[open].offset, delete: 0, insert: ">".into() });
            }
            continue;
        }
        edits.push(Edit { offset: toks[open].offset, delete: 1, insert: "{".into() });
        edits.push(Edit { offset: toks[close].offset, delete: 1, insert: "}".into() });
        braces.push((toks[open].line, toks[open].col));
    }
}

fn instantiation_attributes(src: &str, toks: &[Token], edits: &mut Vec<Edit>) {
    for i in 0..toks.len() {
        if !toks[i].is("template") {
            continue;
        }
        let mut j = i + 1;
        while toks.get(j).is_some_and(|t| t.is("[")) && toks.get(j + 1).is_some_and(|t| t.is("[")) {
            let Some(close) = matching(toks, j) else { break };
            let start = toks[j].offset;
            let end = toks[close].offset + 1;
            edits.push(Edit { offset: start, delete: end - start, insert: blanked(&src[start..end]) });
            j = close + 1;
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Brace {
    Function,
    Block,
    Other,
}

/// For each token, whether it sits inside a function body (as far as braces tell).
fn function_bodies(toks: &[Token]) -> Vec<bool> {
    let mut stack: Vec<Brace> = Vec::new();
    let mut out = Vec::with_capacity(toks.len());
    for i in 0..toks.len() {
        brace_step(toks, i, &mut stack);
        out.push(matches!(stack.last(), Some(Brace::Function | Brace::Block)));
    }
    out
}

/// Track the kind of the innermost brace: a function body, a block inside one, or anything
/// else (a class, a namespace, an initialiser list).
fn brace_step(toks: &[Token], i: usize, stack: &mut Vec<Brace>) {
    let t = &toks[i];
    if t.kind == Kind::Punct && t.is("{") {
        let in_fn = stack.iter().any(|b| *b != Brace::Other);
        let prev = if i > 0 { toks[i - 1].text.as_str() } else { "" };
        let fn_like = prev == ")"
            || matches!(prev, "const" | "thread" | "device" | "threadgroup" | "constant" | "noexcept" | "override");
        let kind = if in_fn {
            if fn_like || matches!(prev, "else" | "do" | "{" | "}" | ";" | ":") { Brace::Block } else { Brace::Other }
        } else if fn_like {
            Brace::Function
        } else {
            Brace::Other
        };
        stack.push(kind);
    } else if t.kind == Kind::Punct && t.is("}") {
        stack.pop();
    }
}

fn threadgroup_locals(src: &str, toks: &[Token], edits: &mut Vec<Edit>) {
    let uses_metal = uses_namespace_metal(toks);
    let mut stack: Vec<Brace> = Vec::new();
    for i in 0..toks.len() {
        let t = &toks[i];
        if t.kind == Kind::Punct && (t.is("{") || t.is("}")) {
            brace_step(toks, i, &mut stack);
            continue;
        }
        if !t.is("threadgroup") || t.pp || !matches!(stack.last(), Some(Brace::Function | Brace::Block)) {
            continue;
        }
        let prev = if i > 0 { toks[i - 1].text.as_str() } else { "" };
        if matches!(prev, ";" | "{" | "}") {
            threadgroup_local(src, toks, i, toks.len(), uses_metal, edits);
        }
    }
    // In a macro's body (candle's `case N: { threadgroup float shared[N]; ... }`) where it
    // expands is not known: a declaration opening a statement there, at the body's top or in
    // a block, is rewritten all the same (not in a class's or an initializer's braces); one that
    // lands outside a kernel function (a helper, a struct, program scope) is reported by the
    // rule every rewritten declaration goes through (its initializer marks it in the AST).
    for d in 0..toks.len() {
        let Some((_, body)) = define_body(toks, d) else { continue };
        let mut stack = vec![Brace::Block];
        for i in body.clone() {
            let t = &toks[i];
            if t.kind == Kind::Punct && (t.is("{") || t.is("}")) {
                brace_step(toks, i, &mut stack);
                continue;
            }
            let opens_statement = i == body.start || matches!(toks[i - 1].text.as_str(), ";" | "{" | "}");
            if t.is("threadgroup") && opens_statement && matches!(stack.last(), Some(Brace::Function | Brace::Block)) {
                threadgroup_local(src, toks, i, body.end, uses_metal, edits);
            }
        }
    }
}

/// The marker of rewrite 9, a local variable's name (the AST reports the function declaring it).
pub const MACRO_KERNEL_MARKER: &str = "__kgmsl_macro_kernel";

/// Rewrite 9: the marker first in the body of each kernel (`kernel void f(...)` or
/// `[[kernel]] void f(...)`) defined in a macro's body.
fn macro_kernels(toks: &[Token], edits: &mut Vec<Edit>) {
    for d in 0..toks.len() {
        let Some((_, body)) = define_body(toks, d) else { continue };
        for k in body.clone().filter(|&k| toks[k].is("kernel")) {
            // the parameter list: the first `(` after it, past attribute lists
            let mut j = k + 1;
            while j < body.end && !toks[j].is("(") {
                j = if toks[j].is("[") { matching(&toks[..body.end], j).map_or(body.end, |c| c + 1) } else { j + 1 };
            }
            let Some(close) = matching(&toks[..body.end], j) else { continue };
            // then the body's `{`, not a declaration's (or an explicit instantiation's) `;`
            let Some(open) = (close + 1..body.end).find(|&m| toks[m].is("{") || toks[m].is(";")).filter(|&m| toks[m].is("{")) else {
                continue;
            };
            edits.push(Edit { offset: toks[open].end(), delete: 0, insert: format!(" constexpr int {MACRO_KERNEL_MARKER} = 0;") });
        }
    }
}

/// Rewrite 10: `vec` → `__kgmsl_bvec` where it names the type of a typedef, a non-template alias,
/// or a variable or field; there an alias template of `vec` (`templates`: name, element argument)
/// gets its element argument wrapped in `::metal::__kgmsl_velem<...>`.
fn bool_vector_declarations(toks: &[Token], templates: &[(String, usize)], edits: &mut Vec<Edit>) {
    let own_vec = declares_own_vec(toks);
    for v in 0..toks.len() {
        if !toks.get(v + 1).is_some_and(|t| t.is("<")) {
            continue;
        }
        let element = templates.iter().find(|(name, _)| toks[v].is(name)).map(|&(_, k)| k);
        let start = if toks[v].is("vec") {
            // the qualified name's start: `metal::vec`, `::metal::vec`, or `vec` alone
            match v.checked_sub(2).map(|q| (&toks[q], &toks[q + 1])) {
                Some((m, c)) if m.is("metal") && c.is("::") => v - 2 - usize::from(v >= 3 && toks[v - 3].is("::")),
                _ if v >= 1 && toks[v - 1].is("::") => continue,
                _ if own_vec => continue,
                _ => v,
            }
        } else if element.is_some() {
            qualified_start(toks, v)
        } else {
            continue;
        };
        let at = |k: usize, s: &str| k < toks.len() && toks[k].is(s);
        let mut before = start;
        if before >= 1 && at(before - 1, "typename") {
            before -= 1;
        }
        let typedef = before >= 1 && at(before - 1, "typedef");
        // `using X = vec<...>`, not `template <...> using X = ...` (an alias template deduces)
        let alias = before >= 3
            && at(before - 1, "=")
            && toks[before - 2].kind == Kind::Ident
            && at(before - 3, "using")
            && !(before >= 4 && (at(before - 4, ">") || at(before - 4, ">>")));
        let variable = || {
            let mut b = start;
            while b >= 1
                && matches!(
                    toks[b - 1].text.as_str(),
                    "const" | "constexpr" | "static" | "volatile" | "thread" | "threadgroup" | "device" | "constant" | "typename"
                )
            {
                b -= 1;
            }
            let opens = b == 0
                || matches!(toks[b - 1].text.as_str(), ";" | "{" | "}")
                || (at(b - 1, ":") && b >= 2 && matches!(toks[b - 2].text.as_str(), "public" | "private" | "protected"));
            let Some(end) = skip_angles(toks, v + 1) else { return false };
            opens
                && toks.get(end).is_some_and(|n| n.kind == Kind::Ident)
                && toks.get(end + 1).is_some_and(|n| matches!(n.text.as_str(), ";" | "=" | "{" | "[" | ","))
        };
        if !(typedef || alias || variable()) {
            continue;
        }
        match element {
            None => edits.push(Edit { offset: toks[v].offset, delete: 0, insert: "__kgmsl_b".into() }),
            Some(k) => {
                if let Some(&(a, b)) = template_arguments(toks, v + 1).get(k) {
                    edits.push(Edit { offset: toks[a].offset, delete: 0, insert: "::metal::__kgmsl_velem<".into() });
                    edits.push(Edit { offset: toks[b - 1].end(), delete: 0, insert: ">".into() });
                }
            }
        }
    }
}

/// Where the qualified name ending at `v` starts: `A::B<T>::template v`, `::v`.
fn qualified_start(toks: &[Token], v: usize) -> usize {
    let mut s = v;
    if s >= 2 && toks[s - 1].is("template") && toks[s - 2].is("::") {
        s -= 1;
    }
    while s >= 1 && toks[s - 1].is("::") {
        s -= 1;
        // the qualifier before `::`: a name, or a template-id `A<...>`
        let mut q = s;
        if q >= 1 && matches!(toks[q - 1].text.as_str(), ">" | ">>") {
            let mut depth = 0i32;
            while q >= 1 {
                q -= 1;
                match toks[q].text.as_str() {
                    ">" => depth += 1,
                    ">>" => depth += 2,
                    "<" => depth -= 1,
                    ";" | "{" | "}" => return s,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        }
        if q >= 1 && toks[q - 1].kind == Kind::Ident {
            s = q - 1;
        } else {
            break;
        }
        if s >= 2 && toks[s - 1].is("template") && toks[s - 2].is("::") {
            s -= 1;
        }
    }
    s
}

/// Rewrite 3 of the declaration `threadgroup <type> name [dims]* [= init];` starting at `i`
/// (the `threadgroup`) and ending before `end`, if it is one plain declarator.
fn threadgroup_local(src: &str, toks: &[Token], i: usize, end: usize, uses_metal: bool, edits: &mut Vec<Edit>) {
    // Tokens of the same code as the `threadgroup`: a macro's body, or outside directives.
    let pp = toks[i].pp;
    let Some(mut semi) = toks[i..end].iter().position(|t| t.is(";") || t.is("{") || t.is("}")).map(|p| p + i) else {
        return;
    };
    // a braced initializer after `=`: the declaration ends at the `;` after its braces
    if toks[semi].is("{") && toks[i..semi].iter().any(|t| t.is("=")) {
        let Some(close) = matching(&toks[..end], semi) else { return };
        match toks.get(close + 1).filter(|_| close + 1 < end) {
            Some(t) if t.is(";") => semi = close + 1,
            _ => return,
        }
    }
    if !toks[semi].is(";") {
        return;
    }
    let body = &toks[i + 1..semi];
    // The name is the last identifier before the first `[` at angle depth 0 (or before `;`).
    let mut depth = 0i32;
    let mut first_bracket = None;
    for (k, t) in body.iter().enumerate() {
        match t.text.as_str() {
            "<" => depth += 1,
            ">" => depth -= 1,
            ">>" => depth -= 2,
            "[" if depth == 0 => {
                first_bracket = Some(k);
                break;
            }
            _ => {}
        }
    }
    // One plain declarator only before the dimensions (no initializer, pointer, reference
    // or second name, nor a macro's `#`/`##`); commas inside template arguments are fine.
    // An initializer (`threadgroup float sums[32] = {0};`, MLX's layer_norm.metal) is
    // blanked: Metal accepts it; what it sets is not the check's.
    let assign = body.iter().position(|t| t.is("=") && t.pp == pp);
    let decl_end = first_bracket.unwrap_or(body.len()).min(assign.unwrap_or(body.len()));
    let mut angle = 0i32;
    let mut plain = true;
    for t in &body[..decl_end] {
        match t.text.as_str() {
            "<" => angle += 1,
            ">" => angle -= 1,
            ">>" => angle -= 2,
            "," if angle > 0 => {}
            "=" | "," | "*" | "&" | "(" | "&&" | "#" | "##" => plain = false,
            _ => {}
        }
        plain &= t.pp == pp;
    }
    if !plain {
        return;
    }
    let name_idx = decl_end.wrapping_sub(1);
    let Some(name) = body.get(name_idx).filter(|t| t.kind == Kind::Ident) else { return };
    if name_idx == 0 {
        return;
    }
    let type_text = qualified_opencl_names(&src[toks[i].offset..name.offset], uses_metal);
    let dims_end = assign.map_or(toks[semi].offset, |a| body[a].offset);
    let dims_text = match first_bracket.filter(|&k| assign.is_none_or(|a| k < a)) {
        Some(k) => &src[body[k].offset..dims_end],
        None => "",
    };
    if let Some(a) = assign {
        let from = body[a].offset;
        edits.push(Edit { offset: from, delete: toks[semi].offset - from, insert: blanked(&src[from..toks[semi].offset]) });
    }
    let name_end = name.offset + name.text.len();
    edits.push(Edit { offset: name.offset, delete: 0, insert: "(&".into() });
    edits.push(Edit { offset: name_end, delete: 0, insert: ")".into() });
    // One line, whatever lines (and a macro's line splices) the type and dimensions spanned.
    let one_line = |s: &str| s.replace("\\\r\n", " ").replace("\\\n", " ").replace(['\r', '\n'], " ");
    let init = format!(" = __kgmsl_threadgroup_alloc<{}{}>()", one_line(&type_text).trim_end(), one_line(dims_text).trim_end());
    edits.push(Edit { offset: toks[semi].offset, delete: 0, insert: init });
}

/// `text` blanked, keeping its newlines and line splices so that lines (and a macro's body)
/// stay where they were.
fn blanked(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (k, c) in text.char_indices() {
        let splice = c == '\\' && matches!(b.get(k + 1), Some(b'\n' | b'\r'));
        if c == '\n' || c == '\r' || splice {
            out.push(c);
        } else {
            // as many bytes, so that columns after it are unchanged
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }
    out
}

fn thread_locals(toks: &[Token], edits: &mut Vec<Edit>) {
    let in_body = function_bodies(toks);
    for i in 1..toks.len() {
        let t = &toks[i];
        if t.is("thread") && !t.pp && in_body[i] && matches!(toks[i - 1].text.as_str(), ";" | "{" | "}" | "(") {
            // `(`: the init-statement of a `for`; a cast `(thread T*)x` is followed by a type
            // and then `*` or `&`, a declaration by a name: tell them apart at the first `)`.
            if toks[i - 1].is("(") {
                let close = toks[i..].iter().position(|x| x.is(")") || x.is(";")).map(|p| p + i);
                if close.is_none_or(|c| toks[c].is(")")) {
                    continue;
                }
            }
            edits.push(Edit { offset: t.offset, delete: 6, insert: "      ".into() });
        }
    }
}

/// Names clang declares implicitly in OpenCL 2.0 and later (`Sema::Initialize`) that Metal
/// declares in namespace metal.
const OPENCL_IMPLICIT: [&str; 4] = ["atomic_int", "atomic_uint", "atomic_float", "memory_order"];

fn uses_namespace_metal(toks: &[Token]) -> bool {
    toks.windows(3).any(|w| w[0].is("using") && w[1].is("namespace") && w[2].is("metal"))
}

/// `text` (a type copied into inserted code) with [`OPENCL_IMPLICIT`]'s names qualified as
/// [`opencl_names`] qualifies the source's.
fn qualified_opencl_names(text: &str, uses_metal: bool) -> String {
    if !uses_metal {
        return text.to_string();
    }
    let mut out = text.to_string();
    for name in OPENCL_IMPLICIT {
        let mut from = 0;
        while let Some(at) = out[from..].find(name).map(|p| p + from) {
            let before = out[..at].chars().next_back();
            let after = out[at + name.len()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            if !word(before) && !word(after) {
                out.insert_str(at, "metal::");
                from = at + "metal::".len() + name.len();
            } else {
                from = at + name.len();
            }
        }
    }
    out
}

/// `constant` qualifying a member function (after its parameter list) is the address space
/// alone: the prelude's `constant` is `const __constant` (constant objects are read-only), and a
/// constructor takes no const (MLX's complex.h: `complex_t(...) constant`).
fn member_constant_qualifiers(toks: &[Token], edits: &mut Vec<Edit>) {
    for i in 1..toks.len() {
        if toks[i].is("constant") && toks[i].kind == Kind::Ident && toks[i - 1].is(")") {
            edits.push(Edit { offset: toks[i].offset, delete: 0, insert: "__".into() });
        }
    }
}

fn opencl_names(toks: &[Token], edits: &mut Vec<Edit>) {
    if !uses_namespace_metal(toks) {
        return;
    }
    for i in 0..toks.len() {
        let t = &toks[i];
        if t.kind != Kind::Ident || t.pp || !OPENCL_IMPLICIT.contains(&t.text.as_str()) {
            continue;
        }
        let prev = if i > 0 { toks[i - 1].text.as_str() } else { "" };
        if !matches!(prev, "::" | "." | "->") {
            edits.push(Edit { offset: t.offset, delete: 0, insert: "metal::".into() });
        }
    }
}

fn function_constants(src: &str, toks: &[Token], edits: &mut Vec<Edit>) {
    for i in 0..toks.len() {
        if !(toks[i].is("[")
            && toks.get(i + 1).is_some_and(|t| t.is("["))
            && toks.get(i + 2).is_some_and(|t| t.is("function_constant")))
        {
            continue;
        }
        let Some(close) = matching(toks, i) else { continue };
        if !toks.get(close + 1).is_some_and(|t| t.is(";")) {
            continue; // a parameter's attribute: left alone
        }
        let (a, b) = (toks[i].offset, toks[close].offset + 1);
        let blank: String = src[a..b]
            .chars()
            .enumerate()
            .map(|(k, c)| match (k, c) {
                (_, '\n') => '\n',
                (0, _) => '{',
                (1, _) => '}',
                _ => ' ',
            })
            .collect();
        edits.push(Edit { offset: a, delete: b - a, insert: blank });
    }
}

pub fn rewrite(src: &str, vector_aliases: &VectorAliases) -> Rewritten {
    let toks = tokenize(src);
    let mut edits = Vec::new();
    let mut constructor_braces = Vec::new();
    vector_constructors(&toks, &vector_aliases.names, &mut edits, &mut constructor_braces);
    instantiation_attributes(src, &toks, &mut edits);
    threadgroup_locals(src, &toks, &mut edits);
    macro_kernels(&toks, &mut edits);
    bool_vector_declarations(&toks, &vector_aliases.templates, &mut edits);
    function_constants(src, &toks, &mut edits);
    thread_locals(&toks, &mut edits);
    opencl_names(&toks, &mut edits);
    member_constant_qualifiers(&toks, &mut edits);
    let deduced_thread_params = deduced_thread_refs(&toks, &mut edits);
    function_pointer_template_params(&toks, &mut edits);
    function_pointer_aliases(&toks, &mut edits);
    edits.sort_by_key(|e| (e.offset, e.delete == 0));
    let mut r = apply(src, edits);
    r.deduced_thread_params = deduced_thread_params;
    r.constructor_braces = constructor_braces;
    r
}

/// Rewrite 8: a template's non-type parameter of function pointer type, `void (*f)(device const
/// B*, short)`, is declared as a function, `void   f (device const B*, short)`, which adjusts to
/// the same pointer type: clang gives the pointer spelt out a `__generic` pointee (`void
/// (__generic *)(...)`), which no function's address matches, so every argument (ggml's and
/// candle's `dequantize_q4_0`) was refused.
fn function_pointer_template_params(toks: &[Token], edits: &mut Vec<Edit>) {
    for i in 0..toks.len().saturating_sub(1) {
        if !(toks[i].is("template") && toks[i + 1].is("<") && !toks[i].pp) {
            continue;
        }
        let Some(end) = skip_angles(toks, i + 1) else { continue };
        for j in i + 2..end.saturating_sub(4) {
            let [open, star, name, close, params] = [j, j + 1, j + 2, j + 3, j + 4].map(|k| &toks[k]);
            if open.is("(") && star.is("*") && name.kind == Kind::Ident && close.is(")") && params.is("(") {
                for t in [open, star, close] {
                    edits.push(Edit { offset: t.offset, delete: 1, insert: " ".into() });
                }
            }
        }
    }
}

/// Rewrite 11: an alias of a function pointer type, `using F = void (*)(thread float*, int);`,
/// becomes `using F = __kgmsl_function_pointer<void   (thread float*, int)>;`, the prelude's
/// pointer made by adjusting a parameter of that function type: as in rewrite 8, the pointer spelt
/// out has a `__generic` pointee, which no function's address matches (MLX's fft.h passes
/// `radix4<T>` as a `RadixFunc<T>` template argument).
fn function_pointer_aliases(toks: &[Token], edits: &mut Vec<Edit>) {
    for i in 0..toks.len().saturating_sub(3) {
        if !(toks[i].is("using") && !toks[i].pp && toks[i + 1].kind == Kind::Ident && toks[i + 2].is("=")) {
            continue;
        }
        let Some(semi) = (i + 3..toks.len()).find(|&k| [";", "{", "}"].iter().any(|s| toks[k].is(s))) else { continue };
        let Some(star) = (i + 4..semi.saturating_sub(3)).find(|&k| toks[k - 1].is("(") && toks[k].is("*") && toks[k + 1].is(")"))
        else {
            continue;
        };
        let params = star + 2;
        if !(toks[params].is("(") && matching(toks, params) == Some(semi - 1) && toks[semi].is(";")) {
            continue;
        }
        edits.push(Edit { offset: toks[i + 3].offset, delete: 0, insert: "__kgmsl_function_pointer<".into() });
        for t in [&toks[star - 1], &toks[star], &toks[star + 1]] {
            edits.push(Edit { offset: t.offset, delete: 1, insert: " ".into() });
        }
        edits.push(Edit { offset: toks[semi].offset, delete: 0, insert: ">".into() });
    }
}

/// The type parameters a template header `template <...>` (at `open`, the `<`) declares, and
/// the index past its `>`.
fn template_type_params(toks: &[Token], open: usize) -> Option<(Vec<String>, usize)> {
    let end = skip_angles(toks, open)?;
    let mut names = Vec::new();
    let mut depth = 0i32;
    let mut j = open + 1;
    while j + 1 < end {
        let t = &toks[j];
        match t.text.as_str() {
            "<" | "(" | "[" | "{" => depth += 1,
            ">" | ")" | "]" | "}" => depth -= 1,
            ">>" => depth -= 2,
            "class" | "typename" if depth == 0 => {
                let mut k = j + 1;
                if toks.get(k).is_some_and(|x| x.is("...")) {
                    k += 1;
                }
                if let Some(n) = toks.get(k).filter(|x| x.kind == Kind::Ident && k + 1 < end) {
                    let after = &toks[k + 1];
                    if after.is(",") || after.is("=") || k + 1 == end - 1 {
                        names.push(n.text.clone());
                    }
                }
            }
            _ => {}
        }
        j += 1;
    }
    Some((names, end))
}

/// A parameter `thread T& x`, `const thread T (&x)[N]` or `thread vec<T, 4>& v` of a function
/// template, T one of its type parameters.
struct ThreadRef {
    /// The parameter's tokens (start, end exclusive), the `thread` token and the name's.
    range: (usize, usize),
    thread: usize,
    name: Option<usize>,
    /// The type parameter, when it is the whole referenced type (`T&`, `T (&)[N]`).
    bare: Option<String>,
}

/// The parameters of the list between `open` and `close` (its parentheses or angle brackets), as
/// token ranges.
fn parameter_ranges(toks: &[Token], open: usize, close: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut depth, mut angle, mut start) = (0i32, 0i32, open + 1);
    for k in open + 1..close {
        match toks[k].text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "<" if depth == 0 => angle += 1,
            ">" if depth == 0 => angle -= 1,
            ">>" if depth == 0 => angle -= 2,
            "," if depth == 0 && angle <= 0 => {
                out.push((start, k));
                start = k + 1;
            }
            _ => {}
        }
    }
    if start < close {
        out.push((start, close));
    }
    out
}

/// The parameter at `range` when it is a thread reference (or reference to an array) whose type
/// names one of `params`.
fn thread_ref(toks: &[Token], range: (usize, usize), params: &[String]) -> Option<ThreadRef> {
    let k = (range.0..range.1).find(|&k| toks[k].is("thread") && !toks[k].pp)?;
    // The type up to the reference declarator: `&`, or `(&name)[` of a reference to an array.
    let mut angle = 0i32;
    let mut end = None;
    for m in k + 1..range.1 {
        match toks[m].text.as_str() {
            "<" => angle += 1,
            ">" => angle -= 1,
            ">>" => angle -= 2,
            "&" | "&&" if angle <= 0 => {
                end = Some(m);
                break;
            }
            "(" if angle <= 0 => {
                let array = toks.get(m + 1..m + 5).is_some_and(|d| {
                    d[0].is("&") && d[1].kind == Kind::Ident && d[2].is(")") && d[3].is("[")
                });
                end = array.then_some(m + 1);
                break;
            }
            "*" | "," | ")" if angle <= 0 => break,
            _ => {}
        }
    }
    let end = end?;
    let ty: Vec<&Token> = toks[k + 1..end].iter().filter(|x| !x.is("const") && !x.is("(")).collect();
    if !ty.iter().any(|x| x.kind == Kind::Ident && params.contains(&x.text)) {
        return None;
    }
    let name = Some(end + 1).filter(|&n| toks.get(n).is_some_and(|x| x.kind == Kind::Ident));
    let bare = (ty.len() == 1).then(|| ty[0].text.clone());
    Some(ThreadRef { range, thread: k, name, bare })
}

/// Whether the parameter at `range` names the type parameter `p` in its type (not in a default
/// argument, not as a qualifier: `typename T::type` deduces nothing).
fn names_type(toks: &[Token], range: (usize, usize), p: &str) -> bool {
    let (mut depth, mut angle) = (0i32, 0i32);
    for k in range.0..range.1 {
        match toks[k].text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "<" => angle += 1,
            ">" => angle -= 1,
            ">>" => angle -= 2,
            "=" if depth == 0 && angle <= 0 => return false,
            _ if toks[k].is(p) && !toks.get(k + 1).is_some_and(|x| x.is("::")) => return true,
            _ => {}
        }
    }
    false
}

/// Rewrite 7: blank `thread` in `thread T&` / `const thread vec<T, N>&` / `thread T (&a)[N]`
/// parameters of a function template, T one of its type parameters (`__private` for a bare `T`
/// another parameter deduces too); returns the positions of the blanked bare-`T` ones' names.
/// (Pointers keep `thread`: a `thread T*` argument is generic already, unless it points at a
/// local.)
fn deduced_thread_refs(toks: &[Token], edits: &mut Vec<Edit>) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < toks.len() {
        if !(toks[i].is("template") && toks[i + 1].is("<") && !toks[i].pp) {
            i += 1;
            continue;
        }
        let Some((params, mut j)) = template_type_params(toks, i + 1) else {
            i += 1;
            continue;
        };
        // The declaration this header introduces: a function when a parameter list comes
        // before a body, a `;` or a class key.
        let mut list = None;
        while j < toks.len() {
            let t = &toks[j];
            match t.text.as_str() {
                "struct" | "class" | "union" | "using" | ";" | "{" | "=" => break,
                "template" => {
                    // Another header (a member template of a class template): its own pass.
                    break;
                }
                "<" => {
                    j = skip_angles(toks, j).unwrap_or(j + 1);
                    continue;
                }
                "(" => {
                    let prev = toks[j - 1].text.as_str();
                    let close = matching(toks, j);
                    if matches!(prev, "decltype" | "sizeof" | "alignof" | "alignas" | "noexcept" | "__attribute__" | "operator")
                    {
                        j = close.map_or(j + 1, |c| c + 1);
                        continue;
                    }
                    list = close.map(|c| (j, c));
                    break;
                }
                "[" => {
                    j = matching(toks, j).map_or(j + 1, |c| c + 1);
                    continue;
                }
                _ => {}
            }
            j += 1;
        }
        // An out-of-line member definition (`template <class T> void S<T>::g(thread T& y)`):
        // the class's parameters are not the function's own (the declaration in the class, with
        // no header of its own, keeps its `thread`), only those of a member template's header.
        let params = match list {
            Some((open, _)) => {
                let class_params = qualifier_names(toks, open);
                params.into_iter().filter(|p| !class_params.contains(p)).collect()
            }
            None => params,
        };
        if let Some((open, close)) = list
            && !params.is_empty()
        {
            let refs: Vec<ThreadRef> =
                parameter_ranges(toks, open, close).into_iter().filter_map(|r| thread_ref(toks, r, &params)).collect();
            for r in &refs {
                let t = &toks[r.thread];
                // A bare `T` another parameter deduces too (`threadgroup T (&q)[N]`, `T b`): that
                // one gives `X`, a bare `T&` of a local `__private X`, two types where Metal sees
                // one; `__private T&` gives `X` (and binds locals only, as a thread object is).
                let private = r.bare.as_ref().is_some_and(|p| {
                    parameter_ranges(toks, open, close).into_iter().any(|range| {
                        !refs.iter().any(|o| o.range == range && o.bare.as_ref() == Some(p)) && names_type(toks, range, p)
                    })
                });
                if private {
                    edits.push(Edit { offset: t.offset, delete: 6, insert: "__private".into() });
                    continue;
                }
                edits.push(Edit { offset: t.offset, delete: 6, insert: "      ".into() });
                // A bare `T`: it deduces the argument's space (rule deduced_thread_params); in
                // `vec<T, 4>&` the reference stays generic, and a conversion into it shows.
                if r.bare.is_some()
                    && let Some(pn) = r.name.map(|n| &toks[n])
                {
                    out.push((pn.line, pn.col));
                }
            }
        }
        i += 1;
    }
    out
}

/// The identifiers in the template argument lists of the qualifier of the function name just
/// before the parameter list at `open` (`S<T, N>::g(` gives T and N; `ns::f(` and `f(` none).
fn qualifier_names(toks: &[Token], open: usize) -> Vec<String> {
    // The name: an identifier, or `operator` and its symbol (`operator()(`, `operator+=(`).
    let Some(mut name) = open.checked_sub(1) else { return Vec::new() };
    if toks[name].kind != Kind::Ident || name.checked_sub(1).is_some_and(|p| toks[p].is("operator")) {
        match (name.saturating_sub(3)..name).rev().find(|&k| toks[k].is("operator")) {
            Some(k) => name = k,
            None => return Vec::new(),
        }
    }
    let mut names = Vec::new();
    let mut j = name;
    // Back over `X<...>::`, `ns::` ... while a `::` precedes.
    while j >= 2 && toks[j - 1].is("::") {
        j -= 2;
        if toks[j].is(">") || toks[j].is(">>") {
            let mut depth = 0i32;
            loop {
                match toks[j].text.as_str() {
                    ">" => depth += 1,
                    ">>" => depth += 2,
                    "<" => depth -= 1,
                    ";" | "{" | "}" => return names,
                    _ if toks[j].kind == Kind::Ident => names.push(toks[j].text.clone()),
                    _ => {}
                }
                if depth <= 0 || j == 0 {
                    break;
                }
                j -= 1;
            }
            // The template's name before its `<`.
            j = j.saturating_sub(1);
        }
        if toks[j].kind != Kind::Ident {
            break;
        }
    }
    names
}

fn apply(src: &str, edits: Vec<Edit>) -> Rewritten {
    let mut text = String::with_capacity(src.len() + 64);
    let mut segments: Vec<Vec<(u32, u32)>> = vec![vec![(1, 1)]];
    let (mut out_col, mut orig_col) = (1u32, 1u32);
    let mut pos = 0usize;
    let push_orig = |text: &mut String, segs: &mut Vec<Vec<(u32, u32)>>, s: &str, oc: &mut u32, gc: &mut u32| {
        for ch in s.chars() {
            text.push(ch);
            if ch == '\n' {
                *oc = 1;
                *gc = 1;
                segs.push(vec![(1, 1)]);
            } else {
                *oc += ch.len_utf8() as u32;
                *gc += ch.len_utf8() as u32;
            }
        }
    };
    for e in edits {
        if e.offset < pos {
            continue; // overlapping edit: keep the first
        }
        push_orig(&mut text, &mut segments, &src[pos..e.offset], &mut out_col, &mut orig_col);
        if e.delete > 0 && e.insert.len() == e.delete {
            // A same-length replacement: columns are unchanged.
            push_orig(&mut text, &mut segments, &e.insert, &mut out_col, &mut orig_col);
        } else {
            text.push_str(&e.insert);
            out_col += e.insert.len() as u32;
            orig_col += e.delete as u32;
            if let Some(l) = segments.last_mut() {
                l.push((out_col, orig_col));
            }
        }
        pos = e.offset + e.delete;
    }
    push_orig(&mut text, &mut segments, &src[pos..], &mut out_col, &mut orig_col);
    Rewritten { text, deduced_thread_params: Vec::new(), constructor_braces: Vec::new(), segments }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_constructor_takes_braces() {
        let src = "void f() { float4 v = float4(a, b.xy, 1); float4 w = float4(a); x = metal::vec<float, 2>(1, 2); short2 o(p, q); C c(1, 2); }\nvec<int, 2> g(uint3 e, int n);";
        let r = rewrite(src, &VectorAliases { names: vec!["C".to_string()], ..Default::default() });
        assert_eq!(
            r.text,
            "void f() { float4 v = float4{a, b.xy, 1}; float4 w = __kgmsl_vcast<float4>(a); x = metal::vec<float, 2>{1, 2}; short2 o{p, q}; C c{1, 2}; }\nvec<int, 2> g(uint3 e, int n);"
        );
        // The braces made of parentheses (where clang's "too few elements" stays an error).
        assert_eq!(r.constructor_braces, vec![(1, 29), (1, 89), (1, 105), (1, 116)]);
        assert_eq!(r.original_col(1, 32), 32);
        // `a` of `float4(a)` (original column 61) sits 15 columns later after the rewrite.
        assert_eq!(r.original_col(1, 76), 61);
        // One argument whose template argument list has a comma (MLX's dot.h): a conversion.
        let r = rewrite("c = float4(*reinterpret_cast<const device metal::vec<T, 4>*>(a + j)); d = float2(a < b, c > (d));", &VectorAliases::default());
        assert_eq!(
            r.text,
            "c = __kgmsl_vcast<float4>(*reinterpret_cast<const device metal::vec<T, 4>*>(a + j)); d = float2{a < b, c > (d)};"
        );
        let r = rewrite("y = metal::vec<float, 2>(h) + float2(); operator float2() const; float2 v(w);", &VectorAliases::default());
        assert_eq!(r.text, "y = __kgmsl_vcast<metal::vec<float, 2>>(h) + float2(); operator float2() const; float2 v(w);");
        assert_eq!(
            vector_aliases("typedef float2 complex_T; using F = metal::vec<T, 4>; typedef int I;").names,
            vec!["complex_T", "F"]
        );
    }

    #[test]
    fn instantiation_attributes_are_blanked() {
        let r = rewrite("template [[host_name(\"f\")]] [[kernel]] decltype(f<1>) f<1>;", &VectorAliases::default());
        assert_eq!(r.text, format!("template {} decltype(f<1>) f<1>;", " ".repeat(29)));
    }

    #[test]
    fn function_constant_becomes_initialised_constant() {
        let r = rewrite("constant bool align_M [[function_constant(200)]];\nint x;", &VectorAliases::default());
        assert_eq!(r.text, format!("constant bool align_M {{}}{};\nint x;", " ".repeat(24)));
    }

    #[test]
    fn deduced_thread_reference_loses_thread() {
        let src = "template <class C, typename T, typename U, class D, int N>\n\
                   void f(thread C& c, const thread T& p, thread float& x, thread vec<U, N>& w, thread D (&a)[N], thread U* q);\n\
                   template <typename T> struct S { void g(thread T& y); };";
        let r = rewrite(src, &VectorAliases::default());
        assert_eq!(
            r.text.lines().nth(1).unwrap(),
            "void f(       C& c, const        T& p, thread float& x,        vec<U, N>& w,        D (&a)[N], thread U* q);"
        );
        assert!(r.text.ends_with("void g(thread T& y); };"));
        assert_eq!(r.deduced_thread_params, vec![(2, 18), (2, 37), (2, 89)]);
        // A bare `T` another parameter deduces too becomes `__private` (one type deduced, as in
        // Metal), not recorded: it binds nothing but a local. `T::type` deduces nothing.
        let src = "template <typename V, int N, class T, class C>\n\
                   float d(const threadgroup V (&q)[N], const thread V (&k)[N], thread T& a, T b, thread T& c, thread C& e, typename C::type f = C());";
        let r = rewrite(src, &VectorAliases::default());
        assert_eq!(
            r.text.lines().nth(1).unwrap(),
            "float d(const threadgroup V (&q)[N], const __private V (&k)[N], __private T& a, T b, __private T& c,        C& e, typename C::type f = C());"
        );
        assert_eq!(r.deduced_thread_params, vec![(2, 103)]);
        // Out of line, a class template's parameter is not the member's own: its `thread`
        // stays, as in the declaration in the class; a member template's own one goes, as there.
        let src = "template <typename T> void S<T>::g(thread T& y) {}\n\
                   template <typename T> template <class U> void S<T>::h(thread T& a, thread U& b) {}\n\
                   template <int N, class T> bool A<N, vec<T, 2>>::operator()(thread T& x) const { return 1; }\n\
                   template <typename T> typename S<T>::type ns::f(thread T& x);";
        let r = rewrite(src, &VectorAliases::default());
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines[0], "template <typename T> void S<T>::g(thread T& y) {}");
        assert_eq!(lines[1], "template <typename T> template <class U> void S<T>::h(thread T& a,        U& b) {}");
        assert!(lines[2].contains("operator()(thread T& x)"), "{}", lines[2]);
        assert_eq!(lines[3], "template <typename T> typename S<T>::type ns::f(       T& x);");
    }

    #[test]
    fn function_pointer_alias_becomes_adjusted_function_type() {
        let r = rewrite("template <typename T>\nusing RadixFunc = void (*)(thread vec<T, 2>*, thread vec<T, 2>*);\nusing G = int (*)[4];", &VectorAliases::default());
        assert_eq!(
            r.text.lines().nth(1).unwrap(),
            "using RadixFunc = __kgmsl_function_pointer<void    (thread vec<T, 2>*, thread vec<T, 2>*)>;"
        );
        assert!(r.text.ends_with("using G = int (*)[4];"));
        // `void` (original column 19) sits 25 columns later.
        assert_eq!(r.original_col(2, 44), 19);
    }

    #[test]
    fn threadgroup_local_becomes_reference() {
        let r = rewrite(
            "void k() {\n  threadgroup float xs[4 * N];\n  x = 1;\n}\nstruct S { threadgroup float y[2]; };",
            &VectorAliases::default(),
        );
        assert_eq!(
            r.text.lines().nth(1).unwrap(),
            "  threadgroup float (&xs)[4 * N] = __kgmsl_threadgroup_alloc<threadgroup float[4 * N]>();"
        );
        assert!(r.text.ends_with("struct S { threadgroup float y[2]; };"));
        assert_eq!(r.original_col(2, 23), 21);
    }

    #[test]
    fn declared_vectors_may_be_of_bool() {
        let src = "template <typename T, int N> struct F {\n\
                   typedef metal::vec<T, N> frag_type;\n\
                   using row_t = typename vec<T, 2>;\n\
                   public: const vec<T, N> v, w;\n\
                   template <typename U> using dtype_t = vec<U, N>;\n\
                   vec<T, 2> get(vec<T, 2> x);\n\
                   };\n\
                   template <typename T> struct G<vec<T, 2>> { ::metal::vec<T, 4> a[2]; foo::vec<T, 4> b; };";
        let r = rewrite(src, &VectorAliases::default());
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines[1], "typedef metal::__kgmsl_bvec<T, N> frag_type;");
        assert_eq!(lines[2], "using row_t = typename __kgmsl_bvec<T, 2>;");
        assert_eq!(lines[3], "public: const __kgmsl_bvec<T, N> v, w;");
        // deducible: an alias template, a function's return and parameter, a partial specialization
        assert_eq!(lines[4], "template <typename U> using dtype_t = vec<U, N>;");
        assert_eq!(lines[5], "vec<T, 2> get(vec<T, 2> x);");
        assert_eq!(lines[7], "template <typename T> struct G<vec<T, 2>> { ::metal::__kgmsl_bvec<T, 4> a[2]; foo::vec<T, 4> b; };");
        // a file with a `vec` of its own keeps its unqualified ones
        let r = rewrite("template <class T, int N> struct vec {};\nvec<T, 2> v; metal::vec<T, 2> w;", &VectorAliases::default());
        assert!(r.text.ends_with("vec<T, 2> v; metal::__kgmsl_bvec<T, 2> w;"), "{}", r.text);
        let r = rewrite("using metal::vec;\ntypedef vec<T, 2> V;", &VectorAliases::default());
        assert!(r.text.ends_with("typedef __kgmsl_bvec<T, 2> V;"), "{}", r.text);
    }

    #[test]
    fn vec_alias_templates_name_bool_vectors_in_declarations() {
        let src = "struct F { template <typename U, int M> using frag_t = typename metal::vec<U, M>;\n\
                   template <class A, typename B> using pair_t = vec<B, 2>; template <typename U> using arr_t = array<U, 2>; };\n\
                   template <typename T> struct G { typedef typename F::template frag_t<T, 8> frag_type;\n\
                   typename X<T>::template pair_t<T, T> p; using a_t = pair_t<int, vec<T, 2>>; arr_t<T> q;\n\
                   void f(thread F::frag_t<T, 8>& x); };";
        let aliases = vector_aliases(src);
        assert_eq!(aliases.templates, [("frag_t".to_string(), 0), ("pair_t".to_string(), 1)]);
        let r = rewrite(src, &aliases);
        let lines: Vec<&str> = r.text.lines().collect();
        // the alias templates themselves stay deducible
        assert_eq!(lines[0], "struct F { template <typename U, int M> using frag_t = typename metal::vec<U, M>;");
        assert_eq!(lines[2], "template <typename T> struct G { typedef typename F::template frag_t<::metal::__kgmsl_velem<T>, 8> frag_type;");
        // the element argument only; not another template's, nor a parameter's
        assert_eq!(
            lines[3],
            "typename X<T>::template pair_t<T, ::metal::__kgmsl_velem<T>> p; using a_t = pair_t<int, ::metal::__kgmsl_velem<vec<T, 2>>>; arr_t<T> q;"
        );
        assert_eq!(lines[4], "void f(thread F::frag_t<T, 8>& x); };");
        assert_eq!(r.original_col(3, lines[2].find("frag_type").unwrap() as u32 + 1), 76);
        // a file with a `vec` of its own declares no alias template of Metal's
        assert!(vector_aliases("struct vec {};\ntemplate <typename U> using V = vec<U, 2>;").templates.is_empty());
    }

    #[test]
    fn threadgroup_local_in_a_macro_becomes_reference() {
        // candle's reduce.metal: a `case` of a switch, declared in a macro's body over lines
        let src = "#define CASE(T, N) \\\ncase N: { \\\n  threadgroup T \\\n    shared[N] = {0}; \\\n  f(shared); \\\n}\n\
                   #define TOP threadgroup float t[2];\n\
                   #define S struct A { threadgroup float y[2]; };\n\
                   #define P threadgroup float* p; threadgroup float q##N[2];\n";
        let r = rewrite(src, &VectorAliases::default());
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines[0], "#define CASE(T, N) \\");
        assert_eq!(lines[2], "  threadgroup T \\");
        // the type's line splice stays out of the initializer made on the declaration's last line
        assert_eq!(lines[3], "    (&shared)[N]       = __kgmsl_threadgroup_alloc<threadgroup T[N]>(); \\");
        assert_eq!(lines[6], "#define TOP threadgroup float (&t)[2] = __kgmsl_threadgroup_alloc<threadgroup float[2]>();");
        // not in a class's braces, nor a pointer, nor a pasted name
        assert_eq!(&lines[7..], ["#define S struct A { threadgroup float y[2]; };", "#define P threadgroup float* p; threadgroup float q##N[2];"]);
    }
}
