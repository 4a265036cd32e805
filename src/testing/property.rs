//! Property-based kernel tests (cargo feature `proptest`): random inputs
//! from proptest strategies, the kernel on one or more adapters, Rust
//! closures as the reference, and a failure shrunk to a small input.
//!
//! Why the user passes a proptest [`Strategy`]: inputs of real kernels share
//! sizes (two vectors of one length, a matrix and a vector that fit), which
//! proptest expresses with `prop_flat_map` and tuples better than any
//! shape language this crate could add. [`Values`] supplies the element
//! generators, with edge values on request, for f32, f16, bf16, i32, u32
//! and bool (the types that implement [`Generate`]).

use std::fmt;
use std::marker::PhantomData;

use proptest::collection::SizeRange;
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use super::differential::{adapter_label, all_devices};
use super::kernel_test::Expected;
use super::{KernelTest, Tolerance};
use crate::{AdapterDescription, DType, Device, Element, Error};

/// Host element types [`Values`] can generate: f32, `half::f16`,
/// `half::bf16`, i32, u32, bool.
pub trait Generate: Element + fmt::Debug {
    /// The range [`Values::new`] draws from.
    const DEFAULT_RANGE: (f64, f64);
    /// Values in `lo..=hi` (clamped to the type's range; floats rounded to
    /// the type).
    fn in_range(lo: f64, hi: f64) -> BoxedStrategy<Self>;
    /// The type's edge values: for floats NaN, both infinities, both zeros,
    /// the smallest and largest subnormals, the smallest normal, the largest
    /// finite values, one and its negative, epsilon; for integers zero, one,
    /// minus one and the extremes; for bool both.
    fn edges() -> Vec<Self>;
}

fn float_edges<T: Copy>(
    from_bits: impl Fn(u32) -> T,
    bits: u32,
    one: T,
    neg_one: T,
    epsilon: T,
) -> Vec<T> {
    let sign = 1u32 << (bits - 1);
    let exp_all: u32 = match bits {
        32 => 0x7F80_0000,
        _ => 0x7C00,
    };
    let mantissa = exp_all.trailing_zeros();
    let max_sub = (1u32 << mantissa) - 1;
    let max_finite = exp_all - 1;
    let min_normal = 1u32 << mantissa;
    vec![
        from_bits(exp_all | (1 << (mantissa - 1))), // quiet NaN
        from_bits(exp_all),
        from_bits(exp_all | sign),
        from_bits(0),
        from_bits(sign),
        from_bits(1),
        from_bits(1 | sign),
        from_bits(max_sub),
        from_bits(min_normal),
        from_bits(max_finite),
        from_bits(max_finite | sign),
        one,
        neg_one,
        epsilon,
    ]
}

impl Generate for f32 {
    const DEFAULT_RANGE: (f64, f64) = (-100.0, 100.0);
    fn in_range(lo: f64, hi: f64) -> BoxedStrategy<Self> {
        (lo as f32..=hi as f32).boxed()
    }
    fn edges() -> Vec<Self> {
        float_edges(f32::from_bits, 32, 1.0, -1.0, f32::EPSILON)
    }
}

impl Generate for half::f16 {
    const DEFAULT_RANGE: (f64, f64) = (-100.0, 100.0);
    fn in_range(lo: f64, hi: f64) -> BoxedStrategy<Self> {
        (lo as f32..=hi as f32)
            .prop_map(half::f16::from_f32)
            .boxed()
    }
    fn edges() -> Vec<Self> {
        float_edges(
            |b| half::f16::from_bits(b as u16),
            16,
            half::f16::ONE,
            half::f16::NEG_ONE,
            half::f16::EPSILON,
        )
    }
}

impl Generate for half::bf16 {
    const DEFAULT_RANGE: (f64, f64) = (-100.0, 100.0);
    fn in_range(lo: f64, hi: f64) -> BoxedStrategy<Self> {
        (lo as f32..=hi as f32)
            .prop_map(half::bf16::from_f32)
            .boxed()
    }
    fn edges() -> Vec<Self> {
        // bf16 is the top half of an f32: its edges are f32's, truncated.
        f32::edges()
            .into_iter()
            .map(|v| half::bf16::from_bits((v.to_bits() >> 16) as u16))
            .filter(|v| v.to_bits() & 0x7FFF != 0 || v.to_f32() == 0.0)
            .chain([half::bf16::from_bits(1), half::bf16::from_bits(0x007F)])
            .collect()
    }
}

