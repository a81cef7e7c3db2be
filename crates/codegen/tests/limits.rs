//! A spec with thousands of mistakes is reported quickly, in bounded memory
//! and output: at most `MAX_SHOWN_PER_FILE` problems per file are shown, the
//! message counts the others, and the source is shared, not copied per problem.

use kernelgen_codegen::diag::MAX_SHOWN_PER_FILE;
use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{generate, Error};
use std::time::{Duration, Instant};

fn spec(text: String) -> SpecSource {
    SpecSource { display: "specs/big.toml".into(), origin: "specs/big.toml".into(), stem: "big".into(), text }
}

fn problems(text: String) -> (kernelgen_codegen::diag::Diagnostics, Duration) {
    let start = Instant::now();
    match generate(vec![spec(text)]) {
        Err(Error::Spec(d)) => (d, start.elapsed()),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("generated"),
    }
}

#[test]
fn ten_thousand_duplicate_axis_values() {
    let values = vec!["\"q4\""; 10_000].join(", ");
    let text = format!("family = \"expert\"\n[axes]\nquant = [{values}]\n[geometry.tiny]\nhidden = 256\nintermediate = 128\n");
    assert!(text.len() > 60_000);
    let (d, elapsed) = problems(text);
    assert_eq!(d.count(), 9_999);
    assert_eq!(d.0.len(), MAX_SHOWN_PER_FILE);
    let rendered = d.render();
    let omitted = 9_999 - MAX_SHOWN_PER_FILE;
    assert!(rendered.contains(&format!("specs/big.toml: {omitted} more problems are not shown (at most {MAX_SHOWN_PER_FILE} are shown per file)")), "{}", &rendered[rendered.len() - 300..]);
    assert!(rendered.ends_with("error: 9999 problems in the specs; nothing was written\n"));
    // Every shown problem keeps its location, without a 60 KB excerpt each.
    assert!(rendered.contains("--> specs/big.toml:3:"));
    assert!(rendered.len() < 50 * 1024, "{} bytes", rendered.len());
    // Generous: it takes well under a second; quadratic work took minutes.
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
}

#[test]
fn eight_thousand_bad_geometries() {
    let mut text = String::from("family = \"expert\"\n");
    for i in 0..8_000 {
        text.push_str(&format!("[geometry.g{i}]\nhidden = 100\nintermediat = 3\n"));
    }
    let (d, elapsed) = problems(text);
    assert!(d.count() >= 16_000, "{}", d.count());
    assert_eq!(d.0.len(), MAX_SHOWN_PER_FILE);
    assert!(d.render().len() < 50 * 1024);
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
}

/// The corpus's base family (tests/bad_families) with `edit` applied and a template that
/// writes `template`, read from a temporary folder: its families, or the error's text.
fn family(edit: impl Fn(&str) -> String, template: &str) -> Result<kernelgen_codegen::Families, String> {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string("tests/bad_families/no_template/rowsum.toml").unwrap();
    std::fs::write(dir.path().join("rowsum.toml"), edit(&base)).unwrap();
    std::fs::write(dir.path().join("rowsum.metal.tera"), template).unwrap();
    kernelgen_codegen::read_families(&[dir.path().to_path_buf()]).map_err(|e| e.to_string())
}

const TEMPLATE: &str = "  // {{ kernel }}\n  y[0] = x[0];\n";

/// What generating one geometry (`N = 8`) of the family gives: its error's text.
fn generated(families: &kernelgen_codegen::Families) -> String {
    let spec = SpecSource { display: "specs/rows.toml".into(), origin: "specs/rows.toml".into(), stem: "rows".into(), text: "family = \"rowsum\"\n[geometry.g]\nN = 8\n".into() };
    match kernelgen_codegen::Config::new().generate(kernelgen_codegen::Input { specs: vec![spec], families: families.clone() }) {
        Ok(_) => "generated".into(),
        Err(e) => e.to_string(),
    }
}

fn with_let(base: &str, lets: &str) -> String {
    base.replace("[let]\n", &format!("[let]\n{lets}"))
}

