//! The Rust side of the WGSL kernels: sources and specialisation, the
//! per-device pipeline cache, dispatch geometry, and encoding a batch of
//! dispatches into one command buffer.
//!
//! Every kernel binds its parameters at `@binding(0)` as a uniform with a
//! dynamic offset into one parameter buffer per submission, then its inputs
//! (read-only storage) and outputs (read-write storage) in order. Kernels are
//! specialised by text substitution of `{{NAME}}` placeholders: types cannot be
//! override constants in WGSL, and one source per family keeps kernels that
//! differ by a constant from being copied.

/// The text of `wgsl/<name>.wgsl`, for a [`Kernel`]'s source or prelude.
macro_rules! wgsl {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/wgsl/",
            $name,
            ".wgsl"
        ))
    };
}

pub(crate) mod attention;
pub(crate) mod background;
pub(crate) mod bits;
pub(crate) mod concat;
pub(crate) mod disk;
pub(crate) mod elementwise;
pub(crate) mod gemm;
#[cfg(test)]
mod portability;
pub(crate) mod program;
pub(crate) mod quant;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod scan;
pub(crate) mod scatter;
pub(crate) mod sort;
pub(crate) mod split;
pub(crate) mod topk;

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::graph::primitive::ReduceOp;
use crate::memory::QueueGuard;
use crate::{DType, Error, Result};

/// Bytes of parameters each dispatch may bind (the uniform binding size).
pub(crate) const PARAMS_BYTES: u64 = 256;
/// Words of parameters.
pub(crate) const PARAMS_WORDS: usize = (PARAMS_BYTES / 4) as usize;
/// Threads per workgroup of the one-dimensional kernels.
pub(crate) const WORKGROUP: u32 = 256;

/// What a kernel builder needs of a device: the pipeline cache, the limits
/// and the optional features. The device owns one; kernels know nothing
/// else of it.
pub(crate) struct Context {
    pub cache: Arc<KernelCache>,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
    /// A software adapter (device type `Cpu`: lavapipe, llvmpipe, WARP):
    /// the GEMM's default kernels and tuning budget differ there.
    pub software: bool,
    /// The workgroup-memory GEMM stages through f32 arrays rather than
    /// vec4 arrays (`gemm/workgroup.rs`): on Metal and D3D12, whose shading
    /// languages make a store into one component of a shared vec4 a
    /// read-modify-write of the whole vector; or with
    /// [`SCALAR_STAGING_ENV`] set, to test that form on other adapters.
    pub scalar_staging: bool,
    /// The adapter's backend.
    pub backend: wgpu::Backend,
    /// The adapter's subgroup sizes (equal where the size is fixed).
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    /// The cooperative-matrix configurations the adapter offers (empty
    /// unless the device has `EXPERIMENTAL_COOPERATIVE_MATRIX`).
    pub coop: Vec<wgpu::CooperativeMatrixProperties>,
    /// The GEMM's kernel choices: tuned, remembered, forced.
    pub tuning: gemm::tuning::Tuning,
    /// Elementwise programs dispatched in their wide variant
    /// (`program::wide`) and wide reductions (`reduce::Mode::Wide`), for
    /// [`crate::Device::wide_dispatches`].
    pub wide_dispatches: std::sync::atomic::AtomicU64,
    /// The device's number in the process (`Device::id`), for progress
    /// events.
    pub device_id: u64,
    /// This context, weakly: what background jobs hold.
    pub me: std::sync::Weak<Context>,
    /// The device's pool, weakly: background jobs that time kernels hold
    /// its queue lock, as an eval does.
    pub pool: std::sync::Weak<crate::memory::Pool>,
    /// Whether kernel work may run on the background thread (tuning,
    /// compiles that replace stand-ins): not on GL, where every wgpu call
    /// holds one EGL context lock (and wgpu-hal panics a thread that waits
    /// 6 s for it), and not with [`gemm::tuning::WARM_UP_ENV`] off.
    pub background: bool,
}

/// Environment variable (tests): `1` makes the workgroup-memory GEMM stage
/// through f32 arrays on every adapter, as it does on Metal and D3D12
/// (`Context::scalar_staging`), so that form runs where tests run.
pub(crate) const SCALAR_STAGING_ENV: &str = "WGARRAY_GEMM_SCALAR_STAGING";

impl Drop for Context {
    fn drop(&mut self) {
        self.cache.stop_warm_up();
    }
}

/// Whether an environment variable is set to `0`, `off` or `false`.
pub(crate) fn env_off(name: &str) -> bool {
    std::env::var(name)
        .is_ok_and(|v| ["0", "off", "false"].contains(&v.trim().to_ascii_lowercase().as_str()))
}

