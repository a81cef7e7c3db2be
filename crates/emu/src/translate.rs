//! MSL to C++17: line-preserving rewrites of a `.metal` file into C++17, the
//! parse of every `[[kernel]]` signature, and the generated entry points.
//!
//! Every rewrite keeps each token on its original line (a replacement that spans
//! newlines re-emits them), so `#line 1 "<file>"` at the top maps every compiler
//! diagnostic, every `__builtin_LINE()` and every debug line back to the `.metal` file.

use super::{AddressSpace, Attribute, Binding, KernelSignature, Param};

/// A token of the source, with its byte span. Comments are skipped; string and
/// character literals are single tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ident,
    Number,
    Str,
    Punct,
}

#[derive(Clone, Copy, Debug)]
struct Tok {
    kind: Kind,
    start: usize,
    end: usize,
    line: u32,
}

fn tokenize(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line = 1u32;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i = (i + 2).min(b.len());
        } else if c == b'"' || c == b'\'' {
            let start = i;
            let l = line;
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                if i < b.len() && b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            toks.push(Tok { kind: Kind::Str, start, end: i, line: l });
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok { kind: Kind::Ident, start, end: i, line });
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let start = i;
            i += 1;
            while i < b.len() {
                let d = b[i];
                let exponent_sign = (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P') && !is_hex(&src[start..i]);
                if exponent_sign || d.is_ascii_alphanumeric() || d == b'_' || d == b'.' {
                    i += 1;
                } else {
                    break;
                }
            }
            toks.push(Tok { kind: Kind::Number, start, end: i, line });
        } else {
            let start = i;
            // keep `::` as one token; everything else is one byte (or one UTF-8 char)
            if c == b':' && b.get(i + 1) == Some(&b':') {
                i += 2;
            } else {
                i += utf8_len(c);
            }
            toks.push(Tok { kind: Kind::Punct, start, end: i, line });
        }
    }
    toks
}

fn is_hex(s: &str) -> bool {
    s.starts_with("0x") || s.starts_with("0X")
}

