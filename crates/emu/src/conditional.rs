//! Metal's conditional operator in C++: `c ? a : b` becomes
//! `c ? (kgemu::cond_to<decltype((b))>{}, (a)) : (kgemu::cond_to<decltype((a))>{}, (b))`.
//!
//! Metal applies the usual arithmetic conversions to the operands of `?:` (`cond ? half :
//! float` is a float, `cond ? half4 : float` a half4), where C++ looks for an implicit
//! conversion of each operand to the other's type: the shim's `half` converts to `float` and
//! `float` to `half` (both must stay implicit: `half h = f;`, `float x = h;`), so g++ finds
//! the conditional ambiguous. The shim's `cond_to<Other>` comma operator converts an operand
//! to Metal's common type where the two rules differ and forwards it unchanged (an lvalue
//! stays an lvalue) everywhere else, so the conditionals C++ already types as Metal does keep
//! their type and value category. The comma (not a call) leaves a `void` operand to the
//! built-in comma. `decltype` does not evaluate the copy of the other operand.
//!
//! The rewrite is line-preserving (each copy is put on one line, without comments) and
//! conservative: a conditional whose last operand has a `<` or `>` outside brackets (a
//! template argument list, or the conditional inside one), a lambda or statement expression,
//! or a preprocessor line, is left as written (g++ then types it as C++ does). Copies nest
//! (an operand's copy holds its own conditionals' rewrites), so the added text is bounded:
//! past [`budget`] of it, or [`MAX_NESTING`] conditionals deep, conditionals are left as
//! written.

use kernelgen_msl::lex::{Kind, Token};

use crate::translate::code_tokens;

/// Conditionals nested deeper than this inside one another's operands are left as written.
const MAX_NESTING: usize = 12;

/// An operand longer than this many tokens is not looked for to its end (left as written).
const MAX_OPERAND: usize = 1 << 16;

/// The most text the rewrite may add to a source of `len` bytes.
fn budget(len: usize) -> usize {
    2 * len + (1 << 20)
}

/// `src` with every conditional rewritten (see the module documentation).
pub(crate) fn rewrite(src: &str) -> String {
    let toks = code_tokens(src);
    let mut r = Rewriter {
        src,
        toks: &toks,
        budget: budget(src.len()),
    };
    let mut out = String::with_capacity(src.len() + src.len() / 8);
    if toks.is_empty() {
        return src.to_string();
    }
    out.push_str(&src[..toks[0].offset]);
    r.emit(0, toks.len(), false, 0, &mut out);
    out.push_str(&src[toks[toks.len() - 1].end()..]);
    out
}

struct Rewriter<'a> {
    src: &'a str,
    toks: &'a [Token],
    budget: usize,
}

/// A conditional's `?`, its `:` and the end (exclusive) of its last operand, token indices.
struct Conditional {
    question: usize,
    colon: usize,
    end: usize,
}

impl Rewriter<'_> {
    /// Tokens `lo..hi` (non-empty) with their conditionals rewritten, appended to `out`: as
    /// written from the first token's start to the last token's end, or, `flat`, their texts
    /// joined by spaces (no newline, no comment).
    fn emit(&mut self, lo: usize, hi: usize, flat: bool, nesting: usize, out: &mut String) {
        let mut i = lo;
        while i < hi {
            let cond = (self.toks[i].is("?") && nesting < MAX_NESTING)
                .then(|| self.conditional(i, hi))
                .flatten();
            let Some(c) = cond else {
                self.token(i, lo, flat, out);
                i += 1;
                continue;
            };
            let (mut flat_a, mut flat_b) = (String::new(), String::new());
            self.emit(c.question + 1, c.colon, true, nesting + 1, &mut flat_a);
            self.emit(c.colon + 1, c.end, true, nesting + 1, &mut flat_b);
            let added = 2 * (flat_a.len() + flat_b.len()) + 2 * WRAP_LEN;
            if added > self.budget {
                // Past the budget: this conditional and everything in it as written.
                self.budget = 0;
                for k in i..c.end {
                    self.token(k, lo, flat, out);
                }
                i = c.end;
                continue;
            }
            self.budget -= added;
            self.token(c.question, lo, flat, out);
            self.operand(c.question + 1, c.colon, &flat_b, flat, nesting, out);
            self.token(c.colon, lo, flat, out);
            self.operand(c.colon + 1, c.end, &flat_a, flat, nesting, out);
            i = c.end;
        }
    }

    /// Token `k` with what precedes it since the previous token (when not the range's first).
    fn token(&self, k: usize, lo: usize, flat: bool, out: &mut String) {
        let t = &self.toks[k];
        if k > lo {
            if flat {
                out.push(' ');
            } else {
                out.push_str(&self.src[self.toks[k - 1].end()..t.offset]);
            }
        }
        out.push_str(&t.text);
    }

    /// One operand, tokens `lo..hi`, wrapped to take Metal's common type with `other`.
    fn operand(
        &mut self,
        lo: usize,
        hi: usize,
        other: &str,
        flat: bool,
        nesting: usize,
        out: &mut String,
    ) {
        if flat {
            out.push(' ');
        } else {
            out.push_str(&self.src[self.toks[lo - 1].end()..self.toks[lo].offset]);
        }
        out.push_str("(kgemu::cond_to<decltype((");
        out.push_str(other);
        out.push_str("))>{}, (");
        self.emit(lo, hi, flat, nesting + 1, out);
        out.push_str("))");
    }

    /// The conditional whose `?` is token `q`, within tokens `..hi`, when it can be rewritten.
    fn conditional(&self, q: usize, hi: usize) -> Option<Conditional> {
        let toks = self.toks;
        // The middle operand: up to the `:` that matches this `?`.
        let (mut depth, mut open) = (0i32, 0u32);
        let mut colon = None;
        for (k, t) in toks
            .iter()
            .enumerate()
            .take(hi.min(q + 1 + MAX_OPERAND))
            .skip(q + 1)
        {
            match t.text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" if depth == 0 => return None,
                ")" | "]" | "}" => depth -= 1,
                ";" => return None,
                "?" if depth == 0 => open += 1,
                ":" if depth == 0 && open > 0 => open -= 1,
                ":" if depth == 0 => {
                    colon = Some(k);
                    break;
                }
                _ => {}
            }
        }
        let colon = colon?;
        // The last operand (an assignment-expression): up to what ends it.
        let limit = hi.min(colon + 1 + MAX_OPERAND);
        let mut end = limit;
        for (k, t) in toks.iter().enumerate().take(limit).skip(colon + 1) {
            let s = t.text.as_str();
            match s {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" if depth == 0 => {
                    end = k;
                    break;
                }
                ")" | "]" | "}" => depth -= 1,
                "," | ";" if depth == 0 => {
                    end = k;
                    break;
                }
                "?" if depth == 0 => open += 1,
                ":" if depth == 0 && open > 0 => open -= 1,
                ":" if depth == 0 => {
                    end = k;
                    break;
                }
                // a template argument list, or a comparison: the operand's end is unknown
                "<" | ">" | ">>" if depth == 0 => return None,
                _ => {}
            }
        }
        if colon + 1 == end || q + 1 == colon || end == limit && limit < hi {
            return None;
        }
        let plain = |lo: usize, hi: usize| {
            (lo..hi).all(|k| {
                let t = &toks[k];
                // a lambda's or a statement expression's braces, a directive
                let body =
                    t.is("{") && matches!(toks[k - 1].text.as_str(), "(" | ")" | "]" | "mutable");
                !body && t.kind != Kind::Directive
            }) && !self.src[toks[lo].offset..toks[hi - 1].end()].contains("\n#")
        };
        (plain(q + 1, colon) && plain(colon + 1, end)).then_some(Conditional {
            question: q,
            colon,
            end,
        })
    }
}

