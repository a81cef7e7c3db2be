//! clang's diagnostics: parsed from its text output, mapped back to the user's files, and
//! reworded where clang's OpenCL vocabulary would confuse a Metal programmer.

use crate::{Problem, ProblemKind};
use crate::sources::Workspace;

#[derive(Clone, Debug)]
pub struct Diag {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub severity: String,
    pub message: String,
    pub notes: Vec<Diag>,
}

/// Parse `file:line:col: severity: message [-Wflag]` lines; notes attach to the last
/// error or warning.
pub fn parse(stderr: &str) -> Vec<Diag> {
    let mut out: Vec<Diag> = Vec::new();
    for line in stderr.lines() {
        let Some(d) = parse_line(line) else { continue };
        if d.severity == "note" {
            if let Some(last) = out.last_mut() {
                last.notes.push(d);
            }
        } else {
            out.push(d);
        }
    }
    out
}

fn parse_line(line: &str) -> Option<Diag> {
    for sev in ["fatal error", "error", "warning", "note"] {
        let pat = format!(": {sev}: ");
        let Some(at) = line.find(&pat) else { continue };
        let loc = &line[..at];
        let message = line[at + pat.len()..].to_string();
        let mut parts = loc.rsplitn(3, ':');
        let col = parts.next()?.parse().ok()?;
        let lno = parts.next()?.parse().ok()?;
        let file = parts.next()?.to_string();
        let severity = if sev == "fatal error" { "error".to_string() } else { sev.to_string() };
        return Some(Diag { file, line: lno, col, severity, message, notes: Vec::new() });
    }
    None
}

/// Messages that describe a Metal-valid construct that only our OpenCL modelling rejects,
/// or that another rule reports in Metal's words.
fn benign(message: &str) -> bool {
    const BENIGN: &[&str] = &[
        // clang's own words for restrictions that the token rules report with their section.
        "'dynamic_cast' is not supported",
        "'typeid' is not supported",
        "with exceptions disabled",
        "does not support the 'register'",
        "does not support the 'thread_local'",
        "'default delete' is not supported",
        "function cannot be called 'main'",
        "'main' is not allowed to be declared inline",
        "use of type 'long double' requires",
        "virtual functions are not supported in C++ for OpenCL",
        // Floating literals without a suffix are float in Metal.
        "double precision constant requires cl_khr_fp64",
        // `double` is reported by the token rule (with its section).
        "use of type 'double' requires",
        "an attribute list cannot appear here",
        // The std-library rule reports these includes.
        "KGMSL_STD_INCLUDE",
        "-Wunknown-attributes",
        // Metal has vectors of bool (MSL 2.2: booln, `vec<bool, N>`); clang 14 has none. The
        // named ones are char vectors (the prelude's); `vec<bool, N>` is this error and nothing
        // more (clang drops what depends on it without further errors).
        "invalid vector element type 'bool'",
    ];
    BENIGN.iter().any(|b| message.contains(b))
}

/// clang's wording, in Metal's.
pub fn reword(message: &str) -> String {
    let mut m = message.to_string();
    let table: &[(&str, &str)] = &[
        (
            "non-kernel function variable cannot be declared in local address space",
            "threadgroup variables may be declared only in kernel functions (MSL 4.4)",
        ),
        (
            "program scope variable must reside in constant address space",
            "program scope variable must reside in constant address space (MSL 4.2)",
        ),
        (
            "declaration requires a global constructor",
            "a program-scope variable must be initialized with a constant expression: this initializer would run at run time (MSL 4.2)",
        ),
        ("pointers to functions are not allowed", "function pointers are not supported in MSL (section 1.5)"),
        (
            "virtual functions are not supported in C++ for OpenCL",
            "virtual functions are not supported in MSL (section 1.5)",
        ),
        (
            "first two arguments to __builtin_convertvector must have the same number of elements",
            "a vector converts only to a vector of as many elements",
        ),
        ("C++ for OpenCL version 2021 does not support", "MSL does not support"),
        ("C++ for OpenCL", "MSL"),
        ("OpenCL", "Metal"),
        ("'_Float16'", "'bfloat'"),
        ("_Float16", "bfloat"),
        (" (aka 'bfloat')", ""),
        ("__global ", "device "),
        ("__constant ", "constant "),
        ("__local ", "threadgroup "),
        (" *__private", " *"),
        ("&__private", "&"),
        ("__private ", "thread "),
        ("__global", "device"),
        ("__constant", "constant"),
        ("__local", "threadgroup"),
        ("__private", "thread"),
        ("__kgmsl_id_", ""),
        ("__kgmsl_bvec", "vec"),
        ("__generic ", "thread "),
        (" *__generic", " *"),
        ("&__generic", "&"),
        ("__generic", "thread"),
        (" [-Werror]", ""),
    ];
    for (from, to) in table.iter().copied() {
        m = m.replace(from, to);
    }
    // clang's flag suffix (`[-Wfoo]`) means nothing to a Metal programmer.
    if let Some(i) = m.rfind(" [-W")
        && m.ends_with(']')
    {
        m.truncate(i);
    }
    m
}

