//! Rust numbers as operands of array ops: [`Scalar`], [`Operand`], and the
//! dtype a scalar takes.
//!
//! # A scalar's dtype comes from its Rust type, never from its value
//!
//! Scalars are *weak*, as Python numbers are in NumPy 2 (NEP 50) and MLX: a
//! scalar beside an array takes a dtype from the array and from its own
//! *kind* (bool, integer or float: the Rust type's), never from its value,
//! so `x * 1.0` and `x * 1.5` have one dtype.
//!
//! | array | bool scalar | integer scalar (`i32`, `u32`, `i64`, `usize`, ...) | float scalar (`f32`, `f64`, `f16`, `bf16`) |
//! |---|---|---|---|
//! | bool | bool | the scalar's type: i32 for signed, u32 for unsigned | f32 (the default float) |
//! | i8, u8, i16, u16, i32, u32 | the array's | the array's | f32 (the default float) |
//! | f32, f16, bf16, f64 | the array's | the array's | the array's |
//!
//! The op then runs as it would on two arrays of those dtypes (so
//! `i32 / 2` is f32, `x > 0` is bool). An integer scalar that the array's
//! integer dtype cannot hold (`u32_array + -1`, `i8_array + 200`,
//! `i32_array * 3_000_000_000u32`)
//! is refused with [`crate::Error::InvalidArgument`], as NumPy 2 refuses
//! `uint32_array + -1`; a comparison with one has its answer anyway
//! (`u32_array.greater(-1)` is all true), as in NumPy 2. Float scalars are rounded to the
//! array's float dtype (to nearest even; past f16's range they become
//! infinite, as NumPy's casts do).
//!
//! Two scalars together (`where_(&cond, 1.0, 0)`) each take their own type's
//! dtype (f64 as f32, the default float; i64 and isize as i32; u64 and usize
//! as u32), then promote as two arrays do.
//!
//! # Operators
//!
//! `+ - * / %` take every mix of owned and borrowed arrays (`a + b`,
//! `&a + &b`, `a + &b`, `&a + b`), any [`Scalar`] on the right
//! (`&a * 0.5f32`, `&a + 1u32`, `a - true`), and `f64`, `i32` or `bool`
//! on the left (`2.0 * &a`, `1 - &a`); unary `-` takes `a` and `&a`. Each
//! gives `Result<Array>`. The left side has one float and one integer type, as
//! candle's `f64`, so that an unsuffixed literal there is unambiguous:
//! with a second one, `(2.0 * &a)?` would not compile (Rust cannot pick
//! the literal's type before `?` needs the result's). The methods take
//! the same operands: `a.add(&b)`, `a.maximum(0.0)`, `a.greater(1)`
//! ([`Operand`]).
//!
//! A scalar never makes a buffer: it is recorded as a lazy 0-d
//! [`crate::Array::full`] constant, which kernels read as a parameter.

use std::fmt;

use crate::{Array, DType, Device, Error, Result};

pub(crate) mod sealed {
    use crate::{Array, DType};

    /// A scalar's value, exact for every type that implements
    /// [`super::Scalar`].
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Value {
        Bool(bool),
        Int(i128),
        Float(f64),
    }

    /// One operand of an elementwise op: an array, or a scalar with the
    /// dtype its Rust type has on its own.
    pub enum Arg {
        Array(Array),
        Scalar { value: Value, dtype: DType },
    }

    pub trait Sealed {}
}

use sealed::{Arg, Value};

