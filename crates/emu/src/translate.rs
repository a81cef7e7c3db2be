//! MSL to C++17: line-preserving rewrites of a `.metal` file into C++17, the
//! parse of every `[[kernel]]` signature, and the generated entry points.
//!
//! Every rewrite keeps each token on its original line (a replacement that spans
//! newlines re-emits them), so `#line 1 "<file>"` at the top maps every compiler
//! diagnostic, every `__builtin_LINE()` and every debug line back to the `.metal` file.

use kernelgen_msl::lex::{self, Kind, Token};
use kernelgen_msl::vocab::is_address_space;

use super::{AddressSpace, Attribute, Binding, FunctionConstant, FunctionConstantDecl, KernelSignature, Param};

/// The C++ tokens of `src` (kernelgen-msl's tokenizer): a preprocessor directive, a
/// `#define`'s body included, is g++'s business, not the rewrites'.
pub(crate) fn code_tokens(src: &str) -> Vec<Token> {
    lex::tokenize(src).into_iter().filter(|t| !t.pp).collect()
}

fn is_hex(s: &str) -> bool {
    s.starts_with("0x") || s.starts_with("0X")
}

/// A failure of preparation: a construct the emulator does not support, at a line.
#[derive(Debug)]
pub(crate) struct PrepError {
    pub line: u32,
    pub message: String,
    /// The file of `line` when it is not the `.metal` file itself (an included header).
    pub file: Option<String>,
}

pub(crate) fn prep_err(line: u32, message: impl Into<String>) -> PrepError {
    PrepError { line, message: message.into(), file: None }
}

/// What `translate_with` needs besides the source.
#[derive(Default)]
pub(crate) struct Options<'a> {
    /// The source is the output of the preprocessing pass (`compile::Builder::preprocess`):
    /// its g++ line markers map lines back to the `.metal` file and its headers.
    pub preprocessed: bool,
    /// Values of `[[function_constant(n)]]` declarations, by index.
    pub function_constants: &'a [(u32, FunctionConstant)],
}

/// Whether `source` must go through the preprocessor before translation: it has a
/// directive other than `#include <metal_*>`, `#pragma` and `#line` (a `#define`, a
/// conditional, an `#include` of anything else). The rewrites read tokens, so a macro
/// that expands to a kernel, an instantiation or a threadgroup declaration, or code
/// in a `#if 0` block, would otherwise be missed or misread.
pub(crate) fn needs_preprocessing(source: &str) -> bool {
    source.lines().any(|l| {
        let Some(rest) = l.trim_start().strip_prefix('#') else { return false };
        let rest = rest.trim_start();
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        match word.as_str() {
            "pragma" | "line" | "" => false,
            "include" => {
                let target = rest["include".len()..].trim();
                !(target.starts_with("<metal_") && target.ends_with('>'))
            }
            _ => true,
        }
    })
}

/// Per line of the translated text: the file (index into `files`) and line it came from.
pub(crate) struct LineMap {
    files: Vec<String>,
    lines: Vec<(usize, u32)>,
}

impl LineMap {
    /// g++ `-E` output: `# N "file" flags` says the next line is line N of `file`.
    pub(crate) fn parse(text: &str, main: &str) -> LineMap {
        let mut files = vec![main.to_string()];
        let mut lines = Vec::new();
        let (mut file, mut next) = (0usize, 1u32);
        for l in text.split('\n') {
            if let Some((n, f)) = line_marker(l) {
                lines.push((file, 0));
                file = match files.iter().position(|x| *x == f) {
                    Some(i) => i,
                    None => {
                        files.push(f);
                        files.len() - 1
                    }
                };
                next = n;
                continue;
            }
            lines.push((file, next));
            next += 1;
        }
        LineMap { files, lines }
    }

    /// The original (file, line) of a line of the text; `None` for the `.metal` file.
    pub(crate) fn get(&self, line: u32) -> (Option<String>, u32) {
        match self.lines.get(line.saturating_sub(1) as usize) {
            Some(&(0, l)) => (None, l),
            Some(&(f, l)) => (Some(self.files[f].clone()), l),
            None => (None, line),
        }
    }
}

/// `# 12 "file" 1 3` (or `#line 12 "file"`).
fn line_marker(l: &str) -> Option<(u32, String)> {
    let rest = l.strip_prefix('#')?;
    let rest = rest.strip_prefix("line").unwrap_or(rest).trim_start();
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u32 = digits.parse().ok()?;
    let rest = rest[digits.len()..].trim_start().strip_prefix('"')?;
    let mut name = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some((n, name)),
            '\\' => name.extend(chars.next()),
            c => name.push(c),
        }
    }
    None
}

/// A replacement of `src[start..end]` by `text` (newlines of the replaced span are kept).
pub(crate) struct Edit {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) text: String,
}

