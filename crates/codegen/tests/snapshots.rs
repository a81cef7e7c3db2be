//! Snapshots of what the generator writes for a small fixture spec, and of
//! the message for every spec in the bad-spec corpus (one snapshot each).

use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{generate, read_families, Config, Error, Input};

fn source(display: &str, text: String) -> SpecSource {
    let stem = std::path::Path::new(display).file_stem().unwrap().to_string_lossy().into_owned();
    SpecSource { display: display.to_string(), origin: format!("specs/{stem}.toml"), stem, text }
}

/// Every spec under `tests/fixtures/` (one small instance of each bundled family, and of
/// the test's own in `tests/fixtures/families/`, which has a CUDA template), generated on its
/// own: the list of files, then each file.
#[test]
fn fixture_spec_renders() {
    let families = read_families(&["tests/fixtures/families".into()]).unwrap_or_else(|e| panic!("{e}"));
    let mut fixtures: Vec<std::path::PathBuf> = std::fs::read_dir("tests/fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    fixtures.sort();
    assert!(!fixtures.is_empty());
    for path in fixtures {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let input = Input { specs: vec![source(&format!("tests/fixtures/{stem}.toml"), text)], families: families.clone() };
        let generated = Config::new().generate(input).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = generated.files.keys().map(String::as_str).collect();
        insta::assert_debug_snapshot!(format!("{stem}_files"), names);
        for (file, text) in &generated.files {
            insta::assert_snapshot!(format!("{stem}__{}", file.replace('/', "__")), text);
        }
    }
}

#[test]
fn bad_specs_are_reported() {
    insta::glob!("bad_specs/*.toml", |path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        match generate(vec![source(&format!("bad_specs/{name}"), text)]) {
            Ok(_) => panic!("bad_specs/{name} generated without an error"),
            Err(Error::Spec(d)) => {
                assert!(!d.is_empty());
                insta::assert_snapshot!(d.render());
            }
            Err(other) => panic!("bad_specs/{name}: expected a spec error, got {other}"),
        }
    });
}

/// A CUDA body's block is the family's `cuda_threadgroup` where it has one (the contract and the
/// manifest carry it; the Metal threadgroup and the grid stay), else the Metal threadgroup; a
/// block past CUDA's limits is the spec's error, naming the kernel and the block.
#[test]
fn a_cuda_block_of_its_own_is_carried_and_checked() {
    let with_block = |block: &str| {
        let dir = tempfile::tempdir().unwrap();
        for file in ["rowscale.toml", "rowscale.metal.tera", "rowscale.cuda.tera"] {
            let text = std::fs::read_to_string(format!("tests/fixtures/families/{file}")).unwrap();
            let text = if file == "rowscale.toml" { text.replacen("threadgroup = [32, 1, 1]", &format!("threadgroup = [32, 1, 1]\ncuda_threadgroup = {block}"), 1) } else { text };
            std::fs::write(dir.path().join(file), text).unwrap();
        }
        let families = read_families(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string("tests/fixtures/rowscale.toml").unwrap();
        Config::new().generate(Input { specs: vec![source("tests/fixtures/rowscale.toml", text)], families })
    };
    let generated = with_block("[64, 1, 1]").unwrap_or_else(|e| panic!("{e}"));
    for rk in &generated.kernels {
        assert_eq!((rk.def.threadgroup, rk.def.cuda.as_ref().unwrap().threadgroup), ([32, 1, 1], [64, 1, 1]));
    }
    let manifest = &generated.files["manifest.json"];
    assert!(manifest.contains("\"threadgroup\": [\n          64,\n          1,\n          1\n        ]"), "{manifest}");
    let e = with_block("[32, 1, 128]").err().expect("a block of 128 in z is refused").to_string();
    assert!(e.contains("CUDA block [32, 1, 128] is 4096 threads, above CUDA's limit of 1024"), "{e}");
    let e = with_block("[1, 1, 65]").err().expect("a block of 65 in z is refused").to_string();
    assert!(e.contains("CUDA block [1, 1, 65] is above CUDA's block extents [1024, 1024, 64]"), "{e}");
    // MLX cuts a block to the grid: a block of 2 in y over the grid's 1 would run as 1
    let e = with_block("[32, 2, 1]").err().expect("a block wider than the grid is refused").to_string();
    assert!(e.contains("CUDA block y extent 2 is more than its grid's 1 threads: MLX's cuda_kernel cuts a block to the grid"), "{e}");
}

/// A kernel with a CUDA body: its `.cu` is byte for byte what MLX assembles from the header and
/// body its contract hands to `cuda_kernel` (MLX's default header first, then kernelgen's line
/// naming the spec and template, which opens the header), and a Metal-only kernel has none.
#[test]
fn cuda_sources_are_what_mlx_assembles() {
    let families = read_families(&["tests/fixtures/families".into()]).unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string("tests/fixtures/rowscale.toml").unwrap();
    let generated = Config::new().generate(Input { specs: vec![source("tests/fixtures/rowscale.toml", text)], families }).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(generated.kernels.len(), 2);
    for rk in &generated.kernels {
        let c = rk.def.cuda.as_ref().expect("rowscale has a CUDA template");
        let (path, file) = rk.cuda_file().unwrap();
        assert_eq!((path, file), (&c.path["generated/".len()..], c.source.as_ref()));
        let again = kernelgen_cuda::mlx::assemble(&c.mlx_name, c.header(), c.body(), &rk.def.inputs, &rk.def.outputs).unwrap();
        assert_eq!(again.source, c.source);
        assert_eq!(c.mlx_name, format!("custom_kernel_{}", rk.def.name));
        assert!(c.source.starts_with(kernelgen_cuda::mlx::DEFAULT_HEADER), "{}", c.source);
        let origin = format!("// Generated by kernelgen from specs/rowscale.toml (kernel {}, family rowscale). Do not edit: change the spec or families/rowscale.cuda.tera", rk.def.name);
        assert!(c.header().starts_with(&origin), "{}", c.header());
        assert!(c.body().starts_with(&format!("  // {}: one warp per row", rk.def.name)) && c.body().ends_with("  }"), "{}", c.body());
        assert_eq!(c.shared_memory_bytes, 0);
        assert!(generated.files[path] == *c.source && generated.files["manifest.json"].contains(&format!("\"path\": \"{}\"", c.path)));
    }
    // The same family without its CUDA template is Metal-only (the bundled families all
    // gain CUDA templates, so the Metal-only case is built here).
    let dir = tempfile::tempdir().unwrap();
    for file in ["rowscale.toml", "rowscale.metal.tera"] {
        std::fs::copy(format!("tests/fixtures/families/{file}"), dir.path().join(file)).unwrap();
    }
    let families = read_families(&[dir.path().to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string("tests/fixtures/rowscale.toml").unwrap();
    let metal_only = Config::new().generate(Input { specs: vec![source("tests/fixtures/rowscale.toml", text)], families }).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(metal_only.kernels.len(), 2);
    assert!(metal_only.kernels.iter().all(|rk| rk.def.cuda.is_none() && rk.cuda_file().is_none()));
    assert!(!metal_only.files.keys().any(|p| p.starts_with("cuda/")) && !metal_only.files["manifest.json"].contains("\"cuda\""));
}
