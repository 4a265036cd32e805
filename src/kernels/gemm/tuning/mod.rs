//! Which GEMM kernel runs, per adapter, dtype and shape class: timed once
//! and remembered.
//!
//! On the first GEMM of a shape class and dtype, a device times a few
//! candidate kernels ([`candidates()`]: the families and tiles that suit the
//! adapter: register-blocked tiles on software adapters, workgroup-memory
//! and cooperative-matrix tiles on GPUs, split-K kernels for
//! matrix-vector products) on a proxy of the shape (each dimension capped,
//! see `proxy`) with operands of its own, and keeps the fastest (the
//! first candidate, the default, unless another beats it by
//! [`DEFAULT_MARGIN`]). The
//! choice goes into the device's table and into the tuning file of the
//! adapter (`disk.rs`), which later processes on the same adapter, driver
//! and wgarray version read instead of timing again, as long as the
//! candidates recorded beside a choice are still the class's candidates
//! (a build that changed them, under the same version number, times the
//! class again and rewrites its entry); the driver's compiled
//! pipelines are saved beside it, so that a later process's first call
//! compiles from the driver's cache where the adapter has one.
//!
//! Timing does not hold up the eval that needs the choice: that eval, and
//! every GEMM of the class until the timing is done, runs the class's
//! default (its first candidate), and the timing is a job for the device's
//! background thread (`kernels/background.rs`), which starts it once the
//! device is idle, under the device's queue lock (other threads' evals on
//! the device wait for it then). On GL, where a background thread cannot
//! share the device (every wgpu call holds one EGL context lock), and with
//! [`WARM_UP_ENV`] off, timing runs inside the first eval that needs the
//! choice, under the queue lock, as it did before. Either way it is
//! bounded: at most [`BUDGET_SOFTWARE`] or [`BUDGET_GPU`] of wall time per
//! class and dtype once the first candidate is timed. `WGARRAY_GEMM_TUNE=0`
//! turns timing off (every class takes its first candidate, nothing is
//! written); `Device::set_gemm_kernel` forces one kernel. On software
//! adapters, a large register tile the driver has not compiled yet runs
//! as a stand-in that compiles fast until the background thread has
//! compiled it ([`first_use`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) mod candidates;
pub(crate) mod check;
pub(crate) mod class;
pub(crate) mod first_use;
pub(crate) mod kernel;
pub(crate) mod variant;

use self::candidates::{candidates, fit_gemv_columns};
use self::check::{Probe, quant_operand, read};
use self::class::{GEMV_WIDE_N, ShapeClass};
use self::kernel::{GemmKernel, usable};
use self::variant::GemmVariant;
use crate::kernels::gemm::common::operand::{Gemm, Mode, QuantB};
use crate::kernels::quant::{Rows, Source, dequantize};
use crate::kernels::{Context, Dispatch, Operand, disk};

/// How the planner builds the dispatches of one kernel for a product
/// (`plan::dispatches`): the tuning times what it builds, and knows no
/// family's dispatch code itself.
pub(crate) type Build = fn(&Context, &mut Gemm<'_>, GemmKernel) -> Result<Vec<Dispatch>>;
use crate::memory::BufferKind;
use crate::{DType, Error, Result};

/// The environment variable that turns tuning off (`0`, `off`, `false`).
pub const TUNE_ENV: &str = "WGARRAY_GEMM_TUNE";

/// The environment variable that forces one GEMM kernel on every device
/// of the process, in the form [`GemmKernel`]'s `Display` writes (e.g.
/// `shared 16 16 8 2 8`), as `Device::set_gemm_kernel` does: to run the
/// whole suite through the GPU family on a software adapter. A value that
/// does not parse is ignored with a warning; a kernel the device cannot run
/// for a dtype leaves that dtype to the tuned choice.
pub const KERNEL_ENV: &str = "WGARRAY_GEMM_KERNEL";

/// The kernel [`KERNEL_ENV`] forces, if any.
fn forced_by_env() -> Option<GemmKernel> {
    let value = std::env::var(KERNEL_ENV).ok()?;
    if value.trim().is_empty() {
        return None;
    }
    match value.parse() {
        Ok(k) => Some(k),
        Err(e) => {
            log::warn!("wgarray: ignoring {KERNEL_ENV}={value:?}: {e}");
            None
        }
    }
}

/// The environment variable that turns the device's background kernel
/// work off (`0`, `off`, `false`): the warm-up ([`WARM_UP_MAX`]), the
/// tuning in the background (it then runs inside the first eval that needs
/// it), and the stand-ins of kernels slow to compile (`first_use`).
pub const WARM_UP_ENV: &str = "WGARRAY_WARM_UP";

/// The GEMM specialisations a tuning file lists for warm-up, at most: the
/// last ones compiled for evals (not for a forced kernel) by processes on
/// the adapter. The first device a process opens on the adapter compiles
/// them on a thread of its own while the program goes on (not on GL), so that a later
/// process's first GEMM of a shape class finds its pipeline made or being
/// made. lavapipe spends 50 to 100 ms creating the pipeline of a large
/// tile even when Mesa's shader cache has its code (docs/PERFORMANCE.md).
pub const WARM_UP_MAX: usize = 8;

/// Wall time one tuning may take on a software adapter, once one candidate
/// is timed.
pub const BUDGET_SOFTWARE: Duration = Duration::from_millis(2500);
/// The same on a GPU.
pub const BUDGET_GPU: Duration = Duration::from_millis(1500);

/// How much faster than the default (a class's first candidate) another
/// candidate must be timed to be chosen: 10%. Timings on a shared software
/// adapter spread by 20% and more between runs (other processes on the
/// same cores); at lavapipe's matrix-vector shapes two runs chose the
/// 16-column and the 32-column tile in turn on noise alone (2026-12-01).
pub const DEFAULT_MARGIN: f64 = 0.1;

/// The tuning file's format name and version.
const FORMAT: &str = "wgarray-gemm-tuning";
/// Version 2: each choice records the candidates it was chosen among.
const VERSION: u64 = 2;

/// The dtypes choices are recorded under: the float GEMM's, the block
/// formats and `u32` (MLX's affine quants) for the quantized family.
const DTYPES: [DType; 9] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q8_0,
    DType::Q4K,
    DType::Q6K,
    DType::U32,
];