/// `source` with `edits` applied (sorted here; an edit overlapping an earlier one is
/// dropped), appended to `out`, every newline of a replaced span kept.
pub(crate) fn apply_edits(out: &mut String, source: &str, edits: &mut [Edit]) {
    edits.sort_by_key(|e| e.start);
    let mut pos = 0;
    for e in edits.iter() {
        if e.start < pos {
            continue; // overlapping (the rewrites never make one)
        }
        out.push_str(&source[pos..e.start]);
        out.push_str(&e.text);
        for _ in source[e.start..e.end].bytes().filter(|&c| c == b'\n') {
            out.push('\n');
        }
        pos = e.end;
    }
    out.push_str(&source[pos..]);
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// What `prepare` produces.
pub(crate) struct Prepared {
    /// The complete C++ translation unit.
    pub cpp: String,
    pub kernels: Vec<KernelSignature>,
    /// Entry symbol per kernel, in the order of `kernels`.
    pub symbols: Vec<String>,
    /// Every `[[function_constant(n)]]` declaration, in source order.
    pub function_constants: Vec<FunctionConstantDecl>,
}

struct KernelDecl {
    name: String,
    line: u32,
    params: Vec<ParsedParam>,
    template_params: Option<Vec<(String, String)>>, // (kind, name)
    /// Why a templated kernel's signature cannot be bound (reported if instantiated).
    deferred: Option<PrepError>,
}

struct ParsedParam {
    name: String,
    binding: Binding,
    type_tokens: Vec<String>,
    address_space: AddressSpace,
    is_const: bool,
    is_reference: bool,
    is_pointer: bool,
    /// False for a `[[buffer(i), function_constant(c)]]` parameter whose constant is
    /// false: the argument does not exist (the entry passes a null pointer).
    present: bool,
    /// Its line in the translated text.
    line: u32,
}

struct Instantiation {
    host_name: String,
    function: String,
    args: String,
    line: u32,
}

#[cfg(test)]
pub(crate) fn translate(source: &str, file_name: &str) -> Result<Prepared, PrepError> {
    translate_with(source, file_name, &Options::default())
}

/// Translates one `.metal` source (or its preprocessed text, see [`Options`]).
/// Error lines and kernel lines are lines of the `.metal` file (or of the header
/// named in [`PrepError::file`]).
pub(crate) fn translate_with(source: &str, file_name: &str, opts: &Options) -> Result<Prepared, PrepError> {
    let map = opts.preprocessed.then(|| LineMap::parse(source, file_name));
    let to_orig = |line: u32| -> (Option<String>, u32) {
        match &map {
            Some(m) => m.get(line),
            None => (None, line),
        }
    };
    let mut prepared = translate_inner(source, file_name, opts, &to_orig).map_err(|mut e| {
        let (file, line) = to_orig(e.line);
        e.line = line;
        e.file = file;
        e
    })?;
    for k in &mut prepared.kernels {
        k.metal_line = to_orig(k.metal_line).1;
    }
    for c in &mut prepared.function_constants {
        c.metal_line = to_orig(c.metal_line).1;
    }
    Ok(prepared)
}

fn translate_inner(
    source: &str,
    file_name: &str,
    opts: &Options,
    to_orig: &dyn Fn(u32) -> (Option<String>, u32),
) -> Result<Prepared, PrepError> {
    let toks = code_tokens(source);
    let is = |i: usize, s: &str| toks.get(i).is_some_and(|t| t.is(s));
    let mut edits: Vec<Edit> = Vec::new();
    let mut kernels: Vec<KernelDecl> = Vec::new();
    let mut insts: Vec<Instantiation> = Vec::new();
    let mut tg_site = 0u32;

    // brace depth before each token (threadgroup variables live in functions only),
    // and parenthesis depth (function constants are declared outside any list)
    let mut depth_at = Vec::with_capacity(toks.len());
    let mut paren_at = Vec::with_capacity(toks.len());
    let (mut depth, mut paren) = (0i32, 0i32);
    for t in &toks {
        depth_at.push(depth);
        paren_at.push(paren);
        match t.text.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "(" => paren += 1,
            ")" => paren -= 1,
            _ => {}
        }
    }

    // Program-scope `[[function_constant(n)]]` declarations become constants with the
    // value given at load time, or a stand-in that fails to compile where it is read.
    let (mut fc_decls, fc_edits) = function_constants(&toks, source, &paren_at, opts.function_constants)?;
    let derived = derived_bool_constants(&toks, &paren_at, &fc_decls);
    fc_decls.extend(derived);
    edits.extend(fc_edits);
    // Declarations that differ only in address spaces (complex.h's `thread` and
    // `threadgroup` overloads) are one declaration on the CPU.
    edits.extend(address_space_twins(&toks));
    edits.extend(class_scope_specializations(&toks));
    edits.extend(program_scope_constants(&toks, &paren_at));

    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        match t.kind {
            Kind::Number => {
                // half literals: 1.5h / 2h -> half(1.5f) / half(2)
                let s = t.text.as_str();
                if (s.ends_with('h') || s.ends_with('H')) && !is_hex(s) {
                    let num = &s[..s.len() - 1];
                    let repl = if num.contains('.') || num.contains('e') || num.contains('E') {
                        format!("metal::half({num}f)")
                    } else {
                        format!("metal::half({num})")
                    };
                    edits.push(Edit { start: t.offset, end: t.end(), text: repl });
                }
            }
            Kind::Punct if t.is(".") || t.is("->") => {
                // swizzles: v.xy (read) / v.xy = e (write)
                if let Some(n) = toks.get(i + 1).filter(|n| n.kind == Kind::Ident && n.offset == t.end()) {
                    let name = n.text.as_str();
                    if (2..=4).contains(&name.len()) && name.bytes().all(|c| b"xyzw".contains(&c)) && !is(i + 2, "(") {
                        let idx: Vec<String> = name
                            .bytes()
                            .map(|c| match c {
                                b'x' => "0",
                                b'y' => "1",
                                b'z' => "2",
                                _ => "3",
                            })
                            .map(String::from)
                            .collect();
                        let write = is_assignment(&toks, i + 2);
                        let f = if write { "kg_swz_ref" } else { "kg_swz" };
                        edits.push(Edit { start: n.offset, end: n.end(), text: format!("template {f}<{}>()", idx.join(",")) });
                    }
                }
            }
            Kind::Ident => {
                let s = t.text.as_str();
                if is_address_space(s) && i >= 2 && is(i - 1, "[") && is(i - 2, "[") {
                    // `[[threadgroup(0)]]` on a helper's parameter: an attribute, not the
                    // address space (whose macro would leave `[[(0)]]`); g++ ignores it.
                    edits.push(Edit { start: t.offset, end: t.end(), text: format!("kgemu_attr_{s}") });
                } else if s == "threadgroup" {
                    if let Some(edit) = threadgroup_decl(&toks, source, i, &mut tg_site)? {
                        if depth_at[i] <= 0 {
                            return Err(PrepError {
                                line: t.line,
                                message: "threadgroup variables must be declared inside a function".into(),
                                file: None,
                            });
                        }
                        edits.push(edit);
                    }
                } else if s == "template" && is(i + 1, "[") && is(i + 2, "[") && is(i + 3, "host_name") {
                    let (inst, end) = instantiation(&toks, source, i)?;
                    // Keep the explicit instantiation without its attributes.
                    let body = format!("template decltype({f}<{a}>) {f}<{a}>;", f = inst.function, a = inst.args);
                    edits.push(Edit { start: t.offset, end: toks[end].end(), text: body });
                    insts.push(inst);
                    i = end + 1;
                    continue;
                } else if (s == "kernel" && is(i + 1, "void") && !(i >= 2 && is(i - 1, "[") && is(i - 2, "["))) ||
                    (s == "kernel" && i >= 2 && is(i - 1, "[") && is(i - 2, "[") && (is(i + 1, "]") && is(i + 2, "]") || is(i + 1, ",")))
                {
                    // `[[kernel]]`, or `[[kernel, max_total_threads_per_threadgroup(n)]]`
                    // (the other attributes are not checked)
                    let kw_start = if is(i + 1, "void") { i } else { i - 2 };
                    let mut after = i + 1;
                    if !is(i + 1, "void") {
                        while after + 1 < toks.len() && !(is(after, "]") && is(after + 1, "]")) {
                            after += 1;
                        }
                        after += 2;
                    }
                    let decl = kernel_decl(&toks, source, kw_start, after, &fc_decls)?;
                    kernels.push(decl);
                }
            }
            _ => {}
        }
        i += 1;
    }

    // Apply the edits, keeping newlines of replaced spans.
    let mut out = String::with_capacity(source.len() + 4096);
    out.push_str("#include \"kgemu_shim.h\"\n");
    if !opts.preprocessed {
        out.push_str(&format!("#line 1 \"{}\"\n", escape_c(file_name)));
    }
    let mut body = String::with_capacity(source.len() + 4096);
    apply_edits(&mut body, source, &mut edits);
    // Metal's `?:` typing (`cond ? half : float` is a float).
    out.push_str(&crate::conditional::rewrite(&body));

    // Entry points.
    out.push_str("#line 1 \"<kgemu-entry>\"\n");
    let mut sigs = Vec::new();
    let mut symbols = Vec::new();
    for k in &kernels {
        if k.template_params.is_some() {
            continue;
        }
        let sym = format!("kgemu_thread_{}", symbols.len());
        out.push_str(&entry(&sym, &k.name, &k.params, tg_site, to_orig));
        symbols.push(sym);
        sigs.push(KernelSignature {
            name: k.name.clone(),
            function: k.name.clone(),
            metal_line: k.line,
            params: k.params.iter().filter(|p| p.present).map(|p| to_param(p, &[])).collect(),
        });
    }
    for inst in &insts {
        let Some(k) = kernels.iter().find(|k| k.name == inst.function && k.template_params.is_some()) else {
            return Err(PrepError {
                line: inst.line,
                message: format!(
                    "host_name(\"{}\") instantiates `{}`, which is not a templated [[kernel]] in this file",
                    inst.host_name, inst.function
                ),
                file: None,
            });
        };
        if let Some(e) = &k.deferred {
            let (file, line) = to_orig(e.line);
            return Err(prep_err(
                inst.line,
                format!(
                    "host_name(\"{}\") instantiates `{}`: {} ({}:{line})",
                    inst.host_name,
                    inst.function,
                    e.message,
                    file.as_deref().unwrap_or(file_name)
                ),
            ));
        }
        if sigs.iter().any(|s: &KernelSignature| s.name == inst.host_name) {
            return Err(prep_err(inst.line, format!("kernel name `{}` is defined twice", inst.host_name)));
        }
        let tparams = k.template_params.as_deref().unwrap_or(&[]);
        let args = split_top_level(&inst.args);
        let subst: Vec<(String, String)> = tparams.iter().map(|(_, n)| n.clone()).zip(args.iter().cloned()).collect();
        let callee = format!("{}<{}>", inst.function, inst.args);
        let sym = format!("kgemu_thread_{}", symbols.len());
        out.push_str(&entry(&sym, &callee, &k.params, tg_site, to_orig));
        symbols.push(sym);
        sigs.push(KernelSignature {
            name: inst.host_name.clone(),
            function: callee,
            metal_line: inst.line,
            params: k.params.iter().filter(|p| p.present).map(|p| to_param(p, &subst)).collect(),
        });
    }
    for (a, s) in sigs.iter().enumerate() {
        if sigs[..a].iter().any(|o| o.name == s.name) {
            return Err(prep_err(s.metal_line, format!("kernel name `{}` is defined twice", s.name)));
        }
    }
    Ok(Prepared { cpp: out, kernels: sigs, symbols, function_constants: fc_decls.into_iter().filter(|d| !d.derived).map(|d| d.public).collect() })
}

pub(crate) fn escape_c(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " ")
}

