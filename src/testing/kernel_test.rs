//! [`KernelTest`]: runs of WGSL compute entry points on host data (one
//! dispatch, or several passes in order), and their [`Outputs`].

use naga::valid::Capabilities;
use wgpu::util::DeviceExt;

use super::compare::{
    Incomparable, bits_of, compare_elems, element_poison, elems_from_bytes, elems_of, poison,
};
use super::portability::{self, Portability, enables};
use super::reflect::{self, Access, Host, host_type};
use super::{Mismatches, Tolerance, default_device};
use crate::kernels;
use crate::{DType, Device, Element, Error, Result};

/// One output as read back: dtype, shape and the raw device bytes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Output {
    pub(super) dtype: DType,
    pub(super) shape: Vec<usize>,
    pub(super) bytes: Vec<u8>,
}

/// The outputs of one [`KernelTest::run`], in the order they were declared
/// (output 0 is the first [`KernelTest::output`] or [`KernelTest::inout`],
/// whatever its binding and pass), each as it was after the last pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    pub(super) outputs: Vec<Output>,
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
    /// The [`Mismatches`] when any element fails; when the lengths differ,
    /// `T` is not the output's dtype, or there is no output `i`, its
    /// `incomparable` field says which (see [`Incomparable`]).
    pub fn check<T: Element>(
        &self,
        i: usize,
        want: &[T],
        tol: Tolerance,
    ) -> std::result::Result<(), Mismatches> {
        let Some(o) = self.outputs.get(i) else {
            let why = Incomparable::NoOutput {
                index: i,
                outputs: self.outputs.len(),
            };
            return Err(Mismatches::not_comparable(T::DTYPE, want.len(), why, tol));
        };
        if o.dtype != T::DTYPE {
            let why = Incomparable::DType {
                got: o.dtype,
                want: T::DTYPE,
            };
            return Err(Mismatches::not_comparable(T::DTYPE, want.len(), why, tol));
        }
        let got = elems_from_bytes(o.dtype, &o.bytes);
        compare_elems(T::DTYPE, &got, &elems_of(want), tol, Some(&o.shape), true)
    }

    /// Compare output `i` of these outputs with output `i` of `other`
    /// (same dtype and shape) within `tol`; never-written elements on
    /// either side fail.
    pub(super) fn check_against(
        &self,
        other: &Outputs,
        i: usize,
        tol: Tolerance,
    ) -> std::result::Result<(), Mismatches> {
        let (a, b) = (&self.outputs[i], &other.outputs[i]);
        let got = elems_from_bytes(a.dtype, &a.bytes);
        let want = elems_from_bytes(b.dtype, &b.bytes);
        compare_elems(a.dtype, &got, &want, tol, Some(&a.shape), true)
    }

    /// Compare with an [`Expected`] output (device bytes of a dtype, and a
    /// tolerance), as [`Outputs::check`] does with host values: what
    /// property-test references and fixtures hold.
    ///
    /// # Errors
    /// As [`Outputs::check`].
    pub fn check_expected(&self, want: &Expected) -> std::result::Result<(), Mismatches> {
        let Some(o) = self.outputs.get(want.output) else {
            let why = Incomparable::NoOutput {
                index: want.output,
                outputs: self.outputs.len(),
            };
            return Err(Mismatches::not_comparable(
                want.dtype,
                0,
                why,
                want.tolerance,
            ));
        };
        let wanted = elems_from_bytes(want.dtype, &want.bytes);
        if o.dtype != want.dtype {
            let why = Incomparable::DType {
                got: o.dtype,
                want: want.dtype,
            };
            return Err(Mismatches::not_comparable(
                want.dtype,
                wanted.len(),
                why,
                want.tolerance,
            ));
        }
        let got = elems_from_bytes(o.dtype, &o.bytes);
        compare_elems(o.dtype, &got, &wanted, want.tolerance, Some(&o.shape), true)
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

/// What one output should hold: elements of `dtype` as device bytes,
/// within a tolerance. Made by property-test references and kept in
/// fixtures; [`Outputs::check_expected`] compares with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    /// The output's number.
    pub output: usize,
    /// The elements' dtype.
    pub dtype: DType,
    /// The elements as the device holds them (row-major, little-endian;
    /// bool as one `u32` each).
    pub bytes: Vec<u8>,
    /// How close the output must be.
    pub tolerance: Tolerance,
}

