//! `cargo run --example check -- [-I DIR]... [--declare-function-constants] FILE.metal...`:
//! what `kernelgen lint` will do. Prints every problem; exits 1 if there were any.
use std::path::PathBuf;
use std::process::ExitCode;

use kernelgen_msl::{Checker, FunctionConstants, Options};

fn main() -> ExitCode {
    let mut includes = Vec::new();
    let mut files = Vec::new();
    let mut opts = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-I" => includes.extend(args.next().map(PathBuf::from)),
            "--declare-function-constants" => opts.function_constants = FunctionConstants::Declare,
            _ => files.push(a),
        }
    }
    let checker = match Checker::new(opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut bad = false;
    for f in &files {
        let src = match std::fs::read_to_string(f) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{f}: {e}");
                bad = true;
                continue;
            }
        };
        let t = std::time::Instant::now();
        match checker.check(&src, f, &includes) {
            Ok(()) => eprintln!("{f}: ok ({:.0} ms)", t.elapsed().as_secs_f64() * 1e3),
            Err(problems) => {
                bad = true;
                for p in problems {
                    println!("{p}");
                }
            }
        }
    }
    if bad { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