/// Whether token `i` is an assignment: `=`, `+=`, `-=`, ... (not `==`).
fn is_assignment(toks: &[Token], i: usize) -> bool {
    toks.get(i).is_some_and(|t| matches!(t.text.as_str(), "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "&=" | "|=" | "^=" | "<<=" | ">>="))
}

/// How a token changes the nesting of parentheses, brackets and template argument lists
/// (`>>` closes two lists: the tokenizer keeps it one token).
pub(crate) fn nesting(t: &str) -> i32 {
    match t {
        "(" | "[" | "<" => 1,
        ")" | "]" | ">" => -1,
        ">>" => -2,
        _ => 0,
    }
}

/// A `threadgroup T name[N]...;` declaration at statement level, rewritten to a
/// reference into the runtime's per-threadgroup allocation.
fn threadgroup_decl(toks: &[Token], src: &str, i: usize, site: &mut u32) -> Result<Option<Edit>, PrepError> {
    let tx = |k: usize| toks[k].text.as_str();
    // Statement start: previous token is ; { } or nothing, or a preprocessor line end.
    if i > 0 {
        let p = tx(i - 1);
        let newline_before = toks[i - 1].line < toks[i].line;
        if !(p == ";" || p == "{" || p == "}" || p == ":" && i >= 2 && matches!(tx(i - 2), "public" | "private" | "default") || newline_before && line_is_directive(src, toks[i - 1].offset)) {
            return Ok(None);
        }
    }
    let line = toks[i].line;
    // Scan to the end of the declaration.
    let mut k = i + 1;
    let mut depth = 0i32;
    let mut first_bracket = None;
    while k < toks.len() {
        let s = tx(k);
        match s {
            "(" if depth == 0 => return Ok(None), // a function declaration or a cast: not a variable
            "[" if depth == 0 && first_bracket.is_none() => {
                first_bracket = Some(k);
                depth += 1;
            }
            "*" | "&" | "&&" if depth == 0 && first_bracket.is_none() => return Ok(None), // pointer/reference
            "=" if depth == 0 => {
                return Err(prep_err(line, "a threadgroup variable cannot have an initializer"));
            }
            "," if depth == 0 => {
                return Err(PrepError {
                    line,
                    message: "declare one threadgroup variable per statement (the emulator rewrites each declaration)".into(),
                    file: None,
                });
            }
            ";" if depth == 0 => break,
            "{" | "}" => return Ok(None),
            s => depth += nesting(s),
        }
        k += 1;
    }
    if k >= toks.len() {
        return Ok(None);
    }
    let semi = k;
    let name_idx = match first_bracket {
        Some(b) => b - 1,
        None => semi - 1,
    };
    if name_idx <= i + 1 || toks[name_idx].kind != Kind::Ident {
        return Ok(None);
    }
    let ty = &src[toks[i + 1].offset..toks[name_idx - 1].end()];
    let name = tx(name_idx);
    let dims = match first_bracket {
        Some(b) => src[toks[b].offset..toks[semi - 1].end()].to_string(),
        None => String::new(),
    };
    let s = *site;
    *site += 1;
    let ty1 = ty.replace('\n', " ");
    let dims1 = dims.replace('\n', " ");
    let text = if dims.is_empty() {
        format!("{ty1} &{name} = *kgemu::tg_alloc<{ty1}>({s}u, __LINE__, \"{name}\");")
    } else {
        format!("{ty1} (&{name}){dims1} = *kgemu::tg_alloc<{ty1}{dims1}>({s}u, __LINE__, \"{name}\");")
    };
    Ok(Some(Edit { start: toks[i].offset, end: toks[semi].end(), text }))
}

fn line_is_directive(src: &str, pos: usize) -> bool {
    let line_start = src[..pos].rfind('\n').map(|p| p + 1).unwrap_or(0);
    src[line_start..].trim_start().starts_with('#')
}

/// `template [[host_name("n")]] [[kernel]] decltype(f<A>) f<A>;`, `... [[kernel]] void
/// f<A>(parameters);` or `... kernel f_t f<A>;` (`f_t` a typedef of the template's type), starting
/// at `i`; returns the parse and the index of the closing `;`.
fn instantiation(toks: &[Token], src: &str, i: usize) -> Result<(Instantiation, usize), PrepError> {
    let line = toks[i].line;
    let bad = || PrepError {
        line,
        message: "unrecognised host_name instantiation; expected `template [[host_name(\"name\")]] [[kernel]] decltype(f<args>) f<args>;`, `... [[kernel]] void f<args>(parameters);` or `... kernel f_t f<args>;`".into(),
        file: None,
    };
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    // template [ [ host_name ( "x" ) ] ], the name possibly as adjacent literals
    // ("a" "_" "b", as MLX's instantiation macros stringize their arguments)
    if tx(i + 4) != "(" {
        return Err(bad());
    }
    let mut k = i + 5;
    let mut host_name = String::new();
    while toks.get(k).map(|t| t.kind) == Some(Kind::Str) {
        let lit = tx(k);
        if !lit.starts_with('"') {
            return Err(bad());
        }
        host_name.push_str(&lit[1..lit.len() - 1]);
        k += 1;
    }
    if k == i + 5 || tx(k) != ")" || tx(k + 1) != "]" || tx(k + 2) != "]" {
        return Err(bad());
    }
    k += 3;
    // optional [[kernel]]
    if tx(k) == "[" && tx(k + 1) == "[" {
        while k < toks.len() && !(tx(k) == "]" && tx(k + 1) == "]") {
            k += 1;
        }
        k += 2;
    }
    if tx(k) == "kernel" {
        k += 1;
    }
    if tx(k) == "void" {
        return explicit_signature(toks, src, k).map(|(function, args, end)| (Instantiation { host_name, function, args, line }, end)).ok_or_else(bad);
    }
    // ggml's `kernel kernel_unary_t kernel_unary_impl<float, float, float>;`, the type a
    // `typedef decltype(f<...>)` of the template
    if tx(k) != "decltype" && toks.get(k).is_some_and(|t| t.kind == Kind::Ident) && toks.get(k + 1).is_some_and(|t| t.kind == Kind::Ident) {
        return template_id(toks, src, k + 1)
            .filter(|&(_, _, close)| tx(close + 1) == ";")
            .map(|(function, args, close)| (Instantiation { host_name, function, args, line }, close + 1))
            .ok_or_else(bad);
    }
    if tx(k) != "decltype" || tx(k + 1) != "(" {
        return Err(bad());
    }
    // find the matching ) of decltype(
    let open = k + 1;
    let mut depth = 0;
    let mut close = open;
    for (j, _) in toks.iter().enumerate().skip(open) {
        match tx(j) {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    close = j;
                    break;
                }
            }
            _ => {}
        }
    }
    if close == open {
        return Err(bad());
    }
    // inside: f < args >, the last `>` perhaps the second of a `>>`
    let function = tx(open + 1).to_string();
    let args_end = match tx(close - 1) {
        ">" if close >= open + 5 => toks[close - 2].end(),
        ">>" if close >= open + 5 => toks[close - 1].offset + 1,
        _ => return Err(bad()),
    };
    if tx(open + 2) != "<" {
        return Err(bad());
    }
    let args = src[toks[open + 3].offset..args_end].to_string();
    let mut end = close + 1;
    while end < toks.len() && tx(end) != ";" {
        end += 1;
    }
    if end >= toks.len() {
        return Err(bad());
    }
    Ok((Instantiation { host_name, function, args: args.replace('\n', " "), line }, end))
}