/// One class's choice and the candidates it was chosen among.
#[derive(Clone, Debug, PartialEq)]
struct Choice {
    kernel: GemmKernel,
    candidates: Vec<GemmKernel>,
    /// Whether `candidates` are known to be this build's for the class
    /// (chosen here, or read and compared once).
    current: bool,
    /// Taken as the class's default because timing is off ([`TUNE_ENV`]):
    /// not a choice, so never written to the file (a later process that
    /// times would trust it).
    defaulted: bool,
}

/// The GEMM's kernel choices for one device.
pub(crate) struct Tuning {
    device: wgpu::Device,
    queue: wgpu::Queue,
    owner: disk::Owner,
    /// The tuning file, unless the cache directory is off.
    file: Option<PathBuf>,
    /// Choices by dtype and class: read from the file, or timed here.
    table: Mutex<HashMap<(DType, ShapeClass), Choice>>,
    /// `Device::set_gemm_kernel`.
    forced: Mutex<Option<GemmKernel>>,
    /// Whether candidates are timed (else each class takes its first).
    timing: bool,
    /// The warm-up list ([`WARM_UP_MAX`]): [`GemmVariant::key`]s,
    /// oldest first.
    warm: Mutex<Vec<String>>,
    /// The variants [`Tuning::note_used`] has seen.
    noted: Mutex<rustc_hash::FxHashSet<GemmVariant>>,
    /// Classes whose timing is queued on the background thread: their
    /// GEMMs take the default meanwhile.
    pending: Mutex<rustc_hash::FxHashSet<(DType, ShapeClass)>>,
    /// The compiled list ([`COMPILED_MAX`]): hashes of GEMM
    /// specialisations slow to compile whose first dispatch a process on
    /// the adapter has run, oldest first (`first_use`).
    compiled: Mutex<Vec<String>>,
    /// Stand-ins (`first_use`): by specialisation, whether its background
    /// compile is done (`true`) or queued (`false`).
    pub(crate) stand_ins: Mutex<rustc_hash::FxHashMap<crate::kernels::QuickKey, bool>>,
}

/// The GEMM specialisations slow to compile that a tuning file lists as
/// compiled by a process on the adapter, at most (`first_use`).
pub const COMPILED_MAX: usize = 64;

