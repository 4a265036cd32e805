//! Elementwise operations: unary math, binary arithmetic and comparisons
//! with NumPy broadcasting, logical ops, `where_`, and `astype`.
//!
//! # Type promotion
//!
//! A NumPy-like subset, as MLX does it (floats win over integers):
//!
//! | operands | result |
//! |---|---|
//! | same dtype | that dtype |
//! | bool with any X | X |
//! | int (i32, u32) with a float | the float |
//! | i32 with u32 | i32 (NumPy gives int64, which WGSL lacks) |
//! | f16 with bf16, or either with f32 | f32 |
//!
//! A scalar (`&a + 2.0`, `a.maximum(0.0)`) is weak, as in NumPy 2 (NEP
//! 50) and MLX: its dtype comes from the array and from its Rust type's
//! kind, never from its value; see [`crate::scalar`] for the table.
//!
//! Every op computes in f32 for every float dtype (f16 and bf16 are decoded
//! from their bits and the result rounded to nearest even, so no
//! `SHADER_F16` is needed), in i32 or u32 for integers. `divide` and the
//! float-only unary ops (exp, log, ...) turn integer input into f32.
//! Integer division by zero gives 0 (NumPy warns and gives 0).

use crate::graph::Primitive;
use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};
use crate::scalar::sealed::{Arg, Value};
use crate::shape::broadcast_shapes;
use crate::{Array, DType, Operand, Result, Scalar};

/// The dtype two arrays promote to (the module docs' table; NumPy's
/// `promote_types` on the dtypes wgarray has).
///
/// Differs from NumPy and MLX on purpose: i32 with u32 gives i32, where
/// both give int64, which WGSL lacks (u32 values past `i32::MAX` wrap to
/// negative numbers); f16 with bf16 gives f32, as in MLX.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    match (a, b) {
        (x, y) if x == y => x,
        (Bool, x) | (x, Bool) => x,
        (I32, U32) | (U32, I32) => I32,
        (x, y) if x.is_float() && !y.is_float() => x,
        (x, y) if y.is_float() && !x.is_float() => y,
        _ => F32,
    }
}

impl Array {
    /// Record an elementwise node over `inputs` broadcast together.
    #[track_caller]
    fn elementwise(
        op: ElementwiseOp,
        name: &'static str,
        inputs: &[&Array],
        out: DType,
    ) -> Result<Array> {
        let shape = broadcast_all(name, inputs)?;
        Ok(Array::from_node(
            inputs[0].device(),
            Primitive::Elementwise(op),
            inputs.iter().map(|a| (*a).clone()).collect(),
            vec![(shape, out)],
        )
        .pop()
        .expect("one output"))
    }