impl Context {
    /// The kernel context of a new device on `adapter`: the pipeline cache
    /// (with the driver's cache file, where the device has
    /// `PIPELINE_CACHE`) and the GEMM's choices, both kept in `cache_dir`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        adapter: &wgpu::Adapter,
        info: &crate::AdapterDescription,
        limits: wgpu::Limits,
        features: wgpu::Features,
        cache_dir: &disk::CacheDir,
        pool: &Arc<crate::memory::Pool>,
        device_id: u64,
    ) -> Arc<Context> {
        let owner = disk::Owner::new(info);
        let dir = cache_dir.resolve();
        let pipelines = dir
            .as_ref()
            .filter(|_| features.contains(wgpu::Features::PIPELINE_CACHE))
            .map(|d| d.join(format!("pipelines-{}.bin", owner.stem())));
        let raw = adapter.get_info();
        let coop = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            adapter.cooperative_matrix_properties()
        } else {
            Vec::new()
        };
        let cx = Arc::new_cyclic(|me| Context {
            cache: Arc::new(KernelCache::new(device.clone(), pipelines)),
            limits,
            features,
            software: info.device_type == wgpu::DeviceType::Cpu,
            scalar_staging: matches!(raw.backend, wgpu::Backend::Metal | wgpu::Backend::Dx12)
                || std::env::var(SCALAR_STAGING_ENV).is_ok_and(|v| v.trim() == "1"),
            backend: raw.backend,
            subgroup_min_size: raw.subgroup_min_size,
            subgroup_max_size: raw.subgroup_max_size,
            coop,
            tuning: gemm::tuning::Tuning::new(device, queue, owner, dir),
            wide_dispatches: std::sync::atomic::AtomicU64::new(0),
            device_id,
            me: me.clone(),
            pool: Arc::downgrade(pool),
            background: raw.backend != wgpu::Backend::Gl && !env_off(gemm::tuning::WARM_UP_ENV),
        });
        gemm::plan::warm_up(&cx);
        cx
    }

    /// Whether the device multiplies `size x size x size` cooperative
    /// matrices of f16 (`half`) or f32 into f32 accumulators.
    pub(crate) fn coop_ok(&self, size: u32, half: bool) -> bool {
        let ab = if half {
            wgpu::CooperativeScalarType::F16
        } else {
            wgpu::CooperativeScalarType::F32
        };
        self.coop.iter().any(|c| {
            c.m_size == size
                && c.n_size == size
                && c.k_size == size
                && c.ab_type == ab
                && c.cr_type == wgpu::CooperativeScalarType::F32
        })
    }

    /// Workgroup counts for `threads` threads (see [`grid`]) under this
    /// device's per-dimension limit.
    pub(crate) fn grid(&self, threads: u64) -> Result<[u32; 3]> {
        grid(threads, self.limits.max_compute_workgroups_per_dimension)
    }
}

/// A kernel operand: elements of `dtype` in `buffer`, read through element
/// strides (two's complement: negative for reversed views, 0 where
/// broadcast) from element `offset`. Each kernel family says which axes the
/// strides are over (the output's, for elementwise kernels).
pub(crate) struct Operand<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub dtype: DType,
    pub offset: usize,
    pub strides: Vec<isize>,
}

/// A dispatch's parameter block under construction: [`PARAMS_WORDS`] words,
/// or a multiple of that for kernels that declare a larger block.
#[derive(Clone)]
pub(crate) struct Params {
    words: Vec<u32>,
    /// The kernel family, for errors.
    op: &'static str,
}

impl Params {
    pub(crate) fn new(op: &'static str) -> Self {
        Params::with_words(op, PARAMS_WORDS)
    }

    /// A block of at least `words` words, rounded up to [`PARAMS_WORDS`].
    pub(crate) fn with_words(op: &'static str, words: usize) -> Self {
        Params {
            words: vec![0; words.max(1).next_multiple_of(PARAMS_WORDS)],
            op,
        }
    }

    /// Store `xs` from word `base` on: sizes and offsets up to `u32::MAX`,
    /// strides down to `i32::MIN` (negative values wrap to two's complement
    /// on purpose; the kernels' u32 arithmetic wraps back to the right
    /// index).
    ///
    /// # Errors
    /// [`Error::TooLarge`] for a value outside that range.
    pub(crate) fn put(&mut self, base: usize, xs: impl IntoIterator<Item = i64>) -> Result<()> {
        for (i, x) in xs.into_iter().enumerate() {
            if !(i32::MIN as i64..=u32::MAX as i64).contains(&x) {
                return Err(Error::TooLarge {
                    op: self.op,
                    limit: crate::Limit::KernelIndex,
                    value: x.unsigned_abs(),
                    max: u32::MAX as u64,
                });
            }
            self.words[base + i] = x as u32;
        }
        Ok(())
    }

    /// Store raw words (f32 bits, counters) from word `base` on.
    pub(crate) fn put_bits(&mut self, base: usize, xs: impl IntoIterator<Item = u32>) {
        for (i, x) in xs.into_iter().enumerate() {
            self.words[base + i] = x;
        }
    }

    pub(crate) fn words(self) -> Vec<u32> {
        self.words
    }
}

/// A kernel family: one WGSL source with `{{NAME}}` placeholders.
#[derive(Debug)]
pub(crate) struct Kernel {
    pub name: &'static str,
    /// Shared sources prepended in order (for example the strided-index helpers).
    pub prelude: &'static [&'static str],
    pub source: &'static str,
    /// Read-only and read-write storage bindings, unless a specialisation
    /// says otherwise (see [`Spec`]).
    pub reads: u32,
    pub writes: u32,
}

impl Kernel {
    /// A kernel of one WGSL `source` after `prelude`, with `reads`
    /// read-only then `writes` read-write storage bindings.
    pub(crate) const fn new(
        name: &'static str,
        prelude: &'static [&'static str],
        source: &'static str,
        reads: u32,
        writes: u32,
    ) -> Kernel {
        Kernel {
            name,
            prelude,
            source,
            reads,
            writes,
        }
    }
}

const CONVERT: &str = include_str!("../../wgsl/convert.wgsl");
const MATH: &str = include_str!("../../wgsl/math.wgsl");
/// f64 helpers (word pairs, NaN tests, conversions): only for kernels that
/// use f64, since the types need `SHADER_F64` and `SHADER_INT64`.
const MATH_F64: &str = include_str!("../../wgsl/math_f64.wgsl");
/// Straight-line index unravelling (reduce, topk).
pub(crate) const UNRAVEL: &str = include_str!("../../wgsl/unravel.wgsl");
/// Order keys of element bits (topk, sort).
pub(crate) const ORDER: &str = include_str!("../../wgsl/order.wgsl");

