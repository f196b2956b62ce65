//! The CPU kernel of every element-wise op, as a method of [`CpuStorage`]: arithmetic, with a
//! scalar, comparisons, logic, unary functions, selection, and a copy into an existing buffer.
//! The op front end (`src/tensor/ops/`) calls them with operands it has checked; each picks the
//! loop for its op and dtype, and the loops (strided walks, broadcasting, threads) are in
//! `kernels.rs`.

use super::{
    Arith, CpuStorage, Float, binary_map, binary_map_into, select, unary_map, unary_map_near, with_storage,
};
use crate::backend::op::{BinaryOp, CmpOp, GELU_TANH_CUBIC, LogicalOp, UnaryOp};
use crate::dtype::WithDType;
use crate::shape::Layout;

impl CpuStorage {
    /// `op(lhs, rhs)` over the broadcast of both views to `shape`.
    pub(crate) fn binary(
        &self,
        op: BinaryOp,
        layout: &Layout,
        rhs: &CpuStorage,
        rhs_layout: &Layout,
        shape: &[usize],
    ) -> CpuStorage {
        float_binary(op, self, layout, rhs, rhs_layout, shape)
    }

    /// [`CpuStorage::binary`] written into this storage's elements from `offset` on (a
    /// contiguous `out` of `shape`).
    pub(crate) fn binary_into(
        &mut self,
        offset: usize,
        op: BinaryOp,
        lhs: (&CpuStorage, &Layout),
        rhs: (&CpuStorage, &Layout),
        shape: &[usize],
    ) {
        binary_into(op, (self, offset), lhs, rhs, shape)
    }

    /// `op(x, value)` for every element, or `op(value, x)` when `reversed`; the scalar takes
    /// this storage's dtype.
    pub(crate) fn binary_scalar(
        &self,
        op: BinaryOp,
        layout: &Layout,
        value: f64,
        reversed: bool,
    ) -> CpuStorage {
        fn run<T: Arith>(
            f: impl Fn(T, T) -> T + Sync,
            v: &[T],
            l: &Layout,
            value: f64,
            rev: bool,
        ) -> CpuStorage {
            let c = T::from_f64(value);
            CpuStorage::from_vec(if rev {
                unary_map(v, l, |x| f(c, x))
            } else {
                unary_map(v, l, |x| f(x, c))
            })
        }
        fn float<T: Float>(op: BinaryOp, v: &[T], l: &Layout, value: f64, rev: bool) -> CpuStorage {
            match op {
                BinaryOp::Add => run(|a: T, b| a.add(b), v, l, value, rev),
                BinaryOp::Sub => run(|a: T, b| a.sub(b), v, l, value, rev),
                BinaryOp::Mul => run(|a: T, b| a.mul(b), v, l, value, rev),
                BinaryOp::Div => run(|a: T, b| a.div(b), v, l, value, rev),
                _ => run(binary_kernel::<T>(op), v, l, value, rev),
            }
        }
        let l = layout;
        match self {
            CpuStorage::F32(v) => float(op, v, l, value, reversed),
            CpuStorage::F64(v) => float(op, v, l, value, reversed),
            CpuStorage::F16(v) => float(op, v, l, value, reversed),
            CpuStorage::BF16(v) => float(op, v, l, value, reversed),
            CpuStorage::I64(v) => run(binary_kernel::<i64>(op), v, l, value, reversed),
            CpuStorage::I32(v) => run(binary_kernel::<i32>(op), v, l, value, reversed),
            CpuStorage::U8(v) => run(binary_kernel::<u8>(op), v, l, value, reversed),
            CpuStorage::Bool(_) => unreachable!("bool arithmetic is rejected by the front end"),
        }
    }