thread_local! {
    /// This thread is timing candidates ([`Tuning::tune`]): its GEMMs are
    /// not the program's.
    static TIMING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is timing candidates (its GEMMs are the tuning's).
pub(crate) fn timing_here() -> bool {
    TIMING.with(|t| t.get())
}

/// Marks this thread as timing while it lives.
struct Timing;

impl Timing {
    fn start() -> Timing {
        TIMING.with(|t| t.set(true));
        Timing
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        TIMING.with(|t| t.set(false));
    }
}

impl Tuning {
    /// The choices of a new device: the adapter's tuning file from `dir`,
    /// if there is one and it is the adapter's.
    pub(crate) fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        owner: disk::Owner,
        dir: Option<PathBuf>,
    ) -> Tuning {
        let file = dir.map(|d| d.join(format!("gemm-{}.json", owner.stem())));
        let (table, warm, compiled) = file.as_ref().map(|f| load(f, &owner)).unwrap_or_default();
        let timing = !crate::kernels::env_off(TUNE_ENV);
        Tuning {
            device: device.clone(),
            queue: queue.clone(),
            owner,
            file,
            table: Mutex::new(table),
            forced: Mutex::new(forced_by_env()),
            timing,
            warm: Mutex::new(warm),
            noted: Mutex::new(Default::default()),
            pending: Mutex::new(Default::default()),
            compiled: Mutex::new(compiled),
            stand_ins: Mutex::new(Default::default()),
        }
    }

    /// The device the tuning times on.
    pub(crate) fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Its queue.
    pub(crate) fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The kernel forced on the device, if any.
    pub(crate) fn forced(&self) -> Option<GemmKernel> {
        *lock(&self.forced)
    }

    /// Whether a process on the adapter has run the first dispatch of the
    /// GEMM specialisation hashed `hash` (the tuning file's compiled list),
    /// so that the driver's shader cache probably holds its machine code.
    /// Never with Mesa's shader cache turned off
    /// (`MESA_SHADER_CACHE_DISABLE`, or the older `MESA_GLSL_CACHE_DISABLE`,
    /// true): then every process compiles from scratch.
    pub(crate) fn known_compiled(&self, hash: &str) -> bool {
        let mesa_off = ["MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE"]
            .iter()
            .any(|v| {
                std::env::var(v).is_ok_and(|x| {
                    ["1", "true", "yes", "y"].contains(&x.trim().to_ascii_lowercase().as_str())
                })
            });
        !mesa_off && lock(&self.compiled).iter().any(|h| h == hash)
    }

    /// Note that this process ran the first dispatch of the GEMM
    /// specialisation hashed `hash` (see [`Tuning::known_compiled`]).
    pub(crate) fn note_compiled(&self, hash: String) {
        if push_capped(&self.compiled, hash, COMPILED_MAX) {
            self.save();
        }
    }

    /// The specialisations the first device of this process with this
    /// tuning file and a list in it warms up (the file's list), or none:
    /// for later devices (a test suite opens hundreds), without a file,
    /// and with [`WARM_UP_ENV`] off.
    pub(crate) fn warm_up_list(&self) -> Vec<GemmVariant> {
        static WARMED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
        let off = crate::kernels::env_off(WARM_UP_ENV);
        let Some(file) = &self.file else {
            return Vec::new();
        };
        let mut warmed = lock(&WARMED);
        if off || warmed.contains(file) {
            return Vec::new();
        }
        let list: Vec<_> = lock(&self.warm)
            .iter()
            .filter_map(|k| GemmVariant::from_key(k))
            .collect();
        if !list.is_empty() {
            warmed.push(file.clone());
        }
        list
    }

    /// Note that an eval ran the GEMM specialisation `variant` (not a
    /// tuning run, not a stand-in: an eval that runs a stand-in notes the
    /// kernel it stands in for): it joins the tuning file's warm-up list,
    /// unless a kernel is forced. Once per variant and device; cheap after
    /// that.
    pub(crate) fn note_used(&self, variant: GemmVariant) {
        if self.file.is_none()
            || TIMING.with(|t| t.get())
            || first_use::standing_in_here()
            || lock(&self.forced).is_some()
            || !lock(&self.noted).insert(variant)
        {
            return;
        }
        if push_capped(&self.warm, variant.key(), WARM_UP_MAX) {
            self.save();
        }
    }

    /// The tuning file, if the cache directory is on.
    pub(crate) fn file(&self) -> Option<&PathBuf> {
        self.file.as_ref()
    }

    /// The choice recorded for `dtype` and `class`, if any. A choice read
    /// from the file among other candidates than this build's (same
    /// version number, changed kernels), or that is not one of its own
    /// candidates (a hand-edited file), is dropped, once, with a log line.
    pub(crate) fn chosen(
        &self,
        cx: &Context,
        dtype: DType,
        class: ShapeClass,
    ) -> Option<GemmKernel> {
        let mut table = lock(&self.table);
        let choice = table.get_mut(&(dtype, class))?;
        if !choice.current {
            let cands = candidates(class, cx.software, dtype, &|k| usable(cx, *k, dtype));
            // A hand-edited entry whose kernel is not among its candidates
            // was not chosen among them either.
            if choice.candidates != cands || !cands.contains(&choice.kernel) {
                log::info!(
                    "wgarray: the {dtype} {} GEMM choice in {} was made among other candidates (or is not one of them); timing again",
                    class.name(),
                    self.file
                        .as_ref()
                        .map_or(String::new(), |f| f.display().to_string())
                );
                table.remove(&(dtype, class));
                return None;
            }
            choice.current = true;
        }
        Some(choice.kernel)
    }

    /// Force `kernel` for every GEMM it can run (`None`: back to the
    /// choices); returns the previous setting.
    pub(crate) fn force(&self, kernel: Option<GemmKernel>) -> Option<GemmKernel> {
        std::mem::replace(&mut *lock(&self.forced), kernel)
    }

    /// The kernel for a GEMM of `dtype` and `class` with dimensions
    /// `[batch, m, n, k]`: the forced one, the recorded choice, or, the
    /// first time, the fastest candidate (or the first, with timing off),
    /// timed with B transposed (`x @ W^T`) where `b_transposed` (as the
    /// first product of the class is laid out: software adapters read the
    /// two layouts with different loads, and the tiles rank differently).
    /// `build` makes a candidate's dispatches on the proxy (the planner's).
    ///
    /// # Errors
    /// What a timing run returns: [`Error::DeviceLost`], [`Error::Timeout`],
    /// [`Error::TooLarge`].
    pub(crate) fn kernel(&self, cx: &Context, want: Wanted, build: Build) -> Result<GemmKernel> {
        let Wanted {
            dtype, class, dims, ..
        } = want;
        if let Some(k) = *lock(&self.forced)
            && usable(cx, k, dtype)
        {
            return Ok(k);
        }
        // A matrix-vector tile's columns fit to this product's n.
        let fit = |k| {
            if class.is_gemv() {
                fit_gemv_columns(k, dims[2])
            } else {
                k
            }
        };
        if let Some(k) = self.chosen(cx, dtype, class)
            && usable(cx, k, dtype)
        {
            return Ok(fit(k));
        }
        let cands = candidates(class, cx.software, dtype, &|k| usable(cx, *k, dtype));
        let timed = self.timing && cands.len() > 1;
        if timed && cx.background && !TIMING.with(|t| t.get()) {
            // The default now; the timing when the device is idle.
            self.defer(cx, want, cands.clone(), build);
            return Ok(fit(cands[0]));
        }
        let chosen = if timed {
            self.tune(cx, want, &cands, build)?
        } else {
            cands[0]
        };
        self.record(cx, dtype, class, chosen, cands, timed);
        Ok(fit(chosen))
    }

    /// Record `chosen` for `dtype` and `class`, among `cands`; a timed
    /// choice is written to the tuning file (with the driver's pipelines).
    fn record(
        &self,
        cx: &Context,
        dtype: DType,
        class: ShapeClass,
        chosen: GemmKernel,
        cands: Vec<GemmKernel>,
        timed: bool,
    ) {
        let defaulted = !timed && cands.len() > 1;
        lock(&self.table).insert(
            (dtype, class),
            Choice {
                kernel: chosen,
                candidates: cands,
                current: true,
                defaulted,
            },
        );
        if timed {
            self.save();
            cx.cache.save_pipelines();
        }
    }

    /// Queue the timing of `want`'s class on the device's background
    /// thread, once per class and dtype: it runs when the device is idle
    /// (`kernels/background.rs`), under the device's queue lock like an
    /// eval, and records its choice for the GEMMs after it. Meanwhile the
    /// class's GEMMs take the default. A timing that fails (a lost device)
    /// is logged and leaves the class untimed until a later process.
    fn defer(&self, cx: &Context, want: Wanted, cands: Vec<GemmKernel>, build: Build) {
        let key = (want.dtype, want.class);
        if !lock(&self.pending).insert(key) {
            return;
        }
        let me = cx.me.clone();
        let what = format!(
            "timing the {} {} GEMM kernels",
            want.dtype.name(),
            want.class.name()
        );
        let run = move |_: &std::sync::Arc<crate::kernels::KernelCache>| {
            let Some(cx) = me.upgrade() else { return };
            let tuning = &cx.tuning;
            // Evals wait while candidates are timed, as for an eval's own
            // timing: their dispatches would blur the timings.
            let pool = cx.pool.upgrade();
            let _queue = pool.as_ref().map(|p| p.lock_queue());
            let _span = crate::progress::Span::start(
                cx.device_id,
                crate::progress::Work::Tuning {
                    dtype: key.0,
                    class: key.1,
                },
                true,
            );
            match tuning.tune(&cx, want, &cands, build) {
                Ok(chosen) => tuning.record(&cx, key.0, key.1, chosen, cands, true),
                Err(e) => log::warn!(
                    "wgarray: timing the {} {} GEMM kernels failed: {e}",
                    key.0,
                    key.1.name()
                ),
            }
            lock(&tuning.pending).remove(&key);
        };
        cx.cache
            .push_background(vec![crate::kernels::background::Job {
                what,
                idle: true,
                run: Box::new(run),
            }]);
    }

    /// Time `cands` on a proxy of the product `want` describes and return
    /// the fastest.
    fn tune(
        &self,
        cx: &Context,
        want: Wanted,
        cands: &[GemmKernel],
        build: Build,
    ) -> Result<GemmKernel> {
        let Wanted {
            dtype,
            class,
            dims,
            b_transposed,
            quant,
        } = want;
        // Timings taken beside a warm-up's compiles would be the CPU's
        // (on the background thread itself there are none).
        cx.cache.wait_warm_up();
        let _timing = Timing::start();
        let started = Instant::now();
        let budget = if cx.software {
            BUDGET_SOFTWARE
        } else {
            BUDGET_GPU
        };
        let [batch, m, n, k] = proxy(class, dims, cx.software);
        // A quantized proxy's K is whole blocks.
        let k = quant.map_or(k, |(source, _)| k.next_multiple_of(block_of(source)));
        // Buffers as the pool makes them (on software adapters B must be
        // bindable as uniform windows, `GemmKernel::Uniform`).
        let storage = BufferKind::Storage.usage(cx.software);
        let buffer = |bytes: usize| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgarray gemm tuning"),
                size: bytes.next_multiple_of(256).max(256) as u64,
                usage: storage,
                mapped_at_creation: false,
            })
        };
        let write = |buffer: &wgpu::Buffer, bytes: &[u8]| {
            // Writes are whole 4-byte words (an odd count of f16 or bf16
            // elements is not): zero-padded, within the buffers' rounding.
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().next_multiple_of(4), 0);
            self.queue.write_buffer(buffer, 0, &padded);
        };
        // The floats of A, B (or the quantized weights, their scales and
        // biases) and the output.
        let x_dtype = if quant.is_some() { DType::F32 } else { dtype };
        let size = x_dtype.size_in_bytes();
        let (a, out) = (buffer(batch * m * k * size), buffer(batch * m * n * size));
        // Known operands: each candidate's product is checked before it
        // may be chosen (`check.rs`); quantized weights are dequantized on
        // the device for it, by the dequantize kernel.
        let (probe, b, scales, biases) = match quant {
            None => {
                let probe = Probe::new(dtype, batch * m * k, batch * k * n, m, n);
                let b = buffer(probe.b_bytes.len());
                write(&b, &probe.b_bytes);
                (probe, b, buffer(0), buffer(0))
            }
            Some((source, mode)) => {
                let (rows, cols) = if mode == Mode::QuantK { (n, k) } else { (k, n) };
                let (w, s, bi) = quant_operand(source, rows, cols);
                let (b, scales, biases) = (buffer(w.len()), buffer(s.len()), buffer(bi.len()));
                for (buffer, bytes) in [(&b, &w), (&scales, &s), (&biases, &bi)] {
                    write(buffer, bytes);
                }
                let values = self.dequantized(cx, source, [&b, &scales, &biases], rows, cols)?;
                let probe = Probe::with_b(x_dtype, batch * m * k, values, w, m, n);
                (probe, b, scales, biases)
            }
        };
        write(&a, &probe.a_bytes);
        let dense = |buffer, rows: usize, cols: usize| Operand {
            buffer,
            dtype: x_dtype,
            offset: 0,
            strides: vec![0, 0, 0, (rows * cols) as isize, cols as isize, 1],
        };
        // The layout of B: the transpose of a row-major [n, k] for GemvT,
        // GemvTWide and where the product's is, row-major [k, n] otherwise;
        // quantized weights in their rows (`QuantB`), unbatched.
        let b_op = match quant {
            Some((source, mode)) => {
                let len = if mode == Mode::QuantK { k } else { n };
                let stride = match source {
                    Source::Blocks(d) => d.nbytes(len),
                    Source::Affine { bits, .. } => len * bits as usize / 32,
                } as isize;
                let mut strides = vec![0; 6];
                strides[if mode == Mode::QuantK { 5 } else { 4 }] = stride;
                Operand {
                    buffer: &b,
                    dtype: x_dtype,
                    offset: 0,
                    strides,
                }
            }
            None if class.b_transposed() || b_transposed => Operand {
                strides: vec![0, 0, 0, (k * n) as isize, 1, k as isize],
                ..dense(&b, k, n)
            },
            None => dense(&b, k, n),
        };
        let rows = |buffer, stride| Rows {
            buffer,
            offset: 0,
            stride,
        };
        let mut g = Gemm {
            dtype: x_dtype,
            batch_shape: [1, 1, 1, batch],
            m,
            n,
            k,
            a: dense(&a, m, k),
            b: b_op,
            bias: None,
            alpha: 1.0,
            beta: 0.0,
            out: &out,
            epilogue: None,
            quant: quant.map(|(source, mode)| {
                let groups = match (source, mode) {
                    (Source::Affine { group_size, .. }, Mode::QuantK) => k / group_size as usize,
                    (Source::Affine { group_size, .. }, _) => n / group_size as usize,
                    _ => 0,
                };
                let affine = matches!(source, Source::Affine { .. });
                QuantB {
                    source,
                    mode,
                    scales: affine.then(|| rows(&scales, groups)),
                    biases: affine.then(|| rows(&biases, groups)),
                }
            }),
        };
        let mut report = Vec::new();
        // Each candidate is built, checked and timed once in turn, then
        // timed in rounds across all of them (`time_rounds`).
        let mut timed: Vec<Timed> = Vec::new();
        for &cand in cands {
            if !timed.is_empty() && started.elapsed() > budget {
                report.push(format!("{cand}: not timed (budget)"));
                continue;
            }
            let d = match build(cx, &mut g, cand) {
                Ok(d) => d,
                Err(Error::Kernel { message, .. }) => {
                    log::warn!("wgarray: GEMM candidate {cand} failed to compile: {message}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            // A uniform-window candidate that cannot run the proxy (a batched
            // first product, or operands it cannot place in windows) would
            // time the register tile it falls back to under its own name.
            if cand.family() == "uniform" && d.iter().any(|x| x.windows.is_empty()) {
                report.push(format!("{cand}: not timed (cannot run the proxy)"));
                continue;
            }
            // The uniform family's row kernel (B along K) has one
            // geometry, so its candidates all build the same pipeline.
            let ids: Vec<u64> = d.iter().map(|x| x.pipeline.id).collect();
            if let Some(same) = timed.iter().find(|t| t.ids == ids) {
                report.push(format!("{cand}: not timed (the kernel of {})", same.kernel));
                continue;
            }
            // The first run pays for the driver's lazy work.
            self.run(&d, cx, 1)?;
            let once = self.run(&d, cx, 1)?;
            let product = read(&self.device, &self.queue, &out, (m * n * size) as u64)?;
            let strides = |o: &Operand<'_>| (o.strides[4] as usize, o.strides[5] as usize);
            // Quantized weights' values are row-major as stored: W [n, k]
            // along K, [k, n] along n.
            let b_strides = match quant {
                Some((_, Mode::QuantK)) => (1, k),
                Some(_) => (n, 1),
                None => strides(&g.b),
            };
            if let Err(why) = probe.check(&product, n, k, strides(&g.a), b_strides) {
                log::warn!(
                    "wgarray: GEMM candidate {cand} computed a wrong {dtype} product on {} ({why}); it is not used",
                    self.owner.adapter
                );
                report.push(format!("{cand}: wrong product"));
                continue;
            }
            // Runs of about 10 ms on a GPU; on a software adapter of about
            // 2 ms, at most 16 repetitions: one run of a matrix-vector proxy
            // takes 0.1 to 0.3 ms there, which the thread pool's wake-ups and
            // other processes on the same cores blur (a single run chose a
            // kernel 2x slower than the best, 2026-12-01). A candidate whose
            // first run is four times the best so far is not timed further.
            let (target, most) = if cx.software { (0.002, 16) } else { (0.01, 64) };
            let fastest = timed
                .iter()
                .map(|t| t.seconds)
                .fold(f64::INFINITY, f64::min);
            let reps = if once > 4.0 * fastest {
                0
            } else {
                ((target / once.max(1e-6)).ceil() as usize).clamp(1, most)
            };
            timed.push(Timed {
                kernel: cand,
                dispatches: d,
                ids,
                seconds: once,
                reps,
            });
        }
        self.time_rounds(&mut timed, cx)?;
        let mut best: Option<(f64, GemmKernel)> = None;
        for t in &timed {
            report.push(format!("{}: {:.3} ms", t.kernel, t.seconds * 1e3));
            if replaces(t.seconds, best, cands[0]) {
                best = Some((t.seconds, t.kernel));
            }
        }
        let chosen = best.map_or(cands[0], |b| b.1);
        log::info!(
            "wgarray: tuned the {} {} GEMM on {} ({batch} x {m} x {k} x {n}) in {:.0} ms: {}; chose {chosen}",
            dtype,
            class.name(),
            self.owner.adapter,
            started.elapsed().as_secs_f64() * 1e3,
            report.join(", ")
        );
        Ok(chosen)
    }

    /// Time the candidates in [`TIMING_ROUNDS`] rounds (after the budget
    /// check: about 3 x 2 ms per candidate on a software adapter, 3 x 10 ms
    /// on a GPU), each a run of
    /// every candidate in turn (those with `reps > 0`), and keep each one's
    /// best seconds per run. In rounds rather than one candidate after
    /// another, so that a burst of load from other processes slows every
    /// candidate of one round instead of every run of one candidate: on
    /// this project's shared two-core machine the one-after-another timing
    /// chose the register tile over a kernel 1.4x faster in one tuning of
    /// three (lavapipe, 1 x 384 x 1280 with B transposed, 2026-12-02).
    fn time_rounds(&self, timed: &mut [Timed], cx: &Context) -> Result<()> {
        for _ in 0..TIMING_ROUNDS {
            for t in timed.iter_mut().filter(|t| t.reps > 0) {
                let per = self.run(&t.dispatches, cx, t.reps)? / t.reps as f64;
                t.seconds = t.seconds.min(per);
            }
        }
        Ok(())
    }

    /// Run `d` `reps` times in one submission and wait: the wall time.
    fn run(&self, d: &[Dispatch], cx: &Context, reps: usize) -> Result<f64> {
        // One slot per dispatch, as large as the largest parameter block
        // (the uniform family's pass 256 bytes) and aligned for a dynamic
        // offset.
        let align =
            crate::kernels::PARAMS_BYTES.max(cx.limits.min_uniform_buffer_offset_alignment as u64);
        let stride = d
            .iter()
            .map(|x| 4 * x.params.len() as u64)
            .max()
            .unwrap_or(0)
            .next_multiple_of(align)
            .max(align);
        let params = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgarray gemm tuning params"),
            size: stride * d.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for (i, x) in d.iter().enumerate() {
            self.queue
                .write_buffer(&params, stride * i as u64, bytemuck::cast_slice(&x.params));
        }
        let groups: Vec<wgpu::BindGroup> = d
            .iter()
            .map(|x| crate::kernels::bind_group(&self.device, &params, x))
            .collect();
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgarray gemm tuning"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgarray gemm tuning"),
                timestamp_writes: None,
            });
            for _ in 0..reps {
                for (i, (x, g)) in d.iter().zip(&groups).enumerate() {
                    pass.set_pipeline(&x.pipeline.pipeline);
                    pass.set_bind_group(0, g, &[(stride * i as u64) as u32]);
                    let [gx, gy, gz] = x.workgroups;
                    pass.dispatch_workgroups(gx, gy, gz);
                }
            }
        }
        let t = Instant::now();
        let index = self.queue.submit([encoder.finish()]);
        crate::memory::wait(
            &self.device,
            Some(index),
            crate::DEFAULT_WAIT_TIMEOUT,
            "gemm tuning",
        )?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Write the table into the tuning file, keeping the file's choices
    /// for classes this device has not chosen.
    fn save(&self) {
        let Some(file) = &self.file else { return };
        let (mut merged, mut warm, mut compiled) = load(file, &self.owner);
        merged.extend(
            lock(&self.table)
                .iter()
                .filter(|(_, v)| !v.defaulted)
                .map(|(k, v)| (*k, v.clone())),
        );
        // The file's lists (another process may have added to them), then
        // ours.
        let merge = |file: &mut Vec<String>, ours: Vec<String>, max: usize| {
            file.retain(|k| !ours.contains(k));
            file.extend(ours);
            file.drain(..file.len().saturating_sub(max));
        };
        merge(&mut warm, lock(&self.warm).clone(), WARM_UP_MAX);
        merge(&mut compiled, lock(&self.compiled).clone(), COMPILED_MAX);
        let mut keys: Vec<_> = merged.keys().copied().collect();
        keys.sort_by_key(|(d, c)| (d.name(), *c));
        let choices: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .map(|key| {
                let choice = &merged[key];
                (
                    format!("{} {}", key.0.name(), key.1.name()),
                    serde_json::json!({
                        "kernel": choice.kernel.to_string(),
                        "candidates": choice.candidates.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
                    }),
                )
            })
            .collect();
        let json = serde_json::json!({
            "format": FORMAT,
            "version": VERSION,
            "owner": self.owner.to_json(),
            "choices": choices,
            "warm": warm,
            "compiled": compiled,
        });
        let text = serde_json::to_string_pretty(&json).expect("a JSON value serialises");
        disk::write(file, text.as_bytes());
    }
}