/// The other form of an instantiation, after its attributes: `void f<A>(parameters);` (mistral.rs's
/// `[[kernel]] void fp8_to_dtype_kernel<float>(device const uchar *input [[buffer(0)]], ...)`,
/// the parameters repeating the template's) from `void` at `k`: the function, its arguments and
/// the index of the `;`.
fn explicit_signature(toks: &[Token], src: &str, k: usize) -> Option<(String, String, usize)> {
    let tx = |j: usize| toks.get(j).map_or("", |t| t.text.as_str());
    let (function, args, j) = template_id(toks, src, k + 1)?;
    // the parameter list, then `;`
    if tx(j + 1) != "(" {
        return None;
    }
    let mut depth = 0i32;
    let mut close = j + 1;
    while close < toks.len() {
        match tx(close) {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
        close += 1;
    }
    (tx(close + 1) == ";").then_some((function, args, close + 1))
}

/// `f<A>` from the name at `k`: the name, the arguments' text and the index of the closing `>`
/// (or `>>`).
fn template_id(toks: &[Token], src: &str, k: usize) -> Option<(String, String, usize)> {
    let tx = |j: usize| toks.get(j).map_or("", |t| t.text.as_str());
    if toks.get(k)?.kind != Kind::Ident || tx(k + 1) != "<" {
        return None;
    }
    // the template arguments' closing `>` (the second of a `>>`), outside parentheses
    let (mut angle, mut paren, mut j) = (0i32, 0i32, k + 1);
    let args_end = loop {
        match tx(j) {
            "(" => paren += 1,
            ")" => paren -= 1,
            "<" if paren == 0 => angle += 1,
            ">" if paren == 0 => {
                angle -= 1;
                if angle == 0 {
                    break toks[j - 1].end();
                }
            }
            ">>" if paren == 0 => {
                angle -= 2;
                if angle <= 0 {
                    // `>>` closing an inner list and this one: the inner `>` is an argument's
                    break if angle == 0 { toks[j].offset + 1 } else { toks[j - 1].end() };
                }
            }
            "" | ";" => return None,
            _ => {}
        }
        j += 1;
    };
    if j <= k + 2 {
        return None;
    }
    Some((tx(k).to_string(), src[toks[k + 2].offset..args_end].replace('\n', " "), j))
}

/// Parse a kernel declaration: `kw_start` is the first token of `[[kernel]]` or
/// `kernel`; `after` the token after it (`void`).
fn kernel_decl(toks: &[Token], src: &str, kw_start: usize, after: usize, fcs: &[FcDecl]) -> Result<KernelDecl, PrepError> {
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let line = toks[kw_start].line;
    if tx(after) != "void" || toks.get(after + 1).map(|t| t.kind) != Some(Kind::Ident) || tx(after + 2) != "(" {
        return Err(prep_err(line, "a [[kernel]] function must be declared as `[[kernel]] void name(...)`"));
    }
    let name = tx(after + 1).to_string();
    // template parameters: `template <...>` right before the kernel keyword
    let mut template_params = None;
    if kw_start > 0 && matches!(tx(kw_start - 1), ">" | ">>") {
        let mut depth = 0;
        let mut j = kw_start - 1;
        loop {
            match tx(j) {
                ">" => depth += 1,
                ">>" => depth += 2,
                "<" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            if j == 0 {
                break;
            }
            j -= 1;
        }
        if j > 0 && tx(j - 1) == "template" && tx(j) == "<" {
            // up to the list's closing `>` (the second of a `>>`)
            let inner = &src[toks[j].end()..toks[kw_start - 1].end() - 1];
            let mut ps = Vec::new();
            for p in split_top_level(inner) {
                let p = p.split('=').next().unwrap_or("").trim().to_string();
                let mut words: Vec<&str> = p.split_whitespace().collect();
                let pname = words.pop().unwrap_or("").to_string();
                ps.push((words.join(" "), pname));
            }
            template_params = Some(ps);
        }
    }
    // parameters
    let open = after + 2;
    let mut depth = 0;
    let mut close = None;
    for j in open..toks.len() {
        depth += nesting(tx(j));
        if depth == 0 && tx(j) == ")" {
            close = Some(j);
            break;
        }
    }
    let Some(close) = close else {
        return Err(prep_err(line, format!("unbalanced parameter list of kernel `{name}`")));
    };
    let mut params = Vec::new();
    let mut start = open + 1;
    let mut depth = 0;
    for j in open + 1..=close {
        let s = tx(j);
        if j == close || (s == "," && depth == 0) {
            if j > start {
                match parse_param(toks, src, start, j, &name, fcs) {
                    Ok(p) => params.push(p),
                    // A templated kernel that is never instantiated does not matter,
                    // as in Metal: its problem is reported by an instantiation.
                    Err(e) if template_params.is_some() => {
                        return Ok(KernelDecl { name, line, params: Vec::new(), template_params, deferred: Some(e) });
                    }
                    Err(e) => return Err(e),
                }
            }
            start = j + 1;
            continue;
        }
        depth += nesting(s);
    }
    assign_implicit_buffers(&mut params);
    Ok(KernelDecl { name, line, params, template_params, deferred: None })
}

/// Buffer parameters without `[[buffer(n)]]` take, in declaration order, the lowest
/// index no other buffer parameter uses (Metal assigns the first free location).
fn assign_implicit_buffers(params: &mut [ParsedParam]) {
    let mut used: Vec<u32> = params
        .iter()
        .filter_map(|p| match p.binding {
            Binding::Buffer(i) if i != u32::MAX => Some(i),
            _ => None,
        })
        .collect();
    for p in params.iter_mut() {
        if p.binding == Binding::Buffer(u32::MAX) {
            let i = (0..).find(|i| !used.contains(i)).unwrap_or(0);
            used.push(i);
            p.binding = Binding::Buffer(i);
        }
    }
}

fn parse_param(toks: &[Token], src: &str, a: usize, b: usize, kernel: &str, fcs: &[FcDecl]) -> Result<ParsedParam, PrepError> {
    let tx = |k: usize| toks[k].text.as_str();
    let line = toks[a].line;
    // attribute [[...]] at the end: `name` or `name(arg)` entries, comma-separated
    let mut attr_start = b;
    let mut attrs: Vec<(String, Option<String>)> = Vec::new();
    for j in a..b.saturating_sub(1) {
        if tx(j) == "[" && tx(j + 1) == "[" {
            attr_start = j;
            let mut k = j + 2;
            while k < b && tx(k) != "]" {
                let aname = tx(k).to_string();
                k += 1;
                let mut arg = None;
                if k < b && tx(k) == "(" {
                    let open = k;
                    let mut depth = 0;
                    while k < b {
                        match tx(k) {
                            "(" => depth += 1,
                            ")" => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        k += 1;
                    }
                    if open + 1 < k {
                        arg = Some(src[toks[open + 1].offset..toks[k - 1].end()].to_string());
                    }
                    k += 1;
                }
                attrs.push((aname, arg));
                if k < b && tx(k) == "," {
                    k += 1;
                }
            }
            break;
        }
    }
    if attr_start < a + 2 {
        return Err(prep_err(line, format!("cannot parse a parameter of kernel `{kernel}`")));
    }
    let name_idx = attr_start - 1;
    if toks[name_idx].kind != Kind::Ident {
        return Err(prep_err(line, format!("cannot parse a parameter of kernel `{kernel}`")));
    }
    let name = tx(name_idx).to_string();
    // `function_constant(c)`: the argument exists only when bool constant `c` is true.
    let mut present = true;
    if let Some(pos) = attrs.iter().position(|(n, _)| n == "function_constant") {
        let (_, arg) = attrs.remove(pos);
        let cname = arg.unwrap_or_default();
        let Some(fc) = fcs.iter().find(|d| d.public.name == cname) else {
            return Err(prep_err(
                line,
                format!("parameter `{name}` of kernel `{kernel}`: [[function_constant({cname})]] must name a program-scope `constant bool` function constant"),
            ));
        };
        present = match fc.public.value {
            Some(FunctionConstant::Bool(v)) => v,
            Some(_) => {
                return Err(prep_err(
                    line,
                    format!("parameter `{name}` of kernel `{kernel}` depends on function constant `{cname}`, which must be a bool"),
                ));
            }
            None if fc.derived => {
                return Err(prep_err(
                    line,
                    format!("parameter `{name}` of kernel `{kernel}` exists only when `{cname}` is true, and a function constant it is made of has no value: give it at load time"),
                ));
            }
            None => {
                return Err(prep_err(
                    line,
                    format!(
                        "parameter `{name}` of kernel `{kernel}` exists only when function constant `{cname}` [[function_constant({})]] is true, and it has no value: give it at load time",
                        fc.public.index
                    ),
                ));
            }
        };
    }
    // No attribute: a buffer whose index Metal assigns (see `assign_implicit_buffers`).
    let (aname, arg) = attrs.first().cloned().unwrap_or_else(|| ("buffer".to_string(), Some("implicit".to_string())));
    let implicit = attrs.is_empty();
    if let Some((other, oarg)) = attrs.get(1) {
        return Err(prep_err(
            line,
            format!(
                "parameter `{name}` of kernel `{kernel}` uses [[{other}{}]], which the emulator does not support",
                oarg.as_ref().map(|a| format!("({a})")).unwrap_or_default()
            ),
        ));
    }
    let binding = if implicit {
        Binding::Buffer(u32::MAX)
    } else if aname == "buffer" {
        let idx = arg.as_deref().and_then(parse_int).ok_or_else(|| {
            prep_err(line, format!("parameter `{name}` of kernel `{kernel}`: buffer index must be an integer literal"))
        })?;
        Binding::Buffer(idx)
    } else if aname == "threadgroup" {
        let idx = arg.as_deref().and_then(parse_int).filter(|&i| i < MAX_THREADGROUP_PARAMS).ok_or_else(|| {
            prep_err(
                line,
                format!("parameter `{name}` of kernel `{kernel}`: threadgroup index must be an integer literal below {MAX_THREADGROUP_PARAMS}"),
            )
        })?;
        Binding::Threadgroup(idx)
    } else if let Some(at) = Attribute::from_name(&aname) {
        Binding::Attribute(at)
    } else {
        return Err(prep_err(
            line,
            format!(
                "parameter `{name}` of kernel `{kernel}` uses [[{aname}{}]], which the emulator does not support (buffers and thread-position attributes only)",
                arg.map(|a| format!("({a})")).unwrap_or_default()
            ),
        ));
    };
    let mut type_tokens = Vec::new();
    let mut address_space = AddressSpace::Thread;
    let mut is_const = false;
    let mut is_reference = false;
    let mut is_pointer = false;
    for j in a..name_idx {
        match tx(j) {
            "device" => address_space = AddressSpace::Device,
            "constant" => address_space = AddressSpace::Constant,
            "threadgroup" => address_space = AddressSpace::Threadgroup,
            "thread" => address_space = AddressSpace::Thread,
            "const" => is_const = true,
            "volatile" => {}
            "&" | "&&" => is_reference = true,
            "*" => is_pointer = true,
            t => type_tokens.push(t.to_string()),
        }
    }
    if implicit && (!(is_pointer || is_reference) || !matches!(address_space, AddressSpace::Device | AddressSpace::Constant)) {
        return Err(prep_err(
            line,
            format!("parameter `{name}` of kernel `{kernel}` has no [[buffer(n)]] or thread-attribute; the emulator needs one (a device or constant pointer or reference without one is a buffer)"),
        ));
    }
    if matches!(binding, Binding::Buffer(_)) && !is_pointer && !is_reference {
        return Err(PrepError {
            line,
            message: format!("buffer parameter `{name}` of kernel `{kernel}` must be a pointer or a reference"),
            file: None,
        });
    }
    let threadgroup_binding = matches!(binding, Binding::Threadgroup(_));
    if threadgroup_binding != (address_space == AddressSpace::Threadgroup) || threadgroup_binding && !is_pointer && !is_reference {
        return Err(prep_err(
            line,
            format!("parameter `{name}` of kernel `{kernel}`: a threadgroup pointer or reference takes [[threadgroup(n)]], and only it"),
        ));
    }
    Ok(ParsedParam { name, binding, type_tokens, address_space, is_const, is_reference, is_pointer, present, line })
}

fn parse_int(s: &str) -> Option<u32> {
    let s = s.trim_end_matches(['u', 'U']);
    if let Some(h) = s.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

fn join_type(tokens: &[String]) -> String {
    let mut out = String::new();
    for t in tokens {
        let word = |s: &str| s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !out.is_empty() && word(t) && out.chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(' ');
        }
        out.push_str(t);
        if t == "," {
            out.push(' ');
        }
    }
    out
}

fn to_param(p: &ParsedParam, subst: &[(String, String)]) -> Param {
    let mut ty = join_type(&p.type_tokens);
    if let Some((_, v)) = subst.iter().find(|(n, _)| *n == ty) {
        ty = v.trim().to_string();
    }
    Param {
        name: p.name.clone(),
        binding: p.binding,
        type_name: ty,
        address_space: if matches!(p.binding, Binding::Attribute(_)) { AddressSpace::Thread } else { p.address_space },
        is_const: p.is_const,
        is_reference: p.is_reference,
    }
}

/// Split `a, b<c, d>, e` at top-level commas.
pub(crate) fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// `[[threadgroup(i)]]` kernel parameters take `i` below this (Metal's 31 argument table
/// entries, rounded up).
pub(crate) const MAX_THREADGROUP_PARAMS: u32 = 32;

/// The entry point of one kernel (or instantiation): `sites` is the first threadgroup
/// allocation site after the source's own declarations (a `[[threadgroup(i)]]` parameter is
/// site `sites + i`), `to_orig` maps a line to the `.metal` file's.
fn entry(sym: &str, callee: &str, params: &[ParsedParam], sites: u32, to_orig: &dyn Fn(u32) -> (Option<String>, u32)) -> String {
    let args: Vec<String> = params
        .iter()
        .map(|p| match p.binding {
            Binding::Threadgroup(i) => {
                format!("kgemu::TgParam{{{i}u, {}u, {}u, \"{}\"}}", sites + i, to_orig(p.line).1, p.name)
            }
            Binding::Buffer(_) if !p.present && p.is_reference && !p.is_pointer => "kgemu::BufRef{nullptr}".to_string(),
            Binding::Buffer(_) if !p.present => "kgemu::BufPtr{nullptr}".to_string(),
            Binding::Buffer(i) if p.is_reference && !p.is_pointer => format!("kgemu::BufRef{{kg_b[{i}]}}"),
            Binding::Buffer(i) => format!("kgemu::BufPtr{{kg_b[{i}]}}"),
            Binding::Attribute(a) => {
                // grid_size is threads_per_grid under another name
                let field = if a == Attribute::GridSize { "threads_per_grid" } else { a.name() };
                if a.is_vector() {
                    format!("kgemu::Attr3{{kg_t->{field}}}")
                } else {
                    format!("kgemu::Attr1{{kg_t->{field}}}")
                }
            }
        })
        .collect();
    format!(
        "extern \"C\" __attribute__((visibility(\"default\"))) void {sym}(void* const* kg_b, const kgemu::ThreadInfo* kg_t) {{\n  (void)kg_b; (void)kg_t;\n  {callee}({});\n}}\n",
        args.join(", ")
    )
}

/// A `[[function_constant(n)]]` declaration found in the source.
pub(crate) struct FcDecl {
    pub public: FunctionConstantDecl,
    /// A program-scope `constant bool name = expression;` of function constants (candle's
    /// `gather_bias = do_gather && use_out_source`), with the value the expression has: usable in
    /// a parameter's `function_constant(name)`, not itself a function constant.
    pub derived: bool,
}

/// Integer function-constant types: (signed, bits).
fn fc_int_type(ty: &str) -> Option<(bool, u32)> {
    Some(match ty {
        "int" | "int32_t" | "signed int" => (true, 32),
        "uint" | "uint32_t" | "unsigned int" | "unsigned" => (false, 32),
        "short" | "int16_t" => (true, 16),
        "ushort" | "uint16_t" | "unsigned short" => (false, 16),
        "char" | "int8_t" | "signed char" => (true, 8),
        "uchar" | "uint8_t" | "unsigned char" => (false, 8),
        "long" | "int64_t" => (true, 64),
        "ulong" | "uint64_t" | "size_t" | "unsigned long" => (false, 64),
        _ => return None,
    })
}

fn float_literal(v: f32) -> String {
    if v.is_nan() {
        "__builtin_nanf(\"\")".into()
    } else if v.is_infinite() {
        if v > 0.0 { "__builtin_inff()".into() } else { "(-__builtin_inff())".into() }
    } else {
        format!("{v:e}f")
    }
}

/// The C++ initializer of constant `name` of type `ty` with value `v`, or why not.
fn fc_initializer(ty: &str, v: FunctionConstant) -> Result<String, String> {
    let is_float = matches!(ty, "float");
    let is_half = matches!(ty, "half" | "float16_t" | "bfloat" | "bfloat16_t");
    match v {
        FunctionConstant::Bool(b) if ty == "bool" => Ok(if b { "true".into() } else { "false".into() }),
        FunctionConstant::Int(i) if fc_int_type(ty).is_some() => {
            let (signed, bits) = fc_int_type(ty).unwrap_or((true, 64));
            let (lo, hi): (i128, i128) = if signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            if (i as i128) < lo || (i as i128) > hi {
                return Err(format!("{i} does not fit in {ty}"));
            }
            Ok(if i == i64::MIN { format!("{ty}(-9223372036854775807ll - 1)") } else { format!("{ty}({i}ll)") })
        }
        FunctionConstant::Int(i) if is_float || is_half => Ok(format!("{ty}({})", float_literal(i as f32))),
        FunctionConstant::Float(f) if is_float || is_half => Ok(format!("{ty}({})", float_literal(f as f32))),
        _ if ty == "bool" || fc_int_type(ty).is_some() || is_float || is_half => Err(format!("{} value for a {ty} constant", match v.kind() { "integer" => "an integer", k => if k == "bool" { "a bool" } else { "a float" } })),
        _ => Err(format!("function constants of type {ty} are not supported (bool, integer, float, half and bfloat scalars)")),
    }
}

/// Program-scope `constant bool name = expression;` whose expression is made of bool function
/// constants (and earlier such names), `true`, `false`, `!`, `&&`, `||` and parentheses, with its
/// value (`None` when a constant in it has none).
fn derived_bool_constants(toks: &[Token], paren_at: &[i32], fcs: &[FcDecl]) -> Vec<FcDecl> {
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let mut out: Vec<FcDecl> = Vec::new();
    let mut depth = 0i32;
    for i in 0..toks.len() {
        match tx(i) {
            "{" => depth += 1,
            "}" => depth -= 1,
            _ => {}
        }
        if depth != 0 || paren_at[i] != 0 || tx(i) != "constant" || tx(i + 1) != "bool" || tx(i + 3) != "=" {
            continue;
        }
        let Some(semi) = (i + 4..toks.len()).find(|&k| tx(k) == ";") else { continue };
        let lookup = |name: &str| -> Option<Option<bool>> {
            let d = fcs.iter().chain(out.iter()).find(|d| d.public.name == name)?;
            match d.public.value {
                Some(FunctionConstant::Bool(b)) => Some(Some(b)),
                None if d.public.type_name == "bool" => Some(None),
                _ => None,
            }
        };
        let mut p = BoolExpr { toks, pos: i + 4, end: semi, lookup: &lookup };
        let Some(value) = p.or().filter(|_| p.pos == semi) else { continue };
        let name = tx(i + 2).to_string();
        out.push(FcDecl {
            public: FunctionConstantDecl { name, index: u32::MAX, type_name: "bool".into(), value: value.map(FunctionConstant::Bool), metal_line: toks[i].line },
            derived: true,
        });
    }
    out
}

/// A recursive-descent reading of a bool expression of constants: `Some(value)` (`Some(None)`:
/// a constant without a value), `None` when it is not one.
struct BoolExpr<'a> {
    toks: &'a [Token],
    pos: usize,
    end: usize,
    lookup: &'a dyn Fn(&str) -> Option<Option<bool>>,
}

impl BoolExpr<'_> {
    fn peek(&self) -> &str {
        if self.pos < self.end { self.toks[self.pos].text.as_str() } else { "" }
    }
    fn or(&mut self) -> Option<Option<bool>> {
        let mut v = self.and()?;
        while self.peek() == "||" {
            self.pos += 1;
            let r = self.and()?;
            v = match (v, r) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            };
        }
        Some(v)
    }
    fn and(&mut self) -> Option<Option<bool>> {
        let mut v = self.unary()?;
        while self.peek() == "&&" {
            self.pos += 1;
            let r = self.unary()?;
            v = match (v, r) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
        }
        Some(v)
    }
    fn unary(&mut self) -> Option<Option<bool>> {
        let t = self.peek().to_string();
        self.pos += 1;
        match t.as_str() {
            "!" => self.unary().map(|v| v.map(|b| !b)),
            "(" => {
                let v = self.or()?;
                (self.peek() == ")").then(|| self.pos += 1)?;
                Some(v)
            }
            "true" => Some(Some(true)),
            "false" => Some(Some(false)),
            name if self.toks[self.pos - 1].kind == Kind::Ident => (self.lookup)(name),
            _ => None,
        }
    }
}

