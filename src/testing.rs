//! Test your own WGSL compute kernels headless, on typed host slices.
//!
//! [`KernelTest`] runs one compute entry point once: it uploads the inputs
//! (read-only storage buffers), fills every output (read-write storage
//! buffers) with a poison pattern ([`poison`]: NaN bits for floats,
//! `0xDEADBEEF` for integers) so that an element the kernel never writes
//! cannot pass by luck, dispatches the workgroups you give, and reads the
//! outputs back as [`Outputs`]. [`Outputs::check`] and [`compare`] compare
//! them with a reference within a [`Tolerance`] (absolute, relative, ULP)
//! and report the first mismatches readably.
//!
//! Without [`KernelTest::device`] it runs on [`default_device`]: a software
//! adapter (Mesa's lavapipe on Vulkan or llvmpipe on GL) when the machine has
//! one, so the same test runs on a laptop and on a CI machine with no GPU.
//! `WGARRAY_BACKEND=vulkan|gl|dx12|metal` and `WGARRAY_ADAPTER=<substring>`
//! narrow the choice, as for [`Device::new_default`].
//!
//! Bindings are numbered in the order they are added, all in group 0:
//! the first `input`, `output` or `uniform_bytes` call is `@binding(0)`, the
//! next `@binding(1)`, and so on.
//!
//! A plain `#[test]` for a kernel of your own (this example runs as a
//! doctest):
//!
//! ```
//! # macro_rules! doctest { ($(#[test] fn $n:ident() -> $r:ty $b:block)*) => { $(fn $n() -> $r $b)* } }
//! # doctest! {
//! #[test]
//! fn axpy_kernel_matches_the_host() -> wgarray::Result<()> {
//!     use wgarray::DType;
//!     use wgarray::testing::{KernelTest, Tolerance};
//!
//!     const AXPY: &str = r#"
//!         override alpha: f32 = 1.0;
//!         @group(0) @binding(0) var<storage, read> x: array<f32>;
//!         @group(0) @binding(1) var<storage, read> y: array<f32>;
//!         @group(0) @binding(2) var<storage, read_write> out: array<f32>;
//!
//!         @compute @workgroup_size(64)
//!         fn axpy(@builtin(global_invocation_id) id: vec3<u32>) {
//!             if id.x < arrayLength(&out) {
//!                 out[id.x] = alpha * x[id.x] + y[id.x];
//!             }
//!         }
//!     "#;
//!     let n = 1001; // not a multiple of the workgroup size
//!     let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
//!     let y: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
//!     let out = KernelTest::new(AXPY, "axpy")
//!         .input(&x)
//!         .input(&y)
//!         .output(DType::F32, &[n])
//!         .constant("alpha", 2.5)
//!         .workgroups([(n as u32).div_ceil(64), 1, 1])
//!         .run()?;
//!     let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 2.5 * x + y).collect();
//!     out.assert_close(0, &want, Tolerance::ulps(1));
//!     Ok(())
//! }
//! # }
//! # axpy_kernel_matches_the_host().unwrap();
//! ```
//!
//! # Errors
//!
//! [`KernelTest::run`] returns, as values of [`Error`]:
//! - [`Error::Kernel`] when naga cannot parse or validate the WGSL, or the
//!   entry point is missing or not `@compute` (the message is naga's);
//! - [`Error::MissingFeature`] with `feature: "SHADER_F16"` when the kernel
//!   uses f16 (`enable f16;`) and the adapter lacks `SHADER_F16` (GL), and
//!   `"SUBGROUP"` likewise for subgroup operations;
//! - [`Error::Validation`] for anything wgpu's validation rejects: bindings
//!   that do not match the shader's declarations, too many workgroups, an
//!   unknown override constant;
//! - [`Error::NoAdapter`] when no adapter was given and none is found;
//! - [`Error::Readback`], [`Error::DeviceLost`], [`Error::OutOfMemory`] as for
//!   any read-back.

// The example's `#[test]` does run: a hidden macro in the doctest strips the
// attribute and the test is called, so the code shown is the code tested.
#![allow(clippy::test_attr_in_doctest)]

