//! Comparing results with a reference: [`Tolerance`], [`compare`] and the
//! readable [`Mismatches`] report; the [`poison`] pattern that marks
//! never-written elements.

use std::fmt;

use crate::{DType, Element};

/// The 32-bit pattern output buffers are filled with before the kernel
/// runs: a quiet NaN for floats (`0x7FC0_DEAD` for f32; `0x7EAD` for f16 and
/// `0x7FAD` for bf16, each repeated in both halves of the word) and
/// `0xDEAD_BEEF` for i32, u32 and bool. An element that still holds these
/// bits after the kernel ran was (almost surely) never written, and
/// [`compare`] reports it as such.
pub const fn poison(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0x7FC0_DEAD,
        DType::F16 => 0x7EAD_7EAD,
        DType::BF16 => 0x7FAD_7FAD,
        // Both words of an f64 element: 0x7FF8DEAD7FF8DEAD is a NaN.
        DType::F64 => 0x7FF8_DEAD,
        DType::I32 | DType::U32 | DType::Bool | DType::I8 | DType::U8 | DType::I16 | DType::U16 => {
            0xDEAD_BEEF
        }
        // Block formats have no element of their own: their bytes.
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => 0xDEAD_BEEF,
    }
}

/// The poison bits of one element of `dtype` (the low 8 or 16 bits for
/// packed dtypes, the word twice for f64).
pub(super) fn element_poison(dtype: DType) -> u64 {
    let w = poison(dtype) as u64;
    match dtype.size_in_bytes() {
        1 => w & 0xFF,
        2 => w & 0xFFFF,
        8 => w | (w << 32),
        _ => w,
    }
}

/// How close a result must be to its reference.
///
/// An element passes when it equals the reference (NaN matches NaN, an
/// infinity the same infinity), or when `|got - want| <= abs + rel * |want|`,
/// or when `got` is at most `ulps` representable values of the element's
/// own type away from `want` (for integers: `|got - want| <= ulps`).
/// A never-written element (see [`poison`]) never passes. The default is
/// exact.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tolerance {
    /// Absolute error allowed, in the values' own units.
    pub abs: f64,
    /// Error allowed relative to `|want|` (0.01 is one percent).
    pub rel: f64,
    /// Units in the last place allowed, in the element's own type.
    pub ulps: u64,
}

impl Tolerance {
    /// Bit-for-bit equality (NaN still matches NaN).
    pub const EXACT: Tolerance = Tolerance {
        abs: 0.0,
        rel: 0.0,
        ulps: 0,
    };

    /// Within `abs` of the reference.
    pub const fn abs(abs: f64) -> Self {
        Tolerance {
            abs,
            rel: 0.0,
            ulps: 0,
        }
    }

    /// Within `rel * |want|` of the reference.
    pub const fn rel(rel: f64) -> Self {
        Tolerance {
            abs: 0.0,
            rel,
            ulps: 0,
        }
    }

    /// Within `ulps` units in the last place of the reference.
    pub const fn ulps(ulps: u64) -> Self {
        Tolerance {
            abs: 0.0,
            rel: 0.0,
            ulps,
        }
    }

    /// This tolerance with the absolute bound set to `abs`.
    pub const fn with_abs(mut self, abs: f64) -> Self {
        self.abs = abs;
        self
    }

    /// This tolerance with the relative bound set to `rel`.
    pub const fn with_rel(mut self, rel: f64) -> Self {
        self.rel = rel;
        self
    }

    /// This tolerance with the ULP bound set to `ulps`.
    pub const fn with_ulps(mut self, ulps: u64) -> Self {
        self.ulps = ulps;
        self
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "abs {:e}, rel {:e}, {} ulps",
            self.abs, self.rel, self.ulps
        )
    }
}