/// A Rust number that ops take beside arrays: `f32`, `f64`, [`half::f16`],
/// [`half::bf16`], `i32`, `u32`, `i64`, `u64`, `isize`, `usize` and
/// `bool`. Its dtype beside an array follows the module's table (weak
/// scalars, NEP 50). A literal with no suffix is `f64` or `i32`, as
/// everywhere in Rust.
///
/// On the right of an operator every one of them works (`&a * s`). On the
/// left, `f64`, `i32`, `bool`, [`half::f16`] and [`half::bf16`] do
/// (`2.0 * &a`, `1 - &a`): with a second float or integer type there, an
/// unsuffixed literal could be either, and `(2.0 * &a)?.exp()` or
/// `-5 + &u` would stop compiling ("type annotations needed"), as in
/// candle, whose scalars on the left are `f64` only. For another type on
/// the left, put it on the right where the op commutes (`&a * s`), or
/// widen it (`f64::from(s) * &a` for an `f32`: the same result, the
/// scalar being weak either way), or make it an array
/// (`&Array::scalar(s, DType::U32, &device)? - &a` for a `u32` past
/// `i32::MAX`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a scalar that wgarray's ops take",
    label = "expected an array or a Rust number here",
    note = "wgarray's scalars are f32, f64, half::f16, half::bf16, i32, u32, i64, u64, isize, usize and bool",
    note = "an op returns `wgarray::Result<Array>`: if this is one, add `?` after it (`&a - (2.0 * &b.matmul(&c)?)?`)"
)]
pub trait Scalar: Copy + Send + Sync + fmt::Debug + 'static + sealed::Sealed {
    /// The dtype the type has on its own, where no array gives one: `f64`
    /// is f32 (the default float), the wide integers the 32-bit one of
    /// their sign.
    const DTYPE: DType;

    #[doc(hidden)]
    fn value(self) -> Value;
}

macro_rules! scalars {
    ($($t:ty => $dtype:expr, $v:ident => $value:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            const DTYPE: DType = $dtype;
            fn value(self) -> Value {
                let $v = self;
                $value
            }
        }
    )*};
}

scalars! {
    f32 => DType::F32, x => Value::Float(x as f64);
    f64 => DType::F32, x => Value::Float(x);
    half::f16 => DType::F16, x => Value::Float(x.to_f64());
    half::bf16 => DType::BF16, x => Value::Float(x.to_f64());
    i32 => DType::I32, x => Value::Int(x as i128);
    i64 => DType::I32, x => Value::Int(x as i128);
    isize => DType::I32, x => Value::Int(x as i128);
    u32 => DType::U32, x => Value::Int(x as i128);
    u64 => DType::U32, x => Value::Int(x as i128);
    usize => DType::U32, x => Value::Int(x as i128);
    bool => DType::Bool, x => Value::Bool(x);
}

/// What binary ops take as their other operand: an [`Array`] (by
/// reference or by value) or a [`Scalar`]. `a.add(&b)`, `a.add(b)`,
/// `a.maximum(0.0)` and `a.greater(1)` all work, as do the operators
/// (`&a + &b`, `&a * 2.0`, `2.0 * &a`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is neither an array nor a scalar that wgarray's ops take",
    label = "expected `&Array`, `Array` or a Rust number here",
    note = "an op returns `wgarray::Result<Array>`: if this is one, add `?` after it (`&a - (2.0 * &b.matmul(&c)?)?`)"
)]
pub trait Operand {
    #[doc(hidden)]
    fn into_arg(self) -> Arg;
}

impl Operand for &Array {
    fn into_arg(self) -> Arg {
        Arg::Array(self.clone())
    }
}

impl Operand for Array {
    fn into_arg(self) -> Arg {
        Arg::Array(self)
    }
}

impl<S: Scalar> Operand for S {
    fn into_arg(self) -> Arg {
        Arg::Scalar {
            value: self.value(),
            dtype: S::DTYPE,
        }
    }
}

/// The most and least values of an integer dtype (not bool: anything
/// converts to bool as `!= 0`).
fn int_range(dtype: DType) -> Option<(i128, i128)> {
    if !dtype.is_integer() {
        return None;
    }
    dtype
        .integer_range()
        .map(|(lo, hi)| (i128::from(lo), i128::from(hi)))
}

impl Value {
    /// The value as an f64 (rounded for integers past 2^53).
    pub(crate) fn to_f64(self) -> f64 {
        match self {
            Value::Bool(b) => f64::from(u8::from(b)),
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
        }
    }

    /// The dtype a scalar of this kind, whose own type's dtype is `own`,
    /// takes beside an array of dtype `array` (the module's table).
    pub(crate) fn weak_dtype(self, own: DType, array: DType) -> DType {
        match self {
            Value::Bool(_) => array,
            Value::Int(_) if array == DType::Bool => own,
            Value::Int(_) => array,
            Value::Float(_) if array.is_float() => array,
            Value::Float(_) => DType::F32,
        }
    }