/// Finds every program-scope `... T name [[function_constant(n)]];` and rewrites it:
/// to `static constexpr T name = value;` when `given` has index `n` (`static const` for
/// half and bfloat), else to a stand-in whose every read is a compile error naming the
/// constant at the line that reads it (`is_function_constant_defined(name)` is false).
fn function_constants(toks: &[Token], src: &str, paren_at: &[i32], given: &[(u32, FunctionConstant)]) -> Result<(Vec<FcDecl>, Vec<Edit>), PrepError> {
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let mut decls: Vec<FcDecl> = Vec::new();
    let mut edits = Vec::new();
    for (g, (idx, _)) in given.iter().enumerate() {
        if given[..g].iter().any(|(o, _)| o == idx) {
            return Err(prep_err(0, format!("function constant {idx} is given twice")));
        }
    }
    for i in 2..toks.len() {
        if tx(i) != "function_constant" || tx(i - 1) != "[" || tx(i - 2) != "[" || paren_at[i] != 0 {
            continue;
        }
        let open = i - 2;
        let line = toks[open].line;
        let bad = || prep_err(line, "expected a program-scope `constant T name [[function_constant(index)]];`");
        // the index, a literal or a sum of them (ggml's `FC_BIN + 1`, its macro expanded), then `]] ;`
        let close = (i + 2..toks.len()).find(|&k| tx(k) == ")" || tx(k) == ";").unwrap_or(toks.len());
        if tx(i + 1) != "(" || tx(close) != ")" || tx(close + 1) != "]" || tx(close + 2) != "]" || tx(close + 3) != ";" {
            return Err(bad());
        }
        let not_literal = || prep_err(line, "the index of [[function_constant(index)]] must be an integer literal (or a sum of them)");
        let mut index = 0u32;
        for (n, k) in (i + 2..close).enumerate() {
            if n % 2 == 1 {
                if tx(k) != "+" || k + 1 == close {
                    return Err(not_literal());
                }
            } else {
                index = parse_int(tx(k)).and_then(|v| index.checked_add(v)).ok_or_else(not_literal)?;
            }
        }
        if close == i + 2 {
            return Err(not_literal());
        }
        let semi = close + 3;
        let mut start = open;
        while start > 0 {
            let p = tx(start - 1);
            if p == ";" || p == "{" || p == "}" || (toks[start - 1].line < toks[start].line && line_is_directive(src, toks[start - 1].offset)) {
                break;
            }
            start -= 1;
        }
        if open < start + 2 || toks[open - 1].kind != Kind::Ident {
            return Err(bad());
        }
        let name = tx(open - 1).to_string();
        let ty_tokens: Vec<String> = (start..open - 1).map(|k| tx(k)).filter(|t| !matches!(*t, "constant" | "const" | "static" | "constexpr")).map(String::from).collect();
        let ty = join_type(&ty_tokens);
        if !(start..open - 1).any(|k| tx(k) == "constant") {
            return Err(prep_err(line, format!("function constant `{name}` must be declared in the constant address space (`constant {ty} {name} [[function_constant({index})]];`)")));
        }
        if let Some(other) = decls.iter().find(|d| d.public.index == index) {
            return Err(prep_err(line, format!("function constant index {index} is used by `{}` and `{name}`", other.public.name)));
        }
        let value = given.iter().find(|(n, _)| *n == index).map(|(_, v)| *v);
        let text = match value {
            Some(v) => {
                let init = fc_initializer(&ty, v).map_err(|why| prep_err(line, format!("function constant `{name}` [[function_constant({index})]]: {why}")))?;
                let kw = if matches!(ty.as_str(), "half" | "float16_t" | "bfloat" | "bfloat16_t") { "static const" } else { "static constexpr" };
                format!("{kw} {ty} {name} = {init};")
            }
            None => {
                if ty != "bool" && fc_int_type(&ty).is_none() && !matches!(ty.as_str(), "float" | "half" | "float16_t" | "bfloat" | "bfloat16_t") {
                    return Err(prep_err(line, format!("function constant `{name}`: type {ty} is not supported (bool, integer, float, half and bfloat scalars)")));
                }
                format!(
                    "struct kgemu_fc_{name} {{ static constexpr bool kgemu_fc_missing = true; template <int Z = 0> operator {ty}() const {{ static_assert(Z != 0, \"function constant {name} [[function_constant({index})]] is read but has no value: give it at load time (kernelgen_emu::LoadOptions::function_constants, kernelgen emu --function-constant {index}=VALUE)\"); return {ty}(); }} }}; static constexpr kgemu_fc_{name} {name}{{}};"
                )
            }
        };
        edits.push(Edit { start: toks[start].offset, end: toks[semi].end(), text });
        decls.push(FcDecl { public: FunctionConstantDecl { name, index, type_name: ty, value, metal_line: line }, derived: false });
    }
    for (idx, _) in given {
        if !decls.iter().any(|d| d.public.index == *idx) {
            let declared: Vec<String> = decls.iter().map(|d| format!("{} ({})", d.public.index, d.public.name)).collect();
            return Err(prep_err(
                0,
                format!(
                    "function constant {idx} is given, but the program declares no [[function_constant({idx})]]; it declares {}",
                    if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                ),
            ));
        }
    }
    Ok((decls, edits))
}