    /// This array converted to `dtype` (NumPy `astype`): floats to f16/bf16
    /// round to nearest even, bit for bit as the `half` crate; floats to
    /// integers truncate toward zero and saturate (WGSL conversion); anything
    /// to bool is `x != 0`. The same dtype gives the same array.
    ///
    /// # Errors
    /// None today; `Result` for symmetry with the other ops.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Result<Array> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        Array::elementwise(ElementwiseOp::Cast, "astype", &[self], dtype)
    }

    /// The same values laid out densely in row-major order (MLX
    /// `contiguous`). Lazy: at eval, an input that is already dense is shared
    /// as it is (no kernel); a strided view (transpose, step slice,
    /// broadcast) is copied by one dispatch.
    ///
    /// # Errors
    /// None today; `Result` so that every op composes with `?`.
    #[track_caller]
    pub fn contiguous(&self) -> Result<Array> {
        Ok(Array::from_node(
            self.device(),
            Primitive::View(crate::graph::View::Contiguous),
            vec![self.clone()],
            vec![(self.shape().to_vec(), self.dtype())],
        )
        .pop()
        .expect("one output"))
    }

    #[track_caller]
    fn unary(&self, op: UnaryOp, name: &'static str) -> Result<Array> {
        let out = match op {
            UnaryOp::LogicalNot => DType::Bool,
            _ if op.takes_integers() || self.dtype().is_float() => self.dtype(),
            _ => DType::F32,
        };
        Array::elementwise(ElementwiseOp::Unary(op), name, &[self], out)
    }

    /// `self op other`, with `other` an array or a scalar.
    #[track_caller]
    fn binary(&self, other: impl Operand, op: BinaryOp) -> Result<Array> {
        let name = op.name();
        let other = match other.into_arg() {
            Arg::Array(b) => b,
            Arg::Scalar { value, dtype } => {
                if let Some(answer) = out_of_range_comparison(op, value, self.dtype()) {
                    return Array::full(self.shape(), answer, DType::Bool, self.device());
                }
                let value = if matches!(op, BinaryOp::LogicalAnd | BinaryOp::LogicalOr) {
                    // Only the truth of the scalar matters.
                    Value::Bool(value.to_f64() != 0.0)
                } else {
                    value
                };
                value.constant(name, value.weak_dtype(dtype, self.dtype()), self.device())?
            }
        };
        self.binary_arrays(&other, op)
    }

    /// `self op other` for two arrays: checks (devices, shapes), promotion,
    /// then the node.
    #[track_caller]
    pub(crate) fn binary_arrays(&self, other: &Array, op: BinaryOp) -> Result<Array> {
        let name = op.name();
        broadcast_all(name, &[self, other])?;
        let t = promote_types(self.dtype(), other.dtype());
        let out = if op.is_predicate() {
            DType::Bool
        } else if op == BinaryOp::Div && !t.is_float() {
            DType::F32
        } else {
            t
        };
        let a = self.astype(t)?;
        let b = other.astype(t)?;
        Array::elementwise(ElementwiseOp::Binary(op), name, &[&a, &b], out)
    }
}

/// The broadcast shape of `inputs`, after checking that they share a device.
///
/// # Errors
/// [`crate::Error::DeviceMismatch`], then [`crate::Error::ShapeMismatch`],
/// both naming `op`.
fn broadcast_all(op: &'static str, inputs: &[&Array]) -> Result<Vec<usize>> {
    for x in &inputs[1..] {
        super::same_device(op, inputs[0], x)?;
    }
    let mut shape: Vec<usize> = inputs[0].shape().to_vec();
    for x in &inputs[1..] {
        shape = broadcast_shapes(op, &shape, x.shape())?;
    }
    Ok(shape)
}

/// The answer of a comparison of an integer array with an integer scalar
/// its dtype cannot hold (`u32_array > -1`): every element compares alike,
/// as NumPy 2 answers it. `None` for anything else.
fn out_of_range_comparison(op: BinaryOp, value: Value, array: DType) -> Option<bool> {
    use std::cmp::Ordering::*;
    let side = value.range_check(array);
    if side == Equal {
        return None;
    }
    let above = side == Greater; // the scalar exceeds every element
    match op {
        BinaryOp::Equal => Some(false),
        BinaryOp::NotEqual => Some(true),
        BinaryOp::Less | BinaryOp::LessEqual => Some(above),
        BinaryOp::Greater | BinaryOp::GreaterEqual => Some(!above),
        _ => None,
    }
}

macro_rules! unary_fns {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                ///
                /// Any dtype; shape unchanged. Float-only math on integer or
                /// bool input returns f32.
                ///
                /// # Errors
                /// None today (the op is recorded lazily); `Result` so that
                /// every op composes with `?`.
                #[track_caller]
                pub fn $name(&self) -> Result<Array> {
                    self.unary($op, stringify!($name))
                }
            )*
        }
    };
}