impl Expected {
    /// Output `output` should hold `values` within `tolerance`.
    pub fn new<T: Element>(output: usize, values: &[T], tolerance: Tolerance) -> Self {
        Expected {
            output,
            dtype: T::DTYPE,
            bytes: T::to_device_bytes(values),
            tolerance,
        }
    }
}

/// One binding of a pass, in group 0.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Binding {
    /// Typed host data, `var<storage, read>`.
    Input {
        dtype: DType,
        len: usize,
        bytes: Vec<u8>,
    },
    /// Raw bytes, `var<uniform>`; `host` names the Rust type.
    Uniform { bytes: Vec<u8>, host: String },
    /// Output `k`, `var<storage, read_write>`, declared here.
    Output(usize),
    /// Output `k` of an earlier binding, read-only.
    ReadOutput(usize),
    /// Output `k` of an earlier binding, read-write.
    WriteOutput(usize),
}

/// How many workgroups a pass dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Grid {
    /// This many workgroups.
    Workgroups([usize; 3]),
    /// Enough workgroups of the entry point's size for this many invocations.
    Threads([usize; 3]),
}

/// One dispatch: an entry point of a WGSL module, its bindings, grid and
/// override constants.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Pass {
    pub(super) source: String,
    pub(super) entry_point: String,
    pub(super) bindings: Vec<Binding>,
    pub(super) grid: Grid,
    pub(super) constants: Vec<(String, f64)>,
}

/// An output buffer: its dtype and shape, and what it holds before the
/// first pass (`None`: the [`poison`] pattern).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct OutputSpec {
    pub(super) dtype: DType,
    pub(super) shape: Vec<usize>,
    pub(super) init: Option<Vec<u8>>,
}

impl OutputSpec {
    fn bytes(&self) -> u64 {
        self.shape.iter().product::<usize>() as u64 * self.dtype.size_in_bytes() as u64
    }
}

/// A value for a WGSL `override` constant: `bool`, `i32`, `u32`, `f32`,
/// `f16` (`half::f16`) or `f64`. WebGPU passes every constant as an f64 and
/// converts it to the constant's type (integers truncated, bool true when
/// non-zero); [`KernelTest::run`] refuses a value the type cannot take.
pub trait OverrideValue: Copy {
    /// The value as WebGPU passes it.
    fn to_f64(self) -> f64;
}

macro_rules! override_value {
    ($($t:ty),*) => {$(
        impl OverrideValue for $t {
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
        }
    )*};
}
override_value!(i32, u32, f32, f64, half::f16);

impl OverrideValue for bool {
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
}

/// Runs of WGSL compute entry points on host data; see the
/// [module docs](super) for examples.
///
/// Build it with [`KernelTest::new`], add bindings in binding order
/// ([`KernelTest::input`], [`KernelTest::output`], [`KernelTest::inout`],
/// [`KernelTest::uniform`], [`KernelTest::read_output`], ...), set the grid
/// ([`KernelTest::workgroups`] or [`KernelTest::threads`]), optionally add
/// passes ([`KernelTest::then`]), and run it: [`KernelTest::run`] on one
/// device, [`KernelTest::run_repeated`] several times,
/// [`KernelTest::run_on_all`] on every adapter. A test can be run more than
/// once; it is cheap to clone.
///
/// Builder calls apply to the last pass: bindings are numbered from 0 in
/// each pass, constants and the grid are per pass. Outputs are numbered
/// across passes in declaration order.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTest {
    pub(super) passes: Vec<Pass>,
    pub(super) outputs: Vec<OutputSpec>,
    pub(super) device: Option<Device>,
}

/// The checked plan of one pass: its workgroup counts, and the smallest
/// buffer each of its bindings may have (bytes).
struct Plan {
    workgroups: [u32; 3],
    min_bytes: Vec<u64>,
}