impl Generate for i32 {
    const DEFAULT_RANGE: (f64, f64) = (-1000.0, 1000.0);
    fn in_range(lo: f64, hi: f64) -> BoxedStrategy<Self> {
        let c = |v: f64| v.clamp(i32::MIN as f64, i32::MAX as f64) as i32;
        (c(lo)..=c(hi)).boxed()
    }
    fn edges() -> Vec<Self> {
        vec![0, 1, -1, i32::MIN, i32::MIN + 1, i32::MAX]
    }
}

impl Generate for u32 {
    const DEFAULT_RANGE: (f64, f64) = (0.0, 1000.0);
    fn in_range(lo: f64, hi: f64) -> BoxedStrategy<Self> {
        let c = |v: f64| v.clamp(0.0, u32::MAX as f64) as u32;
        (c(lo)..=c(hi)).boxed()
    }
    fn edges() -> Vec<Self> {
        vec![0, 1, 0x7FFF_FFFF, 0x8000_0000, u32::MAX]
    }
}

impl Generate for bool {
    const DEFAULT_RANGE: (f64, f64) = (0.0, 1.0);
    fn in_range(_: f64, _: f64) -> BoxedStrategy<Self> {
        any::<bool>().boxed()
    }
    fn edges() -> Vec<Self> {
        vec![false, true]
    }
}

/// A generator of host elements of type `T` (f32, `half::f16`,
/// `half::bf16`, i32, u32 or bool: the types that implement [`Generate`];
/// not the packed 8- and 16-bit integers, f64, i64 or u64) for a
/// [`PropertyTest`]: values
/// in a range, and the type's edge values ([`Generate::edges`]) mixed in on
/// request (one element in four). Its strategies shrink towards small
/// values and, for vectors, short lengths.
#[derive(Clone, Copy, Debug)]
pub struct Values<T> {
    lo: f64,
    hi: f64,
    edges: bool,
    _t: PhantomData<T>,
}

impl<T: Generate> Default for Values<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Generate> Values<T> {
    /// Values in the type's default range (floats in [-100, 100], i32 in
    /// [-1000, 1000], u32 in [0, 1000]), no edge values.
    pub fn new() -> Self {
        let (lo, hi) = T::DEFAULT_RANGE;
        Self::range(lo, hi)
    }

    /// Values in `lo..=hi`, no edge values.
    pub fn range(lo: f64, hi: f64) -> Self {
        Values {
            lo,
            hi,
            edges: false,
            _t: PhantomData,
        }
    }

    /// These values with the type's edge values mixed in (NaN, infinities,
    /// subnormals, signed zero, integer extremes; see [`Generate::edges`]).
    pub fn with_edges(mut self) -> Self {
        self.edges = true;
        self
    }

    /// One element.
    pub fn strategy(&self) -> BoxedStrategy<T> {
        let range = T::in_range(self.lo, self.hi);
        if self.edges {
            prop_oneof![3 => range, 1 => proptest::sample::select(T::edges())].boxed()
        } else {
            range
        }
    }

    /// A vector of elements, its length drawn from `len` (`1..=1025`, or a
    /// fixed `n`).
    pub fn vec(&self, len: impl Into<SizeRange>) -> BoxedStrategy<Vec<T>> {
        proptest::collection::vec(self.strategy(), len).boxed()
    }
}

/// A reference closure: the expected output's device bytes for an input.
type ReferenceFn<V> = Box<dyn Fn(&V) -> Vec<u8>>;

/// A reference: output `output` must match what `expected` computes from
/// the input, within `tolerance`.
struct Reference<V> {
    output: usize,
    dtype: DType,
    tolerance: Tolerance,
    expected: ReferenceFn<V>,
}

/// A property-based test of a kernel: for inputs drawn from a proptest
/// strategy, the [`KernelTest`] that `build` makes from them must match the
/// Rust references on every device. On failure proptest shrinks the input
/// to a small one, and [`PropertyFailure`] prints it with the report.
///
/// ```
/// # #[cfg(feature = "proptest")] {
/// use proptest::prelude::*;
/// use wgarray::DType;
/// use wgarray::testing::{KernelTest, PropertyTest, Tolerance, Values};
///
/// const ABS: &str = r#"
///     @group(0) @binding(0) var<storage, read> x: array<f32>;
///     @group(0) @binding(1) var<storage, read_write> y: array<f32>;
///     @compute @workgroup_size(64)
///     fn main(@builtin(global_invocation_id) id: vec3<u32>) {
///         if id.x < arrayLength(&y) { y[id.x] = abs(x[id.x]); }
///     }
/// "#;
/// PropertyTest::new(Values::<f32>::new().with_edges().vec(1..300), |x: &Vec<f32>| {
///     KernelTest::new(ABS, "main")
///         .input(x)
///         .output(DType::F32, &[x.len()])
///         .threads([x.len(), 1, 1])
/// })
/// .reference(0, |x: &Vec<f32>| x.iter().map(|v| v.abs()).collect::<Vec<f32>>(), Tolerance::EXACT)
/// .cases(16)
/// .assert();
/// # }
/// ```
pub struct PropertyTest<V> {
    strategy: BoxedStrategy<V>,
    build: Box<dyn Fn(&V) -> KernelTest>,
    references: Vec<Reference<V>>,
    cases: u32,
    max_shrink_iters: u32,
    seed: u64,
    devices: Option<Vec<Device>>,
}