use std::fmt;
use std::sync::OnceLock;

use naga::valid::{Capabilities, ValidationFlags, Validator};
use wgpu::util::DeviceExt;

use crate::{DType, Device, DeviceOptions, Element, Error, Result};

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
        DType::I32 | DType::U32 | DType::Bool => 0xDEAD_BEEF,
    }
}

/// The poison bits of one element of `dtype` (16 bits for 2-byte dtypes).
fn element_poison(dtype: DType) -> u32 {
    match dtype.size_in_bytes() {
        2 => poison(dtype) & 0xFFFF,
        _ => poison(dtype),
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
    /// The bits read back (the low 16 for 2-byte dtypes).
    pub got_bits: u32,
    /// Whether the element still held the poison pattern: never written.
    pub unwritten: bool,
    /// Distance in units in the last place (`u64::MAX` when one side is NaN).
    pub ulps: u64,
}

/// The result of a failed comparison: how many elements differ and the
/// first [`Mismatches::MAX_REPORTED`] of them. Its `Display` is the report
/// [`Outputs::assert_close`] panics with.
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
    /// Set when the lengths differ: `(got, want)`.
    pub lengths: Option<(usize, usize)>,
}

impl Mismatches {
    /// How many mismatches are kept in [`Mismatches::first`].
    pub const MAX_REPORTED: usize = 10;
}