unary_fns! {
    /// `-x` (NumPy `negative`).
    negative => UnaryOp::Neg;
    /// `|x|` (NumPy `abs`).
    abs => UnaryOp::Abs;
    /// -1, 0 or 1 (NumPy `sign`).
    sign => UnaryOp::Sign;
    /// `e^x`.
    exp => UnaryOp::Exp;
    /// Natural logarithm.
    log => UnaryOp::Log;
    /// `log(1 + x)`, within 2 ulp of the true value over the whole f32
    /// range (musl's `log1pf`, after Sun's fdlibm): -inf at -1, NaN below,
    /// x itself for |x| < 2^-24. f16 and bf16 compute in f32 and round once.
    log1p => UnaryOp::Log1p;
    /// `e^x - 1`, within 2 ulp of the true value over the whole f32 range
    /// (musl's `expm1f`, after Sun's fdlibm): -1 below -27 ln 2, inf past
    /// ln(f32::MAX), x itself for |x| < 2^-25.
    expm1 => UnaryOp::Expm1;
    /// Square root.
    sqrt => UnaryOp::Sqrt;
    /// `1 / sqrt(x)` (MLX `rsqrt`).
    rsqrt => UnaryOp::Rsqrt;
    /// `x * x`.
    square => UnaryOp::Square;
    /// `1 / x`.
    reciprocal => UnaryOp::Reciprocal;
    /// Sine (radians).
    sin => UnaryOp::Sin;
    /// Cosine (radians).
    cos => UnaryOp::Cos;
    /// Hyperbolic tangent.
    tanh => UnaryOp::Tanh;
    /// `1 / (1 + e^-x)`.
    sigmoid => UnaryOp::Sigmoid;
    /// `max(x, 0)`.
    relu => UnaryOp::Relu;
    /// GELU, exact erf form: `x/2 * (1 + erf(x/sqrt 2))` (Hendrycks & Gimpel 2016).
    gelu => UnaryOp::Gelu;
    /// GELU, tanh approximation: `x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (MLX `gelu_approx`).
    gelu_approx => UnaryOp::GeluTanh;
    /// SiLU (swish): `x * sigmoid(x)`.
    silu => UnaryOp::Silu;
    /// The error function (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).
    erf => UnaryOp::Erf;
    /// Largest integer not above x.
    floor => UnaryOp::Floor;
    /// Smallest integer not below x.
    ceil => UnaryOp::Ceil;
    /// Round half to even (NumPy `round`, `decimals=0`).
    round => UnaryOp::Round;
    /// `x == 0`, as bool (NumPy `logical_not`).
    logical_not => UnaryOp::LogicalNot;
}

macro_rules! binary_fns {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                ///
                /// `other` is an array (`&b` or `b`) or a scalar (`2.0`,
                /// `1i32`, `true`): see [`crate::Operand`]. Shapes
                /// broadcast as in NumPy; dtypes promote as the module
                /// docs say, a scalar as a weak one ([`crate::scalar`]).
                ///
                /// # Errors
                /// [`crate::Error::DeviceMismatch`];
                /// [`crate::Error::ShapeMismatch`] when the shapes do not
                /// broadcast; [`crate::Error::InvalidArgument`] for an
                /// integer scalar the array's integer dtype cannot hold.
                #[track_caller]
                pub fn $name(&self, other: impl Operand) -> Result<Array> {
                    self.binary(other, $op)
                }
            )*
        }
    };
}

