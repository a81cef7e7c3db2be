//! CUDA C++ to C++17: the emulator's CUDA mode (docs/emulator.md, "CUDA").
//!
//! A `.cu` source as MLX's `cuda_kernel` assembles it is checked in two steps. Its directives
//! first ([`check_directives`]): it may include MLX's two headers (`mlx/backend/cuda/device/utils.cuh`,
//! `<cooperative_groups.h>`) and `<cuda_fp16.h>`/`<cuda_bf16.h>`, nothing else; each resolves
//! to the emulator's stand-in (`shim/kgemu_cuda.h`). Then g++ preprocesses it (those headers
//! empty, [`PREDEFINED`] set), and [`translate`] reads the expanded tokens: it refuses what a
//! host could run and a CUDA kernel cannot need (inline assembly, compiler builtins, host
//! functions, `extern` declarations, the heap, printf and the C library's copies, mutable
//! globals, `thread_local`, unions holding a pointer, the emulator's own namespaces), routes
//! every cast through a check that refuses one between a pointer and an integer (a C-style or
//! functional cast through `kgemu::cu::ccast`, `reinterpret_cast` through `kgemu::cu::rcast`:
//! a `static_assert` at the cast's line), rewrites `__shared__` declarations into the
//! runtime's threadgroup allocations (Metal's `threadgroup` arrays take the same path), and
//! writes an entry point for every `__global__` function. Every rewrite keeps each token on
//! its line: g++'s line markers map diagnostics, call sites and faults back to the `.cu` file.

use std::collections::HashSet;

use kernelgen_cuda::vocab;
use kernelgen_msl::lex::{self, Kind, Token, matching};

use crate::translate::{Edit, LineMap, PrepError, Prepared, apply_edits, code_tokens, nesting, prep_err};
use crate::{AddressSpace, Binding, KernelSignature, Param};

/// The headers a CUDA source may include, as written after `#include` (kernelgen-cuda's
/// vocabulary); each resolves to the emulator's stand-in.
pub(crate) use kernelgen_cuda::vocab::INCLUDES as ALLOWED_INCLUDES;

/// The same headers as paths: empty files in the preprocessing pass's include folder.
pub(crate) fn stand_in_headers() -> impl Iterator<Item = &'static str> {
    ALLOWED_INCLUDES.iter().map(|i| kernelgen_cuda::vocab::include_path(i))
}

/// Macros nvrtc predefines for MLX's compile on an H200 (sm_90), which a source's conditionals
/// may test.
pub(crate) use kernelgen_cuda::vocab::PREDEFINED_MACROS as PREDEFINED;

/// Names a CUDA source may not use, with why: what reaches the host, and the emulator's own.
fn refused_name(s: &str) -> Option<&'static str> {
    Some(match s {
        "asm" | "__asm" | "__asm__" => "inline assembly is not allowed: a kernel runs only CUDA C++",
        "__host__" => "host code is not allowed in a kernel source (`__host__`): it runs on the device only",
        "printf" | "fprintf" | "sprintf" | "snprintf" | "puts" | "putchar" | "malloc" | "calloc" | "realloc" | "free" | "memcpy" | "memmove"
        | "memset" | "exit" | "abort" | "system" | "fopen" | "open" | "read" | "write" | "getenv" | "dlsym" | "dlopen" | "mmap" | "syscall"
        | "__trap" | "assert" => "the C library is not available to a kernel (no printf, heap, copies or system calls)",
        "new" | "delete" => "the heap is not available to a kernel (new and delete)",
        "thread_local" | "__thread" => "thread_local storage is not available to a kernel",
        "__managed__" => "managed memory is not available to a kernel source",
        "kgemu" | "metal" => "this name is the emulator's own",
        "dynamic_cast" | "typeid" | "throw" | "try" | "catch" => "exceptions and run-time type information are not available in device code",
        _ if s.starts_with("__builtin") => "compiler builtins are not allowed: a kernel uses CUDA's functions",
        _ if s.starts_with("kgemu") || s.starts_with("kg_") || s.starts_with("KG_") || s.starts_with("__metal") => "this name is the emulator's own",
        _ => return None,
    })
}