/// Errors that only our modelling produces. First, clang gives temporaries in constant evaluation
/// at namespace scope no address space, so a `thread`-qualified constructor cannot build
/// them; in Metal they are `thread` objects. A static_assert that failed only because of such
/// a constructor goes too.
fn artifacts(diags: &[Diag]) -> Vec<bool> {
    // Likewise a string literal is `const constant char[N]` in clang but converts to Metal's
    // `constant char*` (MLX's os_log fallback takes its format that way).
    // And clang 14 cannot pass a braced list as a vector argument (`f({x, y, z})` for a `uint3`
    // parameter, which MLX's unary_g writes and Metal accepts): a call failing because one
    // candidate would need that is taken as valid.
    let modelled = |m: &str| {
        m.contains("in address space unqualified")
            || (m.contains("no known conversion from 'const __constant char[") && m.contains("to '__constant char *"))
            || (m.contains("cannot convert initializer list argument to") && m.contains("(vector of "))
    };
    let unqualified: Vec<bool> = diags.iter().map(|d| d.notes.iter().any(|n| modelled(&n.message))).collect();
    let sites: Vec<(&str, u32, u32)> = diags
        .iter()
        .zip(&unqualified)
        .filter(|(_, u)| **u)
        .flat_map(|(d, _)| d.notes.iter().map(|n| (n.file.as_str(), n.line, n.col)))
        .collect();
    // A function template specialization whose instantiation failed (its errors reported, or
    // let through by metal_accepts: MLX's radix3<T> with a double literal times a float vector)
    // is then an invalid template argument with no reason of its own, on the line that
    // instantiated it (fft.h: `radix_n_steps<T, ..., radix3<T>>(...)`, once per caller).
    let instantiated: Vec<(&str, u32)> = diags
        .iter()
        .flat_map(|d| &d.notes)
        .filter(|n| n.message.starts_with("in instantiation of function template specialization"))
        .map(|n| (n.file.as_str(), n.line))
        .collect();
    let invalid_argument = |d: &Diag| {
        let candidates: Vec<&Diag> = d.notes.iter().filter(|n| n.message.starts_with("candidate")).collect();
        d.message.starts_with("no matching function for call to '")
            && !candidates.is_empty()
            && candidates.iter().all(|n| n.message.starts_with("candidate template ignored: invalid explicitly-specified argument for template parameter '"))
            && instantiated.contains(&(d.file.as_str(), d.line))
    };
    diags
        .iter()
        .zip(&unqualified)
        .map(|(d, u)| {
            *u || (d.message.starts_with("static_assert expression is not an integral constant expression")
                && sites.contains(&(d.file.as_str(), d.line, d.col)))
                || invalid_argument(d)
        })
        .collect()
}

