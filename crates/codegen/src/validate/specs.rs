//! Every spec of a run: its file name, which names a Rust module; a family file met among the
//! specs; then each spec's syntax and [`validate`].

use super::{searched, validate};
use crate::diag::{Diagnostic, Diagnostics};
use crate::family::Families;
use crate::names;
use crate::spec::{self, SpecSource};
use std::sync::Arc;

/// Parses and validates every spec: the models of every spec whose family
/// is known, and every problem found.
pub fn validate_all(sources: Vec<SpecSource>, families: &Families) -> (Vec<super::SpecModel>, Diagnostics) {
    let mut diags = Diagnostics::default();
    let mut models = Vec::new();
    let mut stems: Vec<(String, String)> = Vec::new();
    for source in sources {
        let source = Arc::new(source);
        let whole = 0..source.text.len().min(1);
        if let Some((message, help)) = stem_problem(&source.stem) {
            diags.push(Diagnostic { source: source.clone(), span: whole.clone(), field: "(file name)".into(), message, help: Some(help) });
        }
        if let Some((_, other)) = stems.iter().find(|(s, _)| *s == source.stem) {
            diags.push(Diagnostic {
                source: source.clone(),
                span: whole.clone(),
                field: "(file name)".into(),
                message: format!("another spec, {other}, has the same file name; both would generate module `{}`", source.stem),
                help: Some("rename one of the files".into()),
            });
        }
        stems.push((source.stem.clone(), source.display.clone()));
        let tree = match spec::toml::parse(&source.text) {
            Ok(tree) => tree,
            Err((message, span)) => {
                diags.push(Diagnostic { source: source.clone(), span, field: "(syntax)".into(), message: format!("TOML syntax error: {message}"), help: None });
                continue;
            }
        };
        if let Some(d) = family_file_as_spec(&source, &tree, families) {
            diags.push(d);
            continue;
        }
        let (model, problems) = validate(source, &tree, families);
        models.extend(model);
        diags.extend(problems);
    }
    (models, diags)
}

/// A family file met among the specs (one with a family file's `[[kernel]]`, or its
/// `summary` and no spec's `geometry`): one problem saying where family files go, rather
/// than each of its keys unknown to a spec.
fn family_file_as_spec(source: &Arc<SpecSource>, tree: &spec::Node, families: &Families) -> Option<Diagnostic> {
    let has = |k: &str| tree.get(k).is_some();
    let key = if has("summary") && !has("geometry") {
        "summary"
    } else if has("kernel") {
        "kernel"
    } else {
        return None;
    };
    Some(Diagnostic {
        source: source.clone(),
        span: 0..source.text.len().min(1),
        field: "(file)".into(),
        message: format!("this is a family file (it has `{key}`), not a spec"),
        help: Some(format!(
            "move family files out of the spec folder: into `families/` beside it, or into a folder named with \
             --families (`Config::families` in a build script){}",
            searched(families)
        )),
    })
}

/// Why a spec file stem cannot name the Rust module of its launchers
/// (`pub mod <stem>;` in `rust/mod.rs`, the file `rust/<stem>.rs`).
fn stem_problem(stem: &str) -> Option<(String, String)> {
    let rename = "rename the file to lowercase letters, digits and `_`, starting with a letter".to_string();
    if !names::is_identifier(stem) {
        Some((format!("spec file name `{}` cannot name a Rust module", stem.escape_debug()), rename))
    } else if stem == "mod" {
        Some(("a spec named `mod.toml` would generate `rust/mod.rs`, which is the catalog of every spec".into(), "rename the file".into()))
    } else if names::is_rust_keyword(stem) {
        Some((format!("spec file name `{stem}` is a Rust keyword, so `pub mod {stem};` would not compile"), "rename the file, e.g. `{stem}s.toml`".replace("{stem}", stem)))
    } else if stem.len() > names::MAX_NAME_LEN {
        Some((format!("spec file name is {} bytes long; at most {} name a module", stem.len(), names::MAX_NAME_LEN), "rename the file to a shorter name".into()))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::SpecSource;
    use crate::{generate, names, Error};

    fn spec(stem: &str, text: &str) -> SpecSource {
        SpecSource { display: format!("specs/{stem}.toml"), origin: format!("specs/{stem}.toml"), stem: stem.into(), text: text.into() }
    }

    const TINY: &str = "family = \"expert\"\n[axes]\nquant = [\"q4\"]\n[geometry.tiny]\nhidden = 256\nintermediate = 128\n";

    /// Every keyword that passes as an identifier is refused as a module name,
    /// at line 1, column 1 of the spec, before anything is rendered.
    #[test]
    fn keyword_stems_are_rejected_with_a_location() {
        for kw in names::RUST_KEYWORDS.iter().filter(|k| names::is_identifier(k)) {
            match generate(vec![spec(kw, TINY)]) {
                Err(Error::Spec(d)) => {
                    assert_eq!(d.0.len(), 1, "{kw}: {d}");
                    assert!(d.0[0].headline().starts_with(&format!("specs/{kw}.toml:1:1: (file name): ")), "{}", d.0[0].headline());
                }
                Err(e) => panic!("{kw}: {e}"),
                Ok(_) => panic!("{kw}.toml generated"),
            }
        }
        assert!(generate(vec![spec("union", TINY)]).is_ok(), "a weak keyword names a module fine");
        let long = "s".repeat(names::MAX_NAME_LEN + 1);
        assert!(matches!(generate(vec![spec(&long, TINY)]), Err(Error::Spec(_))));
    }

    /// A spec with a stray `summary` is a spec with an unknown key, not a family file.
    #[test]
    fn only_a_family_file_is_called_one() {
        let message = |text: &str| match generate(vec![spec("s", text)]) {
            Err(Error::Spec(d)) => d.0.iter().map(|d| d.message.clone()).collect::<Vec<_>>(),
            _ => panic!("generated"),
        };
        assert_eq!(message(&format!("summary = \"x\"\n{TINY}")), ["unknown key `summary`"]);
        assert_eq!(message("family = \"f\"\nsummary = \"x\"\n"), ["this is a family file (it has `summary`), not a spec"]);
        assert_eq!(message(&format!("{TINY}[[kernel]]\n")), ["this is a family file (it has `kernel`), not a spec"]);
    }
}