/// Problems of a CUDA source's directives, read before it is preprocessed: an `#include`
/// (or `#include_next`, `#import`, `#embed`) of anything but [`ALLOWED_INCLUDES`].
pub(crate) fn check_directives(source: &str) -> Vec<PrepError> {
    let mut problems = Vec::new();
    let mut line_no = 0u32;
    let mut continued = false;
    for l in source.split('\n') {
        line_no += 1;
        let was_continued = continued;
        continued = l.trim_end().ends_with('\\');
        if was_continued {
            continue;
        }
        let Some(rest) = l.trim_start().strip_prefix('#') else { continue };
        let rest = rest.trim_start();
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        // `#embed` reads a file as data (g++ 15 has it)
        if !matches!(word.as_str(), "include" | "include_next" | "import" | "embed") {
            continue;
        }
        let target = rest[word.len()..].trim();
        let target = target.split("//").next().unwrap_or("").trim();
        if word != "include" || !ALLOWED_INCLUDES.contains(&target) {
            problems.push(prep_err(
                line_no,
                format!(
                    "`#{word} {target}`: a CUDA kernel source may include only MLX's headers ({}), which the emulator provides",
                    ALLOWED_INCLUDES.join(", ")
                ),
            ));
        }
    }
    problems
}

/// Type names a source sees without declaring them: C++'s (the rest are CUDA's scalars or
/// `_t` typedefs) and CUDA's and its headers' (kernelgen-cuda's vocabulary).
fn is_known_type(s: &str) -> bool {
    matches!(s, "void" | "signed" | "unsigned") || vocab::is_type_name(s) || vocab::HEADER_TYPE_NAMES.contains(&s)
}

/// Templates a source sees without declaring them (a `<` after one opens its arguments): C++'s
/// casts and its headers' (kernelgen-cuda's vocabulary).
fn is_known_template(s: &str) -> bool {
    matches!(s, "static_cast" | "const_cast" | "reinterpret_cast") || vocab::HEADER_TEMPLATES.contains(&s)
}

/// Keywords after which `(` starts an expression (so may be a cast).
const EXPRESSION_KEYWORDS: [&str; 6] = ["return", "case", "else", "do", "co_return", "co_yield"];

/// What the source declares: its type names and template names.
struct Declared {
    types: HashSet<String>,
    templates: HashSet<String>,
}

impl Declared {
    fn of(toks: &[Token]) -> Declared {
        let tx = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
        let ident = |k: usize| toks.get(k).is_some_and(|t| t.kind == Kind::Ident);
        let mut types = HashSet::new();
        let mut templates = HashSet::new();
        for i in 0..toks.len() {
            match tx(i) {
                "struct" | "class" | "union" | "enum" => {
                    let mut k = i + 1;
                    if tx(i) == "enum" && matches!(tx(k), "class" | "struct") {
                        k += 1;
                    }
                    if ident(k) {
                        types.insert(tx(k).to_string());
                    }
                }
                "typename" if ident(i + 1) && matches!(tx(i + 2), "," | ">" | "=" | "...") => {
                    types.insert(tx(i + 1).to_string());
                }
                "using" if ident(i + 1) && tx(i + 2) == "=" => {
                    types.insert(tx(i + 1).to_string());
                }
                "typedef" => {
                    // the last identifier before the `;`, outside parentheses and brackets
                    let (mut k, mut depth, mut name) = (i + 1, 0i32, None);
                    while k < toks.len() && !(depth == 0 && tx(k) == ";") {
                        match tx(k) {
                            "(" | "[" | "{" => depth += 1,
                            ")" | "]" | "}" => depth -= 1,
                            _ if ident(k) && depth == 0 => name = Some(k),
                            _ => {}
                        }
                        k += 1;
                    }
                    if let Some(n) = name {
                        types.insert(tx(n).to_string());
                    }
                }
                "template" if tx(i + 1) == "<" => {
                    // the parameters' type names, then the name of what is declared
                    let (mut k, mut depth) = (i + 1, 0i32);
                    while k < toks.len() {
                        depth += nesting(tx(k));
                        if matches!(tx(k), "class" | "typename") && ident(k + 1) {
                            types.insert(tx(k + 1).to_string());
                        }
                        k += 1;
                        if depth <= 0 {
                            break;
                        }
                    }
                    let mut j = k;
                    while j < toks.len() && !matches!(tx(j), "(" | "{" | ";" | "=") {
                        if matches!(tx(j), "struct" | "class" | "union") && ident(j + 1) {
                            templates.insert(tx(j + 1).to_string());
                            break;
                        }
                        j += 1;
                    }
                    if tx(j) == "(" && j > 0 && ident(j - 1) {
                        templates.insert(tx(j - 1).to_string());
                    }
                }
                _ => {}
            }
        }
        Declared { types, templates }
    }

    fn is_type(&self, s: &str) -> bool {
        is_known_type(s) || self.types.contains(s)
    }

    fn is_template(&self, s: &str) -> bool {
        is_known_template(s) || self.templates.contains(s)
    }
}

/// Reads one source's tokens.
struct Reader<'a> {
    toks: &'a [Token],
    declared: Declared,
}

