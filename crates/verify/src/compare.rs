//! What an output must be, and the comparison of a kernel's output with it: bit for bit with a
//! replay model and within an f64 model's rigorous bound (kernelgen's Rust references), or
//! within a tolerance of a reference's values (a numpy function, a test's own reference).

use crate::error::{Error, Mismatch};
use half::{bf16, f16};
use kernelgen::contract::{Dtype, Tolerance};
use kernelgen_emu::HostArray;
use kernelgen_reference::{Agreement, Element, Exact, Violation, ulp, ulp_of};

/// What one output must be.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    /// A Rust reference's two models.
    Model {
        /// The replay model's output, in the output's dtype: the kernel's bits.
        replay: HostArray,
        /// The f64 model: exact values and per-element bounds.
        exact: Exact,
        /// The output elements `exact` covers, in its order, where the f64 model ran on a
        /// sample (every element when `None`); the replay covers every element regardless.
        exact_at: Option<Vec<usize>>,
    },
    /// A reference's values (widened to f64), within a tolerance (integer outputs exactly).
    Values {
        /// One value per element.
        values: Vec<f64>,
        /// How close each element must be.
        tolerance: Tolerance,
    },
}

/// How an output compared with what it must be.
#[derive(Clone, Debug, PartialEq)]
pub enum Compared {
    /// Bit for bit against the replay model, within the f64 model's bound: the largest error
    /// and the largest bound, in ulps of the output's largest exact magnitude.
    Model {
        /// The largest error.
        max_ulp: f64,
        /// The largest bound.
        bound: f64,
    },
    /// Within the tolerance of a reference's values.
    Values(Agreement),
}

/// One output's values, widened to f64 (integers and bools by value).
pub fn values(a: &HostArray) -> Vec<f64> {
    let d = &a.data;
    match a.dtype {
        Dtype::F32 => d.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        Dtype::F16 => d.chunks_exact(2).map(|c| f64::from(f16::from_le_bytes([c[0], c[1]]).to_f32())).collect(),
        Dtype::Bf16 => d.chunks_exact(2).map(|c| f64::from(bf16::from_le_bytes([c[0], c[1]]).to_f32())).collect(),
        Dtype::I8 => d.iter().map(|&b| f64::from(b as i8)).collect(),
        Dtype::U8 | Dtype::Bool => d.iter().map(|&b| f64::from(b)).collect(),
        Dtype::U16 => d.chunks_exact(2).map(|c| f64::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
        Dtype::I32 => d.chunks_exact(4).map(|c| f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        Dtype::U32 => d.chunks_exact(4).map(|c| f64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        // a dtype of a newer contract: NaNs, which match nothing
        _ => vec![f64::NAN; a.elements()],
    }
}

/// Compares output `name` with what it must be.
pub fn compare(name: &str, got: &HostArray, want: &Expected) -> Result<Compared, Error> {
    match want {
        Expected::Model { replay, exact, exact_at } => compare_model(name, got, replay, exact, exact_at.as_deref()).map(|(max_ulp, bound)| Compared::Model { max_ulp, bound }),
        Expected::Values { values, tolerance } => compare_values(name, got, values, *tolerance).map(Compared::Values),
    }
}

/// Compares `got` with a reference's `want`, element by element, within `tolerance` (integer
/// outputs exactly); the first failing element is named.
pub fn compare_values(name: &str, got: &HostArray, want: &[f64], tolerance: Tolerance) -> Result<Agreement, Error> {
    let tolerance = if got.dtype.is_float() { tolerance } else { Tolerance::Exact };
    let g = values(got);
    if g.len() != want.len() {
        return Err(Mismatch::Count { output: name.to_string(), got: g.len(), want: want.len() }.into());
    }
    let outside = |a: f64, b: f64| !tolerance.accepts(a, b, ulp_of(got.dtype, b));
    let mut agreement = Agreement { elements: g.len(), max_ulp: 0.0, max_ulp_bound: 0.0, max_abs: 0.0, max_bound_use: 0.0 };
    for (index, (&a, &b)) in g.iter().zip(want).enumerate() {
        if outside(a, b) {
            let count = g.iter().zip(want).filter(|(x, y)| outside(**x, **y)).count();
            return Err(Mismatch::Tolerance { output: name.to_string(), index, got: a, want: b, tolerance, outside: count, elements: g.len() }.into());
        }
        if a.is_finite() && b.is_finite() {
            let unit = ulp_of(got.dtype, b);
            let err = (a - b).abs();
            let allowed = match tolerance {
                Tolerance::Ulps(n) => f64::from(n) * unit,
                Tolerance::AbsRel { abs, rel } => abs + rel * b.abs(),
                _ => 0.0,
            };
            agreement.max_ulp = agreement.max_ulp.max(err / unit);
            agreement.max_ulp_bound = agreement.max_ulp_bound.max(allowed / unit);
            agreement.max_abs = agreement.max_abs.max(err);
            if err > 0.0 {
                agreement.max_bound_use = agreement.max_bound_use.max(err / allowed);
            }
        }
    }
    Ok(agreement)
}

/// The elements of an array of `T`.
pub(crate) fn elements<T: Element>(a: &HostArray) -> Vec<T> {
    let size = T::DTYPE.size();
    a.data
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..size].copy_from_slice(c);
            T::from_bits(u32::from_le_bytes(b))
        })
        .collect()
}