    /// `op(lhs, rhs)` as bool over the broadcast of both views to `shape`.
    pub(crate) fn compare(
        &self,
        op: CmpOp,
        layout: &Layout,
        rhs: &CpuStorage,
        rhs_layout: &Layout,
        shape: &[usize],
    ) -> CpuStorage {
        macro_rules! run {
            ($($v:ident),*) => {
                match (self, rhs) {
                    $((CpuStorage::$v(a), CpuStorage::$v(b)) => CpuStorage::from_vec(
                        binary_map(a, layout, b, rhs_layout, shape, cmp_kernel(op)),
                    ),)*
                    _ => unreachable!("same_dtype checked"),
                }
            };
        }
        run!(F32, F64, F16, BF16, I64, I32, U8, Bool)
    }

    /// `op(x, value)` as bool for every element; the scalar takes this storage's dtype.
    pub(crate) fn compare_scalar(&self, op: CmpOp, layout: &Layout, value: f64) -> CpuStorage {
        with_storage!(self, v => {
            let c = WithDType::from_f64(value);
            let f = cmp_kernel(op);
            CpuStorage::from_vec(unary_map(v, layout, |x| f(x, c)))
        })
    }

    /// `op(lhs, rhs)` of two bool views over their broadcast to `shape`.
    pub(crate) fn logical(
        &self,
        op: LogicalOp,
        layout: &Layout,
        rhs: &CpuStorage,
        rhs_layout: &Layout,
        shape: &[usize],
    ) -> CpuStorage {
        let f: fn(bool, bool) -> bool = match op {
            LogicalOp::And => |a, b| a && b,
            LogicalOp::Or => |a, b| a || b,
        };
        match (self, rhs) {
            (CpuStorage::Bool(a), CpuStorage::Bool(b)) => {
                CpuStorage::Bool(binary_map(a, layout, b, rhs_layout, shape, f))
            }
            _ => unreachable!("dtype checked"),
        }
    }

    /// Not, of a bool view.
    pub(crate) fn logical_not(&self, layout: &Layout) -> CpuStorage {
        match self {
            CpuStorage::Bool(v) => CpuStorage::Bool(unary_map(v, layout, |x: bool| !x)),
            _ => unreachable!("dtype checked"),
        }
    }

    /// `op(x)` for every element, same dtype out.
    pub(crate) fn unary(&self, op: UnaryOp, layout: &Layout) -> CpuStorage {
        let l = layout;
        match self {
            CpuStorage::F32(v) => CpuStorage::F32(unary_kernel(op, v, l)),
            CpuStorage::F64(v) => CpuStorage::F64(unary_kernel(op, v, l)),
            CpuStorage::F16(v) => CpuStorage::F16(unary_kernel(op, v, l)),
            CpuStorage::BF16(v) => CpuStorage::BF16(unary_kernel(op, v, l)),
            CpuStorage::I64(v) => CpuStorage::I64(int_unary(op, v, l)),
            CpuStorage::I32(v) => CpuStorage::I32(int_unary(op, v, l)),
            CpuStorage::U8(v) => CpuStorage::U8(int_unary(op, v, l)),
            CpuStorage::Bool(_) => unreachable!("dtype checked"),
        }
    }

    /// These elements where `cond` (bool) holds, else `on_false`'s, over the broadcast of the
    /// three views to `shape` (`torch.where(cond, self, on_false)`).
    pub(crate) fn where_cond(
        &self,
        layout: &Layout,
        cond: &CpuStorage,
        cond_layout: &Layout,
        on_false: &CpuStorage,
        false_layout: &Layout,
        shape: &[usize],
    ) -> CpuStorage {
        let CpuStorage::Bool(c) = cond else { unreachable!("dtype checked") };
        let (tl, fl) = (layout, false_layout);
        macro_rules! run {
            ($($v:ident),*) => {
                match (self, on_false) {
                    $((CpuStorage::$v(a), CpuStorage::$v(b)) => {
                        CpuStorage::$v(select(c, cond_layout, (a, tl), (b, fl), shape))
                    })*
                    _ => unreachable!("same_dtype checked"),
                }
            };
        }
        run!(F32, F64, F16, BF16, I64, I32, U8, Bool)
    }