/// MSL overloads functions on address spaces: member functions on the address space of
/// `*this` (complex.h's `complex_t() thread` and `complex_t() threadgroup`), free
/// functions on the address space of a parameter (`operator+=(thread complex_t<T>&, ..)`
/// and `operator+=(device complex_t<T>&, ..)`), and templates are specialized on it
/// (`pointer_element<device T*>`). With the address spaces erased, each such set is one
/// declaration repeated. So in every scope (the file, each namespace and class body)
/// the declarations whose text up to the body is the same once the address-space
/// keywords are removed are twins: the one that names only `thread` or no address space
/// (else the first) is kept, the others that name one are blanked (their lines kept). On the CPU every object lives
/// in one memory; MLX's twins have identical bodies.
fn address_space_twins(toks: &[Token]) -> Vec<Edit> {
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let mut scopes: Vec<(usize, usize)> = vec![(0, toks.len())];
    let mut stack: Vec<(usize, bool)> = Vec::new();
    for i in 0..toks.len() {
        match tx(i) {
            "{" => stack.push((i, opens_scope(toks, i))),
            "}" => {
                if let Some((open, true)) = stack.pop() {
                    scopes.push((open + 1, i));
                }
            }
            _ => {}
        }
    }
    let mut edits = Vec::new();
    for (from, to) in scopes {
        struct Decl {
            start: usize,
            end: usize,
            key: String,
            /// It names an address space (a declaration without one is only ever kept).
            spaced: bool,
            /// It names none but `thread` (or none at all: `T() = default` beside
            /// `T() threadgroup = default`, candle's reduce.metal).
            thread_only: bool,
        }
        let mut decls: Vec<Decl> = Vec::new();
        let mut depth = 0i32;
        let mut seg = from;
        for j in from..to {
            let t = tx(j);
            match t {
                "{" | "(" | "[" => depth += 1,
                "}" | ")" | "]" => depth -= 1,
                _ => {}
            }
            let access = depth == 0 && t == ":" && j == seg + 1 && matches!(tx(seg), "public" | "private" | "protected");
            if depth == 0 && (t == ";" || t == "}" || access) {
                if !access && j > seg {
                    // the head: up to the body's `{` at depth 0
                    let mut d = 0i32;
                    let mut head_end = j + 1;
                    for k in seg..=j {
                        match tx(k) {
                            "{" if d == 0 => {
                                head_end = k;
                                break;
                            }
                            "(" | "[" | "{" => d += 1,
                            ")" | "]" | "}" => d -= 1,
                            _ => {}
                        }
                    }
                    let spaces: Vec<&str> = (seg..head_end).map(|k| tx(k)).filter(|t| is_address_space(t)).collect();
                    let key: Vec<&str> = (seg..head_end).map(|k| tx(k)).filter(|t| !is_address_space(t)).collect();
                    decls.push(Decl {
                        start: seg,
                        end: j,
                        key: key.join(" "),
                        spaced: !spaces.is_empty(),
                        thread_only: spaces.iter().all(|s| *s == "thread"),
                    });
                }
                seg = j + 1;
            }
        }
        for (a, d) in decls.iter().enumerate() {
            if !d.spaced {
                continue;
            }
            let twins: Vec<usize> = (0..decls.len()).filter(|&o| decls[o].key == d.key).collect();
            if twins.len() < 2 {
                continue;
            }
            let keep = twins.iter().copied().find(|&o| decls[o].thread_only).unwrap_or(twins[0]);
            if keep != a {
                edits.push(Edit { start: toks[d.start].offset, end: toks[d.end].end(), text: String::new() });
            }
        }
    }
    edits
}

