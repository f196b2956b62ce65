//! A deliberately naive n-d array over `f64`, the reference the runtime's ops are checked against.

#[derive(Clone, Debug, PartialEq)]
pub struct Nd {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Nd {
    pub fn new(shape: &[usize], data: Vec<f64>) -> Nd {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Nd { shape: shape.to_vec(), data }
    }

    fn strides(shape: &[usize]) -> Vec<usize> {
        let mut s = vec![1; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            s[i] = s[i + 1] * shape[i + 1];
        }
        s
    }

    fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
        let mut idx = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
        idx
    }

    pub fn at(&self, idx: &[usize]) -> f64 {
        let s = Self::strides(&self.shape);
        self.data[idx.iter().zip(&s).map(|(i, s)| i * s).sum::<usize>()]
    }

    pub fn permute(&self, dims: &[usize]) -> Nd {
        let shape: Vec<usize> = dims.iter().map(|&d| self.shape[d]).collect();
        let n = self.data.len();
        let data = (0..n)
            .map(|i| {
                let out_idx = Self::unravel(i, &shape);
                let mut src = vec![0; dims.len()];
                for (k, &d) in dims.iter().enumerate() {
                    src[d] = out_idx[k];
                }
                self.at(&src)
            })
            .collect();
        Nd { shape, data }
    }

    pub fn broadcast_binary(&self, other: &Nd, f: impl Fn(f64, f64) -> f64) -> Option<Nd> {
        let rank = self.shape.len().max(other.shape.len());
        let pad = |s: &[usize]| {
            let mut p = vec![1; rank - s.len()];
            p.extend_from_slice(s);
            p
        };
        let (a, b) = (pad(&self.shape), pad(&other.shape));
        let mut shape = vec![0; rank];
        for d in 0..rank {
            shape[d] = if a[d] == b[d] {
                a[d]
            } else if a[d] == 1 {
                b[d]
            } else if b[d] == 1 {
                a[d]
            } else {
                return None;
            };
        }
        let n: usize = shape.iter().product();
        let (sa, sb) = (Self::strides(&a), Self::strides(&b));
        let data = (0..n)
            .map(|i| {
                let idx = Self::unravel(i, &shape);
                let ia: usize = (0..rank).map(|d| if a[d] == 1 { 0 } else { idx[d] } * sa[d]).sum();
                let ib: usize = (0..rank).map(|d| if b[d] == 1 { 0 } else { idx[d] } * sb[d]).sum();
                f(self.data[ia], other.data[ib])
            })
            .collect();
        Some(Nd { shape, data })
    }

    /// Reduces `dims` with `f` over the list of values in each group.
    pub fn reduce(&self, dims: &[usize], keepdim: bool, f: impl Fn(&[f64]) -> f64) -> Nd {
        let out_shape_keep: Vec<usize> =
            self.shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect();
        let n_out: usize = out_shape_keep.iter().product();
        let mut groups = vec![Vec::new(); n_out];
        let so = Self::strides(&out_shape_keep);
        for i in 0..self.data.len() {
            let idx = Self::unravel(i, &self.shape);
            let o: usize =
                idx.iter().enumerate().map(|(d, &x)| if dims.contains(&d) { 0 } else { x * so[d] }).sum();
            groups[o].push(self.data[i]);
        }
        let data = groups.iter().map(|g| f(g)).collect();
        let shape = if keepdim {
            out_shape_keep
        } else {
            self.shape.iter().enumerate().filter(|(d, _)| !dims.contains(d)).map(|(_, &n)| n).collect()
        };
        Nd { shape, data }
    }

    /// Batched matmul of `[.., m, k] @ [.., k, n]` with equal batch dims.
    pub fn matmul(&self, other: &Nd) -> Nd {
        let r = self.shape.len();
        let (m, k, n) = (self.shape[r - 2], self.shape[r - 1], other.shape[r - 1]);
        let batch: usize = self.shape[..r - 2].iter().product();
        let mut data = Vec::with_capacity(batch * m * n);
        for b in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0;
                    for p in 0..k {
                        acc += self.data[b * m * k + i * k + p] * other.data[b * k * n + p * n + j];
                    }
                    data.push(acc);
                }
            }
        }
        let mut shape = self.shape[..r - 2].to_vec();
        shape.extend([m, n]);
        Nd { shape, data }
    }
}

pub fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "length differs");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a - e).abs() <= tol * (1.0 + e.abs()) || (a.is_nan() && e.is_nan());
        assert!(ok, "element {i}: got {a}, expected {e} (tolerance {tol})");
    }
}
