//! Elementwise operations: unary math, binary arithmetic and comparisons
//! with NumPy broadcasting, logical and bitwise ops, shifts, `where_`, and
//! `astype`.
//!
//! # Type promotion
//!
//! NumPy's table among the integers (as far as 32 bits go) and among the
//! floats; floats win over integers, as in MLX:
//!
//! | operands | result |
//! |---|---|
//! | same dtype | that dtype |
//! | bool with any X | X |
//! | two signed (or two unsigned) integers | the wider |
//! | a signed and a narrower unsigned integer | the signed one (i16 with u8: i16) |
//! | a signed and an unsigned integer as wide or wider | the signed integer of twice the unsigned one's width: i8 with u8 gives i16, i8 or i16 with u16 gives i32 |
//! | i32 (or i8, i16) with u32 | i32 (NumPy gives int64, which WGSL lacks) |
//! | an integer with a float | the float (NumPy widens some: i32 with f16 gives f64 there) |
//! | f16 with bf16, or either with f32 | f32 |
//! | f64 with anything | f64 |
//!
//! A scalar (`&a + 2.0`, `a.maximum(0.0)`) is weak, as in NumPy 2 (NEP
//! 50) and MLX: its dtype comes from the array and from its Rust type's
//! kind, never from its value; see [`crate::scalar`] for the table.
//!
//! Every op computes in f32 for every float dtype but f64 (f16 and bf16 are
//! decoded from their bits and the result rounded to nearest even, so no
//! `SHADER_F16` is needed), in f64 for f64, in i32 or u32 for integers: the
//! 8- and 16-bit ones are widened and the result wraps back to their width
//! as NumPy's does (`int8(100) + int8(100) == -56`). `divide` and the
//! float-only unary ops (exp, log, ...) turn integer input into f32.
//! Integer division by zero gives 0 (NumPy warns and gives 0).
//!
//! f64 (on adapters with `SHADER_F64`) takes the ops WGSL computes in 64
//! bits: arithmetic, comparisons, floor_divide, remainder, maximum,
//! minimum, abs, sign, sqrt, rsqrt, square, reciprocal, floor, ceil,
//! round, relu, casts. The transcendental ones (exp, log, sin, tanh, erf,
//! power, ...) return [`crate::Error::OpDType`]: Vulkan's GLSL.std.450 has
//! no 64-bit exp or log, and computing them in f32 would be a silent
//! downcast. Cast to f32 first where f32 accuracy is enough.
//!
//! Bitwise ops (`bitwise_and`, `bitwise_or`, `bitwise_xor`,
//! `bitwise_invert`) take integers and bool; shifts take integers (bool
//! operands shift as int8, as in NumPy) and follow NumPy at counts past the
//! width: `x << n` is 0 and `x >> n` is 0, or -1 for negative `x`, when `n`
//! is negative or at least the dtype's width (WGSL alone would take `n`
//! mod 32).

use std::borrow::Cow;

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
        (F64, _) | (_, F64) => F64,
        (x, y) if x.is_float() && y.is_float() => F32,
        (x, _) if x.is_float() => x,
        (_, y) if y.is_float() => y,
        (x, y) if x.is_signed_integer() == y.is_signed_integer() => {
            if x.size_in_bytes() >= y.size_in_bytes() {
                x
            } else {
                y
            }
        }
        (x, y) => {
            let (signed, unsigned) = if x.is_signed_integer() {
                (x, y)
            } else {
                (y, x)
            };
            match unsigned {
                _ if signed.size_in_bytes() > unsigned.size_in_bytes() => signed,
                U8 => I16,
                _ => I32,
            }
        }
    }
}