    /// `value` where `mask` (bool, broadcast to this view's shape) holds, the element elsewhere.
    pub(crate) fn masked_fill(
        &self,
        layout: &Layout,
        mask: &CpuStorage,
        mask_layout: &Layout,
        value: f64,
    ) -> CpuStorage {
        let CpuStorage::Bool(m) = mask else { unreachable!("dtype checked") };
        with_storage!(self, v => {
            let fill = WithDType::from_f64(value);
            CpuStorage::from_vec(binary_map(v, layout, m, mask_layout, &layout.shape,
                move |x, masked: bool| if masked { fill } else { x }))
        })
    }

    /// The elements on and above (`upper`) or on and below the `diagonal`-th diagonal of the
    /// last two dims, zero elsewhere.
    pub(crate) fn triangle(&self, layout: &Layout, diagonal: i64, upper: bool) -> CpuStorage {
        let rank = layout.rank();
        let (rows, cols) = (layout.shape[rank - 2], layout.shape[rank - 1]);
        with_storage!(self, v => {
            let zero = WithDType::from_f64(0.0);
            CpuStorage::from_vec(layout.offsets().enumerate().map(|(i, o)| {
                let (r, c) = (((i / cols.max(1)) % rows.max(1)) as i64, (i % cols.max(1)) as i64);
                let keep = if upper { c - r >= diagonal } else { c - r <= diagonal };
                if keep { v[o] } else { zero }
            }).collect())
        })
    }

    /// Copies the view `src` (this storage's dtype) over this storage's elements from `offset` on.
    pub(crate) fn overwrite(&mut self, offset: usize, src: &CpuStorage, src_layout: &Layout) {
        let from = src.gather(src_layout);
        with_storage!(&from, v => copy_into(self, offset, v));
    }
}

fn binary_kernel<T: Arith>(op: BinaryOp) -> fn(T, T) -> T {
    match op {
        BinaryOp::Add => T::add,
        BinaryOp::Sub => T::sub,
        BinaryOp::Mul => T::mul,
        BinaryOp::Pow => T::pow,
        BinaryOp::Maximum => T::maximum,
        BinaryOp::Minimum => T::minimum,
        // Division is float-only (checked by the front end) and dispatched separately.
        BinaryOp::Div => T::sub,
    }
}

fn cmp_kernel<T: PartialOrd>(op: CmpOp) -> fn(T, T) -> bool {
    match op {
        CmpOp::Eq => |a, b| a == b,
        CmpOp::Ne => |a, b| a != b,
        CmpOp::Lt => |a, b| a < b,
        CmpOp::Le => |a, b| a <= b,
        CmpOp::Gt => |a, b| a > b,
        CmpOp::Ge => |a, b| a >= b,
    }
}

fn float_binary(
    op: BinaryOp,
    a: &CpuStorage,
    la: &Layout,
    b: &CpuStorage,
    lb: &Layout,
    shape: &[usize],
) -> CpuStorage {
    fn run<T: Float>(
        op: BinaryOp,
        a: &[T],
        la: &Layout,
        b: &[T],
        lb: &Layout,
        shape: &[usize],
    ) -> CpuStorage {
        let out = match op {
            // Monomorphised per op so each loop vectorises.
            BinaryOp::Add => binary_map(a, la, b, lb, shape, |x, y| x.add(y)),
            BinaryOp::Sub => binary_map(a, la, b, lb, shape, |x, y| x.sub(y)),
            BinaryOp::Mul => binary_map(a, la, b, lb, shape, |x, y| x.mul(y)),
            BinaryOp::Div => binary_map(a, la, b, lb, shape, |x, y| x.div(y)),
            _ => binary_map(a, la, b, lb, shape, binary_kernel::<T>(op)),
        };
        CpuStorage::from_vec(out)
    }
    match (a, b) {
        (CpuStorage::F32(a), CpuStorage::F32(b)) => run(op, a, la, b, lb, shape),
        (CpuStorage::F64(a), CpuStorage::F64(b)) => run(op, a, la, b, lb, shape),
        (CpuStorage::F16(a), CpuStorage::F16(b)) => run(op, a, la, b, lb, shape),
        (CpuStorage::BF16(a), CpuStorage::BF16(b)) => run(op, a, la, b, lb, shape),
        _ => int_binary(op, a, la, b, lb, shape),
    }
}