/// The product a tuning times candidates for (see [`Tuning::kernel`]): its
/// dtype (for quantized weights the block format, or `u32` for affine),
/// class, `[batch, m, n, k]`, whether B is read along K, and a quantized
/// B's format and orientation.
#[derive(Clone, Copy)]
pub(crate) struct Wanted {
    pub dtype: DType,
    pub class: ShapeClass,
    pub dims: [usize; 4],
    pub b_transposed: bool,
    pub quant: Option<(Source, Mode)>,
}

/// The K (or, along n, the columns) a quantized B's rows are a whole
/// number of: a block, or 32 for affine.
fn block_of(source: Source) -> usize {
    match source {
        Source::Blocks(d) => d.block_size(),
        Source::Affine { .. } => 32,
    }
}

impl Tuning {
    /// The values of a quantized proxy's weights (`buffers`: the packed
    /// weights, the scales and biases), `rows` rows of `cols`, row-major:
    /// dequantized on the device by the dequantize kernel and read back.
    ///
    /// # Errors
    /// As [`Tuning::run`], and [`crate::Error::TooLarge`].
    fn dequantized(
        &self,
        cx: &Context,
        source: Source,
        [w, scales, biases]: [&wgpu::Buffer; 3],
        rows: usize,
        cols: usize,
    ) -> Result<Vec<f64>> {
        let out = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgarray gemm tuning"),
            size: (4 * rows * cols).next_multiple_of(256) as u64,
            usage: BufferKind::Storage.usage(cx.software),
            mapped_at_creation: false,
        });
        let row = |buffer, stride| Rows {
            buffer,
            offset: 0,
            stride,
        };
        let affine = |group_size: u32| cols / group_size as usize;
        let (w_rows, s_rows) = match source {
            Source::Blocks(d) => (row(w, d.nbytes(cols)), None),
            Source::Affine {
                bits, group_size, ..
            } => (
                row(w, cols * bits as usize / 32),
                Some((
                    row(scales, affine(group_size)),
                    row(biases, affine(group_size)),
                )),
            ),
        };
        let d = dequantize(
            cx,
            source,
            &w_rows,
            s_rows.as_ref().map(|s| &s.0),
            s_rows.as_ref().map(|s| &s.1),
            rows,
            cols,
            &out,
            DType::F32,
        )?;
        self.run(&d.into_iter().collect::<Vec<_>>(), cx, 1)?;
        let bytes = read(&self.device, &self.queue, &out, (4 * rows * cols) as u64)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect())
    }
}