/// The error for an op that does not take `dtype`.
fn refuse(op: &'static str, dtype: DType) -> crate::Error {
    let takes = if dtype == DType::F64 {
        "float32, float16 and bfloat16 arrays: float64 has no 64-bit exp, log, \
         sin, tanh, erf or pow on the GPU (cast with astype(DType::F32))"
    } else {
        "integer and bool arrays"
    };
    crate::Error::OpDType { op, dtype, takes }
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
        super::refuse_blocks(name, inputs)?;
        Ok(Array::from_node1(
            inputs[0].device(),
            Primitive::Elementwise(op),
            inputs
                .iter()
                .map(|a| (*a).clone())
                .collect::<crate::graph::Inputs>(),
            shape.into_owned(),
            out,
        ))
    }

    /// This array converted to `dtype` (NumPy `astype`): floats to f16/bf16
    /// round to nearest even, bit for bit as the `half` crate; floats to
    /// integers truncate toward zero and saturate at the target's limits
    /// (WGSL conversion; NumPy leaves these undefined); integers to narrower
    /// integers keep the low bits (NumPy's wrap-around: `int32(300)` to
    /// uint8 is 44); f64 to f32 rounds to nearest even, on the bits (f64 to
    /// f16 or bf16 rounds through f32, so a value a hair off a halfway
    /// point of the 16-bit type can round twice); anything to bool is
    /// `x != 0`. The same dtype gives the same array (a view stays a view of
    /// its parent: [`Array::copy`] makes a buffer of its own). In short:
    /// Rust's `as` between the host types.
    ///
    /// # Errors
    /// [`crate::Error::MissingFeature`] for f64 on an adapter without
    /// `SHADER_F64`.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Result<Array> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        self.device().check_dtype("astype", dtype)?;
        Array::elementwise(ElementwiseOp::Cast, "astype", &[self], dtype)
    }

    /// A new array with a buffer of its own holding the same values and
    /// dtype, densely in row-major order (NumPy `.copy()`, PyTorch
    /// `.clone()`, candle `.copy()`): always one copy dispatch on eval,
    /// never a view, so a copy of a view (a row, a slice, a transpose) does
    /// not keep the view's parent alive. `let row = big.slice(..)?.copy()?`
    /// and then dropping `big` returns `big`'s memory at once, where a
    /// view, [`Array::contiguous`] of a dense view and `astype` to the same
    /// dtype all share `big`'s buffer and keep all of it. (Rust's
    /// `Array::clone` is another handle to the same array, as candle's
    /// `Tensor::clone`.) Any dtype; fuses with the elementwise ops around
    /// it like any of them.
    ///
    /// # Errors
    /// None today; `Result` so that every op composes with `?`.
    #[track_caller]
    pub fn copy(&self) -> Result<Array> {
        Array::elementwise(ElementwiseOp::Copy, "copy", &[self], self.dtype())
    }

    /// The same values laid out densely in row-major order (MLX
    /// `contiguous`). Lazy: at eval, an input that is already dense is shared
    /// as it is (no kernel), so a dense view still holds its parent's
    /// buffer (use [`Array::copy`] for a buffer of its own); a strided view
    /// (transpose, step slice, broadcast) is copied by one dispatch.
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
        // NumPy: ~ of a bool is logical not.
        let op = match op {
            UnaryOp::BitwiseInvert if self.dtype() == DType::Bool => UnaryOp::LogicalNot,
            op => op,
        };
        let out = op
            .out_dtype(self.dtype())
            .ok_or_else(|| refuse(name, self.dtype()))?;
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
        let out = op.out_dtype(t).ok_or_else(|| refuse(op.name(), t))?;
        // Shifts of bools compute as int8 (out), the rest in `t`.
        let t = if op.is_bitwise() && t == DType::Bool && out != DType::Bool {
            out
        } else {
            t
        };
        // Borrowed where the dtype is already `t` (no handle to count); not
        // a closure, so that a cast records the caller's location.
        let a = if self.dtype() == t {
            None
        } else {
            Some(self.astype(t)?)
        };
        let b = if other.dtype() == t {
            None
        } else {
            Some(other.astype(t)?)
        };
        let (a, b) = (a.as_ref().unwrap_or(self), b.as_ref().unwrap_or(other));
        Array::elementwise(ElementwiseOp::Binary(op), name, &[a, b], out)
    }
}