impl Reader<'_> {
    fn tx(&self, k: usize) -> &str {
        self.toks.get(k).map_or("", |t| t.text.as_str())
    }

    fn kind(&self, k: usize) -> Option<Kind> {
        self.toks.get(k).map(|t| t.kind)
    }

    /// The token after the name at `k` and its template arguments, where it names a template
    /// (`None` when `k` is not a name).
    fn name_with_arguments(&self, k: usize) -> Option<usize> {
        if self.kind(k) != Some(Kind::Ident) {
            return None;
        }
        let name = self.tx(k);
        if self.tx(k + 1) == "<" && self.declared.is_template(name) {
            return Some(self.template_close(k + 1)? + 1);
        }
        Some(k + 1)
    }

    /// The index of the `>` closing the template argument list opened at `open`, if the
    /// tokens up to it can be one.
    fn template_close(&self, open: usize) -> Option<usize> {
        let mut depth = 0i32;
        for k in open..self.toks.len() {
            match self.tx(k) {
                ";" | "{" | "}" => return None,
                "(" | "[" => depth += 100,
                ")" | "]" => depth -= 100,
                t => depth += nesting(t),
            }
            if depth <= 0 {
                return Some(k);
            }
        }
        None
    }

    /// Whether tokens `a..b` spell a type: type names (possibly qualified, with template
    /// arguments), cv-qualifiers, `*`, `&`, and at least one type name at the top level.
    fn is_type_span(&self, a: usize, b: usize) -> bool {
        if a >= b {
            return false;
        }
        let mut k = a;
        let mut saw_type = false;
        while k < b {
            let t = self.tx(k);
            match t {
                "const" | "volatile" | "__restrict__" | "struct" | "class" | "union" | "enum" | "typename" | "::" | "*" | "&" | "&&" => k += 1,
                "<" => match self.template_close(k) {
                    Some(c) if c < b => k = c + 1,
                    _ => return false,
                },
                "decltype" if self.tx(k + 1) == "(" => {
                    saw_type = true;
                    k = match matching(self.toks, k + 1) {
                        Some(c) if c < b => c + 1,
                        _ => return false,
                    };
                }
                _ if self.kind(k) == Some(Kind::Ident) => {
                    // a qualifier (`cu::`) or a type name
                    if self.tx(k + 1) == "::" {
                        k += 1;
                        continue;
                    }
                    if !self.declared.is_type(t) {
                        return false;
                    }
                    saw_type = true;
                    k += 1;
                }
                _ => return false,
            }
        }
        saw_type
    }

    /// If a C-style cast `( type )` opens at `open`: its closing parenthesis. `after_cast`:
    /// the token before `open` closes a cast (`(float)(int)x`), so `(` starts its operand.
    fn c_cast_at(&self, open: usize, after_cast: bool) -> Option<usize> {
        if self.tx(open) != "(" {
            return None;
        }
        if open > 0 && !after_cast {
            let prev = &self.toks[open - 1];
            let expression_keyword = EXPRESSION_KEYWORDS.contains(&prev.text.as_str());
            if (prev.kind == Kind::Ident && !expression_keyword) || matches!(prev.text.as_str(), ")" | "]" | ">" | ">>" | "operator") {
                return None;
            }
        }
        let close = matching(self.toks, open)?;
        if !self.is_type_span(open + 1, close) {
            return None;
        }
        let next = close + 1;
        let starts_operand = match self.kind(next) {
            Some(Kind::Ident) => !matches!(self.tx(next), "and" | "or" | "bitand" | "bitor" | "xor" | "not_eq"),
            Some(Kind::Number | Kind::Str | Kind::Char) => true,
            Some(Kind::Punct) => matches!(self.tx(next), "(" | "!" | "~" | "-" | "+" | "*" | "&" | "++" | "--" | "::"),
            _ => false,
        };
        starts_operand.then_some(close)
    }

    /// The end (exclusive) of the cast-expression starting at `k`: prefix operators and casts,
    /// a primary expression, postfix operators.
    fn operand_end(&self, mut k: usize) -> Option<usize> {
        loop {
            match self.tx(k) {
                "-" | "+" | "!" | "~" | "*" | "&" | "++" | "--" => k += 1,
                "(" if self.c_cast_at(k, true).is_some() => k = self.c_cast_at(k, true)? + 1,
                "sizeof" | "alignof" | "__alignof__" if self.tx(k + 1) == "(" => return Some(matching(self.toks, k + 1)? + 1),
                "sizeof" => k += 1,
                _ => break,
            }
        }
        let mut k = match self.kind(k)? {
            Kind::Ident | Kind::Punct if self.tx(k) == "::" || self.kind(k) == Some(Kind::Ident) => {
                // a possibly qualified name, with template arguments where it names a template
                if self.tx(k) == "::" {
                    k += 1;
                }
                loop {
                    k = self.name_with_arguments(k)?;
                    if self.tx(k) == "::" {
                        k += 1;
                        continue;
                    }
                    break;
                }
                k
            }
            Kind::Number | Kind::Char => k + 1,
            Kind::Str => {
                let mut j = k;
                while self.kind(j) == Some(Kind::Str) {
                    j += 1;
                }
                j
            }
            Kind::Punct if self.tx(k) == "(" => matching(self.toks, k)? + 1,
            _ => return None,
        };
        loop {
            match self.tx(k) {
                "[" | "(" => k = matching(self.toks, k)? + 1,
                "." | "->" => {
                    k += 1;
                    if self.tx(k) == "template" {
                        k += 1;
                    }
                    if self.tx(k) == "~" {
                        k += 1;
                    }
                    k = self.name_with_arguments(k)?;
                }
                "++" | "--" => k += 1,
                _ => break,
            }
        }
        Some(k)
    }
}