/// Everything a run needs on one device, made once for repeated runs.
struct Prepared {
    outputs: Vec<wgpu::Buffer>,
    staging: Vec<wgpu::Buffer>,
    /// What each output holds before the first pass.
    init: Vec<Vec<u8>>,
    passes: Vec<(wgpu::ComputePipeline, wgpu::BindGroup, [u32; 3])>,
}

impl KernelTest {
    /// A test of the `@compute` function `entry_point` in the WGSL `source`,
    /// with no bindings and one workgroup.
    pub fn new(source: impl Into<String>, entry_point: impl Into<String>) -> Self {
        KernelTest {
            passes: vec![Pass {
                source: source.into(),
                entry_point: entry_point.into(),
                bindings: Vec::new(),
                grid: Grid::Workgroups([1, 1, 1]),
                constants: Vec::new(),
            }],
            outputs: Vec::new(),
            device: None,
        }
    }

    fn pass(&mut self) -> &mut Pass {
        self.passes
            .last_mut()
            .expect("a kernel test has at least one pass")
    }

    fn bind(mut self, binding: Binding) -> Self {
        self.pass().bindings.push(binding);
        self
    }

    /// A new pass after the current one: the entry point `entry_point` of
    /// the same WGSL module, with no bindings, one workgroup and no
    /// constants. Passes run in order in one submission, each in its own
    /// compute pass, so a pass sees everything the ones before it wrote;
    /// bind their outputs with [`KernelTest::read_output`] and
    /// [`KernelTest::write_output`].
    pub fn then(self, entry_point: impl Into<String>) -> Self {
        let source = self.passes.last().expect("one pass").source.clone();
        self.then_source(source, entry_point)
    }

    /// A new pass running `entry_point` of another WGSL module (see
    /// [`KernelTest::then`]).
    pub fn then_source(
        mut self,
        source: impl Into<String>,
        entry_point: impl Into<String>,
    ) -> Self {
        self.passes.push(Pass {
            source: source.into(),
            entry_point: entry_point.into(),
            bindings: Vec::new(),
            grid: Grid::Workgroups([1, 1, 1]),
            constants: Vec::new(),
        });
        self
    }

    /// Bind `data` at the next binding as `var<storage, read>`: an array of
    /// `data.len()` elements of `T`'s [`DType`]. The shader's element type
    /// must be `T`'s (scalars, vectors, matrices, arrays or structs of it;
    /// f16 and bf16 may also be read as `u32` words, bool as one `u32` or
    /// `i32` each), else the run fails with [`Error::BindingMismatch`]. The
    /// buffer is zero-padded to a multiple of 4 bytes and to the declared
    /// type's size, so WGSL's `arrayLength` may round up for 2-byte dtypes.
    pub fn input<T: Element>(self, data: &[T]) -> Self {
        self.bind(Binding::Input {
            dtype: T::DTYPE,
            len: data.len(),
            bytes: T::to_device_bytes(data),
        })
    }

    /// Bind `value` at the next binding as `var<uniform>`: its bytes as
    /// bytemuck gives them (`#[repr(C)]`, `#[derive(Pod, Zeroable)]`). Its
    /// size must be the WGSL struct's size under WGSL's layout rules (16-byte
    /// alignment of `vec3` and `vec4`, struct size rounded to its
    /// alignment), or at most that rounded up to 16 bytes, else the run fails
    /// with [`Error::BindingMismatch`] giving both sizes.
    ///
    /// The derives come from the `bytemuck` crate, which wgarray
    /// re-exports as [`crate::bytemuck`]: use it with
    /// `#[bytemuck(crate = "wgarray::bytemuck")]`, as below, or add
    /// `bytemuck = { version = "1", features = ["derive"] }` to your
    /// `Cargo.toml` and leave that attribute out.
    ///
    /// ```
    /// use wgarray::bytemuck::{Pod, Zeroable};
    /// use wgarray::testing::KernelTest;
    ///
    /// #[repr(C)]
    /// #[derive(Clone, Copy, Pod, Zeroable)]
    /// #[bytemuck(crate = "wgarray::bytemuck")]
    /// struct Params {
    ///     n: u32,
    ///     scale: f32,
    /// }
    ///
    /// let src = "struct Params { n: u32, scale: f32 }
    ///     @group(0) @binding(0) var<uniform> p: Params;
    ///     @compute @workgroup_size(1) fn main() { _ = p.n; }";
    /// let test = KernelTest::new(src, "main").uniform(&Params { n: 4, scale: 0.5 });
    /// # let _ = test;
    /// ```
    pub fn uniform<T: bytemuck::Pod>(self, value: &T) -> Self {
        let name = std::any::type_name::<T>();
        let host = name.rsplit("::").next().unwrap_or(name).to_string();
        self.bind(Binding::Uniform {
            bytes: bytemuck::bytes_of(value).to_vec(),
            host,
        })
    }