impl fmt::Display for Mismatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((got, want)) = self.lengths {
            return write!(
                f,
                "{}: got {got} elements, the reference has {want}",
                self.dtype
            );
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
        let width = if self.dtype.size_in_bytes() == 2 {
            4
        } else {
            8
        };
        for m in &self.first {
            let at = match &m.position {
                Some(p) => format!("{p:?} (flat {})", m.index),
                None => format!("[{}]", m.index),
            };
            if m.unwritten {
                write!(
                    f,
                    "\n  {at}: never written (still poison 0x{:0width$x}), want {}",
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
                    "\n  {at}: got {}, want {} (abs err {abs:.3e}, rel err {rel:.3e}, {ulps} ulps)",
                    m.got, m.want
                )?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Mismatches {}

/// One element as the comparison sees it: its value and raw bits.
#[derive(Clone, Copy)]
struct Elem {
    value: f64,
    bits: u32,
}

fn elems_of<T: Element>(values: &[T]) -> Vec<Elem> {
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

fn bits_of(b: &[u8]) -> u32 {
    match *b {
        [a, b] => u16::from_ne_bytes([a, b]) as u32,
        [a, b, c, d] => u32::from_ne_bytes([a, b, c, d]),
        _ => unreachable!("elements are 2 or 4 bytes"),
    }
}

/// The position of `bits` on a line where consecutive floats are
/// consecutive integers (so +0 and -0 meet).
fn float_order(bits: u32, width_bits: u32) -> i64 {
    let sign = 1u32 << (width_bits - 1);
    if bits & sign != 0 {
        -((bits & !sign) as i64)
    } else {
        bits as i64
    }
}

fn ulp_distance(dtype: DType, got: Elem, want: Elem) -> u64 {
    match dtype {
        DType::F32 => float_order(got.bits, 32).abs_diff(float_order(want.bits, 32)),
        DType::F16 | DType::BF16 => float_order(got.bits, 16).abs_diff(float_order(want.bits, 16)),
        DType::I32 | DType::U32 | DType::Bool => (got.value - want.value).abs() as u64,
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

fn compare_elems(
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
        lengths: None,
    };
    if got.len() != want.len() {
        report.lengths = Some((got.len(), want.len()));
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

/// One output as read back: dtype, shape and the raw device bytes.
#[derive(Clone, Debug)]
struct Output {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

/// The outputs of one [`KernelTest::run`], in the order they were declared
/// (output 0 is the first [`KernelTest::output`], whatever its binding).
#[derive(Clone, Debug)]
pub struct Outputs {
    outputs: Vec<Output>,
}

impl Outputs {
    /// How many outputs were declared.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// Whether no output was declared.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    fn output(&self, i: usize) -> Result<&Output> {
        self.outputs.get(i).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "output {i} does not exist: the kernel test declared {}",
                self.outputs.len()
            ))
        })
    }

    /// The shape output `i` was declared with.
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.outputs[i].shape
    }

    /// The dtype output `i` was declared with.
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn dtype(&self, i: usize) -> DType {
        self.outputs[i].dtype
    }

    /// The raw device bytes of output `i` (elements of
    /// [`DType::size_in_bytes`], row-major; bool as a `u32` each).
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn bytes(&self, i: usize) -> &[u8] {
        &self.outputs[i].bytes
    }

    /// Output `i` as host values, row-major.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no output `i`;
    /// [`Error::DType`] when `T` is not its dtype.
    pub fn get<T: Element>(&self, i: usize) -> Result<Vec<T>> {
        let o = self.output(i)?;
        if T::DTYPE != o.dtype {
            return Err(Error::DType {
                op: "testing::Outputs::get",
                dtype: T::DTYPE,
                other: Some(o.dtype),
            });
        }
        Ok(T::from_device_bytes(&o.bytes))
    }

    /// Flat indices of the elements of output `i` that still hold the
    /// [`poison`] pattern: the kernel (almost surely) never wrote them.
    ///
    /// # Panics
    /// When there is no output `i`.
    pub fn unwritten(&self, i: usize) -> Vec<usize> {
        let o = &self.outputs[i];
        let poison_bits = element_poison(o.dtype);
        o.bytes
            .chunks_exact(o.dtype.size_in_bytes())
            .enumerate()
            .filter(|(_, b)| bits_of(b) == poison_bits)
            .map(|(i, _)| i)
            .collect()
    }

    /// Compare output `i` with `want` within `tol` (see [`Tolerance`]);
    /// the report gives positions in the output's shape and names
    /// never-written elements.
    ///
    /// # Errors
    /// The [`Mismatches`] when any element fails, the lengths differ, there
    /// is no output `i` or `T` is not its dtype (reported as a length or
    /// dtype mismatch).
    pub fn check<T: Element>(
        &self,
        i: usize,
        want: &[T],
        tol: Tolerance,
    ) -> std::result::Result<(), Mismatches> {
        let Some(o) = self.outputs.get(i).filter(|o| o.dtype == T::DTYPE) else {
            return Err(Mismatches {
                dtype: T::DTYPE,
                total: want.len(),
                count: want.len(),
                unwritten: 0,
                first: Vec::new(),
                tolerance: tol,
                lengths: Some((0, want.len())),
            });
        };
        let values = T::from_device_bytes(&o.bytes);
        let got: Vec<Elem> = values
            .iter()
            .zip(o.bytes.chunks_exact(o.dtype.size_in_bytes()))
            .map(|(v, b)| Elem {
                value: v.to_f64(),
                bits: bits_of(b),
            })
            .collect();
        compare_elems(T::DTYPE, &got, &elems_of(want), tol, Some(&o.shape), true)
    }

    /// [`Outputs::check`], panicking with the report on failure: for tests.
    ///
    /// # Panics
    /// With the [`Mismatches`] report when the check fails.
    #[track_caller]
    pub fn assert_close<T: Element>(&self, i: usize, want: &[T], tol: Tolerance) {
        if let Err(m) = self.check(i, want, tol) {
            panic!("output {i} does not match its reference: {m}");
        }
    }
}

/// One binding of a kernel test, in group 0.
#[derive(Clone, Debug)]
enum Binding {
    Input { bytes: Vec<u8> },
    Uniform { bytes: Vec<u8> },
    Output { dtype: DType, shape: Vec<usize> },
}

/// One run of a WGSL compute entry point on host data; see the
/// [module docs](self) for an example.
///
/// Build it with [`KernelTest::new`], add bindings in binding order
/// ([`KernelTest::input`], [`KernelTest::output`],
/// [`KernelTest::uniform_bytes`]), set [`KernelTest::workgroups`], and
/// [`KernelTest::run`] it. A test can be run more than once.
#[derive(Clone, Debug)]
pub struct KernelTest {
    source: String,
    entry_point: String,
    bindings: Vec<Binding>,
    workgroups: [u32; 3],
    constants: Vec<(String, f64)>,
    device: Option<Device>,
}

impl KernelTest {
    /// A test of the `@compute` function `entry_point` in the WGSL `source`,
    /// with no bindings and one workgroup.
    pub fn new(source: impl Into<String>, entry_point: impl Into<String>) -> Self {
        KernelTest {
            source: source.into(),
            entry_point: entry_point.into(),
            bindings: Vec::new(),
            workgroups: [1, 1, 1],
            constants: Vec::new(),
            device: None,
        }
    }

    /// Bind `data` at the next binding as `var<storage, read>`: an
    /// `array<T>` of `data.len()` elements of `T`'s [`DType`] (bool as one
    /// `u32` each). The buffer is padded to a multiple of 4 bytes (at least
    /// 4), so WGSL's `arrayLength` may round up for 2-byte dtypes.
    pub fn input<T: Element>(mut self, data: &[T]) -> Self {
        self.bindings.push(Binding::Input {
            bytes: T::to_device_bytes(data),
        });
        self
    }

    /// Bind `bytes` at the next binding as `var<uniform>`, zero-padded to a
    /// multiple of 16 bytes (the layout, WGSL's uniform rules, is yours).
    pub fn uniform_bytes(mut self, bytes: &[u8]) -> Self {
        self.bindings.push(Binding::Uniform {
            bytes: bytes.to_vec(),
        });
        self
    }

    /// Bind an output at the next binding as `var<storage, read_write>`:
    /// `shape.iter().product()` elements of `dtype`, row-major, each filled
    /// with [`poison`] before the kernel runs. Outputs are numbered 0, 1, ...
    /// in the order of these calls (see [`Outputs`]). The buffer is padded
    /// to a multiple of 4 bytes (at least 4).
    pub fn output(mut self, dtype: DType, shape: &[usize]) -> Self {
        self.bindings.push(Binding::Output {
            dtype,
            shape: shape.to_vec(),
        });
        self
    }

    /// Dispatch `[x, y, z]` workgroups (each at most the adapter's
    /// `max_compute_workgroups_per_dimension`, 65535 by WebGPU's defaults).
    /// Default `[1, 1, 1]`.
    pub fn workgroups(mut self, counts: [u32; 3]) -> Self {
        self.workgroups = counts;
        self
    }

    /// Set the pipeline-overridable constant `name` (its identifier, or its
    /// `@id` as a decimal string) to `value`, as WebGPU's `constants` do;
    /// the value converts to the constant's WGSL type.
    pub fn constant(mut self, name: impl Into<String>, value: f64) -> Self {
        self.constants.push((name.into(), value));
        self
    }

    /// Run on `device` instead of [`default_device`].
    pub fn device(mut self, device: &Device) -> Self {
        self.device = Some(device.clone());
        self
    }

    /// Validate the kernel with naga, run it once and read every output back.
    ///
    /// # Errors
    /// See the [module docs](self#errors): [`Error::Kernel`],
    /// [`Error::MissingFeature`], [`Error::Validation`], [`Error::NoAdapter`],
    /// and read-back failures.
    pub fn run(&self) -> Result<Outputs> {
        let device = match &self.device {
            Some(d) => d.clone(),
            None => default_device()?,
        };
        self.validate(&device)?;
        let dev = &device.inner;
        let d = &dev.device;

        // Buffers: inputs and uniforms filled, outputs poisoned.
        let buffers: Vec<wgpu::Buffer> = self
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (contents, usage) = match b {
                    Binding::Input { bytes } => (padded(bytes, 4), wgpu::BufferUsages::STORAGE),
                    Binding::Uniform { bytes } => (padded(bytes, 16), wgpu::BufferUsages::UNIFORM),
                    Binding::Output { dtype, shape } => {
                        let len = (shape.iter().product::<usize>() * dtype.size_in_bytes())
                            .next_multiple_of(4)
                            .max(4);
                        let word = poison(*dtype).to_ne_bytes();
                        (
                            word.iter().copied().cycle().take(len).collect(),
                            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                        )
                    }
                };
                device.scoped(|| {
                    Ok(d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some(&format!("wgarray::testing binding {i}")),
                        contents: &contents,
                        usage,
                    }))
                })
            })
            .collect::<Result<_>>()?;

        // Pipeline, bind group and commands: wgpu's validation errors
        // surface here, as Error::Validation.
        let staging: Vec<(usize, wgpu::Buffer)> = self
            .bindings
            .iter()
            .enumerate()
            .filter(|(_, b)| matches!(b, Binding::Output { .. }))
            .map(|(i, _)| {
                let size = buffers[i].size();
                let buffer = d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wgarray::testing read-back"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                (i, buffer)
            })
            .collect();
        let commands = device.scoped(|| Ok(self.encode(d, &buffers, &staging)))?;

        let index = device.scoped(|| {
            let _guard = dev.pool.lock_queue();
            Ok(dev.queue.submit([commands]))
        })?;
        let mut outputs = Vec::new();
        for (i, buffer) in &staging {
            let Binding::Output { dtype, shape } = &self.bindings[*i] else {
                unreachable!("staging buffers are made for outputs only")
            };
            let len = shape.iter().product::<usize>() * dtype.size_in_bytes();
            let mut bytes = device
                .scoped(|| crate::memory::read_back(d, buffer, ..buffer.size(), index.clone()))?;
            bytes.truncate(len);
            outputs.push(Output {
                dtype: *dtype,
                shape: shape.clone(),
                bytes,
            });
        }
        Ok(Outputs { outputs })
    }

    /// naga's verdict, with missing features told apart from broken WGSL.
    fn validate(&self, device: &Device) -> Result<()> {
        let label = format!("testing:{}", self.entry_point);
        let kernel_error = |message: String| Error::Kernel {
            kernel: label.clone(),
            message,
        };
        let module = naga::front::wgsl::parse_str(&self.source)
            .map_err(|e| kernel_error(e.emit_to_string(&self.source)))?;
        let features = device.features();
        let mut caps = Capabilities::default();
        let mut needs = Vec::new();
        for (feature, name, cap) in [
            (
                wgpu::Features::SHADER_F16,
                "SHADER_F16",
                Capabilities::SHADER_FLOAT16,
            ),
            (
                wgpu::Features::SUBGROUP,
                "SUBGROUP",
                Capabilities::SUBGROUP | Capabilities::SUBGROUP_BARRIER,
            ),
        ] {
            if features.contains(feature) {
                caps |= cap;
            } else {
                needs.push((name, cap));
            }
        }
        // `enable f16;` alone needs the feature, even if nothing uses f16.
        if !features.contains(wgpu::Features::SHADER_F16) && enables(&self.source, "f16") {
            return Err(missing_feature("SHADER_F16"));
        }
        if let Err(e) = Validator::new(ValidationFlags::all(), caps).validate(&module) {
            // Would a feature the adapter lacks make it valid?
            for (name, cap) in needs {
                if Validator::new(ValidationFlags::all(), caps | cap)
                    .validate(&module)
                    .is_ok()
                {
                    return Err(missing_feature(name));
                }
            }
            return Err(kernel_error(e.emit_to_string(&self.source)));
        }
        match module
            .entry_points
            .iter()
            .find(|ep| ep.name == self.entry_point)
        {
            Some(ep) if ep.stage == naga::ShaderStage::Compute => Ok(()),
            Some(ep) => Err(kernel_error(format!(
                "entry point `{}` is a {:?} shader, not @compute",
                ep.name, ep.stage
            ))),
            None => Err(kernel_error(format!(
                "no entry point `{}`; the module has: [{}]",
                self.entry_point,
                module
                    .entry_points
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    fn encode(
        &self,
        d: &wgpu::Device,
        buffers: &[wgpu::Buffer],
        staging: &[(usize, wgpu::Buffer)],
    ) -> wgpu::CommandBuffer {
        let entries: Vec<wgpu::BindGroupLayoutEntry> = self
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match b {
                        Binding::Input { .. } => {
                            wgpu::BufferBindingType::Storage { read_only: true }
                        }
                        Binding::Output { .. } => {
                            wgpu::BufferBindingType::Storage { read_only: false }
                        }
                        Binding::Uniform { .. } => wgpu::BufferBindingType::Uniform,
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("wgarray::testing"),
            entries: &entries,
        });
        let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("wgarray::testing"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&self.entry_point),
            source: wgpu::ShaderSource::Wgsl(self.source.as_str().into()),
        });
        let constants: Vec<(&str, f64)> = self
            .constants
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&self.entry_point),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(&self.entry_point),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        let bind_entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("wgarray::testing"),
            layout: &layout,
            entries: &bind_entries,
        });
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wgarray::testing"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgarray::testing"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            let [x, y, z] = self.workgroups;
            pass.dispatch_workgroups(x, y, z);
        }
        for (i, dst) in staging {
            encoder.copy_buffer_to_buffer(&buffers[*i], 0, dst, 0, dst.size());
        }
        encoder.finish()
    }
}