/// GNU attributes (`__attribute__((name...))`) a source may write: layout and inlining only
/// (a constructor, a section, an alias or a visibility could reach the host or the loader).
const ALLOWED_GNU_ATTRIBUTES: [&str; 6] = ["aligned", "always_inline", "noinline", "unused", "maybe_unused", "noreturn"];

/// Standard attributes (`[[name]]`) a source may write: hints only, none with a namespace.
const ALLOWED_STD_ATTRIBUTES: [&str; 6] = ["likely", "unlikely", "maybe_unused", "nodiscard", "fallthrough", "noreturn"];

/// The names of the attributes of a list between `open` and `close` (exclusive): the first
/// identifier of each comma-separated entry at the top level, `ns::name` as one name.
fn attribute_names(toks: &[Token], open: usize, close: usize) -> Vec<(String, u32)> {
    let mut names = Vec::new();
    let (mut depth, mut entry_start) = (0i32, true);
    let mut k = open;
    while k < close {
        let t = &toks[k];
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                entry_start = true;
                k += 1;
                continue;
            }
            _ if depth == 0 && entry_start && t.kind == Kind::Ident => {
                let mut name = t.text.clone();
                while toks.get(k + 1).is_some_and(|x| x.is("::")) && toks.get(k + 2).is_some_and(|x| x.kind == Kind::Ident) {
                    name = format!("{name}::{}", toks[k + 2].text);
                    k += 2;
                }
                names.push((name, t.line));
            }
            _ => {}
        }
        entry_start = false;
        k += 1;
    }
    names
}

/// An attribute list starting at token `i` (`__attribute__((...))` or `[[...]]`): the problem
/// with each name outside its allow-list, and the index of its last token.
fn check_attributes(toks: &[Token], i: usize) -> (Vec<PrepError>, usize) {
    let line = toks[i].line;
    let is_gnu = toks[i].is("__attribute__");
    let (open, close, last) = if is_gnu {
        match (toks.get(i + 1), toks.get(i + 2)) {
            (Some(a), Some(b)) if a.is("(") && b.is("(") => match (matching(toks, i + 2), matching(toks, i + 1)) {
                (Some(inner), Some(outer)) => (i + 3, inner, outer),
                _ => return (vec![prep_err(line, "unbalanced `__attribute__((`")], i),
            },
            _ => return (vec![prep_err(line, "`__attribute__` without its `((...))`")], i),
        }
    } else {
        // `[[`: the list ends at the `]]` matching it
        match matching(toks, i).and_then(|outer| matching(toks, i + 1).map(|inner| (inner, outer))) {
            Some((inner, outer)) => (i + 2, inner, outer),
            None => return (vec![prep_err(line, "unbalanced `[[`")], i),
        }
    };
    let allowed = |n: &str| {
        if is_gnu {
            let bare = n.strip_prefix("__").and_then(|m| m.strip_suffix("__")).unwrap_or(n);
            ALLOWED_GNU_ATTRIBUTES.contains(&bare)
        } else {
            ALLOWED_STD_ATTRIBUTES.contains(&n)
        }
    };
    let problems = attribute_names(toks, open, close)
        .into_iter()
        .filter(|(n, _)| !allowed(n))
        .map(|(n, l)| {
            let (spelled, list) = if is_gnu { (format!("__attribute__(({n}))"), ALLOWED_GNU_ATTRIBUTES) } else { (format!("[[{n}]]"), ALLOWED_STD_ATTRIBUTES) };
            prep_err(l, format!("the attribute `{spelled}` is not allowed in a kernel source (allowed: {})", list.join(", ")))
        })
        .collect();
    (problems, last)
}