/// Compares one output with a Rust reference's models: `(max error, bound)`, both in ulps of
/// the output's largest exact magnitude (per-element ulps blow up where a dot product cancels
/// to near zero; the check itself is per element).
fn compare_model(name: &str, got: &HostArray, replay: &HostArray, exact: &Exact, exact_at: Option<&[usize]>) -> Result<(f64, f64), Error> {
    fn typed<T: Element>(name: &str, got: &HostArray, replay: &HostArray, exact: &Exact, exact_at: Option<&[usize]>) -> Result<(f64, f64), Error> {
        let g: Vec<T> = elements(got);
        let sampled: Vec<T>;
        let (checked, index): (&[T], &dyn Fn(usize) -> usize) = match exact_at {
            None => (&g, &|i| i),
            Some(at) => {
                sampled = at.iter().map(|&i| g[i]).collect();
                (&sampled, &|i| at[i])
            }
        };
        exact.check::<T>(checked).map_err(|v| Mismatch::Bound { output: name.to_string(), violation: Violation { index: index(v.index), ..v } })?;
        let r: Vec<T> = elements(replay);
        if let Some(index) = g.iter().zip(&r).position(|(a, b)| a.to_bits() != b.to_bits()) {
            let differing = g.iter().zip(&r).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            return Err(Mismatch::Replay { output: name.to_string(), index, got: g[index].to_f32(), replay: r[index].to_f32(), differing }.into());
        }
        let scale = exact.value.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let unit = ulp::<T>(scale);
        let err = checked.iter().zip(&exact.value).fold(0.0f64, |m, (a, e)| m.max((f64::from(a.to_f32()) - e).abs()));
        let tol = exact.tol.iter().fold(0.0f64, |m, t| m.max(*t));
        Ok((err / unit, tol / unit))
    }
    if got.shape != replay.shape || got.dtype != replay.dtype {
        return Err(Mismatch::Shape { output: name.to_string(), got: (got.dtype, got.shape.clone()), want: (replay.dtype, replay.shape.clone()) }.into());
    }
    match got.dtype {
        Dtype::F32 => typed::<f32>(name, got, replay, exact, exact_at),
        Dtype::Bf16 => typed::<bf16>(name, got, replay, exact, exact_at),
        Dtype::F16 => typed::<f16>(name, got, replay, exact, exact_at),
        dtype => Err(Mismatch::Dtype { output: name.to_string(), dtype }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundled::host;

    fn model(replay: &[f32], exact: Exact, exact_at: Option<Vec<usize>>) -> Expected {
        Expected::Model { replay: host(vec![replay.len() as u64], replay), exact, exact_at }
    }

    /// The f64 model on a sample of the elements: checked at those elements, a violation
    /// reported at the output's index, the others left to the replay.
    #[test]
    fn a_sampled_f64_model_checks_its_elements_and_names_the_output_index() {
        let got = host(vec![4], &[1.0f32, 2.0, 3.0, 4.5]);
        // elements 1 and 3 sampled: 3 is 0.5 off a bound of 0.1
        let exact = Exact { value: vec![2.0, 4.0], tol: vec![0.1, 0.1] };
        let err = compare("y", &got, &model(&[1.0, 2.0, 3.0, 4.5], exact, Some(vec![1, 3]))).unwrap_err().to_string();
        assert!(err.contains("element 3:"), "{err}");
        // within the bound at the sampled elements: passes, whatever the others are
        let exact = Exact { value: vec![2.0, 4.45], tol: vec![0.1, 0.1] };
        assert!(matches!(compare("y", &got, &model(&[1.0, 2.0, 3.0, 4.5], exact, Some(vec![1, 3]))), Ok(Compared::Model { .. })));
        // the replay still covers every element
        let exact = Exact { value: vec![2.0, 4.45], tol: vec![0.1, 0.1] };
        let err = compare("y", &got, &model(&[1.5, 2.0, 3.0, 4.5], exact, Some(vec![1, 3]))).unwrap_err().to_string();
        assert!(err.contains("differs from the replay model at element 0"), "{err}");
    }

    /// Within a tolerance: the agreement counts the elements and measures the largest error and
    /// bound in ulps; outside it, the first element is named with how many are outside.
    #[test]
    fn values_within_a_tolerance() {
        let got = host(vec![3], &[1.0f32, 2.0, 4.0]);
        let one_ulp_off = [1.0, 2.0 + 2f64.powi(-22), 4.0];
        let a = compare_values("y", &got, &one_ulp_off, Tolerance::Ulps(2)).unwrap();
        assert_eq!((a.elements, a.max_ulp, a.max_ulp_bound, a.max_bound_use), (3, 1.0, 2.0, 0.5));
        let e = compare_values("y", &got, &one_ulp_off, Tolerance::Exact).unwrap_err().to_string();
        assert_eq!(e, format!("output `y` element 1: got 2, reference {} (tolerance exact); 1 of 3 elements are outside it", one_ulp_off[1]));
        let e = compare_values("y", &got, &[1.0, 2.0], Tolerance::Exact).unwrap_err().to_string();
        assert_eq!(e, "output `y` has 3 elements where the reference gave 2");
    }
}