/// Rounds of [`Tuning::time_rounds`].
const TIMING_ROUNDS: usize = 3;

/// A tuning candidate being timed: its dispatches on the proxy, their
/// pipelines' ids, its best seconds per run so far, and the repetitions
/// per timed run (0: not timed further).
struct Timed {
    kernel: GemmKernel,
    dispatches: Vec<Dispatch>,
    ids: Vec<u64>,
    seconds: f64,
    reps: usize,
}

/// Whether a candidate timed at `t` seconds replaces `best` so far: when
/// it is faster, by [`DEFAULT_MARGIN`] when `best` is the default (the
/// class's first candidate, chosen from measurements on a quiet machine,
/// which gives way only to a clear win).
fn replaces(t: f64, best: Option<(f64, GemmKernel)>, default: GemmKernel) -> bool {
    best.is_none_or(|(bt, bk)| {
        let margin = if bk == default {
            1.0 - DEFAULT_MARGIN
        } else {
            1.0
        };
        t < bt * margin
    })
}

/// Append `item` to `list` unless it is there, keeping the last `max`
/// (oldest first); whether it was appended.
fn push_capped(list: &Mutex<Vec<String>>, item: String, max: usize) -> bool {
    let mut list = lock(list);
    if list.contains(&item) {
        return false;
    }
    list.push(item);
    let extra = list.len().saturating_sub(max);
    list.drain(..extra);
    true
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The choices in tuning file `path` if it is `owner`'s, its warm-up list
/// and its compiled list; nothing, with a warning, if it is corrupt or
/// someone else's. Each choice is checked against this build's candidates
/// when first asked for (`Tuning::chosen`). A warm-up entry that does not
/// parse is dropped with a warning; so is a compiled entry that is not a
/// hash (`first_use::spec_hash`). A file without a compiled list (an
/// earlier build's) has an empty one.
fn load(path: &std::path::Path, owner: &disk::Owner) -> (Table, Vec<String>, Vec<String>) {
    let (table, json) = load_choices(path, owner);
    let Some(json) = json else {
        return (table, Vec::new(), Vec::new());
    };
    let list = |name: &str, what: &str, ok: &dyn Fn(&str) -> bool, max: usize| {
        let mut list: Vec<String> = Vec::new();
        for entry in json[name].as_array().into_iter().flatten() {
            match entry.as_str().filter(|k| ok(k)) {
                Some(k) if !list.iter().any(|w| w == k) => list.push(k.to_string()),
                Some(_) => {}
                None => log::warn!(
                    "wgarray: ignoring {what} entry {entry} of GEMM tuning file {}",
                    path.display()
                ),
            }
        }
        list.drain(..list.len().saturating_sub(max));
        list
    };
    let compiled = list("compiled", "compiled", &first_use::is_hash, COMPILED_MAX);
    let warm = list(
        "warm",
        "warm-up",
        &|k| GemmVariant::from_key(k).is_some(),
        WARM_UP_MAX,
    );
    (table, warm, compiled)
}

type Table = HashMap<(DType, ShapeClass), Choice>;

/// The choices of [`load`], and the file's JSON if it is `owner`'s.
fn load_choices(path: &std::path::Path, owner: &disk::Owner) -> (Table, Option<serde_json::Value>) {
    let mut table = HashMap::new();
    let Some(bytes) = disk::read(path) else {
        return (table, None);
    };
    let warn = |why: &str| {
        log::warn!(
            "wgarray: ignoring GEMM tuning file {}: {why}",
            path.display()
        )
    };
    let json: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(j) => j,
        Err(e) => {
            warn(&format!("corrupt ({e})"));
            return (table, None);
        }
    };
    if json["format"] != FORMAT || json["version"] != VERSION {
        warn("not a wgarray GEMM tuning file of this version");
        return (table, None);
    }
    if json["owner"] != owner.to_json() {
        warn(&format!(
            "written for {} (another adapter, driver or wgarray version), not {}",
            json["owner"],
            owner.to_json()
        ));
        return (table, None);
    }
    let Some(choices) = json["choices"].as_object() else {
        warn("corrupt (no choices)");
        return (table, None);
    };
    for (key, value) in choices {
        let parsed = key.split_once(' ').and_then(|(d, c)| {
            let dtype = DTYPES.into_iter().find(|t| t.name() == d)?;
            let class = ShapeClass::from_name(c)?;
            let kernel: GemmKernel = value["kernel"].as_str()?.parse().ok()?;
            let candidates = value["candidates"]
                .as_array()?
                .iter()
                .map(|k| k.as_str()?.parse().ok())
                .collect::<Option<Vec<GemmKernel>>>()?;
            Some((
                (dtype, class),
                Choice {
                    kernel,
                    candidates,
                    current: false,
                    defaulted: false,
                },
            ))
        });
        match parsed {
            Some((k, v)) => {
                table.insert(k, v);
            }
            None => warn(&format!("corrupt entry {key:?}: {value}")),
        }
    }
    (table, Some(json))
}