impl<V: Clone + fmt::Debug + 'static> PropertyTest<V> {
    /// A property over inputs from `strategy`; `build` makes the kernel
    /// test for one input (bindings, grid, constants). 32 cases, seed 0, on
    /// [`default_device`](super::default_device).
    pub fn new(
        strategy: impl Strategy<Value = V> + 'static,
        build: impl Fn(&V) -> KernelTest + 'static,
    ) -> Self {
        PropertyTest {
            strategy: strategy.boxed(),
            build: Box::new(build),
            references: Vec::new(),
            cases: 32,
            max_shrink_iters: 256,
            seed: 0,
            devices: None,
        }
    }

    /// Output `output` must equal `reference(input)` within `tolerance`
    /// (see [`Tolerance`]; never-written elements always fail).
    pub fn reference<T: Element>(
        mut self,
        output: usize,
        reference: impl Fn(&V) -> Vec<T> + 'static,
        tolerance: Tolerance,
    ) -> Self {
        self.references.push(Reference {
            output,
            dtype: T::DTYPE,
            tolerance,
            expected: Box::new(move |v| T::to_device_bytes(&reference(v))),
        });
        self
    }

    /// How many random inputs to try (default 32; each runs the kernel on
    /// every device).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// At most this many shrinking steps after a failure (default 256;
    /// each runs the kernel).
    pub fn max_shrink_iters(mut self, iters: u32) -> Self {
        self.max_shrink_iters = iters;
        self
    }

    /// The seed of the random inputs (default 0: the same inputs every
    /// run, so a CI failure reproduces).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Run every case on each of `devices` (a differential property test).
    pub fn devices(mut self, devices: &[Device]) -> Self {
        self.devices = Some(devices.to_vec());
        self
    }

    /// Run every case on every adapter of the machine
    /// ([`all_devices`]; those that refuse a device are left out, and those
    /// that lack a feature the kernel needs are skipped), the devices made
    /// once for all cases.
    pub fn on_all_adapters(mut self) -> Self {
        self.devices = Some(
            all_devices()
                .into_iter()
                .filter_map(|(_, d)| d.ok())
                .collect(),
        );
        self
    }

    fn expectations(&self, input: &V) -> Vec<Expected> {
        self.references
            .iter()
            .map(|r| Expected {
                output: r.output,
                dtype: r.dtype,
                bytes: (r.expected)(input),
                tolerance: r.tolerance,
            })
            .collect()
    }

    /// One case: the first failure's adapter and report. Devices that lack
    /// a feature the kernel needs (f16 on GL) are skipped, as in a
    /// differential run; a case that no device ran fails.
    fn case(&self, devices: &[Device], input: &V) -> Option<(Option<AdapterDescription>, String)> {
        let test = (self.build)(input);
        let mut skipped = Vec::new();
        for device in devices {
            let outputs = match test.run_with(device) {
                Ok(o) => o,
                Err(e @ Error::MissingFeature { .. }) => {
                    skipped.push(format!("{}: {e}", adapter_label(device.info())));
                    continue;
                }
                Err(e) => {
                    return Some((Some(device.info().clone()), format!("the run failed: {e}")));
                }
            };
            for want in self.expectations(input) {
                if let Err(m) = outputs.check_expected(&want) {
                    return Some((
                        Some(device.info().clone()),
                        format!("output {}: {m}", want.output),
                    ));
                }
            }
        }
        if skipped.len() == devices.len() {
            let why = skipped.join("; ");
            return Some((None, format!("no device ran the kernel: {why}")));
        }
        None
    }

    /// Run the property: `cases` random inputs, each on every device,
    /// shrinking the first failure.
    ///
    /// # Errors
    /// The [`PropertyFailure`]: the smallest failing input found, the
    /// adapter and the report (or the error that prevented the run: no
    /// adapter, a bad kernel).
    pub fn run(&self) -> Result<(), Box<PropertyFailure>> {
        let devices = match &self.devices {
            Some(d) => d.clone(),
            None => match super::default_device() {
                Ok(d) => vec![d],
                Err(e) => return Err(Box::new(PropertyFailure::setup(e, self.cases, self.seed))),
            },
        };
        if devices.is_empty() {
            let e = Error::NoAdapter {
                requested: "every adapter (testing::PropertyTest)".into(),
                available: Vec::new(),
            };
            return Err(Box::new(PropertyFailure::setup(e, self.cases, self.seed)));
        }
        let config = Config {
            cases: self.cases,
            max_shrink_iters: self.max_shrink_iters,
            failure_persistence: None,
            ..Config::default()
        };
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&self.seed.to_le_bytes());
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        let result = runner.run(&self.strategy, |input| match self.case(&devices, &input) {
            None => Ok(()),
            Some((_, report)) => Err(TestCaseError::fail(report)),
        });
        match result {
            Ok(()) => Ok(()),
            Err(TestError::Abort(reason)) => Err(Box::new(PropertyFailure::setup(
                Error::InvalidArgument(format!("proptest aborted: {reason}")),
                self.cases,
                self.seed,
            ))),
            Err(TestError::Fail(_, input)) => {
                // The minimal input, run once more for its adapter and report.
                let (adapter, report) = self.case(&devices, &input).unwrap_or((
                    None,
                    "the smallest input passed when run again: flaky".into(),
                ));
                Err(Box::new(PropertyFailure {
                    input: format!("{input:?}"),
                    test: Some((self.build)(&input)),
                    expected: self.expectations(&input),
                    adapter,
                    report,
                    cases: self.cases,
                    seed: self.seed,
                }))
            }
        }
    }

    /// [`PropertyTest::run`], panicking with the failure: for tests.
    ///
    /// # Panics
    /// With the [`PropertyFailure`] report.
    #[track_caller]
    pub fn assert(&self) {
        if let Err(f) = self.run() {
            panic!("{f}");
        }
    }
}

