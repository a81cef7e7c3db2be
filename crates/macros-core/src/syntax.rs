//! The Rust-syntax front end of `kernels!`: tokens to the same spanned tree
//! the TOML front end builds.
//!
//! The tokens are rendered, one top-level entry a line, into a synthetic
//! TOML text while every rendered token records its byte range and its
//! [`Span`]; the text then goes through the generator's own TOML front end
//! (`kernelgen_codegen::spec::toml::parse`), so the tree, its semantics
//! (dotted keys, duplicate keys) and every later stage are the generator's.
//! A diagnostic's byte range maps back to the tokens it covers with
//! [`Synthetic::locate`].
//!
//! The grammar (see the crate docs for examples):
//!
//! ```text
//! spec    := item*
//! item    := header | "debug" sep? | entry
//! header  := attribute* visibility "mod" IDENT ";"
//! entry   := path "=" value sep      | path "{" entry* "}" sep?
//! path    := key ("." key)*          | key key+        (juxtaposed keys only before "{")
//! key     := IDENT | STRING | INTEGER
//! value   := STRING | INTEGER | FLOAT | "-" (INTEGER | FLOAT) | "true" | "false" | IDENT
//!          | "[" (value ("," value)* ","?)? "]" | "{" entry* "}"
//! sep     := "," | ";"
//! ```
//!
//! A bare name as a value is a string (`quant = [q4, q8]` is
//! `quant = ["q4", "q8"]`); `path { ... }` is the table `path = { ... }`.

use proc_macro2::{Ident, Span, TokenStream};
use std::ops::Range;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Attribute, LitFloat, LitInt, LitStr, Token, Visibility};

/// A spec written in Rust syntax, rendered to TOML text with a map back to
/// the tokens.
pub struct InlineSpec {
    /// Outer attributes of `mod <name>;`, passed through to the module.
    pub attrs: Vec<Attribute>,
    /// The visibility of `mod <name>;`, given to the module.
    pub vis: Visibility,
    /// The module name; also the spec's stem.
    pub name: Ident,
    /// `debug;` was given: print the expansion at compile time.
    pub debug: bool,
    /// The spec as TOML text, with the span of every token.
    pub text: Synthetic,
}

/// Synthetic TOML text and the span of every token rendered into it.
#[derive(Clone, Debug, Default)]
pub struct Synthetic {
    /// The TOML text.
    pub text: String,
    /// Byte range in `text` -> the span of the token it came from, in
    /// increasing order of range.
    map: Vec<(Range<usize>, Span)>,
}

impl Synthetic {
    fn raw(&mut self, s: &str) {
        self.text.push_str(s);
    }

    fn token(&mut self, s: &str, span: Span) {
        let start = self.text.len();
        self.text.push_str(s);
        self.map.push((start..self.text.len(), span));
    }

    /// The first and last token a byte range of the text covers. A range
    /// that covers no token (whitespace, the end) takes the nearest token.
    pub fn locate(&self, range: &Range<usize>) -> Option<(Span, Span)> {
        if self.map.is_empty() {
            return None;
        }
        let first = self.map.iter().position(|(r, _)| r.end > range.start).unwrap_or(self.map.len() - 1);
        let end = range.end.max(range.start + 1);
        let last = self.map.iter().rposition(|(r, _)| r.start < end).unwrap_or(first).max(first);
        Some((self.map[first].1, self.map[last].1))
    }

    /// The number of recorded tokens.
    pub fn tokens(&self) -> usize {
        self.map.len()
    }
}

impl Parse for InlineSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut header: Option<(Vec<Attribute>, Visibility, Ident)> = None;
        let mut debug = false;
        let mut text = Synthetic::default();
        // The spec's first byte is where the generator reports problems of
        // the spec as a whole (no family, no geometry): the module name.
        let mut entries = Vec::new();
        while !input.is_empty() {
            if input.peek(Token![#]) || input.peek(Token![pub]) || input.peek(Token![mod]) {
                let attrs = input.call(Attribute::parse_outer)?;
                let vis: Visibility = input.parse()?;
                let kw: Token![mod] = input.parse()?;
                let name: Ident = input.parse()?;
                input.parse::<Token![;]>()?;
                if header.is_some() {
                    return Err(syn::Error::new(
                        kw.span,
                        "(syntax): the module is already named; a `kernels!` block holds one spec",
                    ));
                }
                header = Some((attrs, vis, name));
                continue;
            }
            if is_debug_flag(input) {
                input.call(Ident::parse_any)?;
                separator(input);
                debug = true;
                continue;
            }
            let mut line = Synthetic::default();
            entry(input, &mut line, true)?;
            entries.push(line);
        }
        let Some((attrs, vis, name)) = header else {
            return Err(syn::Error::new(
                Span::call_site(),
                "(syntax): name the module the launchers go in: start the spec with `mod <name>;`",
            ));
        };
        text.token("#", name.span());
        text.raw(" kernels!\n");
        for line in entries {
            let offset = text.text.len();
            text.text.push_str(&line.text);
            text.map.extend(line.map.into_iter().map(|(r, s)| (r.start + offset..r.end + offset, s)));
            text.raw("\n");
        }
        Ok(InlineSpec { attrs, vis, name, debug, text })
    }
}