    /// Where an integer value lies against `dtype`'s range: `Less` below
    /// it, `Greater` above it, `Equal` inside it (and for every value of
    /// another kind or dtype).
    pub(crate) fn range_check(self, dtype: DType) -> std::cmp::Ordering {
        match (self, int_range(dtype)) {
            (Value::Int(i), Some((lo, _))) if i < lo => std::cmp::Ordering::Less,
            (Value::Int(i), Some((_, hi))) if i > hi => std::cmp::Ordering::Greater,
            _ => std::cmp::Ordering::Equal,
        }
    }

    /// The bits of the value as `dtype`, in the low
    /// [`DType::size_in_bytes`] bytes (as [`DType::bits_of`] gives them):
    /// floats round to nearest even (f64 keeps them); floats into integers
    /// truncate toward zero and saturate (NaN is 0), as `astype`; anything
    /// into bool is `!= 0`; an integer into an integer dtype is exact.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `op` for an integer outside an
    /// integer dtype's range.
    pub(crate) fn bits(self, op: &'static str, dtype: DType) -> Result<u64> {
        match self {
            Value::Int(i) if dtype.is_integer() => {
                if self.range_check(dtype) != std::cmp::Ordering::Equal {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: the scalar {i} is out of range for {dtype} \
                         (NumPy 2 refuses it too); cast the array to a wider dtype first"
                    )));
                }
                let width = 8 * dtype.size_in_bytes() as u32;
                Ok(i as u64 & (u64::MAX >> (64 - width)))
            }
            _ => Ok(dtype.bits_of(self.to_f64())),
        }
    }

    /// The value as a lazy 0-d constant of `dtype` on `device` (no buffer:
    /// kernels read it as a parameter).
    ///
    /// # Errors
    /// As [`Value::bits`].
    #[track_caller]
    pub(crate) fn constant(self, op: &'static str, dtype: DType, device: &Device) -> Result<Array> {
        let bits = self.bits(op, dtype)?;
        Ok(Array::operand_constant(bits, dtype, device))
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_dtypes_follow_the_kind_not_the_value() {
        use DType::*;
        for array in DType::ALL {
            // 1.0 and 1.5: one dtype.
            assert_eq!(
                1.0f64.value().weak_dtype(f64::DTYPE, array),
                1.5f64.value().weak_dtype(f64::DTYPE, array)
            );
        }
        assert_eq!(2.0f64.value().weak_dtype(F32, I32), F32);
        assert_eq!(2.0f32.value().weak_dtype(F32, F16), F16);
        assert_eq!(2i32.value().weak_dtype(I32, BF16), BF16);
        assert_eq!(2i32.value().weak_dtype(I32, U32), U32);
        assert_eq!(2u32.value().weak_dtype(U32, Bool), U32);
        assert_eq!(2usize.value().weak_dtype(usize::DTYPE, Bool), U32);
        assert_eq!(2i64.value().weak_dtype(i64::DTYPE, Bool), I32);
        assert_eq!(true.value().weak_dtype(Bool, I32), I32);
    }

    #[test]
    fn bits_are_exact_and_out_of_range_integers_are_refused() {
        assert_eq!((-1i32).value().bits("t", DType::I32).unwrap(), 0xffff_ffff);
        assert_eq!(u32::MAX.value().bits("t", DType::U32).unwrap(), 0xffff_ffff);
        assert_eq!((-1i32).value().bits("t", DType::I8).unwrap(), 0xff);
        assert_eq!((-2i32).value().bits("t", DType::I16).unwrap(), 0xfffe);
        assert_eq!(255u32.value().bits("t", DType::U8).unwrap(), 0xff);
        assert!((-1i32).value().bits("t", DType::U32).is_err());
        assert!((-1i32).value().bits("t", DType::U8).is_err());
        assert!(128i32.value().bits("t", DType::I8).is_err());
        assert!(65536u32.value().bits("t", DType::U16).is_err());
        assert!(3_000_000_000u32.value().bits("t", DType::I32).is_err());
        assert_eq!(
            16777217i32.value().bits("t", DType::F32).unwrap(),
            u64::from(16777216f32.to_bits())
        );
        assert_eq!(
            16777217i32.value().bits("t", DType::F64).unwrap(),
            16777217f64.to_bits()
        );
        assert_eq!(
            0.1f64.value().bits("t", DType::F64).unwrap(),
            0.1f64.to_bits()
        );
        assert_eq!(1.5f64.value().bits("t", DType::Bool).unwrap(), 1);
        assert_eq!(7i32.value().bits("t", DType::Bool).unwrap(), 1);
    }
}