binary_fns! {
    /// Elementwise `self + other` (NumPy `add`).
    add => BinaryOp::Add;
    /// Elementwise `self - other` (NumPy `subtract`).
    subtract => BinaryOp::Sub;
    /// Elementwise `self * other` (NumPy `multiply`).
    multiply => BinaryOp::Mul;
    /// True division (NumPy `divide`): integers give f32.
    divide => BinaryOp::Div;
    /// Floored quotient (NumPy `floor_divide`).
    floor_divide => BinaryOp::FloorDiv;
    /// Floored remainder, with the divisor's sign (NumPy `remainder`).
    remainder => BinaryOp::Remainder;
    /// `self ** other` (NumPy `power`; negative bases take integral exponents).
    power => BinaryOp::Pow;
    /// Elementwise maximum; NaN propagates (NumPy `maximum`).
    maximum => BinaryOp::Maximum;
    /// Elementwise minimum; NaN propagates (NumPy `minimum`).
    minimum => BinaryOp::Minimum;
    /// `self == other`, as bool.
    equal => BinaryOp::Equal;
    /// `self != other`, as bool.
    not_equal => BinaryOp::NotEqual;
    /// `self < other`, as bool.
    less => BinaryOp::Less;
    /// `self <= other`, as bool.
    less_equal => BinaryOp::LessEqual;
    /// `self > other`, as bool.
    greater => BinaryOp::Greater;
    /// `self >= other`, as bool.
    greater_equal => BinaryOp::GreaterEqual;
    /// Both non-zero, as bool.
    logical_and => BinaryOp::LogicalAnd;
    /// Either non-zero, as bool.
    logical_or => BinaryOp::LogicalOr;
}

/// `cond ? a : b` elementwise (NumPy `where`); the three shapes broadcast
/// together, `a` and `b` promote, `cond` is any dtype (non-zero is true).
/// `a` and `b` are arrays or scalars ([`crate::Operand`]): `where_(&m, &x,
/// 0.0)`; a scalar beside an array is weak ([`crate::scalar`]), two scalars
/// take their own types' dtypes.
///
/// # Errors
/// [`crate::Error::DeviceMismatch`], [`crate::Error::ShapeMismatch`],
/// [`crate::Error::InvalidArgument`] for an integer scalar the other
/// operand's integer dtype cannot hold.
#[track_caller]
pub fn where_(cond: &Array, a: impl Operand, b: impl Operand) -> Result<Array> {
    let (a, b) = pair("where", a.into_arg(), b.into_arg(), cond.device())?;
    broadcast_all("where", &[cond, &a, &b])?;
    let t = promote_types(a.dtype(), b.dtype());
    let (a, b) = (a.astype(t)?, b.astype(t)?);
    Array::elementwise(ElementwiseOp::Where, "where", &[cond, &a, &b], t)
}

/// Two operands as arrays: a scalar beside an array takes its weak dtype
/// from it and becomes a lazy 0-d constant on its device; two scalars take
/// their own types' dtypes, on `device`.
#[track_caller]
fn pair(op: &'static str, a: Arg, b: Arg, device: &crate::Device) -> Result<(Array, Array)> {
    let like = match (&a, &b) {
        (Arg::Array(x), _) | (_, Arg::Array(x)) => Some(x.dtype()),
        _ => None,
    };
    // A loop-free pair of matches, not a closure: the constants record the
    // caller's location.
    let a = match a {
        Arg::Array(x) => x,
        Arg::Scalar { value, dtype } => value.constant(
            op,
            like.map_or(dtype, |l| value.weak_dtype(dtype, l)),
            device,
        )?,
    };
    let b = match b {
        Arg::Array(x) => x,
        Arg::Scalar { value, dtype } => value.constant(
            op,
            like.map_or(dtype, |l| value.weak_dtype(dtype, l)),
            device,
        )?,
    };
    Ok((a, b))
}

impl Array {
    /// `lhs op self` for a scalar `lhs` (`2.0 - &a`): the scalar is weak.
    #[track_caller]
    fn binary_scalar_lhs<S: Scalar>(&self, lhs: S, op: BinaryOp) -> Result<Array> {
        let value = lhs.value();
        let dtype = value.weak_dtype(S::DTYPE, self.dtype());
        let c = value.constant(op.name(), dtype, self.device())?;
        c.binary_arrays(self, op)
    }
}