/// `debug` followed by a separator or the end: the flag, not a key.
fn is_debug_flag(input: ParseStream) -> bool {
    let f = input.fork();
    matches!(f.call(Ident::parse_any), Ok(i) if i == "debug")
        && (f.is_empty() || f.peek(Token![;]) || f.peek(Token![,]))
}

fn syntax(span: Span, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, format!("(syntax): {message}"))
}

fn peek_key(input: ParseStream) -> bool {
    input.peek(syn::Ident::peek_any) || input.peek(LitStr) || input.peek(LitInt)
}

/// One key: a name, a string or an integer.
fn key(input: ParseStream, out: &mut Synthetic) -> syn::Result<()> {
    if input.peek(LitStr) {
        let s: LitStr = input.parse()?;
        if !s.suffix().is_empty() {
            return Err(syntax(s.span(), "a key has no suffix"));
        }
        let v = s.value();
        out.token(&toml_key(&v), s.span());
    } else if input.peek(LitInt) {
        let i: LitInt = input.parse()?;
        if !i.suffix().is_empty() || !i.to_string().bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax(i.span(), "a numeric key is plain decimal digits"));
        }
        out.token(&i.to_string(), i.span());
    } else if input.peek(syn::Ident::peek_any) {
        let id = input.call(Ident::parse_any)?;
        out.token(&toml_key(&id.unraw().to_string()), id.span());
    } else {
        return Err(input.error("(syntax): expected a key: a name such as `hidden`, a string or an integer"));
    }
    Ok(())
}

/// One entry: `path = value sep` or `path { entries } sep?`.
fn entry(input: ParseStream, out: &mut Synthetic, top: bool) -> syn::Result<()> {
    key(input, out)?;
    loop {
        if input.peek(Token![.]) {
            let dot: Token![.] = input.parse()?;
            out.token(".", dot.span);
            key(input, out)?;
        } else if peek_key(input) {
            // `geometry tiny { ... }` is `geometry.tiny { ... }`: juxtaposed
            // keys are a path only when a table follows.
            let ahead = input.fork();
            while peek_key(&ahead) || ahead.peek(Token![.]) {
                if ahead.peek(Token![.]) {
                    ahead.parse::<Token![.]>()?;
                } else {
                    key(&ahead, &mut Synthetic::default())?;
                }
            }
            if !ahead.peek(syn::token::Brace) {
                return Err(input.error("(syntax): expected `=`, `.` or `{` after the key (keys side by side, as in `geometry tiny { ... }`, name a table)"));
            }
            out.raw(".");
            key(input, out)?;
        } else {
            break;
        }
    }
    if input.peek(Token![=]) {
        let eq: Token![=] = input.parse()?;
        out.raw(" ");
        out.token("=", eq.span);
        out.raw(" ");
        value(input, out)?;
        if input.is_empty() {
            return Ok(());
        }
        if input.peek(Token![,]) || input.peek(Token![;]) {
            separator(input);
            return Ok(());
        }
        Err(input.error(if top {
            "(syntax): expected `;` or `,` after the value"
        } else {
            "(syntax): expected `,` or `;` after the value"
        }))
    } else if input.peek(syn::token::Brace) {
        out.raw(" = ");
        table(input, out)?;
        if input.peek(Token![,]) || input.peek(Token![;]) {
            separator(input);
        }
        Ok(())
    } else {
        Err(input.error("(syntax): expected `=` or `{` after the key"))
    }
}

fn separator(input: ParseStream) {
    if input.parse::<Token![,]>().is_err() {
        let _ = input.parse::<Token![;]>();
    }
}

/// `{ entries }` as a TOML inline table.
fn table(input: ParseStream, out: &mut Synthetic) -> syn::Result<()> {
    let body;
    let brace = syn::braced!(body in input);
    out.token("{", brace.span.open());
    let mut first = true;
    while !body.is_empty() {
        out.raw(if first { " " } else { ", " });
        first = false;
        entry(&body, out, false)?;
    }
    out.raw(" ");
    out.token("}", brace.span.close());
    Ok(())
}