/// The directives g++ leaves in a preprocessed source: line markers, and `#pragma` lines
/// (`_Pragma` becomes one). Only `#pragma unroll [n]` and `#pragma nounroll` (CUDA's loop
/// hints) are allowed; each is blanked (g++ does not know them). Problems, and the edits.
fn check_pragmas(text: &str) -> (Vec<PrepError>, Vec<Edit>) {
    let (mut problems, mut edits) = (Vec::new(), Vec::new());
    for t in lex::tokenize(text).iter().filter(|t| t.kind == Kind::Directive) {
        let rest = t.text[1..].trim_start();
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if word.is_empty() || word.starts_with(|c: char| c.is_ascii_digit()) {
            continue; // a line marker
        }
        let args: Vec<&str> = rest[word.len()..].split_whitespace().collect();
        let unroll = word == "pragma" && match args.as_slice() {
            ["unroll"] | ["nounroll"] => true,
            ["unroll", n] => n.parse::<u32>().is_ok(),
            _ => false,
        };
        if unroll {
            // to the end of the line (no `\` continues a line g++ wrote)
            let end = text[t.offset..].find('\n').map_or(text.len(), |n| t.offset + n);
            edits.push(Edit { start: t.offset, end, text: String::new() });
        } else {
            problems.push(prep_err(t.line, format!("`{}`: a kernel source may use no pragma but `#pragma unroll [n]` and `#pragma nounroll`", t.text.trim())));
        }
    }
    (problems, edits)
}

/// One `__global__` function found.
struct Kernel {
    name: String,
    qualified: String,
    line: u32,
    params: Vec<KernelParam>,
}

struct KernelParam {
    name: String,
    type_name: String,
    is_pointer: bool,
    is_const: bool,
}

/// What a brace opened.
#[derive(Clone, PartialEq)]
enum Scope {
    /// A namespace (`None`: anonymous).
    Namespace(Option<String>),
    Other,
}