/// Every plain reduction; accumulator, bindings and entry point generated
/// per specialisation (`reduce.rs`).
pub(crate) static REDUCE: Kernel = Kernel::new("reduce", &[CONVERT], wgsl!("reduce"), 1, 1);

/// Reductions with a fused elementwise prologue (`reduce.rs`): the op
/// functions' helpers too.
pub(crate) static REDUCE_PROLOGUE: Kernel =
    Kernel::new("reduce_prologue", &[CONVERT, MATH], wgsl!("reduce"), 1, 1);

/// Reductions over f64: the f64 helpers too.
pub(crate) static REDUCE_F64: Kernel =
    Kernel::new("reduce_f64", &[CONVERT, MATH_F64], wgsl!("reduce"), 1, 1);

/// Every specialisation any kernel family can dispatch. Each family lists
/// its own in a `specs()` next to its dispatch code, built from the same
/// tables; `kernels/portability.rs` checks all of them with every naga back
/// end.
#[cfg(test)]
pub(crate) fn all_specs() -> Vec<(Spec, &'static Kernel)> {
    let mut specs = program::specs();
    specs.extend(reduce::specs());
    specs.extend(gemm::spec::specs());
    specs.extend(random::specs());
    specs.extend(concat::specs());
    specs.extend(topk::specs());
    specs.extend(scan::specs());
    specs.extend(sort::specs());
    specs.extend(scatter::specs());
    specs.extend(quant::specs());
    specs.extend(attention::specs());
    specs.extend(split::specs());
    specs.extend(rope::specs());
    // Ops that share an expression on some dtype (floor of an integer is
    // the identity, like a cast) share a specialisation.
    let mut seen = rustc_hash::FxHashSet::default();
    specs.retain(|(s, _)| seen.insert(s.clone()));
    specs
}

/// One specialisation of a kernel: the values of its placeholders.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Spec {
    pub kernel: &'static str,
    pub subs: Vec<(&'static str, String)>,
    /// Read-only and read-write storage bindings.
    pub reads: u32,
    pub writes: u32,
    /// Words of the parameter block (a multiple of [`PARAMS_WORDS`]).
    pub params: u32,
    /// Uniform-buffer windows after the storage bindings, each its binding
    /// size in bytes (at most [`WINDOW_BYTES`]; `GemmKernel::Uniform`);
    /// empty for every other kernel.
    pub windows: Vec<u64>,
}

/// The largest uniform-buffer window (`Spec::windows`), in bytes:
/// WebGPU's default `max_uniform_buffer_binding_size`.
pub(crate) const WINDOW_BYTES: u64 = 65536;

impl Kernel {
    pub(crate) fn spec(&'static self, subs: &[(&'static str, &str)]) -> (Spec, &'static Kernel) {
        self.spec_with_bindings(subs, self.reads, self.writes)
    }

    /// A specialisation whose binding counts differ from the kernel's default.
    pub(crate) fn spec_with_bindings(
        &'static self,
        subs: &[(&'static str, &str)],
        reads: u32,
        writes: u32,
    ) -> (Spec, &'static Kernel) {
        let mut subs: Vec<_> = subs.iter().map(|(k, v)| (*k, v.to_string())).collect();
        subs.sort();
        (
            Spec {
                kernel: self.name,
                subs,
                reads,
                writes,
                params: PARAMS_WORDS as u32,
                windows: Vec::new(),
            },
            self,
        )
    }

    /// The WGSL text of one specialisation.
    pub(crate) fn source_for(&self, spec: &Spec) -> String {
        let mut src = String::with_capacity(8192);
        // A specialisation that uses WGSL's f16 type says so.
        if spec
            .subs
            .iter()
            .any(|(k, v)| *k == "ENABLE_F16" && v == "true")
        {
            src.push_str("enable f16;\n");
        }
        for part in self.prelude {
            src.push_str(part);
            src.push('\n');
        }
        src.push_str(self.source);
        for (k, v) in &spec.subs {
            src = src.replace(&format!("{{{{{k}}}}}"), v);
        }
        src
    }
}

/// A compiled kernel: its pipeline and bind-group layout (cheap clones).
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    /// Which creation this is (the cache's counter): what
    /// [`KernelCache::release`] names.
    pub id: u64,
    /// Whether a submission has dispatched it: its first dispatch is where
    /// a software adapter compiles its machine code (see [`submit`]).
    pub dispatched: Arc<std::sync::atomic::AtomicBool>,
}

thread_local! {
    /// The pipelines this thread created inside [`recording_created`].
    static CREATED: std::cell::RefCell<Option<Vec<u64>>> = const { std::cell::RefCell::new(None) };
}

/// Run `f`, returning its result and the ids of the pipelines it created on
/// this thread (a compiled function owns those: see `crate::compile`).
pub(crate) fn recording_created<R>(f: impl FnOnce() -> R) -> (R, Vec<u64>) {
    let outer = CREATED.with(|c| c.replace(Some(Vec::new())));
    let r = f();
    let created = CREATED.with(|c| c.replace(outer)).unwrap_or_default();
    // A recording around this one owns them too.
    if !created.is_empty() {
        CREATED.with(|c| {
            if let Some(v) = c.borrow_mut().as_mut() {
                v.extend_from_slice(&created);
            }
        });
    }
    (r, created)
}