/// The broadcast shape of `inputs`, after checking that they share a device.
///
/// # Errors
/// [`crate::Error::DeviceMismatch`], then [`crate::Error::ShapeMismatch`],
/// both naming `op`.
///
/// Borrowed (no allocation) when it is the first input's shape, as in
/// `x + scalar` or two arrays of one shape.
fn broadcast_all<'a>(op: &'static str, inputs: &[&'a Array]) -> Result<Cow<'a, [usize]>> {
    for x in &inputs[1..] {
        super::same_device(op, inputs[0], x)?;
    }
    let mut shape = Cow::Borrowed(inputs[0].shape());
    for x in &inputs[1..] {
        // A scalar, or the same shape, broadcasts to the shape so far.
        if !(x.shape().is_empty() || x.shape() == &shape[..]) {
            shape = Cow::Owned(broadcast_shapes(op, &shape, x.shape())?);
        }
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
                /// Shape unchanged. Float-only math on integer or bool input
                /// returns f32.
                ///
                /// # Errors
                /// [`crate::Error::OpDType`] for a dtype the op does not
                /// take (see the module docs: f64 takes no transcendental
                /// op, bitwise_invert only integers and bool).
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
    /// `e^x`: fdlibm's `expf` (`wgsl/math.wgsl`), within 2 ulp
    /// (docs/ACCURACY.md has every float function's bound and measured
    /// error).
    exp => UnaryOp::Exp;
    /// `2^x` (NumPy `exp2`), within 2 ulp of the true value over the whole
    /// f32 range: `x = k + r` with `k` an integer and `|r| <= 1/2`, then
    /// `e^(r ln 2)` (musl's `expf`) scaled by `2^k` exactly; exact at
    /// integers. f16 and bf16 compute in f32 and round once.
    exp2 => UnaryOp::Exp2;
    /// Natural logarithm: fdlibm's `logf`, within 2 ulp.
    log => UnaryOp::Log;
    /// `log(1 + x)`, within 2 ulp of the true value over the whole f32
    /// range (musl's `log1pf`, after Sun's fdlibm): -inf at -1, NaN below,
    /// x itself for |x| < 2^-24. f16 and bf16 compute in f32 and round once.
    log1p => UnaryOp::Log1p;
    /// `e^x - 1`, within 2 ulp of the true value over the whole f32 range
    /// (musl's `expm1f`, after Sun's fdlibm): -1 below -27 ln 2, inf past
    /// ln(f32::MAX), x itself for |x| < 2^-25.
    expm1 => UnaryOp::Expm1;
    /// Square root, within 1 ulp.
    sqrt => UnaryOp::Sqrt;
    /// `1 / sqrt(x)` (MLX `rsqrt`): WGSL's `inverseSqrt`, within 2 ulp.
    rsqrt => UnaryOp::Rsqrt;
    /// `x * x`.
    square => UnaryOp::Square;
    /// `1 / x`, within 1 ulp.
    reciprocal => UnaryOp::Reciprocal;
    /// Sine (radians), within 2 ulp for every finite f32: an exact
    /// reduction by pi/2 (Payne-Hanek) and fdlibm's `__kernel_sinf`.
    sin => UnaryOp::Sin;
    /// Cosine (radians), within 2 ulp for every finite f32, as `sin`.
    cos => UnaryOp::Cos;
    /// Hyperbolic tangent, within 1.5 ulp: an odd polynomial below
    /// log(3)/2, musl's `1 - 2 / (e^(2|x|) + 1)` beyond.
    tanh => UnaryOp::Tanh;
    /// `1 / (1 + e^-x)`, within 2 ulp.
    sigmoid => UnaryOp::Sigmoid;
    /// `max(x, 0)`.
    relu => UnaryOp::Relu;
    /// GELU, exact erf form: `x/2 * (1 + erf(x/sqrt 2))` (Hendrycks & Gimpel
    /// 2016), within 5 ulp for x >= -12 (computed as `x erfc(-x / sqrt 2) /
    /// 2` below 0).
    gelu => UnaryOp::Gelu;
    /// GELU, tanh approximation: `x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715
    /// x^3)))` (MLX `gelu_approx`), within 16 ulp for x >= -3 (computed as
    /// `x sigmoid(2 z)`).
    gelu_approx => UnaryOp::GeluTanh;
    /// SiLU (swish): `x * sigmoid(x)`, within 3.5 ulp for x >= -87.
    silu => UnaryOp::Silu;
    /// `log(1 + e^x)` (PyTorch `softplus` with beta 1 and no threshold,
    /// MLX `nn.softplus`, JAX `nn.softplus`), computed as
    /// `max(x, 0) + log1p(e^-|x|)`: no overflow for large `x`, within 2
    /// ulp. Float out.
    softplus => UnaryOp::Softplus;
    /// The error function: musl's `erff` (after fdlibm), within 2 ulp.
    erf => UnaryOp::Erf;
    /// Largest integer not above x.
    floor => UnaryOp::Floor;
    /// Smallest integer not below x.
    ceil => UnaryOp::Ceil;
    /// Round half to even (NumPy `round`, `decimals=0`).
    round => UnaryOp::Round;
    /// `x == 0`, as bool (NumPy `logical_not`).
    logical_not => UnaryOp::LogicalNot;
    /// `~x`: every bit flipped, in the dtype's own width (NumPy
    /// `bitwise_invert`); integers and bool (where it is `logical_not`).
    bitwise_invert => UnaryOp::BitwiseInvert;
    /// Base-2 logarithm (NumPy `log2`): musl's `log2f` (after fdlibm),
    /// within 2 ulp; -inf at 0, NaN below.
    log2 => UnaryOp::Log2;
    /// Base-10 logarithm (NumPy `log10`): musl's `log10f`, within 2 ulp.
    log10 => UnaryOp::Log10;
    /// Tangent (radians; NumPy `tan`), within 2 ulp for every finite f32:
    /// an exact reduction by pi/2 (Payne-Hanek) and fdlibm's `__kernel_tan`.
    tan => UnaryOp::Tan;
    /// Hyperbolic sine (NumPy `sinh`; musl's `sinhf`), within 3 ulp.
    sinh => UnaryOp::Sinh;
    /// Hyperbolic cosine (NumPy `cosh`; musl's `coshf`), within 3 ulp.
    cosh => UnaryOp::Cosh;
    /// Inverse sine in [-pi/2, pi/2], NaN outside [-1, 1] (NumPy `arcsin`;
    /// musl's `asinf`, float only), within 2 ulp.
    arcsin => UnaryOp::Arcsin;
    /// Inverse cosine in [0, pi], NaN outside [-1, 1] (NumPy `arccos`;
    /// musl's `acosf`), within 2 ulp.
    arccos => UnaryOp::Arccos;
    /// Inverse tangent in [-pi/2, pi/2] (NumPy `arctan`; musl's `atanf`),
    /// within 2 ulp.
    arctan => UnaryOp::Arctan;
    /// Inverse hyperbolic sine (NumPy `arcsinh`; musl's `asinhf`), within 3 ulp.
    arcsinh => UnaryOp::Arcsinh;
    /// Inverse hyperbolic cosine, NaN below 1 (NumPy `arccosh`; musl's
    /// `acoshf`), within 3 ulp.
    arccosh => UnaryOp::Arccosh;
    /// Inverse hyperbolic tangent, +-inf at +-1, NaN beyond (NumPy
    /// `arctanh`; musl's `atanhf`), within 3 ulp.
    arctanh => UnaryOp::Arctanh;
    /// Inverse error function on [-1, 1], +-inf at +-1, NaN beyond (SciPy
    /// `erfinv`, MLX `erfinv`): Giles, "Approximating the erfinv function"
    /// (GPU Computing Gems, 2011), single precision, within 4 ulp.
    erfinv => UnaryOp::Erfinv;
    /// Radians to degrees, `x * (180 / pi)` with the constant correctly
    /// rounded to f32 (NumPy `degrees`): one rounding, within 0.5 ulp of
    /// that product.
    degrees => UnaryOp::Degrees;
    /// Degrees to radians, `x * (pi / 180)` (NumPy `radians`), as
    /// [`Array::degrees`]: within 0.5 ulp of that product.
    radians => UnaryOp::Radians;
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
                /// integer scalar the array's integer dtype cannot hold;
                /// [`crate::Error::OpDType`] for a promoted dtype the op
                /// does not take (see the module docs).
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
    /// `self ** other` (NumPy `power`; negative bases take integral
    /// exponents): within 2 ulp for exponents in [-64, 64], exact for
    /// small integer exponents and 0.5 when the result is representable.
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
    /// `self & other` on integers and bool (NumPy `bitwise_and`).
    bitwise_and => BinaryOp::BitwiseAnd;
    /// `self | other` on integers and bool (NumPy `bitwise_or`).
    bitwise_or => BinaryOp::BitwiseOr;
    /// `self ^ other` on integers and bool (NumPy `bitwise_xor`).
    bitwise_xor => BinaryOp::BitwiseXor;
    /// `self << other` on integers (NumPy `left_shift`): 0 for counts that
    /// are negative or at least the dtype's width; bits shifted past the
    /// width are lost (`int8(1) << 7 == -128`).
    left_shift => BinaryOp::LeftShift;
    /// `self >> other` on integers (NumPy `right_shift`; arithmetic for
    /// signed dtypes): for counts that are negative or at least the
    /// dtype's width, 0, or -1 where `self` is negative.
    right_shift => BinaryOp::RightShift;
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
pub(crate) fn pair(
    op: &'static str,
    a: Arg,
    b: Arg,
    device: &crate::Device,
) -> Result<(Array, Array)> {
    let like = match (&a, &b) {
        (Arg::Array(x), _) | (_, Arg::Array(x)) => Some(x.dtype()),
        _ => None,
    };
    Ok((
        as_array(op, a, like, device)?,
        as_array(op, b, like, device)?,
    ))
}

/// One operand of [`pair`] as an array; `#[track_caller]` (not a closure)
/// so that the constant records the caller's location.
#[track_caller]
fn as_array(
    op: &'static str,
    arg: Arg,
    like: Option<DType>,
    device: &crate::Device,
) -> Result<Array> {
    match arg {
        Arg::Array(x) => Ok(x),
        Arg::Scalar { value, dtype } => value.constant(
            op,
            like.map_or(dtype, |l| value.weak_dtype(dtype, l)),
            device,
        ),
    }
}

impl Array {
    /// `self` and `other` (an array or a weak scalar) as a [`pair`] of
    /// arrays on `self`'s device.
    #[track_caller]
    pub(crate) fn pair_with(
        &self,
        op: &'static str,
        other: impl Operand,
    ) -> Result<(Array, Array)> {
        pair(
            op,
            Arg::Array(self.clone()),
            other.into_arg(),
            self.device(),
        )
    }
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
        // On the left f64, i32 and bool (as candle's f64), and f16 and
        // bf16, which no literal can be: with one float and one integer
        // type that literals can be, an unsuffixed literal (`2.0 * &a`,
        // `1 - &a`) is unambiguous and `(2.0 * &a)?.exp()` compiles; a
        // second one (f32, i64, u32, ...) would leave `2.0` unresolved
        // where a method after `?` needs the result's type ("type
        // annotations needed"; tests/scalars.rs checks these forms). Every
        // scalar type works on the right. See `crate::Scalar`.
        scalar_lhs_operator!($trait, $method, $op; f64, i32, bool, half::f16, half::bf16);
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
operator!(BitAnd, bitand, BinaryOp::BitwiseAnd);
operator!(BitOr, bitor, BinaryOp::BitwiseOr);
operator!(BitXor, bitxor, BinaryOp::BitwiseXor);
operator!(Shl, shl, BinaryOp::LeftShift);
operator!(Shr, shr, BinaryOp::RightShift);

/// A unary operator on `&Array` and `Array`, as the method `$call`.
macro_rules! unary_operator {
    ($trait:ident, $method:ident, $call:ident, $doc:literal) => {
        impl std::ops::$trait for &Array {
            type Output = Result<Array>;
            #[doc = $doc]
            #[track_caller]
            fn $method(self) -> Result<Array> {
                self.$call()
            }
        }
        impl std::ops::$trait for Array {
            type Output = Result<Array>;
            #[doc = $doc]
            #[track_caller]
            fn $method(self) -> Result<Array> {
                self.$call()
            }
        }
    };
}

unary_operator!(Neg, neg, negative, "[`Array::negative`] (`-x`).");
unary_operator!(
    Not,
    not,
    bitwise_invert,
    "[`Array::bitwise_invert`] (`~x` in NumPy)."
);

/// The float predicates: one public method each (docs of their own), each
/// one call of `float_predicate`.
macro_rules! float_predicates {
    ($($(#[$doc:meta])* $name:ident => $op:ident, $on_integers:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self) -> Result<Array> {
                    self.float_predicate(UnaryOp::$op, $on_integers)
                }
            )*
        }
    };
}

float_predicates! {
    /// Whether each element is NaN, as bool (NumPy `isnan`), tested on the
    /// bits (drivers may assume no NaN in float comparisons). Any dtype:
    /// integers and bool are never NaN (a constant, no kernel).
    ///
    /// # Errors
    /// None today; `Result` so that every op composes with `?`.
    isnan => IsNan, false;
    /// Whether each element is +inf or -inf, as bool (NumPy `isinf`), on
    /// the bits. Integers and bool: all false.
    ///
    /// # Errors
    /// None today.
    isinf => IsInf, false;
    /// Whether each element is neither NaN nor infinite, as bool (NumPy
    /// `isfinite`), on the bits. Integers and bool: all true.
    ///
    /// # Errors
    /// None today.
    isfinite => IsFinite, true;
    /// Whether each element is +inf, as bool (NumPy `isposinf`).
    /// Integers and bool: all false.
    ///
    /// # Errors
    /// None today.
    isposinf => IsPosInf, false;
    /// Whether each element is -inf, as bool (NumPy `isneginf`).
    /// Integers and bool: all false.
    ///
    /// # Errors
    /// None today.
    isneginf => IsNegInf, false;
}

impl Array {
    /// A predicate on float values (bool result); integer and bool input
    /// give `on_integers` everywhere, as a lazy constant (no kernel).
    #[track_caller]
    fn float_predicate(&self, op: UnaryOp, on_integers: bool) -> Result<Array> {
        super::refuse_blocks(op.name(), &[self])?;
        if !self.dtype().is_float() {
            return Array::full(self.shape(), on_integers, DType::Bool, self.device());
        }
        Array::elementwise(ElementwiseOp::Unary(op), op.name(), &[self], DType::Bool)
    }

    /// A float-only binary op: `other` an array or a weak scalar, both
    /// operands promoted, then integers and bool taken to f32 (as `divide`
    /// does).
    #[track_caller]
    fn float_binary(&self, other: impl Operand, op: BinaryOp) -> Result<Array> {
        let name = op.name();
        let (a, b) = self.pair_with(name, other)?;
        broadcast_all(name, &[&a, &b])?;
        let t = promote_types(a.dtype(), b.dtype());
        let t = if t.is_float() { t } else { DType::F32 };
        a.astype(t)?.binary_arrays(&b.astype(t)?, op)
    }

    /// `log(e^self + e^other)` without overflow (NumPy `logaddexp`, MLX
    /// `logaddexp`): equal arguments give `self + ln 2` (so two infinities
    /// of one sign stay infinite), otherwise `max + log1p(e^-|self -
    /// other|)` with musl's `expf` and `log1pf` (NumPy's
    /// `npy_logaddexpf`); NaN propagates. Within 8 ulp when the larger
    /// operand is at least 0; with both negative, the error is a few ulp
    /// of the larger magnitude and has no bound in ulp of a result near 0
    /// (docs/ACCURACY.md). Shapes broadcast; integers and bool compute in
    /// f32, f16 and bf16 in f32 and round once.
    ///
    /// `other` is an array or a weak scalar ([`crate::Operand`]).
    ///
    /// # Errors
    /// [`crate::Error::DeviceMismatch`]; [`crate::Error::ShapeMismatch`]
    /// when the shapes do not broadcast; [`crate::Error::InvalidArgument`]
    /// for an integer scalar the array's integer dtype cannot hold.
    #[track_caller]
    pub fn logaddexp(&self, other: impl Operand) -> Result<Array> {
        self.float_binary(other, BinaryOp::LogAddExp)
    }

    /// The angle of the point `(other, self)` in radians, in [-pi, pi]
    /// (NumPy `arctan2(y, x)` with `self` as `y`; musl's `atan2f`, with
    /// C99's signed zeros and infinities), within 2 ulp. Shapes broadcast;
    /// integers and bool compute in f32.
    ///
    /// # Errors
    /// As [`Array::logaddexp`].
    #[track_caller]
    pub fn arctan2(&self, other: impl Operand) -> Result<Array> {
        self.float_binary(other, BinaryOp::Arctan2)
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
        let (a, b) = self.pair_with("divmod", other)?;
        let shape = broadcast_all("divmod", &[&a, &b])?.into_owned();
        super::refuse_blocks("divmod", &[&a, &b])?;
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