fn utf8_len(c: u8) -> usize {
    match c {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// A failure of preparation: a construct the emulator does not support, at a line.
#[derive(Debug)]
pub(crate) struct PrepError {
    pub line: u32,
    pub message: String,
}

/// A replacement of `src[start..end]` by `text` (newlines of the replaced span are kept).
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// What `prepare` produces.
pub(crate) struct Prepared {
    /// The complete C++ translation unit.
    pub cpp: String,
    pub kernels: Vec<KernelSignature>,
    /// Entry symbol per kernel, in the order of `kernels`.
    pub symbols: Vec<String>,
}

struct KernelDecl {
    name: String,
    line: u32,
    params: Vec<ParsedParam>,
    template_params: Option<Vec<(String, String)>>, // (kind, name)
}

struct ParsedParam {
    name: String,
    binding: Binding,
    type_tokens: Vec<String>,
    address_space: AddressSpace,
    is_const: bool,
    is_reference: bool,
    is_pointer: bool,
}

struct Instantiation {
    host_name: String,
    function: String,
    args: String,
    line: u32,
}

pub(crate) fn translate(source: &str, file_name: &str) -> Result<Prepared, PrepError> {
    let toks = tokenize(source);
    let text = |t: &Tok| &source[t.start..t.end];
    let is = |i: usize, s: &str| toks.get(i).is_some_and(|t| &source[t.start..t.end] == s);
    let mut edits: Vec<Edit> = Vec::new();
    let mut kernels: Vec<KernelDecl> = Vec::new();
    let mut insts: Vec<Instantiation> = Vec::new();
    let mut tg_site = 0u32;

    // brace depth before each token (threadgroup variables live in functions only)
    let mut depth_at = Vec::with_capacity(toks.len());
    let mut depth = 0i32;
    for t in &toks {
        depth_at.push(depth);
        match &source[t.start..t.end] {
            "{" => depth += 1,
            "}" => depth -= 1,
            _ => {}
        }
    }

    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        match t.kind {
            Kind::Number => {
                // half literals: 1.5h / 2h -> half(1.5f) / half(2)
                let s = text(&t);
                if (s.ends_with('h') || s.ends_with('H')) && !is_hex(s) {
                    let num = &s[..s.len() - 1];
                    let repl = if num.contains('.') || num.contains('e') || num.contains('E') {
                        format!("metal::half({num}f)")
                    } else {
                        format!("metal::half({num})")
                    };
                    edits.push(Edit { start: t.start, end: t.end, text: repl });
                }
            }
            Kind::Punct if text(&t) == "." || (text(&t) == ">" && i > 0 && is(i - 1, "-") && toks[i - 1].end == t.start) => {
                // swizzles: v.xy (read) / v.xy = e (write)
                if let Some(n) = toks.get(i + 1).filter(|n| n.kind == Kind::Ident && n.start == t.end) {
                    let name = text(n);
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
                        let write = is_assignment(&toks, source, i + 2);
                        let f = if write { "kg_swz_ref" } else { "kg_swz" };
                        edits.push(Edit { start: n.start, end: n.end, text: format!("template {f}<{}>()", idx.join(",")) });
                    }
                }
            }
            Kind::Ident => {
                let s = text(&t);
                if s == "threadgroup" {
                    if let Some(edit) = threadgroup_decl(&toks, source, i, &mut tg_site)? {
                        if depth_at[i] <= 0 {
                            return Err(PrepError {
                                line: t.line,
                                message: "threadgroup variables must be declared inside a function".into(),
                            });
                        }
                        edits.push(edit);
                    }
                } else if s == "template" && is(i + 1, "[") && is(i + 2, "[") && is(i + 3, "host_name") {
                    let (inst, end) = instantiation(&toks, source, i)?;
                    // Keep the explicit instantiation without its attributes.
                    let body = format!("template decltype({f}<{a}>) {f}<{a}>;", f = inst.function, a = inst.args);
                    edits.push(Edit { start: t.start, end: toks[end].end, text: body });
                    insts.push(inst);
                    i = end + 1;
                    continue;
                } else if (s == "kernel" && is(i + 1, "void") && !(i >= 2 && is(i - 1, "[") && is(i - 2, "["))) ||
                    (s == "kernel" && i >= 2 && is(i - 1, "[") && is(i - 2, "[") && is(i + 1, "]") && is(i + 2, "]"))
                {
                    let kw_start = if is(i + 1, "void") { i } else { i - 2 };
                    let after = if is(i + 1, "void") { i + 1 } else { i + 3 };
                    let decl = kernel_decl(&toks, source, kw_start, after)?;
                    kernels.push(decl);
                }
            }
            _ => {}
        }
        i += 1;
    }

    // Apply the edits, keeping newlines of replaced spans.
    edits.sort_by_key(|e| e.start);
    let mut out = String::with_capacity(source.len() + 4096);
    out.push_str("#include \"kgemu_shim.h\"\n");
    out.push_str(&format!("#line 1 \"{}\"\n", escape_c(file_name)));
    let mut pos = 0;
    for e in &edits {
        if e.start < pos {
            continue; // overlapping (cannot happen with the rules above)
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

    // Entry points.
    out.push_str("#line 1 \"<kgemu-entry>\"\n");
    let mut sigs = Vec::new();
    let mut symbols = Vec::new();
    for k in &kernels {
        if k.template_params.is_some() {
            continue;
        }
        let sym = format!("kgemu_thread_{}", symbols.len());
        out.push_str(&entry(&sym, &k.name, &k.params));
        symbols.push(sym);
        sigs.push(KernelSignature {
            name: k.name.clone(),
            function: k.name.clone(),
            metal_line: k.line,
            params: k.params.iter().map(|p| to_param(p, &[])).collect(),
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
            });
        };
        if sigs.iter().any(|s: &KernelSignature| s.name == inst.host_name) {
            return Err(PrepError { line: inst.line, message: format!("kernel name `{}` is defined twice", inst.host_name) });
        }
        let tparams = k.template_params.as_deref().unwrap_or(&[]);
        let args = split_top_level(&inst.args);
        let subst: Vec<(String, String)> = tparams.iter().map(|(_, n)| n.clone()).zip(args.iter().cloned()).collect();
        let callee = format!("{}<{}>", inst.function, inst.args);
        let sym = format!("kgemu_thread_{}", symbols.len());
        out.push_str(&entry(&sym, &callee, &k.params));
        symbols.push(sym);
        sigs.push(KernelSignature {
            name: inst.host_name.clone(),
            function: callee,
            metal_line: inst.line,
            params: k.params.iter().map(|p| to_param(p, &subst)).collect(),
        });
    }
    for (a, s) in sigs.iter().enumerate() {
        if sigs[..a].iter().any(|o| o.name == s.name) {
            return Err(PrepError { line: s.metal_line, message: format!("kernel name `{}` is defined twice", s.name) });
        }
    }
    Ok(Prepared { cpp: out, kernels: sigs, symbols })
}

fn escape_c(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " ")
}

/// `=`, `+=`, `-=`, ... starting at token `i` (but not `==`).
fn is_assignment(toks: &[Tok], src: &str, i: usize) -> bool {
    let tx = |k: usize| toks.get(k).map(|t| &src[t.start..t.end]).unwrap_or("");
    let adjacent = |k: usize| toks.get(k + 1).is_some_and(|n| n.start == toks[k].end);
    match tx(i) {
        "=" => !(adjacent(i) && tx(i + 1) == "="),
        "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^" => adjacent(i) && tx(i + 1) == "=" && !(adjacent(i + 1) && tx(i + 2) == "="),
        _ => false,
    }
}