/// Read-only and read-write storage bindings, words of parameters, and the
/// uniform windows' sizes in bytes.
type LayoutKey = (u32, u32, u32, Vec<u64>);

/// The per-device pipeline cache, keyed by kernel and specialisation.
///
/// It holds only pipelines and layouts, keyed by strings: nothing in it points
/// back at arrays, graphs or compiled functions (DESIGN.md, rule 5).
pub(crate) struct KernelCache {
    device: wgpu::Device,
    pipelines: Mutex<HashMap<Spec, Pipeline>>,
    layouts: Mutex<HashMap<LayoutKey, (wgpu::BindGroupLayout, wgpu::PipelineLayout)>>,
    /// Pipelines created, by anyone: the source of pipeline ids.
    created: AtomicU64,
    /// Of those, the ones created for evals ([`KernelCache::created`]).
    created_for_evals: AtomicU64,
    /// Of `created`, the pipelines a warm-up made ([`KernelCache::warm_up`]).
    warmed: AtomicU64,
    /// Specialisations being compiled now, by any thread: a second request
    /// waits for the first ([`KernelCache::get`]) rather than compiling
    /// again.
    compiling: Mutex<rustc_hash::FxHashSet<Spec>>,
    /// Signalled when a compile ends (`compiling` shrinks).
    compiled: Condvar,
    /// The device's background kernel work (warm-up, tuning, compiles
    /// that replace stand-ins): one thread at most, joined when the device
    /// goes ([`KernelCache::stop_warm_up`]).
    pub(crate) background: background::Background,
    /// The parameter buffer, reused by every submission (see `params_buffer`).
    params: Mutex<Option<wgpu::Buffer>>,
    /// Pipelines by a family's compact key, so that the hot path does not
    /// build and hash WGSL text for every dispatch.
    quick: Mutex<HashMap<QuickKey, Pipeline>>,
    /// The driver's pipeline cache and its file, where the device has
    /// `PIPELINE_CACHE` and the cache directory is on.
    disk: Option<DiskPipelines>,
}

/// wgpu's `PipelineCache` kept in a file: loaded when the device is made,
/// written after tuning and when the device goes, if pipelines were
/// compiled meanwhile. The file is wgarray's header (magic, length, FNV-1a
/// hash of the data) then wgpu's data, so a damaged file is refused before
/// wgpu or the driver sees it; wgpu itself refuses data from another
/// adapter or driver (`fallback: true` then starts an empty cache).
struct DiskPipelines {
    cache: wgpu::PipelineCache,
    path: std::path::PathBuf,
    /// Pipelines compiled since the file was read or written.
    dirty: std::sync::atomic::AtomicBool,
}