/// Deep or long expressions are errors at their line and column, not a stack overflow (a
/// test thread has 2 MiB of stack).
#[test]
fn deep_and_long_expressions_are_errors_at_their_place() {
    let deep = format!("DEEP = \"{}1{}\"\n", "(".repeat(10_000), ")".repeat(10_000));
    let text = family(|b| with_let(b, &deep), TEMPLATE).unwrap_err();
    assert!(text.contains("let.DEEP") && text.contains("rowsum.toml:13:73") && text.contains("nested more than 64 deep"), "{text}");
    let long = format!("LONG = \"1{}\"\n", " + 1".repeat(30_000));
    let text = family(|b| with_let(b, &long), TEMPLATE).unwrap_err();
    assert!(text.contains("let.LONG") && text.contains("rowsum.toml:13:") && text.contains("bytes long, above the limit"), "{text}");
    let wide = format!("WIDE = \"1{}\"\n", "+1".repeat(4_000));
    let text = family(|b| with_let(b, &wide), TEMPLATE).unwrap_err();
    assert!(text.contains("let.WIDE") && text.contains("more than 256 operations deep"), "{text}");
    let negated = format!("NEG = \"{}1\"\n", "-".repeat(5_000));
    let text = family(|b| with_let(b, &negated), TEMPLATE).unwrap_err();
    assert!(text.contains("let.NEG") && text.contains("nested more than 64 deep"), "{text}");
    // at the limit it reads, checks and evaluates
    let fine = format!("FINE = \"{}1{}\"\nSUM = \"1{}\"\n", "(".repeat(64), ")".repeat(64), " + 1".repeat(255));
    let families = family(|b| with_let(b, &fine), TEMPLATE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(generated(&families), "generated");
}

/// A string that doubles with each derived value is an error naming the value, not an
/// exhausted memory.
#[test]
fn strings_that_grow_without_end_are_errors() {
    let mut lets = String::from("S0 = \"'xxxxxxxx'\"\n");
    for i in 1..64 {
        lets.push_str(&format!("S{i} = \"concat(S{}, S{})\"\n", i - 1, i - 1));
    }
    let families = family(|b| with_let(b, &lets), TEMPLATE).unwrap_or_else(|e| panic!("{e}"));
    let text = generated(&families);
    assert!(text.contains("let.S14") && text.contains("longer than the limit of 65536 bytes"), "{text}");
}

/// A template that loops or grows without end fails the generation with the limit it broke.
#[test]
fn templates_that_grow_without_end_are_errors() {
    for (template, want) in [
        ("{% for i in range(end=4000000000) %}x{% endfor %}", "`range` of 4000000000 values"),
        ("{% for i in range(end=16000) %}{% for j in range(end=16000) %}x{% endfor %}{% endfor %}", "MiB of work"),
        ("{% set_global s = \"xxxxxxxx\" %}{% for i in range(end=64) %}{% set_global s = s ~ s %}{% endfor %}{{ s }}", "above the limit of 256 KiB"),
    ] {
        let families = family(|b| b.to_string(), &format!("  // {{{{ kernel }}}}\n{template}\n  y[0] = x[0];\n")).unwrap_or_else(|e| panic!("{e}"));
        let text = generated(&families);
        assert!(text.contains("rendering kernel `g_rowsum_f32`") && text.contains(want), "{template}: {text}");
    }
}

/// Offsets, lengths and helper arithmetic at the ends of 64 bits are errors or sensible
/// help, never an overflow (a debug build panicked, a release one printed nonsense).
#[test]
fn arithmetic_at_the_ends_of_64_bits_does_not_overflow() {
    let packed = "\n[packed.slot]\nbytes = 64\n[[packed.slot.region]]\nname = \"a\"\noffset = \"9223372036854775807 - 8\"\nbytes = 16\n[[packed.slot.region]]\nname = \"b\"\noffset = \"9223372036854775807 - 4\"\nbytes = 16\n[[packed.slot.region]]\nname = \"c\"\noffset = -9223372036854775807\nbytes = 9223372036854775807\n";
    let families = family(|b| b.replace("\n[sizes]", &format!("{packed}\n[sizes]")), TEMPLATE).unwrap_or_else(|e| panic!("{e}"));
    let text = generated(&families);
    assert!(text.contains("a occupy bytes 9223372036854775799..9223372036854775815 but the slot has only 64 bytes"), "{text}");
    assert!(text.contains("b (bytes 9223372036854775803..9223372036854775819) overlap a (bytes 9223372036854775799..9223372036854775815)"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    let check = "[[check]]\nrequire = \"N < 0\"\nmessage = \"no\"\nhelp = \"{near_multiples(9223372036854775807, 2)} / {near_multiples(-9223372036854775807, 3)}\"\n\n[sizes]";
    let families = family(|b| b.replace("[sizes]", check), TEMPLATE).unwrap_or_else(|e| panic!("{e}"));
    let text = generated(&families);
    assert!(text.contains("help: 9223372036854775806 / -9223372036854775806"), "{text}");
}