    /// Bind `bytes` at the next binding as `var<uniform>` (the layout,
    /// WGSL's uniform rules, is yours; the size is checked as for
    /// [`KernelTest::uniform`]). The buffer is zero-padded to a multiple of
    /// 16 bytes.
    pub fn uniform_bytes(self, bytes: &[u8]) -> Self {
        self.bind(Binding::Uniform {
            bytes: bytes.to_vec(),
            host: "bytes".into(),
        })
    }

    /// Bind a new output at the next binding as `var<storage, read_write>`:
    /// `shape.iter().product()` elements of `dtype`, row-major, each filled
    /// with [`poison`] before the first pass. Outputs are numbered 0, 1, ...
    /// in the order of these calls and [`KernelTest::inout`] calls (see
    /// [`Outputs`]). The buffer is padded to a multiple of 4 bytes (at
    /// least 4) and to the declared type's size.
    pub fn output(mut self, dtype: DType, shape: &[usize]) -> Self {
        let k = self.outputs.len();
        self.outputs.push(OutputSpec {
            dtype,
            shape: shape.to_vec(),
            init: None,
        });
        self.bind(Binding::Output(k))
    }

    /// Bind a new output at the next binding as `var<storage, read_write>`,
    /// holding `data` (shape `[data.len()]`) before the first pass instead of
    /// poison: for kernels that update in place or accumulate (atomics into
    /// zeros). Read back like any output.
    pub fn inout<T: Element>(mut self, data: &[T]) -> Self {
        let k = self.outputs.len();
        self.outputs.push(OutputSpec {
            dtype: T::DTYPE,
            shape: vec![data.len()],
            init: Some(T::to_device_bytes(data)),
        });
        self.bind(Binding::Output(k))
    }

    /// Bind output `k` (declared earlier, in this pass or one before) at the
    /// next binding as `var<storage, read>`: the output of one pass as the
    /// input of the next. A run whose output `k` does not exist fails with
    /// [`Error::InvalidArgument`].
    pub fn read_output(self, k: usize) -> Self {
        self.bind(Binding::ReadOutput(k))
    }

    /// Bind output `k` (declared in an earlier pass) at the next binding as
    /// `var<storage, read_write>`, to update it in place; what it holds after
    /// the last pass is read back.
    pub fn write_output(self, k: usize) -> Self {
        self.bind(Binding::WriteOutput(k))
    }

    /// Dispatch `[x, y, z]` workgroups in this pass (each at most the
    /// adapter's `max_compute_workgroups_per_dimension`, 65535 by WebGPU's
    /// defaults; more is [`Error::InvalidArgument`]). Default `[1, 1, 1]`.
    pub fn workgroups(mut self, counts: [usize; 3]) -> Self {
        self.pass().grid = Grid::Workgroups(counts);
        self
    }

    /// Dispatch enough workgroups for `[x, y, z]` invocations in this pass:
    /// each count divided by the entry point's `@workgroup_size` (after
    /// override constants), rounded up. The kernel still bounds-checks the
    /// extra invocations of the last workgroup.
    pub fn threads(mut self, invocations: [usize; 3]) -> Self {
        self.pass().grid = Grid::Threads(invocations);
        self
    }