const PIPELINES_MAGIC: &[u8; 8] = b"WGAPIPE1";

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl DiskPipelines {
    fn open(device: &wgpu::Device, path: std::path::PathBuf) -> DiskPipelines {
        let data = disk::read(&path).and_then(|bytes| {
            let data = bytes.get(24..)?;
            let ok = bytes.starts_with(PIPELINES_MAGIC)
                && bytes[8..16] == (data.len() as u64).to_le_bytes()
                && bytes[16..24] == fnv1a(data).to_le_bytes();
            if !ok {
                log::warn!(
                    "wgarray: ignoring damaged pipeline cache file {}",
                    path.display()
                );
            }
            ok.then(|| data.to_vec())
        });
        // SAFETY: `data` is what `PipelineCache::get_data` returned when it
        // was saved (checked against its length and hash above); wgpu
        // checks that it belongs to this adapter and driver, and starts an
        // empty cache otherwise (`fallback`).
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("wgarray pipelines"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        DiskPipelines {
            cache,
            path,
            dirty: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn save(&self) {
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return;
        }
        if let Some(data) = self.cache.get_data() {
            let mut bytes = Vec::with_capacity(24 + data.len());
            bytes.extend_from_slice(PIPELINES_MAGIC);
            bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
            bytes.extend_from_slice(&fnv1a(&data).to_le_bytes());
            bytes.extend_from_slice(&data);
            disk::write(&self.path, &bytes);
        }
    }
}

impl Drop for KernelCache {
    fn drop(&mut self) {
        self.save_pipelines();
    }
}

/// A kernel family's compact, exact description of a specialisation: equal
/// keys always generate the same [`Spec`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum QuickKey {
    /// A reduction: its mode, the kept and reduced ranks after merging,
    /// and the structure of the program whose value it reduces (the
    /// one-load program of a plain reduction).
    Reduce {
        op: ReduceOp,
        mode: reduce::Mode,
        ranks: (u8, u8),
        program: program::Program,
        /// A one-pass normalisation's epilogue.
        epi: Option<crate::graph::primitive::Norm>,
    },
    /// The combine pass of a reduction whose rows were cut into parts.
    ReduceCombine {
        op: ReduceOp,
        ct: &'static str,
    },
    Gemm(gemm::tuning::variant::GemmVariant),
    /// A GEMM and its fused epilogue's structure.
    GemmEpilogue(gemm::tuning::variant::GemmVariant, program::Program),
    Program(program::Program),
    /// A wide program in the rows geometry, with its loads' kinds.
    ProgramRows(program::Program, Vec<program::RowLoad>),
    /// A quantization kernel (`quant.rs`).
    Quant(quant::QuantKey),
}

/// A parameter buffer larger than this is not kept after the submission
/// that needed it.
const PARAMS_KEEP_BYTES: u64 = 1 << 20;

impl KernelCache {
    pub(crate) fn new(device: wgpu::Device, pipelines: Option<std::path::PathBuf>) -> Self {
        KernelCache {
            disk: pipelines.map(|p| DiskPipelines::open(&device, p)),
            device,
            pipelines: Mutex::new(HashMap::default()),
            layouts: Mutex::new(HashMap::default()),
            created: AtomicU64::new(0),
            created_for_evals: AtomicU64::new(0),
            warmed: AtomicU64::new(0),
            compiling: Mutex::new(Default::default()),
            compiled: Condvar::new(),
            background: Default::default(),
            params: Mutex::new(None),
            quick: Mutex::new(HashMap::default()),
        }
    }

    /// The pipeline for `key`, building its [`Spec`] only on first use.
    ///
    /// # Errors
    /// As [`KernelCache::get`].
    pub(crate) fn get_quick(
        &self,
        key: QuickKey,
        build: impl FnOnce() -> (Spec, &'static Kernel),
    ) -> Result<Pipeline> {
        if let Some(p) = self
            .quick
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let (spec, kernel) = build();
        let p = self.get(kernel, &spec)?;
        self.quick
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, p.clone());
        Ok(p)
    }

    /// Whether the pipeline for `key` is made (by [`KernelCache::get_quick`]).
    pub(crate) fn has_quick(&self, key: &QuickKey) -> bool {
        self.quick
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(key)
    }

    /// The device's parameter buffer, at least `bytes` long. It lives outside
    /// the pool and is not counted in active memory; one that grows past
    /// [`PARAMS_KEEP_BYTES`] is made for that submission alone.
    ///
    /// Rewriting it for the next submission while the last one still reads
    /// it is safe: `queue.write_buffer` takes effect in queue order, after
    /// every command buffer submitted before it (WebGPU `writeBuffer`), and
    /// callers hold the queue lock, so no submission is recorded in between.
    fn params_buffer(&self, bytes: u64) -> wgpu::Buffer {
        let mut slot = self.params.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = slot.as_ref().filter(|b| b.size() >= bytes) {
            return b.clone();
        }
        let size = bytes.max(PARAMS_BYTES * 64).next_power_of_two();
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgarray params"),
            size,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        *slot = (size <= PARAMS_KEEP_BYTES).then(|| buffer.clone());
        buffer
    }

    /// Write the driver's pipeline cache to its file, if pipelines were
    /// compiled since it was read or written.
    pub(crate) fn save_pipelines(&self) {
        if let Some(d) = &self.disk {
            d.save();
        }
    }

    /// Pipelines created for evals (a warm-up's are not counted).
    pub(crate) fn created(&self) -> u64 {
        self.created_for_evals.load(Ordering::SeqCst)
    }

    /// Pipelines created by warm-ups ([`KernelCache::warm_up`]).
    pub(crate) fn warmed(&self) -> u64 {
        self.warmed.load(Ordering::SeqCst)
    }

    /// Compile `jobs` (each a quick key and how to build its [`Spec`]) on
    /// the device's background thread, in order, as
    /// [`KernelCache::get_quick`] would on first use: the kernels a later
    /// eval will probably ask for (the tuning file's warm-up list), made
    /// while the program does other work. An eval that asks for one being
    /// compiled waits for it rather than compiling it again. A kernel that
    /// fails to compile is logged and skipped (the eval that asks for it
    /// reports the error). Pipelines made on the background thread are
    /// counted by [`KernelCache::warmed`], not [`KernelCache::created`].
    pub(crate) fn warm_up(self: &Arc<Self>, jobs: Vec<(QuickKey, WarmBuild)>) {
        let jobs = jobs
            .into_iter()
            .map(|(key, build)| background::Job {
                what: format!("warm-up of {key:?}"),
                idle: false,
                run: Box::new(move |cache: &Arc<KernelCache>| {
                    if let Err(e) = cache.get_quick(key, build) {
                        log::debug!("wgarray: warm-up kernel not made: {e}");
                    }
                }),
            })
            .collect();
        self.background.push(self, jobs);
    }

    /// Queue background jobs (see `background.rs`).
    pub(crate) fn push_background(self: &Arc<Self>, jobs: Vec<background::Job>) {
        self.background.push(self, jobs);
    }

    /// Stop the background work after the job in hand and wait for its
    /// thread, so that when the device's drop returns no thread of
    /// wgarray's still holds its `wgpu::Device` (as with the poller: a
    /// thread left inside lavapipe at process exit can crash it). At most
    /// one job's time (a kernel's compile: 0.05 to 0.1 s on lavapipe with
    /// Mesa's cache warm, seconds cold).
    pub(crate) fn stop_warm_up(&self) {
        self.background.stop();
    }

    /// Wait until the background work has ended (the GEMM tuning does,
    /// so that its timings do not share the CPU or the GPU with compiles;
    /// tests that count pipelines, benchmarks); at once when there is
    /// none, or on the background thread itself.
    pub(crate) fn wait_warm_up(&self) {
        self.background.wait();
    }

    /// Pipelines the cache holds now.
    pub(crate) fn live(&self) -> usize {
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Forget the pipelines `ids` (wgpu frees each when the last dispatch
    /// that uses it has finished). A later request compiles it again.
    pub(crate) fn release(&self, ids: &[u64]) {
        if ids.is_empty() {
            return;
        }
        let ids: rustc_hash::FxHashSet<u64> = ids.iter().copied().collect();
        self.quick
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, p| !ids.contains(&p.id));
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, p| !ids.contains(&p.id));
    }

    fn layout(
        &self,
        reads: u32,
        writes: u32,
        params: u32,
        windows: &[u64],
    ) -> (wgpu::BindGroupLayout, wgpu::PipelineLayout) {
        let mut layouts = self.layouts.lock().unwrap_or_else(|e| e.into_inner());
        layouts
            .entry((reads, writes, params, windows.to_vec()))
            .or_insert_with(|| {
                let mut entries = vec![wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(4 * params as u64),
                    },
                    count: None,
                }];
                for i in 0..reads + writes {
                    entries.push(wgpu::BindGroupLayoutEntry {
                        binding: 1 + i,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Storage {
                                read_only: i < reads,
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    });
                }
                for (i, &size) in (0..).zip(windows) {
                    entries.push(wgpu::BindGroupLayoutEntry {
                        binding: 1 + reads + writes + i,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Uniform,
                            has_dynamic_offset: false,
                            min_binding_size: wgpu::BufferSize::new(size),
                        },
                        count: None,
                    });
                }
                let bgl = self
                    .device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("wgarray kernel"),
                        entries: &entries,
                    });
                let pl = self
                    .device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some("wgarray kernel"),
                        bind_group_layouts: &[Some(&bgl)],
                        immediate_size: 0,
                    });
                (bgl, pl)
            })
            .clone()
    }

    /// The pipeline for `spec`, compiling it on first use.
    ///
    /// # Errors
    /// [`Error::Kernel`] when WGSL parsing, validation or pipeline creation fails.
    pub(crate) fn get(&self, kernel: &Kernel, spec: &Spec) -> Result<Pipeline> {
        let lookup = || {
            self.pipelines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(spec)
                .cloned()
        };
        if let Some(p) = lookup() {
            return Ok(p);
        }
        // One compile per specialisation: wait for another thread's (a
        // warm-up's, another eval's), then take its pipeline; or mark it
        // ours. A compile inserts its pipeline before it unmarks, so a
        // marked spec or a cached pipeline is always found here.
        let mut compiling = self.compiling.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(p) = lookup() {
                return Ok(p);
            }
            if !compiling.contains(spec) {
                break;
            }
            compiling = self
                .compiled
                .wait(compiling)
                .unwrap_or_else(|e| e.into_inner());
        }
        compiling.insert(spec.clone());
        drop(compiling);
        let _unmark = Compiling { cache: self, spec };
        let started = std::time::Instant::now();
        // An eval that compiles is busy (for the background work's idleness).
        let eval = !background::on_background_thread();
        if eval {
            self.background.touch();
        }
        let source = kernel.source_for(spec);
        let label = format!("{}{:?}", spec.kernel, spec.subs);
        // Validate with naga first: its messages name the line, and a bad
        // kernel never reaches the driver.
        let module = parse(&source, &label)?;
        validate(&module, &source, &label, naga::valid::Capabilities::all())?;
        let parsed = started.elapsed();
        let (layout, pipeline_layout) =
            self.layout(spec.reads, spec.writes, spec.params, &spec.windows);
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        // The module naga already parsed, not its text: wgpu would parse
        // the WGSL again (3 to 5 ms for a large GEMM tile on this machine).
        let shader = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Naga(std::borrow::Cow::Owned(module)),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&label),
                layout: Some(&pipeline_layout),
                module: &shader,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    zero_initialize_workgroup_memory: false,
                    ..Default::default()
                },
                cache: self.disk.as_ref().map(|d| &d.cache),
            });
        if let Some(d) = &self.disk {
            d.dirty.store(true, Ordering::SeqCst);
        }
        let i = pollster::block_on(internal.pop());
        let v = pollster::block_on(scope.pop());
        if let Some(e) = v.or(i) {
            return Err(Error::Kernel {
                kernel: label,
                message: e.to_string(),
            });
        }
        let id = self.created.fetch_add(1, Ordering::SeqCst);
        // One counter each, so that no reader sees a pipeline in neither
        // or both.
        if eval {
            self.background.touch();
            self.created_for_evals.fetch_add(1, Ordering::SeqCst);
        } else {
            self.warmed.fetch_add(1, Ordering::SeqCst);
        }
        CREATED.with(|c| {
            if let Some(v) = c.borrow_mut().as_mut() {
                v.push(id);
            }
        });
        log::debug!(
            "compiled {} in {:.1} ms ({:.1} ms of it naga)",
            spec.kernel,
            started.elapsed().as_secs_f64() * 1e3,
            parsed.as_secs_f64() * 1e3
        );
        let p = Pipeline {
            pipeline,
            layout,
            id,
            dispatched: Default::default(),
        };
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.clone(), p.clone());
        Ok(p)
    }
}