/// One element that failed a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Row-major flat index of the element.
    pub index: usize,
    /// The element's index in each dimension, when the shape is known.
    pub position: Option<Vec<usize>>,
    /// The value read back, as f64.
    pub got: f64,
    /// The reference value, as f64.
    pub want: f64,
    /// The bits read back (the low 8 or 16 for packed dtypes, 64 for f64).
    pub got_bits: u64,
    /// Whether the element still held the poison pattern: never written.
    pub unwritten: bool,
    /// Distance in units in the last place (`u64::MAX` when one side is NaN).
    pub ulps: u64,
}

/// The largest count above the poison pattern that
/// [`Mismatch::over_poison`] reads as "poison plus a count": far more than
/// a test kernel adds, far less than a wrong value lands on by chance.
const OVER_POISON_MAX: u64 = 1 << 20;

/// The loop cap of Mesa's software adapters (lavapipe and llvmpipe:
/// gallivm's `LP_MAX_TGSI_LOOP_ITERATIONS`): an invocation stops after this
/// many loop iterations in total and carries on without an error.
pub const MESA_LOOP_CAP: u64 = 65535;

impl Mismatch {
    /// `Some(k)` when the value read back is the [`poison`] pattern plus a
    /// small count `k` (at most 2^20): the kernel added `k` to an element it
    /// never set, so an accumulating kernel (`atomicAdd`, `+=`) ran on an
    /// output that started as poison instead of zeros. 32-bit integer and
    /// bool dtypes only (a float poison plus anything stays NaN, and is
    /// reported as never written; 8- and 16-bit poison is too short to
    /// tell).
    pub fn over_poison(&self, dtype: DType) -> Option<u64> {
        if self.unwritten || dtype.is_float() || dtype.size_in_bytes() != 4 {
            return None;
        }
        let k = (self.got_bits as u32).wrapping_sub(poison(dtype)) as u64;
        (k > 0 && k <= OVER_POISON_MAX).then_some(k)
    }

    /// Whether the value read back is exactly [`MESA_LOOP_CAP`] (65535)
    /// where more was expected: what a count or a loop bound gives when
    /// Mesa's software adapters stopped the loop that made it.
    pub fn at_loop_cap(&self) -> bool {
        !self.unwritten && self.got == MESA_LOOP_CAP as f64 && self.want > MESA_LOOP_CAP as f64
    }
}

/// The result of a failed comparison: how many elements differ and the
/// first [`Mismatches::MAX_REPORTED`] of them. Its `Display` is the report
/// [`Outputs::assert_close`](super::Outputs::assert_close) panics with.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatches {
    /// The dtype compared.
    pub dtype: DType,
    /// Elements compared.
    pub total: usize,
    /// Elements that failed.
    pub count: usize,
    /// Of those, elements never written (still poison).
    pub unwritten: usize,
    /// The first failures, in index order.
    pub first: Vec<Mismatch>,
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// Set when the two sides could not be compared element by element.
    pub incomparable: Option<Incomparable>,
}

/// Why a comparison could not be made element by element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incomparable {
    /// The lengths differ.
    Lengths {
        /// Elements read back (or on the first side).
        got: usize,
        /// Elements in the reference (or on the second side).
        want: usize,
    },
    /// The output holds `got` elements; the reference is of `want`.
    DType {
        /// The output's declared dtype.
        got: DType,
        /// The reference's dtype (the host type asked for).
        want: DType,
    },
    /// There is no output `index`: the test declared `outputs`.
    NoOutput {
        /// The output asked for.
        index: usize,
        /// How many outputs there are.
        outputs: usize,
    },
}

impl Mismatches {
    /// How many mismatches are kept in [`Mismatches::first`].
    pub const MAX_REPORTED: usize = 10;

    /// A report of two sides that cannot be compared element by element.
    pub(super) fn not_comparable(
        dtype: DType,
        total: usize,
        why: Incomparable,
        tol: Tolerance,
    ) -> Self {
        Mismatches {
            dtype,
            total,
            count: total,
            unwritten: 0,
            first: Vec::new(),
            tolerance: tol,
            incomparable: Some(why),
        }
    }

