//! kernelgen's Rust references against kernelgen's family files, read through the codegen
//! API: each bundled family names a reference that exists, each reference is named, and what
//! each reference declares it reads (plan parameters, buffers) is what the family plans for
//! every kernel of the catalog. A renamed `let`, axis or buffer in a family file fails here,
//! not in the middle of a `kernelgen verify` run.

use kernelgen::contract::Source;
use kernelgen_codegen::family::{FamilyDef, ReferenceDef, Role};
use kernelgen_codegen::{Config, Families};
use kernelgen_verify::bundled::{self, BUNDLED, RustReference};
use std::path::PathBuf;

/// The Rust reference a bundled family names.
fn named(family: &FamilyDef) -> &'static RustReference {
    let reference = family.verify.reference.as_ref().unwrap_or_else(|| panic!("family `{}` names no reference", family.name));
    let ReferenceDef::Rust(name) = &reference.value else { panic!("family `{}` names {:?}, not a Rust reference", family.name, reference.value) };
    bundled::find(name).unwrap_or_else(|| panic!("family `{}` names `rust:{name}`, which kernelgen-verify does not have", family.name))
}

#[test]
fn every_bundled_family_names_a_rust_reference_and_each_is_named() {
    let families = Families::bundled();
    let names: Vec<&str> = families.iter().map(|f| named(f).name).collect();
    for r in BUNDLED {
        assert!(names.contains(&r.name), "no bundled family names `rust:{}`", r.name);
    }
    for (i, r) in BUNDLED.iter().enumerate() {
        assert!(BUNDLED[..i].iter().all(|o| o.name != r.name), "`rust:{}` twice", r.name);
    }
}

/// Each declaration against its family's file: every parameter is an axis, a `let` or a field
/// every geometry gives; every buffer of every kernel (a host-integer one too; not one the
/// launcher fills) is declared; every declared buffer is one of some kernel.
#[test]
fn every_declaration_matches_its_family_file() {
    for family in Families::bundled().iter() {
        let r = named(family);
        let d = &r.declared;
        for p in d.params {
            let planned = family.axes.iter().any(|a| a.name == *p) || family.lets.iter().any(|(n, _)| n == p) || family.fields.iter().any(|f| f.name == *p && f.required);
            assert!(planned, "`rust:{}` reads `{p}`, which family `{}` has as no axis, `let` or required field", r.name, family.name);
        }
        let mut seen = Vec::new();
        for part in &family.parts {
            for (buffers, declared, kind) in [(&part.inputs, d.inputs, "input"), (&part.outputs, d.outputs, "output")] {
                for b in buffers.iter().filter(|b| !matches!(b.role, Role::Holds(_))) {
                    assert!(declared.contains(&b.name.as_str()), "family `{}` has the {kind} `{}`, which `rust:{}` does not declare", family.name, b.name, r.name);
                    seen.push(b.name.as_str());
                }
            }
        }
        for b in d.inputs.iter().chain(d.outputs) {
            assert!(seen.contains(b), "`rust:{}` declares the buffer `{b}`, which no kernel of family `{}` has", r.name, family.name);
        }
    }
}

/// Every kernel of the catalog (specs/), planned: each parameter its family's reference
/// declares is a value of its plan, and each buffer of its contract is declared.
#[test]
fn every_catalog_kernel_plans_what_its_reference_reads() {
    let specs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../specs");
    let config = Config::new().specs(specs);
    let generated = config.load().and_then(|input| config.generate(input)).unwrap_or_else(|e| panic!("{e}"));
    let mut checked = Vec::new();
    for k in &generated.kernels {
        let r = named(&k.kernel.family);
        for p in r.declared.params {
            assert!(k.kernel.plan.params.contains_key(*p), "kernel `{}` plans no `{p}`, which `rust:{}` reads", k.kernel.name, r.name);
        }
        for b in k.def.inputs.iter().filter(|b| matches!(b.source, Source::Data | Source::HostInts)) {
            assert!(r.declared.inputs.contains(&b.name.as_ref()), "kernel `{}` reads `{}`, which `rust:{}` does not declare", k.kernel.name, b.name, r.name);
        }
        for b in k.def.outputs.iter() {
            assert!(r.declared.outputs.contains(&b.name.as_ref()), "kernel `{}` writes `{}`, which `rust:{}` does not declare", k.kernel.name, b.name, r.name);
        }
        checked.push(r.name);
    }
    for r in BUNDLED {
        assert!(checked.contains(&r.name), "no catalog kernel checks `rust:{}`", r.name);
    }
}