/// How a warm-up job builds its specialisation (on the warm-up thread).
pub(crate) type WarmBuild = Box<dyn FnOnce() -> (Spec, &'static Kernel) + Send>;

/// Unmarks a specialisation [`KernelCache::get`] marked as compiling, and
/// wakes the threads waiting for it, however the compile ends.
struct Compiling<'a> {
    cache: &'a KernelCache,
    spec: &'a Spec,
}

impl Drop for Compiling<'_> {
    fn drop(&mut self) {
        self.cache
            .compiling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.spec);
        self.cache.compiled.notify_all();
    }
}

/// Parse WGSL with naga, as wgpu does before it hands a shader to the
/// driver, but with naga's own messages (they name the line). `label` names
/// the kernel in the error.
///
/// # Errors
/// [`Error::Kernel`] with naga's message when parsing fails.
pub(crate) fn parse(source: &str, label: &str) -> Result<naga::Module> {
    naga::front::wgsl::parse_str(source).map_err(|e| Error::Kernel {
        kernel: label.to_string(),
        message: e.emit_to_string(source),
    })
}

/// Validate a parsed module under `capabilities` (see [`parse`]); naga's
/// analysis of it (what each entry point uses) on success.
///
/// # Errors
/// [`Error::Kernel`] with naga's message when validation fails.
pub(crate) fn validate(
    module: &naga::Module,
    source: &str,
    label: &str,
    capabilities: naga::valid::Capabilities,
) -> Result<naga::valid::ModuleInfo> {
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
        .validate(module)
        .map_err(|e| Error::Kernel {
            kernel: label.to_string(),
            message: e.emit_to_string(source),
        })
}