/// `bytes` zero-padded to a multiple of `align` (at least `align` bytes).
fn padded(bytes: &[u8], align: usize) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().next_multiple_of(align).max(align), 0);
    v
}

fn missing_feature(feature: &'static str) -> Error {
    Error::MissingFeature {
        op: "testing::KernelTest::run",
        feature,
    }
}

/// Whether the WGSL has an `enable` directive naming `extension`.
fn enables(source: &str, extension: &str) -> bool {
    source.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix("enable").is_some_and(|rest| {
            rest.trim_end_matches([';', ' ', '\t'])
                .split(',')
                .any(|e| e.trim() == extension)
        })
    })
}

/// The device [`KernelTest`] runs on when given none: among the adapters
/// that match `WGARRAY_BACKEND` and `WGARRAY_ADAPTER` (see
/// [`DeviceOptions::from_env`]), a software one (device type `Cpu`: Mesa's
/// lavapipe on Vulkan before llvmpipe on GL), else what
/// [`Device::new_default`] picks. Made once per process and shared.
///
/// # Errors
/// [`Error::UnknownBackend`] for a bad `WGARRAY_BACKEND`,
/// [`Error::NoAdapter`] when no adapter matches, [`Error::RequestDevice`]
/// when the adapter refuses.
pub fn default_device() -> Result<Device> {
    static DEVICE: OnceLock<Result<Device>> = OnceLock::new();
    DEVICE.get_or_init(software_or_default).clone()
}