/// A `threadgroup T name[N]...;` declaration at statement level, rewritten to a
/// reference into the runtime's per-threadgroup allocation.
fn threadgroup_decl(toks: &[Tok], src: &str, i: usize, site: &mut u32) -> Result<Option<Edit>, PrepError> {
    let tx = |k: usize| &src[toks[k].start..toks[k].end];
    // Statement start: previous token is ; { } or nothing, or a preprocessor line end.
    if i > 0 {
        let p = tx(i - 1);
        let newline_before = toks[i - 1].line < toks[i].line;
        if !(p == ";" || p == "{" || p == "}" || p == ":" && i >= 2 && matches!(tx(i - 2), "public" | "private" | "default") || newline_before && line_is_directive(src, toks[i - 1].start)) {
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
            "(" => {
                if depth == 0 {
                    return Ok(None); // a function declaration or a cast: not a variable
                }
                depth += 1;
            }
            "<" | "[" => {
                if s == "[" && depth == 0 && first_bracket.is_none() {
                    first_bracket = Some(k);
                }
                depth += 1;
            }
            ">" | "]" | ")" => depth -= 1,
            "*" | "&" if depth == 0 && first_bracket.is_none() => return Ok(None), // pointer/reference
            "=" if depth == 0 => {
                return Err(PrepError { line, message: "a threadgroup variable cannot have an initializer".into() });
            }
            "," if depth == 0 => {
                return Err(PrepError {
                    line,
                    message: "declare one threadgroup variable per statement (the emulator rewrites each declaration)".into(),
                });
            }
            ";" if depth == 0 => break,
            "{" | "}" => return Ok(None),
            _ => {}
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
    let ty = &src[toks[i + 1].start..toks[name_idx - 1].end];
    let name = tx(name_idx);
    let dims = match first_bracket {
        Some(b) => src[toks[b].start..toks[semi - 1].end].to_string(),
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
    Ok(Some(Edit { start: toks[i].start, end: toks[semi].end, text }))
}

fn line_is_directive(src: &str, pos: usize) -> bool {
    let line_start = src[..pos].rfind('\n').map(|p| p + 1).unwrap_or(0);
    src[line_start..].trim_start().starts_with('#')
}

/// `template [[host_name("n")]] [[kernel]] decltype(f<A>) f<A>;` starting at `i`;
/// returns the parse and the index of the closing `;`.
fn instantiation(toks: &[Tok], src: &str, i: usize) -> Result<(Instantiation, usize), PrepError> {
    let line = toks[i].line;
    let bad = || PrepError {
        line,
        message: "unrecognised host_name instantiation; expected `template [[host_name(\"name\")]] [[kernel]] decltype(f<args>) f<args>;`".into(),
    };
    let tx = |k: usize| toks.get(k).map(|t| &src[t.start..t.end]).unwrap_or("");
    // template [ [ host_name ( "x" ) ] ]
    if tx(i + 4) != "(" || toks.get(i + 5).map(|t| t.kind) != Some(Kind::Str) || tx(i + 6) != ")" || tx(i + 7) != "]" || tx(i + 8) != "]" {
        return Err(bad());
    }
    let host = tx(i + 5);
    let host_name = host[1..host.len() - 1].to_string();
    let mut k = i + 9;
    // optional [[kernel]]
    if tx(k) == "[" && tx(k + 1) == "[" {
        while k < toks.len() && !(tx(k) == "]" && tx(k + 1) == "]") {
            k += 1;
        }
        k += 2;
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
    // inside: f < args >
    let function = tx(open + 1).to_string();
    if tx(open + 2) != "<" || tx(close - 1) != ">" {
        return Err(bad());
    }
    let args = src[toks[open + 3].start..toks[close - 2].end].to_string();
    let mut end = close + 1;
    while end < toks.len() && tx(end) != ";" {
        end += 1;
    }
    if end >= toks.len() {
        return Err(bad());
    }
    Ok((Instantiation { host_name, function, args: args.replace('\n', " "), line }, end))
}

/// Parse a kernel declaration: `kw_start` is the first token of `[[kernel]]` or
/// `kernel`; `after` the token after it (`void`).
fn kernel_decl(toks: &[Tok], src: &str, kw_start: usize, after: usize) -> Result<KernelDecl, PrepError> {
    let tx = |k: usize| toks.get(k).map(|t| &src[t.start..t.end]).unwrap_or("");
    let line = toks[kw_start].line;
    if tx(after) != "void" || toks.get(after + 1).map(|t| t.kind) != Some(Kind::Ident) || tx(after + 2) != "(" {
        return Err(PrepError { line, message: "a [[kernel]] function must be declared as `[[kernel]] void name(...)`".into() });
    }
    let name = tx(after + 1).to_string();
    // template parameters: `template <...>` right before the kernel keyword
    let mut template_params = None;
    if kw_start > 0 && tx(kw_start - 1) == ">" {
        let mut depth = 0;
        let mut j = kw_start - 1;
        loop {
            match tx(j) {
                ">" => depth += 1,
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
            let inner = &src[toks[j].end..toks[kw_start - 1].start];
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
        match tx(j) {
            "(" | "[" | "<" => depth += 1,
            ")" | "]" | ">" => {
                depth -= 1;
                if depth == 0 && tx(j) == ")" {
                    close = Some(j);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return Err(PrepError { line, message: format!("unbalanced parameter list of kernel `{name}`") });
    };
    let mut params = Vec::new();
    let mut start = open + 1;
    let mut depth = 0;
    for j in open + 1..=close {
        let s = tx(j);
        if j == close || (s == "," && depth == 0) {
            if j > start {
                params.push(parse_param(toks, src, start, j, &name)?);
            }
            start = j + 1;
            continue;
        }
        match s {
            "(" | "[" | "<" => depth += 1,
            ")" | "]" | ">" => depth -= 1,
            _ => {}
        }
    }
    Ok(KernelDecl { name, line, params, template_params })
}

fn parse_param(toks: &[Tok], src: &str, a: usize, b: usize, kernel: &str) -> Result<ParsedParam, PrepError> {
    let tx = |k: usize| &src[toks[k].start..toks[k].end];
    let line = toks[a].line;
    // attribute [[...]] at the end
    let mut attr_start = b;
    let mut attr: Option<(String, Option<String>)> = None;
    for j in a..b.saturating_sub(1) {
        if tx(j) == "[" && tx(j + 1) == "[" {
            attr_start = j;
            let mut k = j + 2;
            let aname = tx(k).to_string();
            let mut arg = None;
            if k + 1 < b && tx(k + 1) == "(" {
                arg = Some(tx(k + 2).to_string());
                k += 3;
            }
            let _ = k;
            attr = Some((aname, arg));
            break;
        }
    }
    if attr_start < a + 2 {
        return Err(PrepError { line, message: format!("cannot parse a parameter of kernel `{kernel}`") });
    }
    let name_idx = attr_start - 1;
    if toks[name_idx].kind != Kind::Ident {
        return Err(PrepError { line, message: format!("cannot parse a parameter of kernel `{kernel}`") });
    }
    let name = tx(name_idx).to_string();
    let Some((aname, arg)) = attr else {
        return Err(PrepError {
            line,
            message: format!("parameter `{name}` of kernel `{kernel}` has no [[buffer(n)]] or thread-attribute; the emulator needs one"),
        });
    };
    let binding = if aname == "buffer" {
        let idx = arg.as_deref().and_then(parse_int).ok_or_else(|| PrepError {
            line,
            message: format!("parameter `{name}` of kernel `{kernel}`: buffer index must be an integer literal"),
        })?;
        Binding::Buffer(idx)
    } else if let Some(at) = Attribute::from_name(&aname) {
        Binding::Attribute(at)
    } else {
        return Err(PrepError {
            line,
            message: format!(
                "parameter `{name}` of kernel `{kernel}` uses [[{aname}{}]], which the emulator does not support (buffers and thread-position attributes only)",
                arg.map(|a| format!("({a})")).unwrap_or_default()
            ),
        });
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
            "&" => is_reference = true,
            "*" => is_pointer = true,
            t => type_tokens.push(t.to_string()),
        }
    }
    if matches!(binding, Binding::Buffer(_)) && !is_pointer && !is_reference {
        return Err(PrepError {
            line,
            message: format!("buffer parameter `{name}` of kernel `{kernel}` must be a pointer or a reference"),
        });
    }
    if address_space == AddressSpace::Threadgroup {
        return Err(PrepError { line, message: format!("threadgroup parameter `{name}` of kernel `{kernel}` is not supported") });
    }
    Ok(ParsedParam { name, binding, type_tokens, address_space, is_const, is_reference, is_pointer })
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
fn split_top_level(s: &str) -> Vec<String> {
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

fn entry(sym: &str, callee: &str, params: &[ParsedParam]) -> String {
    let args: Vec<String> = params
        .iter()
        .map(|p| match p.binding {
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
    fn pointers_into_threadgroup_memory_are_left_alone() {
        let src = "void g() {\n  threadgroup float* p = 0;\n  const threadgroup float* q = p;\n}\n";
        let p = translate(src, "g.metal").unwrap();
        assert!(p.cpp.contains("threadgroup float* p = 0;"));
    }
}
