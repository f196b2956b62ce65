//! Operator sugar: `&a + &b`, `&a * 2.0`, `-&a`. The `Result` methods are the primary API; an
//! operator cannot return an error, so a failing one panics with the same rendered diagnostic,
//! reported at the caller's line.

use std::ops::{Add, Div, Mul, Neg, Sub};

use super::Tensor;
use crate::error::Result;

#[track_caller]
fn or_panic(result: Result<Tensor>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("{}", e.render(100)),
    }
}

macro_rules! binary_sugar {
    ($trait:ident, $method:ident, $scalar:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                or_panic(Tensor::$method(self, rhs))
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                or_panic(Tensor::$method(&self, &rhs))
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                or_panic(Tensor::$method(&self, rhs))
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                or_panic(Tensor::$method(self, &rhs))
            }
        }
        impl $trait<f64> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: f64) -> Tensor {
                or_panic(self.$scalar(rhs))
            }
        }
        impl $trait<f64> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: f64) -> Tensor {
                or_panic(self.$scalar(rhs))
            }
        }
    };
}

binary_sugar!(Add, add, add_scalar);
binary_sugar!(Sub, sub, sub_scalar);
binary_sugar!(Mul, mul, mul_scalar);
binary_sugar!(Div, div, div_scalar);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        or_panic(Tensor::neg(self))
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        or_panic(Tensor::neg(&self))
    }
}
