//! `kernelgen verify` handles every geometry `generate` accepts: for each
//! bundled family, random specs (axis values and field values drawn wide,
//! kept only when the generator accepts them) are generated and verified.
//! `KERNELGEN_VERIFY_RANDOM_SEED` replays a run; the seed is printed.

use kernelgen_codegen::spec::SpecSource;
use kernelgen_reference::SplitMix64;
use std::process::Command;

/// Draws over the reference crate's generator.
struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len() as u64) as usize]
    }

    /// A size as geometries have them: small, a multiple of 32 or 64, or a power of two,
    /// at most `max`.
    fn size(&mut self, max: u64) -> u64 {
        let v = match self.below(4) {
            0 => 1 + self.below(96),
            1 => 32 * (1 + self.below(8)),
            2 => 64 * (1 + self.below(12)),
            _ => 1 << self.below(11),
        };
        v.clamp(1, max)
    }
}

const DTYPES: &[&str] = &["\"bf16\"", "\"f16\"", "\"f32\""];

/// One random spec of `family` (the spec's text), not necessarily accepted.
fn draw(family: &str, geometry: &str, rng: &mut Rng) -> String {
    let dtype = rng.pick(DTYPES);
    let (axes, fields) = match family {
        "expert" => (
            format!("quant = [{}]\ndtype = [{dtype}]\nrows_per_threadgroup = [{}]", rng.pick(&["\"q4\"", "\"q8\""]), 1 + rng.below(8)),
            format!("hidden = {}\nintermediate = {}", rng.size(1024), rng.size(1024)),
        ),
        "affine" => (format!("bits = [{}]\ndtype = [{dtype}]", 3 + rng.below(2)), format!("K = {}\nN = {}", rng.size(2048), rng.size(512))),
        "delta" => (
            format!("masked = [{}]\ndtype = [{dtype}]\nstate_dtype = [{}]", rng.pick(&["false", "true"]), rng.pick(&["\"f32\"", "\"bf16\""])),
            format!("Dk = {}\nDv = {}\nHk = {}\nHv = {}", rng.size(256), rng.size(128), 1 + rng.below(4), 1 + rng.below(8)),
        ),
        "delta_state" => (
            format!("dtype = [{dtype}]"),
            format!("Dk = {}\nDv = {}\nHk = {}\nHv = {}", rng.size(256), rng.size(128), 1 + rng.below(4), 1 + rng.below(8)),
        ),
        "silu_rms_heads" => (
            format!("dtype = [{dtype}]"),
            format!("Hk = {}\nHv = {}\nDk = {}\nDv = {}", 1 + rng.below(4), 1 + rng.below(8), rng.size(128), rng.size(128)),
        ),
        "gated_rms_norm" => (format!("dtype = [{dtype}]"), format!("D = {}\neps = {:e}", rng.size(8192), 1e-6 * (1 + rng.below(10)) as f64)),
        other => panic!("no drawing for family {other}"),
    };
    format!("family = \"{family}\"\ndescription = \"random\"\n\n[axes]\n{axes}\n\n[geometry.{geometry}]\n{fields}\n")
}

fn accepted(stem: &str, text: &str) -> bool {
    let source = SpecSource { display: format!("{stem}.toml"), origin: format!("{stem}.toml"), stem: stem.into(), text: text.into() };
    kernelgen_codegen::generate(vec![source]).is_ok()
}

#[test]
fn verify_passes_random_accepted_specs_of_every_bundled_family() {
    let seed = std::env::var("KERNELGEN_VERIFY_RANDOM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("KERNELGEN_VERIFY_RANDOM_SEED={seed}");
    let mut rng = Rng(SplitMix64::new(seed));
    let dir = tempfile::tempdir().unwrap();
    let families = ["expert", "affine", "delta", "delta_state", "silu_rms_heads", "gated_rms_norm"];
    let mut specs = Vec::new();
    for family in families {
        for n in 0..2 {
            let stem = format!("{family}_{n}");
            let text = (0..500).map(|_| draw(family, &format!("g{n}"), &mut rng)).find(|t| accepted(&stem, t)).unwrap_or_else(|| panic!("no accepted {family} spec in 500 draws (seed {seed})"));
            std::fs::write(dir.path().join(format!("{stem}.toml")), &text).unwrap();
            specs.push(text);
        }
    }
    // The geometry the issue found verify panicking on (H = 66, I = 34) is refused now that a Q8
    // row is read as whole words (generation names the field); its nearest accepted neighbour,
    // rows of 17 and 9 words (neither a multiple of 32 lanes), runs instead.
    let refused = "family = \"expert\"\ndescription = \"q8, 2 rows\"\n\n[axes]\nquant = [\"q8\"]\nrows_per_threadgroup = [2]\n\n[geometry.h66]\nhidden = 66\nintermediate = 34\n";
    assert!(!accepted("expert_refused", refused));
    let fixed = refused.replace("h66", "h68").replace("hidden = 66", "hidden = 68").replace("intermediate = 34", "intermediate = 36");
    assert!(accepted("expert_fixed", &fixed));
    std::fs::write(dir.path().join("expert_fixed.toml"), &fixed).unwrap();
    // Rows too wide for the CUDA body's 32 KiB of staged row (H or I past 8192): it reads x or
    // mid from device memory instead, a path the bundled geometries never render.
    let wide = "family = \"expert\"\ndescription = \"unstaged rows\"\n\n[axes]\nquant = [\"q4\", \"q8\"]\nrows_per_threadgroup = [2]\n\n\
                [geometry.wide_h]\nhidden = 8456\nintermediate = 40\n\n[geometry.wide_i]\nhidden = 40\nintermediate = 8456\n";
    assert!(accepted("expert_wide", wide));
    std::fs::write(dir.path().join("expert_wide.toml"), wide).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kernelgen")).arg("verify").arg("--specs").arg(dir.path()).output().expect("kernelgen runs");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "seed {seed}, specs:\n{}\n{text}", specs.join("\n---\n"));
    assert!(text.contains(", 0 failed"), "{text}");
}