/// A failed [`PropertyTest`]: the smallest failing input proptest found
/// and what went wrong with it. Its `Display` prints both.
#[derive(Clone, Debug)]
pub struct PropertyFailure {
    /// The input, as `Debug` prints it.
    pub input: String,
    /// The kernel test built from it (`None` when the property could not
    /// start: no adapter).
    pub test: Option<KernelTest>,
    /// The references' outputs for it.
    pub expected: Vec<Expected>,
    /// The adapter it failed on.
    pub adapter: Option<AdapterDescription>,
    /// The mismatch report or error.
    pub report: String,
    /// Cases asked for.
    pub cases: u32,
    /// The seed.
    pub seed: u64,
}

impl PropertyFailure {
    fn setup(e: Error, cases: u32, seed: u64) -> Self {
        PropertyFailure {
            input: String::new(),
            test: None,
            expected: Vec::new(),
            adapter: None,
            report: e.to_string(),
            cases,
            seed,
        }
    }

    /// The failing case as a [`Fixture`](super::Fixture) (kernel, inputs,
    /// expected outputs, adapter), to save and replay.
    #[cfg(feature = "fixtures")]
    pub fn fixture(&self) -> Option<super::Fixture> {
        let mut f = super::Fixture::new(self.test.as_ref()?);
        f.expected = self.expected.clone();
        f.adapter = self.adapter.clone();
        f.note = format!("property test (seed {}): {}", self.seed, self.report);
        Some(f)
    }
}

impl fmt::Display for PropertyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.test.is_none() {
            return write!(f, "property test could not run: {}", self.report);
        }
        write!(
            f,
            "property test failed (seed {}, {} cases)",
            self.seed, self.cases
        )?;
        if let Some(a) = &self.adapter {
            write!(f, " on {}", adapter_label(a))?;
        }
        write!(
            f,
            "\nsmallest failing input: {}\n{}",
            self.input, self.report
        )
    }
}

impl std::error::Error for PropertyFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_values_are_the_documented_ones() {
        let e = f32::edges();
        assert!(e[0].is_nan());
        assert!(e.contains(&f32::INFINITY) && e.contains(&f32::NEG_INFINITY));
        assert!(e.iter().any(|v| *v == 0.0 && v.is_sign_negative()));
        assert!(e.contains(&f32::from_bits(1)) && e.contains(&f32::from_bits(0x007F_FFFF)));
        assert!(e.contains(&f32::MIN_POSITIVE) && e.contains(&f32::MAX) && e.contains(&f32::MIN));
        let h = half::f16::edges();
        assert!(h[0].is_nan());
        assert!(h.contains(&half::f16::MAX) && h.contains(&half::f16::MIN_POSITIVE));
        assert!(h.contains(&half::f16::from_bits(0x03FF)));
        let b = half::bf16::edges();
        assert!(b.iter().any(|v| v.is_nan()) && b.contains(&half::bf16::MAX));
        assert!(b.contains(&half::bf16::from_bits(1)));
        assert!(i32::edges().contains(&i32::MIN) && u32::edges().contains(&u32::MAX));
    }
}