fn software_or_default() -> Result<Device> {
    let options = DeviceOptions::from_env()?;
    let backends = match options.backend {
        Some(b) => wgpu::Backends::from(b),
        None => wgpu::Backends::all(),
    };
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    let instance = wgpu::Instance::new(desc);
    let needle = options.adapter_name.as_ref().map(|n| n.to_lowercase());
    let software = pollster::block_on(instance.enumerate_adapters(backends))
        .into_iter()
        .filter(|a| {
            let info = a.get_info();
            info.device_type == wgpu::DeviceType::Cpu
                && needle
                    .as_ref()
                    .is_none_or(|n| info.name.to_lowercase().contains(n))
        })
        .min_by_key(|a| match a.get_info().backend {
            wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
            _ => 1,
        });
    match software {
        Some(adapter) => Device::from_adapter(&adapter),
        None => Device::new(&options),
    }
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
        assert_eq!(m.lengths, Some((2, 1)));
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
    }

    #[test]
    fn enable_directives() {
        assert!(enables("enable f16;\nfn f() {}", "f16"));
        assert!(enables("  enable subgroups, f16 ;", "f16"));
        assert!(!enables("// enable f16;", "f16"));
        assert!(!enables("enable subgroups;", "f16"));
    }

    #[test]
    fn positions_are_row_major() {
        assert_eq!(unravel(7, &[2, 3, 2]), vec![1, 0, 1]);
        assert_eq!(unravel(0, &[4]), vec![0]);
    }
}