fn int_binary(
    op: BinaryOp,
    a: &CpuStorage,
    la: &Layout,
    b: &CpuStorage,
    lb: &Layout,
    shape: &[usize],
) -> CpuStorage {
    fn run<T: Arith>(
        op: BinaryOp,
        a: &[T],
        la: &Layout,
        b: &[T],
        lb: &Layout,
        shape: &[usize],
    ) -> CpuStorage {
        CpuStorage::from_vec(binary_map(a, la, b, lb, shape, binary_kernel::<T>(op)))
    }
    match (a, b) {
        (CpuStorage::I64(a), CpuStorage::I64(b)) => run(op, a, la, b, lb, shape),
        (CpuStorage::I32(a), CpuStorage::I32(b)) => run(op, a, la, b, lb, shape),
        (CpuStorage::U8(a), CpuStorage::U8(b)) => run(op, a, la, b, lb, shape),
        _ => unreachable!("binary op dispatched with dtypes the front end rejects"),
    }
}

/// [`float_binary`]/[`int_binary`] writing into `out`'s contiguous slice starting at `offset`.
fn binary_into(
    op: BinaryOp,
    (out, offset): (&mut CpuStorage, usize),
    (a, la): (&CpuStorage, &Layout),
    (b, lb): (&CpuStorage, &Layout),
    shape: &[usize],
) {
    let n: usize = shape.iter().product();
    fn float<T: Float>(
        op: BinaryOp,
        o: &mut [T],
        a: &[T],
        la: &Layout,
        b: &[T],
        lb: &Layout,
        shape: &[usize],
    ) {
        match op {
            BinaryOp::Add => binary_map_into(o, a, la, b, lb, shape, |x, y| x.add(y)),
            BinaryOp::Sub => binary_map_into(o, a, la, b, lb, shape, |x, y| x.sub(y)),
            BinaryOp::Mul => binary_map_into(o, a, la, b, lb, shape, |x, y| x.mul(y)),
            BinaryOp::Div => binary_map_into(o, a, la, b, lb, shape, |x, y| x.div(y)),
            _ => binary_map_into(o, a, la, b, lb, shape, binary_kernel::<T>(op)),
        }
    }
    fn int<T: Arith>(op: BinaryOp, o: &mut [T], a: &[T], la: &Layout, b: &[T], lb: &Layout, shape: &[usize]) {
        binary_map_into(o, a, la, b, lb, shape, binary_kernel::<T>(op))
    }
    match (out, a, b) {
        (CpuStorage::F32(o), CpuStorage::F32(a), CpuStorage::F32(b)) => {
            float(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        (CpuStorage::F64(o), CpuStorage::F64(a), CpuStorage::F64(b)) => {
            float(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        (CpuStorage::F16(o), CpuStorage::F16(a), CpuStorage::F16(b)) => {
            float(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        (CpuStorage::BF16(o), CpuStorage::BF16(a), CpuStorage::BF16(b)) => {
            float(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        (CpuStorage::I64(o), CpuStorage::I64(a), CpuStorage::I64(b)) => {
            int(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        (CpuStorage::I32(o), CpuStorage::I32(a), CpuStorage::I32(b)) => {
            int(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        (CpuStorage::U8(o), CpuStorage::U8(a), CpuStorage::U8(b)) => {
            int(op, &mut o[offset..offset + n], a, la, b, lb, shape)
        }
        _ => unreachable!("binary_into dispatched with dtypes the front end rejects"),
    }
}

fn unary_kernel<T: Float>(op: UnaryOp, data: &[T], layout: &Layout) -> Vec<T> {
    let half = T::from_f32(0.5);
    match op {
        UnaryOp::Neg => unary_map(data, layout, |x: T| x.neg()),
        UnaryOp::Abs => unary_map(data, layout, |x: T| x.abs()),
        UnaryOp::Relu => unary_map(data, layout, |x: T| if x > T::ZERO { x } else { T::ZERO }),
        UnaryOp::Exp => unary_map(data, layout, |x: T| x.exp()),
        UnaryOp::Log => unary_map(data, layout, |x: T| x.ln()),
        UnaryOp::Sqrt => unary_map(data, layout, |x: T| x.sqrt()),
        UnaryOp::Rsqrt => unary_map(data, layout, |x: T| T::ONE.div(x.sqrt())),
        UnaryOp::Tanh => unary_map(data, layout, |x: T| x.tanh()),
        UnaryOp::Sigmoid => unary_map(data, layout, |x: T| T::ONE.div(T::ONE.add(x.neg().exp()))),
        // x Φ(x) = x/2 erfc(-x/√2): `1 + erf(..)` would cancel to a few digits for x << 0.
        // Blocks of inputs all within 4 of 0 (erfc's near range) take erfc's shorter form.
        UnaryOp::Gelu => {
            let minus_inv_sqrt2 = T::from_f64(-std::f64::consts::FRAC_1_SQRT_2);
            unary_map_near(
                data,
                layout,
                #[inline(always)]
                move |x: T| x.mul(minus_inv_sqrt2).erfc_is_near(),
                #[inline(always)]
                move |x: T| half.mul(x).mul(x.mul(minus_inv_sqrt2).erfc_with_gaussian_near().0),
                #[inline(always)]
                move |x: T| half.mul(x).mul(x.mul(minus_inv_sqrt2).erfc()),
            )
        }
        // x/2 (1 + tanh(u)) = x / (1 + e^(-2u)), u = √(2/π) (x + 0.044715 x³): the same
        // cancellation-free rewrite.
        UnaryOp::GeluTanh => {
            let minus_two_k = T::from_f64(-2.0 * (2.0 / std::f64::consts::PI).sqrt());
            let cubic = T::from_f64(GELU_TANH_CUBIC);
            unary_map(data, layout, move |x: T| {
                let inner = x.add(cubic.mul(x).mul(x).mul(x));
                x.div(T::ONE.add(minus_two_k.mul(inner).exp()))
            })
        }
        UnaryOp::Silu => unary_map(data, layout, |x: T| x.div(T::ONE.add(x.neg().exp()))),
        UnaryOp::Sin => unary_map(data, layout, |x: T| x.sin()),
        UnaryOp::Cos => unary_map(data, layout, |x: T| x.cos()),
    }
}

fn int_unary<T: Arith>(op: UnaryOp, data: &[T], layout: &Layout) -> Vec<T> {
    match op {
        UnaryOp::Neg => unary_map(data, layout, |x: T| x.neg()),
        UnaryOp::Abs => unary_map(data, layout, |x: T| x.abs()),
        _ => unary_map(data, layout, |x: T| if x > T::ZERO { x } else { T::ZERO }),
    }
}

/// Copies `src` into `dst` at `offset` (same dtype, checked by the caller).
fn copy_into<T: WithDType>(dst: &mut CpuStorage, offset: usize, src: &[T]) {
    with_storage!(dst, d => {
        if let Some(d) = (d as &mut dyn std::any::Any).downcast_mut::<Vec<T>>() {
            d[offset..offset + src.len()].copy_from_slice(src);
        }
    })
}