/// Workgroup counts for `threads` threads in groups of [`WORKGROUP`], folded
/// into a second dimension when one would pass `max_per_dim`. Kernels
/// recover the thread index as `gid.x + gid.y * num_workgroups.x * WG`.
///
/// # Errors
/// [`Error::TooLarge`] when even two dimensions cannot cover the threads.
pub(crate) fn grid(threads: u64, max_per_dim: u32) -> Result<[u32; 3]> {
    let groups = threads.div_ceil(WORKGROUP as u64);
    if groups <= max_per_dim as u64 {
        return Ok([groups as u32, 1, 1]);
    }
    let y = groups.div_ceil(max_per_dim as u64);
    if y > max_per_dim as u64 || threads > u32::MAX as u64 {
        return Err(Error::TooLarge {
            op: "dispatch",
            limit: crate::Limit::DispatchThreads,
            value: threads,
            max: u32::MAX as u64,
        });
    }
    Ok([max_per_dim, y as u32, 1])
}

/// One dispatch, ready to encode: the buffers are bound at 1, 2, ... in order.
pub(crate) struct Dispatch {
    pub pipeline: Pipeline,
    /// A multiple of [`PARAMS_WORDS`] words, as the kernel declares.
    pub params: Vec<u32>,
    pub buffers: Vec<wgpu::Buffer>,
    /// Uniform-buffer windows (`Spec::windows`), bound after `buffers`.
    /// Empty for every kernel but `GemmKernel::Uniform`.
    pub windows: Vec<Window>,
    pub workgroups: [u32; 3],
}

impl Dispatch {
    /// A dispatch of `pipeline` over `workgroups` with `params` and
    /// storage `buffers`, and no uniform windows.
    pub(crate) fn new(
        pipeline: Pipeline,
        params: Vec<u32>,
        buffers: Vec<wgpu::Buffer>,
        workgroups: [u32; 3],
    ) -> Dispatch {
        Dispatch {
            pipeline,
            params,
            buffers,
            windows: Vec::new(),
            workgroups,
        }
    }
}

/// One uniform-buffer binding of a dispatch: `size` bytes of `buffer` from
/// byte `offset` (a multiple of the adapter's
/// `min_uniform_buffer_offset_alignment`).
pub(crate) struct Window {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
    pub size: u64,
}

/// The bind group of dispatch `d`: its parameter slot of `params` (bound
/// with a dynamic offset) at 0, then its buffers at 1, 2, ..., then its
/// uniform windows.
pub(crate) fn bind_group(
    device: &wgpu::Device,
    params: &wgpu::Buffer,
    d: &Dispatch,
) -> wgpu::BindGroup {
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: params,
            offset: 0,
            size: wgpu::BufferSize::new(4 * d.params.len() as u64),
        }),
    }];
    for (i, b) in d.buffers.iter().enumerate() {
        entries.push(wgpu::BindGroupEntry {
            binding: 1 + i as u32,
            resource: b.as_entire_binding(),
        });
    }
    for (i, w) in d.windows.iter().enumerate() {
        entries.push(wgpu::BindGroupEntry {
            binding: 1 + (d.buffers.len() + i) as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &w.buffer,
                offset: w.offset,
                size: wgpu::BufferSize::new(w.size),
            }),
        });
    }
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &d.pipeline.layout,
        entries: &entries,
    })
}

/// Encode `dispatches` (one compute pass) into one command buffer and submit
/// it once. Identical parameter blocks share one slot of
/// the parameter buffer.
pub(crate) fn submit(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    cx: &Context,
    guard: &QueueGuard<'_>,
    dispatches: &[Dispatch],
) -> Result<wgpu::SubmissionIndex> {
    submit_then(device, queue, cx, guard, dispatches, None)
}