/// The shape tuning times for a GEMM of `[batch, m, n, k]`: each dimension
/// capped (512 on software adapters, 2048 on GPUs; 2048 and 4096 for the
/// matrix-vector classes' n and k), in the same class, and the batch cut so
/// the proxy does about as much work as a `cap^3 / 4` product. The
/// matrix-vector classes' n and k are also raised to at least
/// [`GEMV_MIN_N`] and [`GEMV_MIN_K`], within the class: the class's first
/// product decides for all, and a tiny one (a `1 x 4 x 4` warm-up) times
/// only the dispatch; their n is rounded up to whole [`GEMV_PROXY_STEP`]s,
/// and with B transposed their k to a multiple of four (what the uniform
/// family's row kernel needs; K's remainder matters to no other candidate).
/// So a class whose products have a K off a multiple of four may choose
/// the row kernel, which hands each of them to the register tile: the
/// class's next candidate on software adapters.
fn proxy(class: ShapeClass, [batch, m, n, k]: [usize; 4], software: bool) -> [usize; 4] {
    let cap = if software { 512 } else { 2048 };
    let (m, n, k) = match class {
        ShapeClass::Gemv | ShapeClass::GemvT => (
            1,
            n.next_multiple_of(GEMV_PROXY_STEP)
                .clamp(GEMV_MIN_N, GEMV_WIDE_N - GEMV_PROXY_STEP),
            k.clamp(GEMV_MIN_K, 4 * cap),
        ),
        ShapeClass::GemvWide | ShapeClass::GemvTWide => (
            1,
            n.next_multiple_of(GEMV_PROXY_STEP)
                .clamp(GEMV_WIDE_N, (4 * cap).max(GEMV_WIDE_N)),
            k.clamp(GEMV_MIN_K, 4 * cap),
        ),
        _ => (m.min(cap), n.min(cap), k.min(cap)),
    };
    // (4 cap is a multiple of four, so the class's K range holds it.)
    let k = if class.b_transposed() {
        k.next_multiple_of(4)
    } else {
        k
    };
    let per = (m * n * k).max(1);
    let batch = batch.min((cap * cap * cap / 4 / per).max(1));
    [batch, m, n, k.max(1)]
}