/// Errors of clang's OpenCL rules where Metal's differ, on code Apple's compiler builds (each a
/// reduction of a real kernel in tests/valid):
/// - a scalar with a vector converts to the vector's element type, whatever their ranks
///   (`half4 * float`, `0.5 * v` with `v` a `float2` in a template: MSL 2.2.2);
/// - a C-style cast between vectors of as many elements converts each element (`(float4)h`,
///   and `T(h)` with `T` a template's `float4`), where OpenCL reinterprets the bits and so wants
///   the sizes equal;
/// - half does not convert to bfloat implicitly (MSL 2.22), so of two candidates, one taking or
///   returning bfloat, the other wins (`f(half)` with `f(float)` and `f(bfloat)`; `half(x)` with
///   `operator float` and `operator bfloat`), where clang, for which bfloat is `_Float16`, sees
///   two floating conversions;
/// - a local of a template's type `T` deduced from a thread object through a pointer
///   (`thread_swap(vals[j], vals[k])` with `vals` a `thread T*`: MLX's sort.h);
/// - the later calls of a specialization whose instantiation failed, which clang then refuses as
///   a substitution failure with no reason (its errors are reported, or let through here);
/// - the out-of-line definition of a `static constexpr` member (`constant constexpr const
///   float S::m[8];`) takes its initializer from the class, as in C++;
/// - a class object is a value in every address space ([`class_value_across_spaces`]).
fn metal_accepts(d: &Diag, ws: &Workspace) -> bool {
    let m = d.message.as_str();
    if class_value_across_spaces(d) {
        return true;
    }
    if m.starts_with("scalar operand type has greater rank than the type of the vector element") {
        return true;
    }
    // (a functional cast in a template, `T(h)`, has the same message without its kind: clang 14
    // prints " from vector ...")
    if (m.starts_with("C-style cast from vector") || m.starts_with(" from vector")) && m.ends_with("of different size") {
        let lanes: Vec<&str> = m.split("(vector of ").skip(1).filter_map(|r| r.split(' ').next()).collect();
        return lanes.len() == 2 && lanes[0] == lanes[1];
    }
    if m.starts_with("call to '") && m.ends_with("' is ambiguous") || m.starts_with("ambiguous conversion for") {
        let candidates: Vec<&Diag> = d.notes.iter().filter(|n| n.message.starts_with("candidate")).collect();
        let bfloat = candidates
            .iter()
            .filter(|n| line_text(ws, &n.file, n.line).is_some_and(|t| t.contains("bfloat")))
            .count();
        return candidates.len() == 2 && bfloat == 1;
    }
    // (a note naming the thread space, clang's __generic, and no other)
    let generic_only = |n: &Diag| n.message.contains("__generic") && !["__global", "__constant", "__local"].iter().any(|s| n.message.contains(s));
    if m == "automatic variable qualified with an invalid address space" {
        // `T w = a;` in a template whose `thread T&` (rewritten to `T&`) deduced `T` from a thread
        // object reached through a pointer: clang's `T` is `__generic float`, Metal's `float`.
        return d.notes.iter().any(|n| n.message.starts_with("in instantiation of") && generic_only(n));
    }
    if m.starts_with("no matching function for call to '") {
        // a call of a specialization clang marked invalid when it instantiated it (its errors
        // were reported there, or accepted here: a `__generic` T above, MLX's
        // `dequantize_scale<half, 32>` with a `half(fp8_e8m0)` of two conversion operators):
        // every candidate is the template, ignored as a substitution failure with no reason of
        // its own (one with a reason, `T::type` of a float, is Metal's error too)
        let candidates: Vec<&Diag> = d.notes.iter().filter(|n| n.message.starts_with("candidate")).collect();
        return !candidates.is_empty()
            && candidates
                .iter()
                .all(|n| n.message.starts_with("candidate template ignored: substitution failure [with") && n.message.ends_with(']'));
    }
    if m == "variable in constant address space must be initialized" {
        return line_text(ws, &d.file, d.line).is_some_and(|t| {
            let col = ws.original(&d.file, d.line, d.col).map_or(d.col, |o| o.2) as usize;
            t.get(..col.saturating_sub(1)).is_some_and(|before| before.trim_end().ends_with("::") && t.contains("constexpr"))
        });
    }
    false
}

/// A class object read as a value from another address space than the one it goes to, which
/// clang's OpenCL model refuses and Metal does (MLX's `complex_t`, in reduce, scan, sort and the
/// steel GEMMs):
/// - copied out of constant memory (`x = op.init;`, `T v = p;` with `constant T& p`): clang's
///   implicit copy and move members take a `__generic` reference, which a `__constant` object
///   does not bind to; Metal's copy them from every space;
/// - the two operands of `?:` of one class in two spaces (`i < n ? tg[i] : T(0)`): clang finds
///   no common type, or several (through a class's conversions); Metal's is the class;
/// - a `constexpr` variable whose initializer clang cannot evaluate and gives no reason for
///   (only the instantiation context): clang 14's evaluator has no vector element access (`v.x`),
///   which the conversions above reach (`complex_t(vec<T, 2> v) constant : real(v.x)`) and
///   which Metal's evaluates.
fn class_value_across_spaces(d: &Diag) -> bool {
    let m = d.message.as_str();
    if m == "no viable overloaded '='" || m.starts_with("no matching constructor for initialization of '") {
        return d.notes.iter().any(|n| {
            (n.message.contains("(the implicit copy constructor) not viable") || n.message.contains("(the implicit copy assignment operator) not viable"))
                && n.message.ends_with("cannot bind reference in address space '__constant' to object in address space '__generic' in 1st argument")
        });
    }
    let operands = m
        .strip_prefix("conditional expression is ambiguous; ")
        .and_then(|r| r.strip_suffix(" can be converted to several common types"))
        .or_else(|| m.strip_prefix("incompatible operand types (").and_then(|r| r.strip_suffix(')')));
    if let Some(operands) = operands {
        // 'A' and 'B': one class type (no pointer, reference, array or function) but for its
        // address space and const
        let types: Vec<&str> = operands.split(" and ").collect();
        let class = |t: &str| -> Option<String> {
            let t = t.strip_prefix('\'')?.strip_suffix('\'')?;
            if t.contains(['*', '&', '[', '(']) {
                return None;
            }
            let words: Vec<&str> = t
                .split(' ')
                .filter(|w| !["const", "__global", "__constant", "__local", "__private", "__generic"].contains(w))
                .collect();
            Some(words.join(" "))
        };
        return types.len() == 2 && class(types[0]).is_some_and(|a| Some(a) == class(types[1]));
    }
    if m.starts_with("constexpr variable '") && m.ends_with("' must be initialized by a constant expression") {
        return d.notes.iter().all(|n| n.message.starts_with("in instantiation of") || n.message.starts_with("expanded from macro"));
    }
    false
}