    /// Set the pipeline-overridable constant `name` (its `@id` as a decimal
    /// string when it has one, else its identifier) of this pass to `value`, as WebGPU's
    /// `constants` do; any scalar type (see [`OverrideValue`]). A name the
    /// module does not declare, or a value its type cannot take, fails the
    /// run with [`Error::InvalidArgument`].
    pub fn constant(mut self, name: impl Into<String>, value: impl OverrideValue) -> Self {
        self.pass().constants.push((name.into(), value.to_f64()));
        self
    }

    /// Run on `device` instead of [`default_device`].
    pub fn device(mut self, device: &Device) -> Self {
        self.device = Some(device.clone());
        self
    }

    /// The device [`KernelTest::run`] uses.
    pub(super) fn chosen_device(&self) -> Result<Device> {
        match &self.device {
            Some(d) => Ok(d.clone()),
            None => default_device(),
        }
    }

    /// Check with naga, run every pass once in one submission and read
    /// every output back.
    ///
    /// # Errors
    /// See the [module docs](super#errors): [`Error::Kernel`],
    /// [`Error::MissingFeature`], [`Error::BindingMismatch`],
    /// [`Error::InvalidArgument`], [`Error::TooLarge`], [`Error::NoAdapter`],
    /// [`Error::Validation`] and read-back failures.
    pub fn run(&self) -> Result<Outputs> {
        self.run_with(&self.chosen_device()?)
    }

    /// [`KernelTest::run`] on `device`.
    pub(super) fn run_with(&self, device: &Device) -> Result<Outputs> {
        // wgpu panics in `create_buffer_init` on a lost device: ask first.
        device.probe_lost()?;
        let prepared = self.prepare(device)?;
        self.execute(device, &prepared)
    }

    /// Run the test `runs` times on the same buffers and pipelines (outputs
    /// poisoned, or set to their [`KernelTest::inout`] data, before each
    /// run), keeping every run's outputs: races through workgroup memory and
    /// atomics show as runs that differ (see [`Repeated`](super::Repeated)).
    ///
    /// # Errors
    /// As [`KernelTest::run`]; [`Error::InvalidArgument`] for `runs == 0`.
    pub fn run_repeated(&self, runs: usize) -> Result<super::Repeated> {
        if runs == 0 {
            return Err(Error::InvalidArgument("run_repeated: 0 runs".into()));
        }
        let device = self.chosen_device()?;
        let prepared = self.prepare(&device)?;
        let runs = (0..runs)
            .map(|_| self.execute(&device, &prepared))
            .collect::<Result<Vec<_>>>()?;
        Ok(super::Repeated {
            adapter: device.info().clone(),
            runs,
        })
    }

    /// [`check_portability`](super::check_portability) for this test: each
    /// pass's entry point with its override constants, translated with
    /// naga's four back ends and checked against WebGPU's default limits.
    /// Needs no adapter.
    ///
    /// # Errors
    /// The [`Portability`] report, every problem of every pass.
    pub fn check_portability(&self) -> std::result::Result<(), Portability> {
        let mut issues = Vec::new();
        for pass in &self.passes {
            let constants = pass.constants.iter().cloned().collect();
            for issue in portability::check(&pass.source, Some(&pass.entry_point), &constants) {
                if !issues.contains(&issue) {
                    issues.push(issue);
                }
            }
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(Portability { issues })
        }
    }

    /// The name of pass `i` in errors.
    fn label(&self, i: usize) -> String {
        let ep = &self.passes[i].entry_point;
        if self.passes.len() == 1 {
            format!("testing:{ep}")
        } else {
            format!("testing:{ep} (pass {} of {})", i + 1, self.passes.len())
        }
    }