macro_rules! operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl<T: Operand> std::ops::$trait<T> for &Array {
            type Output = Result<Array>;
            /// `rhs` is an array (`&b`, `b`) or a weak scalar
            /// ([`crate::scalar`]).
            #[track_caller]
            fn $method(self, rhs: T) -> Result<Array> {
                self.binary(rhs, $op)
            }
        }
        impl<T: Operand> std::ops::$trait<T> for Array {
            type Output = Result<Array>;
            /// `rhs` is an array (`&b`, `b`) or a weak scalar
            /// ([`crate::scalar`]).
            #[track_caller]
            fn $method(self, rhs: T) -> Result<Array> {
                self.binary(rhs, $op)
            }
        }
        // On the left only f64, i32 and bool, as candle's f64: with one
        // float and one integer type there, an unsuffixed literal (`2.0 *
        // &a`, `1 - &a`) is unambiguous and `(2.0 * &a)?` compiles; a
        // second float type would leave `2.0` unresolved where `?` needs
        // the result's type. Every scalar type works on the right.
        scalar_lhs_operator!($trait, $method, $op; f64, i32, bool);
    };
}

/// `scalar op array`, for each scalar type on the left (a generic impl
/// over the scalar is not allowed: the scalar would be the uncovered
/// `Self`).
macro_rules! scalar_lhs_operator {
    ($trait:ident, $method:ident, $op:expr; $($t:ty),*) => {$(
        impl std::ops::$trait<&Array> for $t {
            type Output = Result<Array>;
            /// The scalar is weak ([`crate::scalar`]).
            #[track_caller]
            fn $method(self, rhs: &Array) -> Result<Array> {
                rhs.binary_scalar_lhs(self, $op)
            }
        }
        impl std::ops::$trait<Array> for $t {
            type Output = Result<Array>;
            /// The scalar is weak ([`crate::scalar`]).
            #[track_caller]
            fn $method(self, rhs: Array) -> Result<Array> {
                rhs.binary_scalar_lhs(self, $op)
            }
        }
    )*};
}

operator!(Add, add, BinaryOp::Add);
operator!(Sub, sub, BinaryOp::Sub);
operator!(Mul, mul, BinaryOp::Mul);
operator!(Div, div, BinaryOp::Div);
operator!(Rem, rem, BinaryOp::Remainder);

impl std::ops::Neg for &Array {
    type Output = Result<Array>;
    #[track_caller]
    fn neg(self) -> Result<Array> {
        self.negative()
    }
}

impl std::ops::Neg for Array {
    type Output = Result<Array>;
    #[track_caller]
    fn neg(self) -> Result<Array> {
        self.negative()
    }
}

impl Array {
    /// Floored quotient and remainder (Python/NumPy `divmod`): `q =
    /// floor(a / b)`, `r = a - q * b` with the divisor's sign, broadcast
    /// together, in the promoted dtype; integer division by zero gives 0 and 0.
    ///
    /// One node and one dispatch write both outputs. Either can be dropped on
    /// its own, before or after eval: a dropped one gets a scratch buffer at
    /// eval that returns to the pool as soon as the dispatch is encoded.
    ///
    /// `other` is an array or a weak scalar ([`crate::Operand`]).
    ///
    /// # Errors
    /// [`crate::Error::DeviceMismatch`], [`crate::Error::ShapeMismatch`],
    /// [`crate::Error::InvalidArgument`] for an integer scalar out of range.
    #[track_caller]
    pub fn divmod(&self, other: impl Operand) -> Result<(Array, Array)> {
        let (a, b) = pair(
            "divmod",
            Arg::Array(self.clone()),
            other.into_arg(),
            self.device(),
        )?;
        let shape = broadcast_all("divmod", &[&a, &b])?;
        let t = promote_types(a.dtype(), b.dtype());
        let (a, b) = (a.astype(t)?, b.astype(t)?);
        let mut v = Array::from_node(
            self.device(),
            Primitive::Elementwise(ElementwiseOp::DivMod),
            vec![a, b],
            vec![(shape.clone(), t), (shape, t)],
        );
        let r = v.pop().expect("two outputs");
        let q = v.pop().expect("two outputs");
        Ok((q, r))
    }
}