/// Translates a preprocessed CUDA source (g++ `-E` output, with its line markers) into the
/// C++ the emulator compiles. Every problem is reported, at its line of the `.cu` file (or of
/// a header).
pub(crate) fn translate(text: &str, file_name: &str) -> Result<Prepared, Vec<PrepError>> {
    let map = LineMap::parse(text, file_name);
    let mut problems = Vec::new();
    let toks = code_tokens(text);
    let reader = Reader { declared: Declared::of(&toks), toks: &toks };
    let r = &reader;
    let tx = |k: usize| r.tx(k);
    let (pragma_problems, mut edits) = check_pragmas(text);
    problems.extend(pragma_problems);
    let mut kernels: Vec<Kernel> = Vec::new();
    let mut scopes: Vec<Scope> = Vec::new();
    let mut pending_namespace: Option<Vec<String>> = None;
    let mut site = 0u32;
    let mut dynamic_site: Option<u32> = None;
    // the `)` of the last C-style cast found (a cast's operand may be a cast)
    let mut last_cast_close: Option<usize> = None;
    let mut err = |line: u32, message: String| problems.push(prep_err(line, message));

    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let at_namespace_scope = scopes.iter().all(|s| matches!(s, Scope::Namespace(_)));
        match t.text.as_str() {
            "{" => {
                scopes.push(match pending_namespace.take() {
                    Some(names) if names.is_empty() => Scope::Namespace(None),
                    Some(names) => Scope::Namespace(Some(names.join("::"))),
                    None => Scope::Other,
                });
            }
            "}" => {
                scopes.pop();
            }
            "namespace" => {
                // `namespace a::b {`, `namespace {`; an alias (`namespace cg = ...;`) opens nothing
                let mut k = i + 1;
                let mut names = Vec::new();
                while r.kind(k) == Some(Kind::Ident) || tx(k) == "::" {
                    if tx(k) != "::" {
                        names.push(tx(k).to_string());
                    }
                    k += 1;
                }
                if tx(k) == "{" {
                    pending_namespace = Some(names);
                }
            }
            "extern" if tx(i + 1) != "__shared__" => err(t.line, "`extern` declarations are not allowed: a kernel source defines everything it uses".into()),
            "union" => {
                // a union holding a pointer beside another member reads one as the other
                if let Some(open) = (i + 1..toks.len().min(i + 4)).find(|&k| tx(k) == "{") {
                    if let Some(close) = matching(&toks, open) {
                        let members = toks[open + 1..close].iter().filter(|x| x.is(";")).count();
                        if members > 1 && toks[open + 1..close].iter().any(|x| x.is("*")) {
                            err(t.line, "a union holding a pointer beside another member converts between a pointer and an integer, which a kernel may not".into());
                        }
                    }
                }
            }
            "__device__" if at_namespace_scope => {
                // a variable at namespace scope: one object every block shares, and writes
                let mut k = i + 1;
                let mut depth = 0i32;
                let mut variable = false;
                while k < toks.len() {
                    match tx(k) {
                        "(" if depth == 0 => break,
                        ";" | "=" | "[" | "{" if depth == 0 => {
                            variable = tx(k) != "{";
                            break;
                        }
                        s => depth += nesting(s),
                    }
                    k += 1;
                }
                if variable {
                    err(t.line, "a `__device__` variable at namespace scope is not allowed (one object all blocks write); use `__constant__` for constants".into());
                }
            }
            "__shared__" => match shared_decl(r, i, &mut site, &mut dynamic_site) {
                Ok(Some(edit)) if !at_namespace_scope => edits.push(edit),
                Ok(_) => err(t.line, "declare `__shared__` variables inside a function, one per statement (`__shared__ float s[N];`, `extern __shared__ float s[];`)".into()),
                Err(e) => problems_push(&mut err, e),
            },
            "__global__" => match kernel_decl(r, i, &scopes) {
                Ok(Some(k)) => kernels.push(k),
                Ok(None) => {}
                Err(e) => problems_push(&mut err, e),
            },
            "__attribute__" | "[" if t.is("__attribute__") || tx(i + 1) == "[" => {
                let (found, last) = check_attributes(&toks, i);
                for e in found {
                    problems_push(&mut err, e);
                }
                i = last;
            }
            "__declspec" => err(t.line, "`__declspec` is not allowed in a kernel source".into()),
            "reinterpret_cast" => edits.push(Edit { start: t.offset, end: t.end(), text: "::kgemu::cu::rcast".into() }),
            "(" => {
                if let Some(close) = r.c_cast_at(i, i > 0 && last_cast_close == Some(i - 1)) {
                    last_cast_close = Some(close);
                    let inner = &text[toks[i + 1].offset..toks[close - 1].end()];
                    if inner.trim() != "void" {
                        match r.operand_end(close + 1) {
                            Some(end) => {
                                edits.push(Edit { start: t.offset, end: toks[close].end(), text: format!("::kgemu::cu::ccast<{}>(", inner.replace('\n', " ")) });
                                let at = toks[end - 1].end();
                                edits.push(Edit { start: at, end: at, text: ")".into() });
                            }
                            None => err(t.line, format!("the emulator cannot read the operand of the cast to `{}`: write it in parentheses", inner.trim())),
                        }
                    }
                }
            }
            s if t.kind == Kind::Ident => {
                if let Some(why) = refused_name(s) {
                    err(t.line, format!("`{s}`: {why}"));
                } else if tx(i + 1) == "(" && r.declared.is_type(s) && !matches!(tx(i.wrapping_sub(1)), ";" | "{" | "}" | "operator" | "" | "::" | "." | "->" | "~" | "struct" | "class" | "typename") && r.kind(i.wrapping_sub(1)) != Some(Kind::Ident) {
                    // a functional cast `T(x)` of one operand is a C-style cast
                    if let Some(close) = matching(&toks, i + 1) {
                        let one_operand = close > i + 2 && {
                            let mut depth = 0;
                            !toks[i + 2..close].iter().any(|x| {
                                depth += nesting(&x.text);
                                depth == 0 && x.is(",")
                            })
                        };
                        if one_operand {
                            edits.push(Edit { start: t.offset, end: toks[i + 1].end(), text: format!("::kgemu::cu::ccast<{s}>(") });
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }

    let mut problems: Vec<PrepError> = problems
        .into_iter()
        .map(|mut e| {
            let (file, line) = map.get(e.line);
            e.line = line;
            e.file = file;
            e
        })
        .collect();
    if kernels.is_empty() && problems.is_empty() {
        problems.push(prep_err(0, "no `__global__` function: a CUDA kernel source defines one (`__global__ void name(...)`)"));
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    let mut out = String::with_capacity(text.len() + 4096);
    out.push_str("#include \"kgemu_cuda.h\"\n");
    apply_edits(&mut out, text, &mut edits);
    out.push_str("#line 1 \"<kgemu-entry>\"\n");
    let mut sigs = Vec::new();
    let mut symbols = Vec::new();
    for k in &kernels {
        if sigs.iter().any(|s: &KernelSignature| s.name == k.name) {
            return Err(vec![prep_err(map.get(k.line).1, format!("kernel name `{}` is defined twice", k.name))]);
        }
        let sym = format!("kgemu_thread_{}", symbols.len());
        let args: Vec<String> = (0..k.params.len()).map(|i| format!("::kgemu::cu::Arg{{kg_b[{i}]}}")).collect();
        out.push_str(&format!(
            "extern \"C\" __attribute__((visibility(\"default\"))) void {sym}(void* const* kg_b, const kgemu::ThreadInfo* kg_t) {{\n  (void)kg_b; (void)kg_t;\n  {}({});\n}}\n",
            k.qualified,
            args.join(", ")
        ));
        symbols.push(sym);
        sigs.push(KernelSignature {
            name: k.name.clone(),
            function: k.qualified.clone(),
            metal_line: map.get(k.line).1,
            params: k
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| Param {
                    name: p.name.clone(),
                    binding: Binding::Buffer(i as u32),
                    type_name: p.type_name.clone(),
                    address_space: if p.is_pointer { AddressSpace::Device } else { AddressSpace::Constant },
                    is_const: p.is_const,
                    is_reference: !p.is_pointer,
                })
                .collect(),
        });
    }
    Ok(Prepared { cpp: out, kernels: sigs, symbols, function_constants: Vec::new() })
}

fn problems_push(err: &mut impl FnMut(u32, String), e: PrepError) {
    err(e.line, e.message)
}

/// A `__shared__` declaration whose `__shared__` is token `i`, rewritten to a reference into
/// the runtime's per-block allocation (`extern __shared__ T name[];`: a pointer to the launch's
/// dynamic shared memory, one block however many declarations name it). `None`: not a
/// declaration the rewrite supports.
fn shared_decl(r: &Reader<'_>, i: usize, site: &mut u32, dynamic_site: &mut Option<u32>) -> Result<Option<Edit>, PrepError> {
    let toks = r.toks;
    let line = toks[i].line;
    // the statement's start: `static`, `volatile`, `extern`, `const` may come first
    let mut start = i;
    while start > 0 && matches!(r.tx(start - 1), "static" | "volatile" | "extern" | "const") {
        start -= 1;
    }
    if start > 0 && !matches!(r.tx(start - 1), ";" | "{" | "}" | ":") {
        return Ok(None);
    }
    let is_extern = toks[start..i].iter().any(|t| t.is("extern"));
    let leading: Vec<&str> = toks[start..i].iter().map(|t| t.text.as_str()).filter(|t| matches!(*t, "volatile" | "const")).collect();
    // to the `;`, taking out alignment attributes
    let mut align = 0u64;
    let mut type_parts: Vec<String> = leading.iter().map(|s| s.to_string()).collect();
    let mut k = i + 1;
    let mut name_at = None;
    while k < toks.len() && r.tx(k) != ";" {
        match r.tx(k) {
            "__align__" | "alignas" if r.tx(k + 1) == "(" => {
                let close = matching(toks, k + 1).ok_or_else(|| prep_err(line, "unbalanced `__align__(`"))?;
                align = r.tx(k + 2).trim_end_matches(['u', 'U', 'l', 'L']).parse().map_err(|_| prep_err(line, "`__align__(n)` of a `__shared__` array needs a number"))?;
                k = close + 1;
            }
            "[" | "=" | "," | "(" | "{" => break,
            _ => {
                if r.kind(k) == Some(Kind::Ident) && !matches!(r.tx(k + 1), "::" | "<") && matches!(r.tx(k + 1), "[" | ";" | "=" | ",") {
                    name_at = Some(k);
                } else {
                    type_parts.push(r.tx(k).to_string());
                }
                k += 1;
            }
        }
    }
    let Some(name_at) = name_at else { return Ok(None) };
    match r.tx(k) {
        "=" => return Err(prep_err(line, "a `__shared__` variable cannot have an initializer")),
        "," => return Err(prep_err(line, "declare one `__shared__` variable per statement")),
        "(" | "{" => return Ok(None),
        _ => {}
    }
    // the dimensions, to the `;`
    let mut semi = k;
    while semi < toks.len() && r.tx(semi) != ";" {
        if matches!(r.tx(semi), "=" | "," | "{") {
            return Err(prep_err(line, "declare one `__shared__` variable per statement, without an initializer"));
        }
        semi += 1;
    }
    if semi >= toks.len() || type_parts.is_empty() {
        return Ok(None);
    }
    let name = r.tx(name_at);
    let ty = join_tokens(&type_parts);
    let dims = if k < semi { join_tokens(&toks[k..semi].iter().map(|t| t.text.clone()).collect::<Vec<_>>()) } else { String::new() };
    let text = if is_extern {
        if dims != "[]" {
            return Err(prep_err(line, "`extern __shared__` declares the launch's dynamic shared memory: `extern __shared__ T name[];`"));
        }
        let s = *dynamic_site.get_or_insert_with(|| {
            *site += 1;
            *site - 1
        });
        format!("{ty}* {name} = static_cast<{ty}*>(::kgemu::rt.tg_dynamic({s}u, {align}u > alignof({ty}) ? {align}u : alignof({ty}), sizeof({ty}), __LINE__, \"{name}\"));")
    } else {
        let s = *site;
        *site += 1;
        if dims.is_empty() {
            format!("{ty}& {name} = *::kgemu::cu::shared<{ty}, {align}u>({s}u, __LINE__, \"{name}\");")
        } else {
            format!("{ty} (&{name}){dims} = *::kgemu::cu::shared<{ty}{dims}, {align}u>({s}u, __LINE__, \"{name}\");")
        }
    };
    Ok(Some(Edit { start: toks[start].offset, end: toks[semi].end(), text }))
}

/// Tokens joined with a space where two words would otherwise run together.
fn join_tokens(parts: &[String]) -> String {
    let mut out = String::new();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    for p in parts {
        if word(out.chars().last()) && word(p.chars().next()) {
            out.push(' ');
        }
        out.push_str(p);
    }
    out
}

/// A `__global__` function whose `__global__` is token `i`: `__global__ void name(params)`
/// with a body (a declaration alone, or a template, is not a kernel the emulator can launch).
fn kernel_decl(r: &Reader<'_>, i: usize, scopes: &[Scope]) -> Result<Option<Kernel>, PrepError> {
    let toks = r.toks;
    let line = toks[i].line;
    // a template is not launchable as it stands (MLX's kernels are not templates)
    let mut b = i;
    while b > 0 && !matches!(r.tx(b - 1), ";" | "{" | "}") {
        b -= 1;
    }
    if toks[b..i].iter().any(|t| t.is("template")) {
        return Ok(None);
    }
    // skip to the name: the identifier before the first `(` that is not `__launch_bounds__(`
    let mut k = i + 1;
    let mut saw_void = false;
    loop {
        match r.tx(k) {
            "__launch_bounds__" | "__maxnreg__" | "__cluster_dims__" | "__attribute__" => {
                k = matching(toks, k + 1).ok_or_else(|| prep_err(line, "unbalanced attribute"))? + 1;
            }
            "void" => {
                saw_void = true;
                k += 1;
            }
            "(" => break,
            "" | ";" | "{" => return Err(prep_err(line, "cannot read this `__global__` function")),
            _ => k += 1,
        }
    }
    if !saw_void || k == 0 || r.kind(k - 1) != Some(Kind::Ident) {
        return Err(prep_err(line, "a `__global__` function returns void: `__global__ void name(...)`"));
    }
    let name = r.tx(k - 1).to_string();
    let close = matching(toks, k).ok_or_else(|| prep_err(line, format!("unbalanced parameter list of kernel `{name}`")))?;
    if r.tx(close + 1) != "{" {
        return Ok(None); // a declaration
    }
    let mut params = Vec::new();
    let mut start = k + 1;
    let mut depth = 0;
    for j in k + 1..=close {
        let s = r.tx(j);
        if j == close || (s == "," && depth == 0) {
            if j > start {
                params.push(kernel_param(r, start, j, &name)?);
            }
            start = j + 1;
            continue;
        }
        depth += nesting(s);
    }
    if params.len() == 1 && params[0].type_name == "void" && !params[0].is_pointer {
        params.clear();
    }
    let path: Vec<&str> = scopes.iter().filter_map(|s| if let Scope::Namespace(Some(n)) = s { Some(n.as_str()) } else { None }).collect();
    let qualified = if path.is_empty() { format!("::{name}") } else { format!("::{}::{name}", path.join("::")) };
    Ok(Some(Kernel { name, qualified, line, params }))
}

fn kernel_param(r: &Reader<'_>, a: usize, b: usize, kernel: &str) -> Result<KernelParam, PrepError> {
    let line = r.toks[a].line;
    let name_at = b - 1;
    if r.kind(name_at) != Some(Kind::Ident) || b - a < 2 {
        return Err(prep_err(line, format!("a parameter of kernel `{kernel}` has no name")));
    }
    let mut type_parts = Vec::new();
    let mut is_pointer = false;
    let mut is_const = false;
    let mut const_before_star = false;
    for j in a..name_at {
        match r.tx(j) {
            "*" => {
                if is_pointer {
                    return Err(prep_err(line, format!("parameter `{}` of kernel `{kernel}` is a pointer to a pointer; a kernel's buffers are pointers to data", r.tx(name_at))));
                }
                is_pointer = true;
                is_const = const_before_star;
            }
            "&" | "&&" => return Err(prep_err(line, format!("parameter `{}` of kernel `{kernel}` is a reference; a kernel takes pointers and values", r.tx(name_at)))),
            "const" => {
                if !is_pointer {
                    const_before_star = true;
                }
            }
            "__restrict__" | "__grid_constant__" | "volatile" => {}
            t => {
                if is_pointer {
                    return Err(prep_err(line, format!("cannot read parameter `{}` of kernel `{kernel}`", r.tx(name_at))));
                }
                type_parts.push(t.to_string());
            }
        }
    }
    if !is_pointer {
        is_const = true;
    }
    Ok(KernelParam { name: r.tx(name_at).to_string(), type_name: join_tokens(&type_parts), is_pointer, is_const })
}