/// A program-scope variable in the `constant` address space is a constant, and one of integral
/// type initialized by a constant expression is usable in constant expressions (candle's
/// `constant uint MAX_SHARED_MEM = 32767;` as a template argument). With `constant` erased it
/// would be a mutable global: at program scope (outside functions, classes and parameter
/// lists) `constant T name = ...` of a scalar `T`, not already const, becomes `const`.
/// The scalar types of a program-scope `constant` made `const`.
const SCALAR_TYPES: [&str; 20] = [
    "bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "bfloat", "float", "size_t", "int8_t", "uint8_t",
    "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t",
];

fn program_scope_constants(toks: &[Token], paren_at: &[i32]) -> Vec<Edit> {
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    // for each open `{`: whether it opens a namespace
    let mut stack: Vec<bool> = Vec::new();
    let mut edits = Vec::new();
    for i in 0..toks.len() {
        match tx(i) {
            "{" => stack.push(scope_keyword(toks, i) == Some("namespace")),
            "}" => {
                stack.pop();
            }
            // `constant T name =` of a scalar T, not already const (MLX's `static constant
            // constexpr const`): objects keep their constructors and methods as they were
            "constant" if paren_at[i] == 0 && stack.iter().all(|&ns| ns) => {
                let specifiers = |k: usize| matches!(tx(k), "static" | "inline" | "constexpr" | "const" | ";" | "{" | "}" | ">" | "") || k == 0;
                let before_ok = (0..i).rev().take_while(|&k| matches!(tx(k), "static" | "inline" | "constexpr" | "const")).all(|k| !matches!(tx(k), "constexpr" | "const"));
                let scalar = SCALAR_TYPES.contains(&tx(i + 1)) && toks.get(i + 2).is_some_and(|t| t.kind == Kind::Ident) && tx(i + 3) == "=";
                let start_ok = (0..i).rev().find(|&k| !matches!(tx(k), "static" | "inline")).is_none_or(specifiers);
                if before_ok && scalar && start_ok {
                    edits.push(Edit { start: toks[i].offset, end: toks[i].end(), text: "const".to_string() });
                }
            }
            _ => {}
        }
    }
    edits
}

/// Whether the `{` at `open` opens a namespace or a class body (a scope of declarations).
fn opens_scope(toks: &[Token], open: usize) -> bool {
    scope_keyword(toks, open).is_some()
}

/// `namespace`, `struct`, `class` or `union` when the `{` at `open` opens such a body.
fn scope_keyword(toks: &[Token], open: usize) -> Option<&str> {
    let tx = |k: usize| toks[k].text.as_str();
    // walk back over the head: names, `::`, template arguments, bases, attributes
    let mut k = open;
    let mut angle = 0i32;
    while k > 0 {
        k -= 1;
        match tx(k) {
            "namespace" | "struct" | "class" | "union" if angle == 0 => {
                return (!(k > 0 && tx(k - 1) == "enum")).then_some(tx(k));
            }
            ">" => angle += 1,
            ">>" => angle += 2,
            "<" => angle -= 1,
            // (an initializer, or an operator: `=`, `+=`, `==`, `<=`)
            t if angle <= 0 && (matches!(t, ";" | "{" | "}" | "(" | ")") || t.contains('=')) => return None,
            _ => {}
        }
    }
    None
}