    /// The report with the two sides named `got` and `want` (the
    /// `Display` form names them "got" and "want"; differential runs name
    /// adapters).
    pub(super) fn write_labeled(
        &self,
        f: &mut dyn fmt::Write,
        got: &str,
        want: &str,
    ) -> fmt::Result {
        match self.incomparable {
            Some(Incomparable::Lengths { got: g, want: w }) => {
                return write!(f, "{}: {got} has {g} elements, {want} has {w}", self.dtype);
            }
            Some(Incomparable::DType { got: g, want: w }) => {
                return write!(
                    f,
                    "the output is {g}, {want} is {w}: read it as its own element type"
                );
            }
            Some(Incomparable::NoOutput { index, outputs }) => {
                return write!(f, "there is no output {index}: the test declared {outputs}");
            }
            None => {}
        }
        write!(
            f,
            "{} of {} {} elements differ ({} never written; tolerance {}); first {}:",
            self.count,
            self.total,
            self.dtype,
            self.unwritten,
            self.tolerance,
            self.first.len()
        )?;
        let width = 2 * self.dtype.size_in_bytes();
        for m in &self.first {
            let at = match &m.position {
                Some(p) => format!("{p:?} (flat {})", m.index),
                None => format!("[{}]", m.index),
            };
            if m.unwritten {
                let by = if got == "got" {
                    String::new()
                } else {
                    format!(" on {got}")
                };
                write!(
                    f,
                    "\n  {at}: never written{by} (still poison 0x{:0width$x}), {want} {}",
                    m.got_bits, m.want
                )?;
            } else {
                let abs = (m.got - m.want).abs();
                let rel = abs / m.want.abs();
                let ulps = if m.ulps == u64::MAX {
                    "-".to_string()
                } else {
                    m.ulps.to_string()
                };
                write!(
                    f,
                    "\n  {at}: {got} {}, {want} {} (abs err {abs:.3e}, rel err {rel:.3e}, {ulps} ulps)",
                    m.got, m.want
                )?;
                if let Some(k) = m.over_poison(self.dtype) {
                    write!(f, " = poison 0x{:08x} + {k}", poison(self.dtype))?;
                }
                if m.at_loop_cap() {
                    write!(f, " = Mesa's loop cap")?;
                }
            }
        }
        self.write_hints(f)
    }

