//! What a launch costs by default: every byte of every input it reads (a
//! packed buffer's read regions only) and of every output, summed as a
//! polynomial in the run-time sizes, so `12288*M + 12599296` reads as it is.

use kernelgen_contract::{BufferDef, Dim, Op};
use std::collections::BTreeMap;

/// A polynomial over run-time sizes: sorted size indices -> coefficient.
#[derive(Clone, Debug, Default, PartialEq)]
struct Poly(BTreeMap<Vec<usize>, u64>);

impl Poly {
    fn constant(c: u64) -> Poly {
        let mut p = Poly::default();
        if c != 0 {
            p.0.insert(Vec::new(), c);
        }
        p
    }

    fn add(mut self, other: &Poly) -> Option<Poly> {
        for (k, c) in &other.0 {
            let e = self.0.entry(k.clone()).or_insert(0);
            *e = e.checked_add(*c)?;
        }
        Some(self)
    }

    fn mul(&self, other: &Poly) -> Option<Poly> {
        let mut out = Poly::default();
        for (ka, ca) in &self.0 {
            for (kb, cb) in &other.0 {
                let mut k: Vec<usize> = ka.iter().chain(kb).copied().collect();
                k.sort_unstable();
                let e = out.0.entry(k).or_insert(0);
                *e = e.checked_add(ca.checked_mul(*cb)?)?;
            }
        }
        Some(out)
    }

    /// The polynomial a dimension is, when it is one (sums and products only).
    fn of(d: &Dim) -> Option<Poly> {
        let ops = match d {
            Dim::Fixed(n) => return Some(Poly::constant(*n)),
            Dim::Expr(ops) => ops,
        };
        let mut stack: Vec<Poly> = Vec::new();
        for op in ops.iter() {
            let p = match op {
                Op::Const(c) => Poly::constant(*c),
                Op::Size(i) => Poly(BTreeMap::from([(vec![*i], 1)])),
                Op::Add | Op::Mul => {
                    let b = stack.pop()?;
                    let a = stack.pop()?;
                    if *op == Op::Add { a.add(&b)? } else { a.mul(&b)? }
                }
                _ => return None,
            };
            stack.push(p);
        }
        (stack.len() == 1).then(|| stack.pop()).flatten()
    }

    /// Highest degree first, the constant last: `12288*M + 12599296`.
    fn into_dim(self) -> Dim {
        let mut terms: Vec<(Vec<usize>, u64)> = self.0.into_iter().filter(|(_, c)| *c != 0).collect();
        terms.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        match terms.as_slice() {
            [] => return Dim::Fixed(0),
            [(sizes, c)] => return Dim::product(*c, sizes),
            _ => {}
        }
        let mut ops = Vec::new();
        for (n, (sizes, c)) in terms.iter().enumerate() {
            match Dim::product(*c, sizes) {
                Dim::Fixed(v) => ops.push(Op::Const(v)),
                Dim::Expr(e) => ops.extend(e.iter().copied()),
            }
            if n > 0 {
                ops.push(Op::Add);
            }
        }
        Dim::Expr(ops.into())
    }
}

/// The bytes a buffer moves: its read regions for a packed buffer (of each one, for an array of them), else
/// its elements times the element size. `None` when a dimension is not a
/// polynomial (a `ceil_div`, say): the family then states its cost.
fn buffer_bytes(b: &BufferDef) -> Option<Poly> {
    if !b.regions.is_empty() {
        // every buffer of an array of packed buffers (`[S, bytes]`): its leading dimensions
        let mut p = Poly::constant(b.regions.iter().try_fold(0u64, |sum, r| sum.checked_add(r.bytes))?);
        for d in b.shape.iter().take(b.shape.len().saturating_sub(1)) {
            p = p.mul(&Poly::of(d)?)?;
        }
        return Some(p);
    }
    let mut p = Poly::constant(b.dtype.size() as u64);
    for d in b.shape.iter() {
        p = p.mul(&Poly::of(d)?)?;
    }
    Some(p)
}

/// The sum of the buffers' bytes.
pub fn bytes(buffers: &[BufferDef]) -> Option<Dim> {
    let mut total = Poly::default();
    for b in buffers {
        total = total.add(&buffer_bytes(b)?)?;
    }
    Some(total.into_dim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernelgen_contract::Dtype;

    #[test]
    fn sums_collect_like_terms() {
        let x = crate::model::array("x", Dtype::Bf16, vec![Dim::size(0), Dim::Fixed(6144)]);
        let y = crate::model::array("y", Dtype::F32, vec![Dim::Fixed(2), Dim::size(0), Dim::size(1)]);
        let w = crate::model::array("w", Dtype::U8, vec![Dim::Fixed(100)]);
        let d = bytes(&[x.clone(), y, w]).unwrap();
        assert_eq!(d.describe(&["M", "T"]), "8*M*T + 12288*M + 100");
        assert_eq!(d.eval(&[3, 5]), Some(8 * 15 + 12288 * 3 + 100));
        assert_eq!(bytes(&[x.clone(), x]).unwrap().describe(&["M"]), "24576*M");
        let odd = crate::model::array("o", Dtype::U8, vec![Dim::Expr(vec![Op::Size(0), Op::Const(4), Op::CeilDiv].into())]);
        assert_eq!(bytes(&[odd]), None);
    }
}