/// `template <>` inside a class body: an explicit specialization of a member function
/// template, which clang (and so Metal) accepts and g++ rejects ("explicit
/// specialization in non-namespace scope", binary_ops.h). Without `template <>` it is a
/// plain overload with the same parameters, which overload resolution prefers to the
/// template exactly where the specialization would have been chosen.
fn class_scope_specializations(toks: &[Token]) -> Vec<Edit> {
    let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    let mut stack: Vec<bool> = Vec::new();
    let mut edits = Vec::new();
    for i in 0..toks.len() {
        match tx(i) {
            "{" => stack.push(matches!(scope_keyword(toks, i), Some("struct" | "class" | "union"))),
            "}" => {
                stack.pop();
            }
            "template" if stack.last() == Some(&true) && tx(i + 1) == "<" && tx(i + 2) == ">" => {
                edits.push(Edit { start: toks[i].offset, end: toks[i + 2].end(), text: String::new() });
            }
            _ => {}
        }
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_keep_lines() {
        let src = "kernel void k(device float* o [[buffer(0)]], uint3 t [[thread_position_in_grid]]) {\n  threadgroup float xs[32];\n  float2 a = float2(1.5h, 2h);\n  a.xy = a.yx;\n  o[0] = a.x + xs[t.x];\n}\n";
        let p = translate(src, "k.metal").unwrap();
        let body: Vec<&str> = p.cpp.lines().collect();
        // line 1 of the .metal is line 3 of the output
        assert!(body[3].contains("(&xs)[32] = *kgemu::tg_alloc<float[32]>(0u, __LINE__, \"xs\");"), "{}", body[3]);
        assert!(body[4].contains("metal::half(1.5f)") && body[4].contains("metal::half(2)"));
        assert!(body[5].contains("a.template kg_swz_ref<0,1>() = a.template kg_swz<1,0>();"), "{}", body[5]);
        assert_eq!(p.kernels.len(), 1);
        assert_eq!(p.kernels[0].params[0].binding, Binding::Buffer(0));
        assert_eq!(p.kernels[0].params[1].binding, Binding::Attribute(Attribute::ThreadPositionInGrid));
    }

    #[test]
    fn host_name_instantiation() {
        let src = "template <int N, typename T>\n[[kernel]] void f(const device T* x [[buffer(0)]], device T* y [[buffer(1)]], uint i [[thread_index_in_simdgroup]]) { y[i] = x[i] * N; }\ntemplate [[host_name(\"f_1_float\")]] [[kernel]] decltype(f<1, float>) f<1, float>;\n";
        let p = translate(src, "f.metal").unwrap();
        assert_eq!(p.kernels.len(), 1);
        assert_eq!(p.kernels[0].name, "f_1_float");
        assert_eq!(p.kernels[0].params[0].type_name, "float");
        assert!(p.kernels[0].params[0].is_const);
        assert!(p.cpp.contains("f<1, float>(kgemu::BufPtr{kg_b[0]}"));
        assert!(p.cpp.contains("template decltype(f<1, float>) f<1, float>;"));
    }

    #[test]
    fn program_scope_threadgroup_variables_are_rejected() {
        let e = translate("#include <metal_stdlib>\nthreadgroup float shared[32];\n", "p.metal").err().unwrap();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn only_directives_beyond_metal_includes_and_pragmas_need_the_preprocessor() {
        assert!(!needs_preprocessing("#include <metal_stdlib>\n#pragma clang loop unroll(full)\nkernel void f() {}\n"));
        assert!(needs_preprocessing("#include \"mlx/backend/metal/kernels/utils.h\"\n"));
        assert!(needs_preprocessing("  #define N 4\n"));
        assert!(needs_preprocessing("#if 0\n#endif\n"));
    }

    #[test]
    fn line_markers_map_back_to_files() {
        let text = "# 1 \"k.metal\"\na\n# 1 \"h.h\" 1\nb\nc\n# 3 \"k.metal\" 2\nd\n";
        let m = LineMap::parse(text, "k.metal");
        assert_eq!(m.get(2), (None, 1));
        assert_eq!(m.get(5), (Some("h.h".to_string()), 2));
        assert_eq!(m.get(7), (None, 3));
    }

    #[test]
    fn address_space_twins_keep_the_thread_one() {
        let src = "struct C {\n  C() thread {}\n  C() threadgroup {}\n  int f(device int* p) const device { return *p; }\n};\nint g(thread int& a) { return a; }\nint g(device int& a) { return a + 1; }\nint h(device int* a);\n";
        let p = translate(src, "t.metal").unwrap();
        let l: Vec<&str> = p.cpp.lines().collect();
        assert!(l[3].contains("C() thread {}") && !l[4].contains("C()"), "{}", p.cpp);
        assert!(l[5].contains("int f(device int* p)"), "a member without a twin stays");
        assert!(l[7].contains("int g(thread int& a)") && !l[8].contains("int g"), "{}", p.cpp);
        assert!(l[9].contains("int h(device int* a);"));
    }

    #[test]
    fn program_scope_constants_are_const() {
        let src = "constant uint N = 8;\nnamespace a { constant int M = 2; }\nstatic constant constexpr const int K = 3;\nconstant Obj o(1);\nstruct S { static constant constexpr bool v = true; };\nvoid f(constant float* p) { }\ntemplate <uint X> uint g() { return X; }\nuint h() { return g<N>() + g<a::M>(); }\n";
        let p = translate(src, "t.metal").unwrap();
        let l: Vec<&str> = p.cpp.lines().collect();
        let line = |s: &str| *l.iter().find(|x| x.contains(s)).expect(&p.cpp);
        assert!(line("N = 8").contains("const uint N"), "{}", p.cpp);
        assert!(line("M = 2").contains("const int M"), "{}", p.cpp);
        assert!(line("K = 3").contains("static constant constexpr const int K"), "already const: {}", p.cpp);
        assert!(line("Obj o").contains("constant Obj o"), "objects stay: {}", p.cpp);
        assert!(line("bool v").contains("static constant constexpr"), "class scope stays: {}", p.cpp);
        assert!(line("void f(").contains("constant float* p"), "parameters stay: {}", p.cpp);
    }

    /// candle's reduce.metal: `MD<T>() = default` (no address space) and its `threadgroup` twin.
    #[test]
    fn a_twin_without_an_address_space_is_the_one_kept() {
        let src = "template <typename T> struct MD {\n  T m;\n  constexpr MD<T>() = default;\n  constexpr MD<T>() threadgroup = default;\n  void f();\n  void f();\n};\n";
        let p = translate(src, "t.metal").unwrap();
        let l: Vec<&str> = p.cpp.lines().collect();
        let at = l.iter().position(|x| x.contains("constexpr MD<T>() = default;")).expect(&p.cpp);
        assert!(!l[at + 1].contains("MD<T>()"), "{}", p.cpp);
        assert_eq!(l.iter().filter(|x| x.contains("void f();")).count(), 2, "redeclarations without an address space stay");
    }

    #[test]
    fn member_specializations_become_overloads() {
        let src = "struct Op {\n  template <typename T> T operator()(T x) { return x; }\n  template <> float operator()(float x) { return -x; }\n};\ntemplate <> struct S<int> {};\n";
        let p = translate(src, "t.metal").unwrap();
        let l: Vec<&str> = p.cpp.lines().collect();
        assert!(!l[4].contains("template") && l[4].contains("float operator()(float x)"), "{}", l[4]);
        assert!(l[6].contains("template <> struct S<int>"), "namespace-scope specializations stay");
    }

    #[test]
    fn buffers_without_an_attribute_take_the_first_free_index() {
        let src = "kernel void k(device float* a, constant uint& n [[buffer(0)]], device float* b, uint i [[thread_position_in_grid]]) {}\n";
        let p = translate(src, "k.metal").unwrap();
        let b: Vec<Binding> = p.kernels[0].params.iter().map(|p| p.binding).collect();
        assert_eq!(b[..3], [Binding::Buffer(1), Binding::Buffer(0), Binding::Buffer(2)]);
    }

    #[test]
    fn function_constants_get_their_values_or_fail_where_read() {
        let src = "constant bool a [[function_constant(0)]];\nconstant int n [[function_constant(3)]];\nconstant half h [[function_constant(4)]];\nkernel void k(device float* x [[buffer(0)]], device float* m [[buffer(1), function_constant(a)]]) {}\n";
        let given = [(0, FunctionConstant::Bool(false)), (4, FunctionConstant::Float(0.5))];
        let p = translate_with(src, "k.metal", &Options { preprocessed: false, function_constants: &given }).unwrap();
        assert!(p.cpp.contains("static constexpr bool a = false;"), "{}", p.cpp);
        assert!(p.cpp.contains("static const half h = half(5e-1f);"), "{}", p.cpp);
        assert!(p.cpp.contains("static_assert(Z != 0, \"function constant n [[function_constant(3)]] is read but has no value"));
        assert_eq!(p.kernels[0].params.len(), 1, "the buffer of a false function constant does not exist");
        assert!(p.cpp.contains("kgemu::BufPtr{nullptr}"));
        assert_eq!(p.function_constants.iter().map(|c| (c.index, c.value)).collect::<Vec<_>>(), [(0, Some(FunctionConstant::Bool(false))), (3, None), (4, Some(FunctionConstant::Float(0.5)))]);
        let bad = [(0, FunctionConstant::Int(1))];
        let e = translate_with(src, "k.metal", &Options { preprocessed: false, function_constants: &bad }).err().unwrap();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("an integer value for a bool constant"), "{}", e.message);
        let unknown = [(0, FunctionConstant::Bool(true)), (9, FunctionConstant::Bool(true))];
        let e = translate_with(src, "k.metal", &Options { preprocessed: false, function_constants: &unknown }).err().unwrap();
        assert!(e.message.contains("function constant 9 is given"), "{}", e.message);
        let e = translate_with(src, "k.metal", &Options::default()).err().unwrap();
        assert_eq!(e.line, 4, "the conditional buffer needs a's value");
    }

    /// candle's mlx_gemm.metal: `[[buffer(12), function_constant(gather_bias)]]` with
    /// `constant bool gather_bias = do_gather && use_out_source;`.
    #[test]
    fn a_parameter_may_depend_on_a_bool_made_of_function_constants() {
        let src = "constant bool a [[function_constant(1)]];\nconstant bool b [[function_constant(2)]];\nconstant bool ab = a && !(b || false);\nkernel void k(device float* x [[buffer(0)]], device float* y [[buffer(1), function_constant(ab)]]) {}\n";
        let given = |a: bool, b: bool| [(1, FunctionConstant::Bool(a)), (2, FunctionConstant::Bool(b))];
        for (a, b, present) in [(true, false, true), (true, true, false), (false, false, false)] {
            let g = given(a, b);
            let p = translate_with(src, "k.metal", &Options { preprocessed: false, function_constants: &g }).unwrap();
            assert_eq!(p.kernels[0].params.len(), 1 + present as usize, "a {a} b {b}");
            assert_eq!(p.function_constants.len(), 2, "ab is no function constant of its own");
        }
        let only_a = [(1, FunctionConstant::Bool(true))];
        let e = translate_with(src, "k.metal", &Options { preprocessed: false, function_constants: &only_a }).err().unwrap();
        assert!(e.message.contains("exists only when `ab` is true, and a function constant it is made of has no value"), "{}", e.message);
    }

    /// ggml's `[[function_constant(FC_BIN + 1)]]`, its macro expanded: the index is the sum.
    #[test]
    fn a_function_constant_index_may_be_a_sum_of_literals() {
        let src = "constant short op [[function_constant(1300 + 0)]];\nconstant bool rb [[function_constant(1300 + 2)]];\nkernel void k(device float* x [[buffer(0)]]) { x[0] = op + rb; }\n";
        let given = [(1300, FunctionConstant::Int(3)), (1302, FunctionConstant::Bool(true))];
        let p = translate_with(src, "k.metal", &Options { preprocessed: false, function_constants: &given }).unwrap();
        assert!(p.cpp.contains("static constexpr short op = short(3ll);"), "{}", p.cpp);
        assert!(p.cpp.contains("static constexpr bool rb = true;"), "{}", p.cpp);
        for bad in ["1300 +", "1300 * 2", "+ 1"] {
            let e = translate(&src.replace("1300 + 0", bad), "k.metal").err().unwrap();
            assert!(e.message.contains("must be an integer literal (or a sum of them)"), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn operators_of_several_characters_are_one_token() {
        // `->` before a swizzle, `<<=` through one, `>>` closing two template argument lists
        let src = "template <typename T = vec<float, 2>>\n[[kernel]] void k(device float4* p [[buffer(0)]], device T* q [[buffer(1)]], uint i [[thread_position_in_grid]]) {\n  float2 a = p->xy;\n  uint2 u = uint2(1, 2);\n  u.yx <<= 1u;\n}\ntemplate [[host_name(\"k2\")]] [[kernel]] decltype(k<vec<float, 2>>) k<vec<float, 2>>;\n";
        let p = translate(src, "k.metal").unwrap();
        let l: Vec<&str> = p.cpp.lines().collect();
        assert!(l[4].contains("p->template kg_swz<0,1>();"), "{}", l[4]);
        assert!(l[6].contains("u.template kg_swz_ref<1,0>() <<= 1u;"), "{}", l[6]);
        assert_eq!(p.kernels.len(), 1);
        assert_eq!((p.kernels[0].name.as_str(), p.kernels[0].function.as_str()), ("k2", "k<vec<float, 2>>"));
        assert_eq!(p.kernels[0].params[1].type_name, "vec<float, 2>");
    }

    #[test]
    fn an_instantiation_without_template_arguments_is_an_error() {
        let src = "template <typename T>\n[[kernel]] void f(device T* x [[buffer(0)]]) {}\ntemplate [[host_name(\"g\")]] [[kernel]] decltype(f< >) f< >;\n";
        let e = translate(src, "f.metal").err().unwrap();
        assert!(e.message.contains("unrecognised host_name instantiation"), "{}", e.message);
        assert_eq!(e.line, 3);
    }

    #[test]
    fn pointers_into_threadgroup_memory_are_left_alone() {
        let src = "void g() {\n  threadgroup float* p = 0;\n  const threadgroup float* q = p;\n}\n";
        let p = translate(src, "g.metal").unwrap();
        assert!(p.cpp.contains("threadgroup float* p = 0;"));
    }
}