/// The text of a line of a file clang named: one of the workspace's, or the prelude's.
fn line_text(ws: &Workspace, file: &str, line: u32) -> Option<String> {
    let nth = |text: &str| text.lines().nth(line.checked_sub(1)? as usize).map(str::to_string);
    match ws.file(file) {
        Some(f) => nth(&f.original),
        None if file.contains("/prelude-") => std::fs::read_to_string(file).ok().and_then(|t| nth(&t)),
        None => None,
    }
}

/// Errors as problems in the user's files. An error inside the prelude is reported where the
/// user's code led to it (the first note in a user file).
pub fn problems(diags: &[Diag], ws: &Workspace) -> Vec<Problem> {
    let mut out = Vec::new();
    let artifact = artifacts(diags);
    // Where the last error inside the prelude was reported: clang prints the instantiation notes
    // once for consecutive errors in one instantiation (two static_asserts of one function), so
    // a prelude error without notes belongs where the one before it did.
    let mut last_prelude: Option<(String, u32, u32)> = None;
    for (d, art) in diags.iter().zip(artifact) {
        if d.severity != "error" || benign(&d.message) || art || metal_accepts(d, ws) {
            continue;
        }
        // OpenCL wants every element of a braced vector initialiser; Metal (C++) value-
        // initialises the rest of braces the user wrote (`vec<float, 2> s{0};`, MLX's
        // steel_attention_nax.h). A constructor (`float4(a, b)`, which rewrite 1 turned into
        // braces) needs every component in Metal too.
        let too_few = d.message.starts_with("too few elements in vector initialization");
        // (In a macro, clang points at its use and notes where the macro spells the brace.)
        let constructor = ws.constructor_brace(&d.file, d.line, d.col)
            || d.notes.iter().any(|n| n.message.starts_with("expanded from macro") && ws.constructor_brace(&n.file, n.line, n.col));
        if too_few && !constructor {
            continue;
        }
        // A header clang found that the workspace did not mirror keeps its own path; the
        // prelude and <built-in> point to the user's code that led there.
        let in_prelude = d.file.contains("/prelude-");
        let outside = !in_prelude && !d.file.starts_with('<');
        let here = ws
            .original(&d.file, d.line, d.col)
            .or_else(|| d.notes.iter().find_map(|n| ws.original(&n.file, n.line, n.col)))
            .or_else(|| outside.then(|| (d.file.clone(), d.line, d.col)))
            .or_else(|| if in_prelude && d.notes.is_empty() { last_prelude.clone() } else { None });
        last_prelude = if in_prelude { here.clone() } else { None };
        let (file, line, col) = here.unwrap_or_else(|| {
            let main = ws.file(&ws.main_path.display().to_string()).map(|f| f.display.clone()).unwrap_or_default();
            (main, 1, 1)
        });
        let mut message = reword(&d.message);
        if too_few {
            message.push_str(
                ": a vector constructor takes as many components as the vector has, from scalars and vectors (MSL 2.2.3)",
            );
        }
        out.push(Problem { file, line, col, message: ws.unmirrored(&message), kind: ProblemKind::Metal });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_errors_and_notes() {
        let d = parse("a.metal:3:5: error: bad thing [-Wfoo]\na.metal:1:2: note: here\n2 errors generated.\n");
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].line, d[0].col, d[0].notes.len()), (3, 5, 1));
    }

    #[test]
    fn rewords_address_spaces() {
        assert_eq!(
            reword(
                "cannot initialize a variable of type '__private float *__private' with an lvalue of type '__global float *__private'"
            ),
            "cannot initialize a variable of type 'thread float *' with an lvalue of type 'device float *'"
        );
    }
}