/// The fewest output columns a matrix-vector proxy has.
const GEMV_MIN_N: usize = 512;
/// A matrix-vector proxy's n is a multiple of this (the columns of the
/// narrow class's widest register tile), so that no candidate is timed on
/// columns it computes past n, which `fit_gemv_columns` avoids in
/// the real product. The wide class's proxy on software adapters is 2048
/// columns, a multiple of its widest tile's 1024.
const GEMV_PROXY_STEP: usize = 256;
/// The shortest K a matrix-vector proxy has.
const GEMV_MIN_K: usize = 384;

#[cfg(test)]
mod tests {
    use super::candidates::register_tile;
    use super::*;

    #[test]
    fn proxies_stay_in_their_class_and_are_bounded() {
        for software in [false, true] {
            for dims in [
                [1, 1, 4096, 4096],
                [1, 1, 100_000, 7],
                [64, 128, 128, 64],
                [1, 4096, 4096, 4096],
                [1, 17, 9000, 33],
                [3, 100, 1000, 70_000],
                [1, 1, 4, 4],
                [1, 1, 2047, 5],
                [1, 1, 2048, 100_000],
                [1, 1, 1000, 1025],
            ] {
                let class = ShapeClass::of(dims[1], dims[2]);
                let p = proxy(class, dims, software);
                assert_eq!(ShapeClass::of(p[1], p[2]), class, "{dims:?} -> {p:?}");
                // The transposed-B matrix-vector classes keep their proxy
                // too; a matrix-vector proxy is never tiny.
                if class.is_gemv() {
                    let t = ShapeClass::of_layout(p[1], p[2], 1, p[3] as isize);
                    assert!(t.is_gemv() && t.b_transposed(), "{dims:?} -> {t:?}");
                    assert_eq!(ShapeClass::of(p[1], p[2]), class);
                    let pt = proxy(t, dims, software);
                    assert_eq!(pt[..3], p[..3], "{dims:?}");
                    assert_eq!(pt[3], p[3].next_multiple_of(4), "{dims:?}");
                    assert!(
                        p[2] >= GEMV_MIN_N && p[3] >= GEMV_MIN_K,
                        "{dims:?} -> {p:?}"
                    );
                }
                assert!(p.iter().all(|&x| x >= 1));
                assert!(p[0] * p[1] * p[2] * p[3] <= 1 << 34, "{dims:?} -> {p:?}");
            }
        }
    }

    #[test]
    fn the_default_gives_way_only_to_a_clear_win() {
        let default = register_tile(ShapeClass::Gemv, true);
        let other = register_tile(ShapeClass::GemvWide, true);
        assert_ne!(default, other);
        assert!(replaces(1.0, None, default));
        assert!(!replaces(0.95, Some((1.0, default)), default));
        assert!(replaces(0.85, Some((1.0, default)), default));
        assert!(replaces(0.99, Some((1.0, other)), default));
        assert!(!replaces(1.01, Some((1.0, other)), default));
    }
}