    /// Every check that can be made before anything is allocated: naga's
    /// verdict (missing features told apart from broken WGSL), the entry
    /// point, override constants, bindings against the shader's
    /// declarations, sizes against the device's limits, workgroup counts.
    fn plan(&self, device: &Device) -> Result<Vec<Plan>> {
        let limits = device.limits();
        let storage_max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let uniform_max = limits
            .max_uniform_buffer_binding_size
            .min(limits.max_buffer_size);
        let op = "testing::KernelTest::run";
        for o in &self.outputs {
            if o.bytes() > storage_max {
                return Err(Error::TooLarge {
                    op,
                    limit: crate::Limit::StorageBinding,
                    value: o.bytes(),
                    max: storage_max,
                });
            }
        }
        let mut plans = Vec::new();
        for (i, pass) in self.passes.iter().enumerate() {
            let label = self.label(i);
            let (module, info) = validate(&pass.source, &label, device)?;
            let kernel_error = |message: String| Error::Kernel {
                kernel: label.clone(),
                message,
            };
            let ep_index = match module
                .entry_points
                .iter()
                .position(|ep| ep.name == pass.entry_point)
            {
                Some(e) if module.entry_points[e].stage == naga::ShaderStage::Compute => e,
                Some(e) => {
                    return Err(kernel_error(format!(
                        "entry point `{}` is a {:?} shader, not @compute",
                        pass.entry_point, module.entry_points[e].stage
                    )));
                }
                None => {
                    return Err(kernel_error(format!(
                        "no entry point `{}`; the module has: [{}]",
                        pass.entry_point,
                        module
                            .entry_points
                            .iter()
                            .map(|e| e.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            };
            reflect::check_constants(&label, &module, &pass.constants)?;
            let constants: naga::back::PipelineConstants = pass.constants.iter().cloned().collect();
            let workgroup_size = naga::back::pipeline_constants::process_overrides(
                &module,
                &info,
                Some((naga::ShaderStage::Compute, &pass.entry_point)),
                &constants,
            )
            .map_err(|e| Error::InvalidArgument(format!("{label}: override constants: {e}")))?
            .0
            .entry_points[0]
                .workgroup_size;

            // The bindings against the shader's declarations.
            let mut hosts = Vec::new();
            for b in &pass.bindings {
                hosts.push(match b {
                    Binding::Input { dtype, len, bytes } => Host {
                        access: Access::Read,
                        dtype: Some(*dtype),
                        bytes: bytes.len() as u64,
                        describe: format!("an input of {len} {}", host_type(*dtype)),
                    },
                    Binding::Uniform { bytes, host } => Host {
                        access: Access::Uniform,
                        dtype: None,
                        bytes: bytes.len() as u64,
                        describe: format!("a uniform of {} bytes ({host})", bytes.len()),
                    },
                    Binding::Output(k) | Binding::ReadOutput(k) | Binding::WriteOutput(k) => {
                        let Some(o) = self.outputs.get(*k) else {
                            return Err(Error::InvalidArgument(format!(
                                "{label}: output {k} does not exist: the test declares {}",
                                self.outputs.len()
                            )));
                        };
                        let n: usize = o.shape.iter().product();
                        let (access, how) = match b {
                            Binding::ReadOutput(_) => (Access::Read, "read-only"),
                            _ => (Access::ReadWrite, "read-write"),
                        };
                        Host {
                            access,
                            dtype: Some(o.dtype),
                            bytes: o.bytes(),
                            describe: format!("output {k} ({n} {}, {how})", host_type(o.dtype)),
                        }
                    }
                });
            }
            let declared = reflect::declared(&module, &info, ep_index);
            reflect::check_bindings(&label, &declared, &hosts)?;
            let mut min_bytes = Vec::new();
            for (b, host) in pass.bindings.iter().zip(&hosts) {
                let (limit, max) = match b {
                    Binding::Uniform { .. } => (crate::Limit::UniformBinding, uniform_max),
                    _ => (crate::Limit::StorageBinding, storage_max),
                };
                if host.bytes > max {
                    return Err(Error::TooLarge {
                        op,
                        limit,
                        value: host.bytes,
                        max,
                    });
                }
                let declared_bytes =
                    reflect::find(&declared, min_bytes.len() as u32).map_or(0, |d| d.min_bytes);
                min_bytes.push(declared_bytes);
            }

            let per_dim = limits.max_compute_workgroups_per_dimension as usize;
            let workgroups = match pass.grid {
                Grid::Workgroups(w) => w,
                Grid::Threads(t) => {
                    std::array::from_fn(|d| t[d].div_ceil(workgroup_size[d].max(1) as usize))
                }
            };
            if workgroups.iter().any(|&w| w > per_dim) {
                return Err(Error::InvalidArgument(format!(
                    "{label}: {workgroups:?} workgroups: this adapter allows at most {per_dim} per \
                     dimension (max_compute_workgroups_per_dimension)"
                )));
            }
            plans.push(Plan {
                workgroups: workgroups.map(|w| w as u32),
                min_bytes,
            });
        }
        Ok(plans)
    }

    /// Buffers, pipelines and bind groups for every pass.
    fn prepare(&self, device: &Device) -> Result<Prepared> {
        let plans = self.plan(device)?;
        let d = &device.inner.device;
        // Each output buffer is as large as its largest use needs.
        let mut sizes: Vec<u64> = self
            .outputs
            .iter()
            .map(|o| o.bytes().next_multiple_of(4).max(4))
            .collect();
        for (pass, plan) in self.passes.iter().zip(&plans) {
            for (b, &min) in pass.bindings.iter().zip(&plan.min_bytes) {
                if let Binding::Output(k) | Binding::ReadOutput(k) | Binding::WriteOutput(k) = b {
                    sizes[*k] = sizes[*k].max(min.next_multiple_of(4));
                }
            }
        }
        let init: Vec<Vec<u8>> = self
            .outputs
            .iter()
            .zip(&sizes)
            .map(|(o, &size)| match &o.init {
                Some(bytes) => padded(bytes, 4, size as usize),
                None => {
                    let word = poison(o.dtype).to_ne_bytes();
                    word.iter().copied().cycle().take(size as usize).collect()
                }
            })
            .collect();
        let (outputs, staging) = device.scoped(|| {
            let outputs: Vec<wgpu::Buffer> = sizes
                .iter()
                .enumerate()
                .map(|(k, &size)| {
                    d.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(&format!("wgarray::testing output {k}")),
                        size,
                        usage: wgpu::BufferUsages::STORAGE
                            | wgpu::BufferUsages::COPY_SRC
                            | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                })
                .collect();
            let staging = sizes
                .iter()
                .map(|&size| {
                    d.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("wgarray::testing read-back"),
                        size,
                        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                })
                .collect();
            Ok((outputs, staging))
        })?;
        let mut modules: Vec<(&str, wgpu::ShaderModule)> = Vec::new();
        let mut passes = Vec::new();
        for (i, (pass, plan)) in self.passes.iter().zip(&plans).enumerate() {
            let label = self.label(i);
            let prepared = device.scoped(|| {
                let module = match modules.iter().find(|(s, _)| *s == pass.source) {
                    Some((_, m)) => m.clone(),
                    None => {
                        let m = d.create_shader_module(wgpu::ShaderModuleDescriptor {
                            label: Some(&label),
                            source: wgpu::ShaderSource::Wgsl(pass.source.as_str().into()),
                        });
                        modules.push((&pass.source, m.clone()));
                        m
                    }
                };
                Ok(self.prepare_pass(d, pass, plan, &label, &module, &outputs))
            })?;
            passes.push(prepared);
        }
        Ok(Prepared {
            outputs,
            staging,
            init,
            passes,
        })
    }

    fn prepare_pass(
        &self,
        d: &wgpu::Device,
        pass: &Pass,
        plan: &Plan,
        label: &str,
        module: &wgpu::ShaderModule,
        outputs: &[wgpu::Buffer],
    ) -> (wgpu::ComputePipeline, wgpu::BindGroup, [u32; 3]) {
        let entries: Vec<wgpu::BindGroupLayoutEntry> = pass
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match b {
                        Binding::Input { .. } | Binding::ReadOutput(_) => {
                            wgpu::BufferBindingType::Storage { read_only: true }
                        }
                        Binding::Output(_) | Binding::WriteOutput(_) => {
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
            label: Some(label),
            entries: &entries,
        });
        let pipeline_layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let constants: Vec<(&str, f64)> = pass
            .constants
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some(&pass.entry_point),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        // Host data: inputs and uniforms, zero-padded to the declared size.
        let owned: Vec<Option<wgpu::Buffer>> = pass
            .bindings
            .iter()
            .zip(&plan.min_bytes)
            .enumerate()
            .map(|(i, (b, &min))| {
                let (bytes, align, usage) = match b {
                    Binding::Input { bytes, .. } => (bytes, 4, wgpu::BufferUsages::STORAGE),
                    Binding::Uniform { bytes, .. } => (bytes, 16, wgpu::BufferUsages::UNIFORM),
                    _ => return None,
                };
                Some(d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(&format!("{label} binding {i}")),
                    contents: &padded(bytes, align, min as usize),
                    usage,
                }))
            })
            .collect();
        let bind_entries: Vec<wgpu::BindGroupEntry> = pass
            .bindings
            .iter()
            .zip(&owned)
            .enumerate()
            .map(|(i, (b, own))| {
                let buffer = match b {
                    Binding::Output(k) | Binding::ReadOutput(k) | Binding::WriteOutput(k) => {
                        &outputs[*k]
                    }
                    _ => own.as_ref().expect("host data has its own buffer"),
                };
                wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: buffer.as_entire_binding(),
                }
            })
            .collect();
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &layout,
            entries: &bind_entries,
        });
        (pipeline, group, plan.workgroups)
    }

