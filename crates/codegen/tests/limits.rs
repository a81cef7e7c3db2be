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