    /// What the pattern of the mismatches shown suggests, one `hint:` line
    /// each: an accumulating kernel on a poisoned output, Mesa's loop cap.
    fn write_hints(&self, f: &mut dyn fmt::Write) -> fmt::Result {
        let over: Vec<(f64, u64)> = self
            .first
            .iter()
            .filter_map(|m| m.over_poison(self.dtype).map(|k| (m.got, k)))
            .collect();
        if let Some(&(got, k)) = over.first() {
            write!(
                f,
                "\nhint: {} of the {} values shown are the poison pattern plus a small count \
                 ({got} = 0x{:08x} + {k}): the kernel added to output elements it never set, \
                 and the test fills outputs with poison. An accumulating kernel (atomicAdd, +=) \
                 needs its output zeroed: bind it with `inout(&zeros)` instead of `output`.",
                over.len(),
                self.first.len(),
                poison(self.dtype)
            )?;
        }
        if self.unwritten > 0 && self.dtype.is_float() {
            write!(
                f,
                "\nhint: an element still poison was never stored to; if the kernel only adds \
                 to its output (+=), a float poison stays NaN: bind the output with \
                 `inout(&zeros)`."
            )?;
        }
        let capped = self.first.iter().filter(|m| m.at_loop_cap()).count();
        if capped > 0 {
            write!(
                f,
                "\nhint: {capped} of the values shown are exactly {MESA_LOOP_CAP} where more was \
                 expected: Mesa's software adapters (lavapipe, llvmpipe) stop a shader \
                 invocation after {MESA_LOOP_CAP} loop iterations in total \
                 (LP_MAX_TGSI_LOOP_ITERATIONS) and carry on without an error. Keep each \
                 invocation's loops shorter (more invocations, several elements per iteration)."
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Mismatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_labeled(f, "got", "want")
    }
}

impl std::error::Error for Mismatches {}

/// One element as the comparison sees it: its value and raw bits.
#[derive(Clone, Copy)]
pub(super) struct Elem {
    pub(super) value: f64,
    pub(super) bits: u64,
}

pub(super) fn elems_of<T: Element>(values: &[T]) -> Vec<Elem> {
    let bytes = T::to_device_bytes(values);
    let size = T::DTYPE.size_in_bytes();
    values
        .iter()
        .zip(bytes.chunks_exact(size))
        .map(|(v, b)| Elem {
            value: v.to_f64(),
            bits: bits_of(b),
        })
        .collect()
}

/// The elements of `dtype` in device bytes, as the comparison sees them.
pub(super) fn elems_from_bytes(dtype: DType, bytes: &[u8]) -> Vec<Elem> {
    fn values<T: Element>(bytes: &[u8]) -> Vec<f64> {
        T::from_device_bytes(bytes)
            .into_iter()
            .map(T::to_f64)
            .collect()
    }
    let values = match dtype {
        DType::F32 => values::<f32>(bytes),
        DType::F16 => values::<half::f16>(bytes),
        DType::BF16 => values::<half::bf16>(bytes),
        DType::F64 => values::<f64>(bytes),
        DType::I32 => values::<i32>(bytes),
        DType::U32 => values::<u32>(bytes),
        DType::I16 => values::<i16>(bytes),
        DType::U16 => values::<u16>(bytes),
        DType::I8 => values::<i8>(bytes),
        DType::U8 => values::<u8>(bytes),
        DType::Bool => values::<bool>(bytes),
        // No host element: the bytes.
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => values::<u8>(bytes),
    };
    values
        .into_iter()
        .zip(bytes.chunks_exact(dtype.size_in_bytes()))
        .map(|(value, b)| Elem {
            value,
            bits: bits_of(b),
        })
        .collect()
}

/// One element's bytes (1, 2, 4 or 8, little-endian) as an integer.
pub(super) fn bits_of(b: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(word)
}

/// The position of `bits` on a line where consecutive floats are
/// consecutive integers (so +0 and -0 meet).
fn float_order(bits: u64, width_bits: u32) -> i128 {
    let sign = 1u64 << (width_bits - 1);
    if bits & sign != 0 {
        -((bits & !sign) as i128)
    } else {
        bits as i128
    }
}

fn ulp_distance(dtype: DType, got: Elem, want: Elem) -> u64 {
    if dtype.is_float() {
        let w = 8 * dtype.size_in_bytes() as u32;
        let d = float_order(got.bits, w).abs_diff(float_order(want.bits, w));
        d.min(u64::MAX as u128) as u64
    } else {
        (got.value - want.value).abs() as u64
    }
}

fn unravel(mut index: usize, shape: &[usize]) -> Vec<usize> {
    let mut pos = vec![0; shape.len()];
    for (p, &d) in pos.iter_mut().zip(shape).rev() {
        if d > 0 {
            *p = index % d;
            index /= d;
        }
    }
    pos
}

pub(super) fn compare_elems(
    dtype: DType,
    got: &[Elem],
    want: &[Elem],
    tol: Tolerance,
    shape: Option<&[usize]>,
    poison_aware: bool,
) -> std::result::Result<(), Mismatches> {
    let mut report = Mismatches {
        dtype,
        total: want.len(),
        count: 0,
        unwritten: 0,
        first: Vec::new(),
        tolerance: tol,
        incomparable: None,
    };
    if got.len() != want.len() {
        report.incomparable = Some(Incomparable::Lengths {
            got: got.len(),
            want: want.len(),
        });
        report.count = got.len().max(want.len());
        return Err(report);
    }
    let poison_bits = element_poison(dtype);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let unwritten = poison_aware && g.bits == poison_bits;
        let ulps = if g.value.is_nan() || w.value.is_nan() {
            u64::MAX
        } else {
            ulp_distance(dtype, g, w)
        };
        let ok = !unwritten
            && ((g.value.is_nan() && w.value.is_nan())
                || g.value == w.value
                || (g.value - w.value).abs() <= tol.abs + tol.rel * w.value.abs()
                || ulps <= tol.ulps);
        if ok {
            continue;
        }
        report.count += 1;
        report.unwritten += unwritten as usize;
        if report.first.len() < Mismatches::MAX_REPORTED {
            report.first.push(Mismatch {
                index: i,
                position: shape.filter(|s| s.len() > 1).map(|s| unravel(i, s)),
                got: g.value,
                want: w.value,
                got_bits: g.bits,
                unwritten,
                ulps,
            });
        }
    }
    if report.count == 0 {
        Ok(())
    } else {
        Err(report)
    }
}

/// Compare `got` with the reference `want` element by element within `tol`
/// (see [`Tolerance`]). Any dtype; values are compared as f64 and ULPs in
/// `T`'s own type. An element whose bits are [`poison`] fails as "never
/// written".
///
/// # Errors
/// The [`Mismatches`] (count and first failures) when any element fails or
/// the lengths differ.
pub fn compare<T: Element>(
    got: &[T],
    want: &[T],
    tol: Tolerance,
) -> std::result::Result<(), Mismatches> {
    compare_elems(
        T::DTYPE,
        &elems_of(got),
        &elems_of(want),
        tol,
        None,
        T::DTYPE != DType::Bool,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn tolerances() {
        let one = 1.0f32;
        let next = f32::from_bits(one.to_bits() + 1);
        assert!(compare(&[one], &[one], Tolerance::EXACT).is_ok());
        assert!(compare(&[next], &[one], Tolerance::EXACT).is_err());
        assert!(compare(&[next], &[one], Tolerance::ulps(1)).is_ok());
        assert!(compare(&[1.1f32], &[1.0], Tolerance::abs(0.11)).is_ok());
        assert!(compare(&[1.1f32], &[1.0], Tolerance::abs(0.09)).is_err());
        assert!(compare(&[110.0f32], &[100.0], Tolerance::rel(0.11)).is_ok());
        assert!(compare(&[110.0f32], &[100.0], Tolerance::rel(0.09)).is_err());
        // abs and rel add up, as in NumPy's isclose.
        assert!(compare(&[1.5f32], &[1.0], Tolerance::abs(0.3).with_rel(0.3)).is_ok());
        // +0 and -0 are equal and 0 ulps apart; the smallest subnormals
        // either side of zero are 2 ulps apart.
        assert!(compare(&[-0.0f32], &[0.0], Tolerance::EXACT).is_ok());
        let tiny = f32::from_bits(1);
        assert!(compare(&[-tiny], &[tiny], Tolerance::ulps(2)).is_ok());
        assert!(compare(&[-tiny], &[tiny], Tolerance::ulps(1)).is_err());
        assert!(compare(&[f32::NAN], &[f32::NAN], Tolerance::EXACT).is_ok());
        assert!(compare(&[f32::NAN], &[1.0], Tolerance::abs(1e9)).is_err());
        assert!(compare(&[f32::INFINITY], &[f32::INFINITY], Tolerance::EXACT).is_ok());
        assert!(compare(&[7i32], &[5], Tolerance::ulps(2)).is_ok());
        assert!(compare(&[7i32], &[5], Tolerance::ulps(1)).is_err());
        let h = f16::from_f32(1.0);
        let h_next = f16::from_bits(h.to_bits() + 3);
        assert!(compare(&[h_next], &[h], Tolerance::ulps(3)).is_ok());
        assert!(compare(&[h_next], &[h], Tolerance::ulps(2)).is_err());
        let m = compare(&[1.0f32, 2.0], &[1.0], Tolerance::EXACT).unwrap_err();
        assert_eq!(
            m.incomparable,
            Some(Incomparable::Lengths { got: 2, want: 1 })
        );
    }

    #[test]
    fn poison_is_nan_and_flagged_unwritten() {
        let p = f32::from_bits(poison(DType::F32));
        assert!(p.is_nan());
        assert!(f16::from_bits(element_poison(DType::F16) as u16).is_nan());
        assert!(half::bf16::from_bits(element_poison(DType::BF16) as u16).is_nan());
        // Even a NaN reference does not excuse a never-written element.
        let m = compare(&[p, 2.0], &[f32::NAN, 3.0], Tolerance::abs(10.0)).unwrap_err();
        assert_eq!((m.count, m.unwritten), (1, 1));
        assert!(m.first[0].unwritten);
        let report = m.to_string();
        assert!(report.contains("never written"), "{report}");
        assert!(report.contains("0x7fc0dead"), "{report}");
    }

    #[test]
    fn report_names_the_first_mismatches() {
        let got: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let mut want = got.clone();
        for i in (3..100).step_by(7) {
            want[i] += 0.5;
        }
        let m = compare(&got, &want, Tolerance::abs(0.1)).unwrap_err();
        assert_eq!(m.count, 14);
        assert_eq!(m.first.len(), Mismatches::MAX_REPORTED);
        assert_eq!(m.first[0].index, 3);
        let report = m.to_string();
        assert!(
            report.starts_with("14 of 100 float32 elements differ"),
            "{report}"
        );
        assert!(report.contains("[3]: got 3, want 3.5"), "{report}");
        let mut labeled = String::new();
        m.write_labeled(&mut labeled, "llvmpipe on Gl", "lavapipe on Vulkan")
            .unwrap();
        assert!(
            labeled.contains("[3]: llvmpipe on Gl 3, lavapipe on Vulkan 3.5"),
            "{labeled}"
        );
    }

    #[test]
    fn poison_plus_a_count_and_the_loop_cap_are_named() {
        // An atomicAdd of 155 into an output left as poison.
        let p = poison(DType::U32);
        let got = [p + 155, 7, p + 3];
        let m = compare(&got, &[155u32, 8, 3], Tolerance::EXACT).unwrap_err();
        assert_eq!(m.first[0].over_poison(DType::U32), Some(155));
        assert_eq!(m.first[1].over_poison(DType::U32), None);
        let report = m.to_string();
        assert!(
            report.contains("got 3735928714, want 155")
                && report.contains("= poison 0xdeadbeef + 155"),
            "{report}"
        );
        assert!(
            report.contains(
                "hint: 2 of the 3 values shown are the poison pattern plus a small count"
            ),
            "{report}"
        );
        assert!(report.contains("`inout(&zeros)`"), "{report}");
        // i32 alike; far from poison is no hint; a float's is NaN.
        let m = compare(&[p as i32 + 1], &[1i32], Tolerance::EXACT).unwrap_err();
        assert!(m.to_string().contains("poison pattern plus"), "{m}");
        let m = compare(&[5i32], &[1i32], Tolerance::EXACT).unwrap_err();
        assert!(!m.to_string().contains("hint"), "{m}");
        let nan = f32::from_bits(poison(DType::F32));
        let m = compare(&[nan], &[1.0f32], Tolerance::EXACT).unwrap_err();
        assert!(m.to_string().contains("if the kernel only adds"), "{m}");
        // Exactly 65535 where more was wanted.
        let m = compare(&[65535u32, 65535], &[100000u32, 65534], Tolerance::EXACT).unwrap_err();
        assert!(m.first[0].at_loop_cap() && !m.first[1].at_loop_cap());
        let report = m.to_string();
        assert!(
            report.contains("want 100000 (") && report.contains("= Mesa's loop cap"),
            "{report}"
        );
        assert!(
            report.contains("hint: 1 of the values shown are exactly 65535")
                && report.contains("LP_MAX_TGSI_LOOP_ITERATIONS"),
            "{report}"
        );
    }

    #[test]
    fn positions_are_row_major() {
        assert_eq!(unravel(7, &[2, 3, 2]), vec![1, 0, 1]);
        assert_eq!(unravel(0, &[4]), vec![0]);
    }
}