    /// One run on prepared buffers: initialise the outputs, dispatch every
    /// pass, copy the outputs out, submit once, read back.
    fn execute(&self, device: &Device, p: &Prepared) -> Result<Outputs> {
        let dev = &device.inner;
        let d = &dev.device;
        let index = device.scoped(|| {
            let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgarray::testing"),
            });
            for (pipeline, group, [x, y, z]) in &p.passes {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("wgarray::testing"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(*x, *y, *z);
            }
            for (src, dst) in p.outputs.iter().zip(&p.staging) {
                encoder.copy_buffer_to_buffer(src, 0, dst, 0, dst.size());
            }
            let commands = encoder.finish();
            let _guard = dev.pool.lock_queue();
            // Queue writes take effect before the commands submitted after them.
            for (buffer, bytes) in p.outputs.iter().zip(&p.init) {
                dev.queue.write_buffer(buffer, 0, bytes);
            }
            Ok(dev.queue.submit([commands]))
        })?;
        let mut outputs = Vec::new();
        for (spec, buffer) in self.outputs.iter().zip(&p.staging) {
            let mut bytes = device.scoped(|| {
                crate::memory::map_read(
                    d,
                    buffer,
                    ..buffer.size(),
                    index.clone(),
                    device.wait_timeout(),
                )
            })?;
            bytes.truncate(spec.bytes() as usize);
            outputs.push(Output {
                dtype: spec.dtype,
                shape: spec.shape.clone(),
                bytes,
            });
        }
        Ok(Outputs { outputs })
    }
}

/// naga's verdict on `source` (the same checks the kernel cache makes),
/// with the capabilities `device` has, and missing features told apart
/// from broken WGSL.
fn validate(
    source: &str,
    label: &str,
    device: &Device,
) -> Result<(naga::Module, naga::valid::ModuleInfo)> {
    let module = kernels::parse(source, label)?;
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
    if !features.contains(wgpu::Features::SHADER_F16) && enables(source, "f16") {
        return Err(missing_feature("SHADER_F16"));
    }
    match kernels::validate(&module, source, label, caps) {
        Ok(info) => Ok((module, info)),
        Err(e) => {
            // Would a feature the adapter lacks make it valid?
            for (name, cap) in needs {
                if kernels::validate(&module, source, label, caps | cap).is_ok() {
                    return Err(missing_feature(name));
                }
            }
            Err(e)
        }
    }
}

/// `bytes` zero-padded to a multiple of `align`, and to at least `min`
/// bytes (at least `align`).
fn padded(bytes: &[u8], align: usize, min: usize) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().max(min).next_multiple_of(align).max(align), 0);
    v
}

fn missing_feature(feature: &'static str) -> Error {
    Error::MissingFeature {
        op: "testing::KernelTest::run",
        feature,
    }
}