/// The wrapper's own text around one operand.
const WRAP_LEN: usize = "(kgemu::cond_to<decltype(())>{}, ())".len();

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn operands_take_the_other_operands_type_on_the_same_lines() {
        let src =
            "float f(bool c, half h, float x) {\n  return c ? h // a comment\n    : x + 1.0f;\n}\n";
        let out = rewrite(src);
        assert_eq!(
            out,
            "float f(bool c, half h, float x) {\n  return c ? (kgemu::cond_to<decltype((x + 1.0f))>{}, (h)) // a comment\n    : (kgemu::cond_to<decltype((h))>{}, (x + 1.0f));\n}\n"
        );
    }

    #[test]
    fn nested_conditionals_are_rewritten_inside_the_copies() {
        let out = rewrite("y = a ? b : c ? d : e;");
        assert_eq!(
            out,
            "y = a ? (kgemu::cond_to<decltype((c ? (kgemu::cond_to<decltype((e))>{}, (d)) : (kgemu::cond_to<decltype((d))>{}, (e))))>{}, (b)) : \
             (kgemu::cond_to<decltype((b))>{}, (c ? (kgemu::cond_to<decltype((e))>{}, (d)) : (kgemu::cond_to<decltype((d))>{}, (e))));"
        );
        // the middle operand holds one too
        let out = rewrite("y = a ? b ? 1 : 2 : 3;");
        assert!(out.starts_with("y = a ? (kgemu::cond_to<decltype((3))>{}, (b ? (kgemu::cond_to<decltype((2))>{}, (1))"), "{out}");
    }

    #[test]
    fn conditionals_whose_end_is_unsure_are_left_as_written() {
        for src in [
            "f<c ? 1 : 2>(x);",
            "y = c ? a : b < d;",
            "y = c ? [&]() { return 1; }() : 2;",
            "y = c ? ({ 1; }) : 2;",
            "y = c ? a +\n#line 4\n b : d;",
        ] {
            assert_eq!(rewrite(src), src, "{src}");
        }
        // a conditional ending at a comma, a bracket or an enclosing conditional's colon
        assert!(rewrite("g(c ? a : b, d);").contains("(b)), d);"));
        assert!(rewrite("v[c ? 0 : 1] = 2;").contains("(1))] = 2;"));
    }

    #[test]
    fn the_added_text_is_bounded() {
        // 40 conditionals nested in the middle operand: each copy doubles the next
        let mut src = String::from("y = ");
        for _ in 0..40 {
            src.push_str("c ? ");
        }
        src.push('a');
        for _ in 0..40 {
            src.push_str(" : b");
        }
        src.push(';');
        let start = std::time::Instant::now();
        let out = rewrite(&src);
        assert!(
            out.len() <= src.len() + super::budget(src.len()),
            "{}",
            out.len()
        );
        assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
        // a directive between operands stays on its line
        assert_eq!(
            rewrite("y = c ? a\n#line 4\n : b;"),
            "y = c ? (kgemu::cond_to<decltype((b))>{}, (a))\n#line 4\n : (kgemu::cond_to<decltype((a))>{}, (b));"
        );
    }
}