/// Work a caller appends to an eval's command buffer, after its compute
/// pass and under the queue lock, so that it goes in the same submission:
/// a read-back's copy of the result (see `Array::read_mapped`).
pub(crate) type Tail<'a> = &'a mut dyn FnMut(&QueueGuard<'_>, &mut wgpu::CommandEncoder);

/// [`submit`], with `tail` encoded after the dispatches.
pub(crate) fn submit_then(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    cx: &Context,
    guard: &QueueGuard<'_>,
    dispatches: &[Dispatch],
    tail: Option<Tail<'_>>,
) -> Result<wgpu::SubmissionIndex> {
    let align = PARAMS_BYTES.max(cx.limits.min_uniform_buffer_offset_alignment as u64);
    let mut slots: HashMap<&[u32], u64> = HashMap::default();
    let mut offsets = Vec::with_capacity(dispatches.len());
    let mut bytes: Vec<u8> = Vec::new();
    for d in dispatches {
        let off = *slots.entry(&d.params).or_insert_with(|| {
            let off = bytes.len() as u64;
            bytes.extend_from_slice(bytemuck::cast_slice(&d.params));
            bytes.resize(bytes.len().next_multiple_of(align as usize), 0);
            off
        });
        offsets.push(off as u32);
    }
    let params = if bytes.is_empty() {
        None
    } else {
        let buf = cx.cache.params_buffer(bytes.len() as u64);
        queue.write_buffer(&buf, 0, &bytes);
        Some(buf)
    };
    let fresh = dispatches
        .iter()
        .filter(|d| !d.pipeline.dispatched.swap(true, Ordering::Relaxed))
        .count();
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("wgarray eval"),
    });
    if !dispatches.is_empty() {
        let params = params.as_ref().expect("made above");
        let groups: Vec<wgpu::BindGroup> = dispatches
            .iter()
            .map(|d| bind_group(device, params, d))
            .collect();
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("wgarray eval"),
            timestamp_writes: None,
        });
        for ((d, g), off) in dispatches.iter().zip(&groups).zip(&offsets) {
            pass.set_pipeline(&d.pipeline.pipeline);
            pass.set_bind_group(0, g, &[*off]);
            let [x, y, z] = d.workgroups;
            pass.dispatch_workgroups(x, y, z);
        }
    }
    if let Some(tail) = tail {
        tail(guard, &mut encoder);
    }
    let index = queue.submit([encoder.finish()]);
    if !dispatches.is_empty() {
        track(queue, cx, fresh);
    }
    Ok(index)
}

/// Note an eval's submission for the background work's idleness (see
/// `background.rs`) and, where `fresh` of its pipelines run for the first
/// time, report [`progress::Work::FirstDispatch`] until it has run (on
/// lavapipe the drivers' compiles happen there, inside the wait that
/// executes the submission). The callback goes only on submissions that
/// need it: first dispatches, or background work waiting.
fn track(queue: &wgpu::Queue, cx: &Context, fresh: usize) {
    let bg = &cx.cache.background;
    bg.submitted();
    let span = (fresh > 0 && crate::progress::hooked()).then(|| {
        crate::progress::Span::start(
            cx.device_id,
            crate::progress::Work::FirstDispatch { kernels: fresh },
            false,
        )
    });
    if fresh == 0 && bg.pending() == 0 {
        bg.finished();
        return;
    }
    let cache = Arc::downgrade(&cx.cache);
    // Runs inside wgpu's poll: only leaves of the lock order (the
    // background's activity, the progress hook).
    queue.on_submitted_work_done(move || {
        if let Some(c) = cache.upgrade() {
            c.background.finished();
        }
        drop(span);
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{QuickKey, WarmBuild};
    use crate::Device;
    use crate::graph::primitive::ReduceOp;

    /// A device without a cache directory: no tuning file, so no warm-up
    /// of its own beside the one a test starts.
    fn device() -> Device {
        let options = crate::DeviceOptions::from_env()
            .expect("WGARRAY_BACKEND names a backend")
            .with_cache_dir(crate::tuning::CacheDir::Off);
        Device::new(&options).expect("a GPU adapter")
    }

    /// A warm-up job under a key of its own (`i`), building a real GEMM
    /// specialisation after `before` runs.
    fn job(i: usize, before: impl FnOnce() + Send + 'static) -> (QuickKey, WarmBuild) {
        let key = QuickKey::ReduceCombine {
            op: [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][i],
            ct: "f32",
        };
        let build: WarmBuild = Box::new(move || {
            before();
            super::gemm::spec::specs().swap_remove(i)
        });
        (key, build)
    }

    /// Runs `f` on a thread of its own; fails if it has not returned in a
    /// minute (a hang is a failure, not a stuck suite).
    fn within_a_minute(f: impl FnOnce() + Send + 'static) {
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            f();
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("returned within a minute");
    }

    /// A warm-up whose thread panics (a driver's panic, say) still ends:
    /// [`super::KernelCache::wait_warm_up`] returns, as the GEMM tuning
    /// needs before it times anything.
    #[test]
    fn a_warm_up_that_panics_still_ends() {
        let device = device();
        let cache = device.inner.kernels.cache.clone();
        cache.warm_up(vec![job(0, || panic!("a driver's panic (on purpose)"))]);
        within_a_minute(move || cache.wait_warm_up());
    }

    /// Dropping the device stops its warm-up after the kernel in hand and
    /// joins the thread: when the drop returns, nothing holds the kernel
    /// cache (and its `wgpu::Device`) any more, and the jobs after the one
    /// in hand never ran.
    #[test]
    fn dropping_the_device_joins_its_warm_up() {
        let device = device();
        let cache = Arc::downgrade(&device.inner.kernels.cache);
        let (started, in_hand) = mpsc::channel();
        let (ran, later) = mpsc::channel();
        // The first job goes on only once the device's drop has asked the
        // thread to stop (a minute at most).
        let watched = cache.clone();
        device.inner.kernels.cache.warm_up(vec![
            job(0, move || {
                started.send(()).unwrap();
                let start = std::time::Instant::now();
                while watched.upgrade().is_some_and(|c| !c.background.stopped())
                    && start.elapsed() < Duration::from_secs(60)
                {
                    std::thread::yield_now();
                }
            }),
            job(1, move || ran.send(()).unwrap()),
        ]);
        in_hand.recv().unwrap();
        within_a_minute(move || drop(device));
        assert_eq!(cache.strong_count(), 0, "the warm-up thread let go");
        assert!(later.try_recv().is_err(), "a job after the stop ran");
    }
}