fn value(input: ParseStream, out: &mut Synthetic) -> syn::Result<()> {
    if input.peek(LitStr) {
        let s: LitStr = input.parse()?;
        if !s.suffix().is_empty() {
            return Err(syntax(s.span(), "a string value has no suffix"));
        }
        out.token(&toml_string(&s.value()), s.span());
    } else if input.peek(LitInt) || input.peek(LitFloat) {
        number(input, out, None)?;
    } else if input.peek(Token![-]) {
        let minus: Token![-] = input.parse()?;
        if !(input.peek(LitInt) || input.peek(LitFloat)) {
            return Err(input.error("(syntax): expected a number after `-`"));
        }
        number(input, out, Some(minus.span))?;
    } else if input.peek(syn::LitBool) {
        let b: syn::LitBool = input.parse()?;
        out.token(if b.value { "true" } else { "false" }, b.span);
    } else if input.peek(syn::Ident::peek_any) {
        let id = input.call(Ident::parse_any)?;
        out.token(&toml_string(&id.unraw().to_string()), id.span());
    } else if input.peek(syn::token::Bracket) {
        let items;
        let bracket = syn::bracketed!(items in input);
        out.token("[", bracket.span.open());
        let mut first = true;
        while !items.is_empty() {
            if !first {
                out.raw(", ");
            }
            first = false;
            value(&items, out)?;
            if items.is_empty() {
                break;
            }
            if !items.peek(Token![,]) {
                return Err(items.error("(syntax): expected `,` between the values of a list"));
            }
            items.parse::<Token![,]>()?;
        }
        out.token("]", bracket.span.close());
    } else if input.peek(syn::token::Brace) {
        table(input, out)?;
    } else {
        return Err(input.error(
            "(syntax): expected a value: a string, an integer, a float, `true`, `false`, a name, `[...]` or `{...}`",
        ));
    }
    Ok(())
}

/// An integer or float literal, negated when `minus` is given.
fn number(input: ParseStream, out: &mut Synthetic, minus: Option<Span>) -> syn::Result<()> {
    if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        if !lit.suffix().is_empty() {
            return Err(syntax(lit.span(), format!("remove the suffix `{}`: spec values are untyped", lit.suffix())));
        }
        let range = || syntax(lit.span(), "integer out of range for a 64-bit signed integer");
        let n: i128 = lit.base10_parse().map_err(|_| range())?;
        let n = if minus.is_some() { -n } else { n };
        if i64::try_from(n).is_err() {
            return Err(range());
        }
        match minus {
            Some(m) => {
                out.token("-", m);
                out.token(&n.unsigned_abs().to_string(), lit.span());
            }
            None => out.token(&n.to_string(), lit.span()),
        }
    } else {
        let lit: LitFloat = input.parse()?;
        if !lit.suffix().is_empty() {
            return Err(syntax(lit.span(), format!("remove the suffix `{}`: spec values are untyped", lit.suffix())));
        }
        let x: f64 = lit.base10_parse().map_err(|e| syntax(lit.span(), e))?;
        if let Some(m) = minus {
            out.token("-", m);
        }
        out.token(&format!("{x:?}"), lit.span());
    }
    Ok(())
}

/// A TOML key for `k`: bare when it can be.
fn toml_key(k: &str) -> String {
    if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        k.to_string()
    } else {
        toml_string(k)
    }
}

/// A TOML basic string holding `s`.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Parses the body of `kernels! { ... }`.
pub fn parse(tokens: TokenStream) -> syn::Result<InlineSpec> {
    syn::parse2(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn renders_toml() {
        let spec = parse(quote! {
            debug;
            #[allow(dead_code)]
            pub mod tiny;
            family = "expert";
            axes { quant = [q4, q8], rows_per_threadgroup = [4,] }
            exclude = [{ quant = q8, dtype = f32 }];
            geometry tiny {
                hidden = 256,
                scale = -1.5,
                slot.q4 { bytes = 1_024 }
            }
            geometry.other { "odd key" = r#type, 12 = true }
        })
        .unwrap();
        assert!(spec.debug);
        assert_eq!(spec.name.to_string(), "tiny");
        assert_eq!(
            spec.text.text,
            "# kernels!\n\
             family = \"expert\"\n\
             axes = { quant = [\"q4\", \"q8\"], rows_per_threadgroup = [4] }\n\
             exclude = [{ quant = \"q8\", dtype = \"f32\" }]\n\
             geometry.tiny = { hidden = 256, scale = -1.5, slot.q4 = { bytes = 1024 } }\n\
             geometry.other = { \"odd key\" = \"type\", 12 = true }\n"
        );
    }

    #[test]
    fn syntax_errors() {
        let err = |t: TokenStream| parse(t).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(quote! { family = "expert"; }).contains("start the spec with `mod <name>;`"));
        assert!(err(quote! { mod a; family = "expert" axes {} }).contains("expected `;` or `,` after the value"));
        assert!(err(quote! { mod a; geometry g { hidden 256 } }).contains("expected `=`, `.` or `{`"));
        assert!(err(quote! { mod a; geometry g { hidden = 256u32 } }).contains("remove the suffix `u32`"));
        assert!(err(quote! { mod a; axes { quant = [q4 q8] } }).contains("expected `,` between the values"));
        assert!(err(quote! { mod a; family = ; }).contains("expected a value"));
    }

    #[test]
    fn locate_maps_ranges_to_tokens() {
        let spec = parse(quote! { mod a; family = "expert"; }).unwrap();
        let text = &spec.text.text;
        let at = text.find("\"expert\"").unwrap();
        assert!(spec.text.locate(&(at..at + 8)).is_some());
        assert!(spec.text.locate(&(0..1)).is_some());
        assert_eq!(spec.text.tokens(), 4);
    }
}
