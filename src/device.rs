//! [`Device`]: adapter choice, features, limits; owns the queue, the buffer
//! pool and the kernel cache.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::kernels;
use crate::memory::{MemoryStats, MemoryTimeline, Origin, Pool};
use crate::snapshot::{MemorySnapshot, Registry};
use crate::{Error, Result};

/// Environment variable that picks a backend: `vulkan`, `gl`, `dx12` or `metal`.
pub const BACKEND_ENV: &str = "WGARRAY_BACKEND";
/// Environment variable that picks an adapter by a case-insensitive substring of its name.
pub const ADAPTER_ENV: &str = "WGARRAY_ADAPTER";

/// How long a device waits for the GPU before a wait fails with
/// [`Error::Timeout`], unless [`Device::set_wait_timeout`] says otherwise.
/// Far above any single submission wgarray makes on a working device
/// (operating systems reset a GPU whose work runs for more than a few
/// seconds), so that a hung device becomes an error instead of a hang.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The wgpu features wgarray uses when the adapter has them: f16 shaders,
/// timestamps, subgroups, the driver's pipeline cache (kept on disk, see
/// [`crate::tuning`]), cooperative matrices (the GEMM's tensor-core
/// family; an experimental wgpu feature, requested only when
/// [`COOPERATIVE_MATRIX_ENV`] is `1`), and `SHADER_F64` and `SHADER_INT64`
/// ([`crate::DType::F64`] arrays).
pub const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::PIPELINE_CACHE)
    .union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SHADER_INT64);

/// Environment variable: `1` (or `on`) requests wgpu's experimental
/// `EXPERIMENTAL_COOPERATIVE_MATRIX` where the adapter offers it, so that
/// the GEMM's cooperative-matrix family (tensor cores) is among the
/// candidates tuning times. Off by default: naga 30 emits such modules
/// under SPIR-V's Vulkan memory model without the availability and
/// visibility operations that model needs for `workgroupBarrier()` to
/// order workgroup memory (gfx-rs/wgpu#8805, open), which the family's
/// staging relies on; and the family has not yet run on a GPU here. Every
/// candidate's product is checked before tuning may choose it
/// ([`crate::tuning`]).
pub const COOPERATIVE_MATRIX_ENV: &str = "WGARRAY_COOPERATIVE_MATRIX";

/// The limits a device must offer wgarray ([`Device::from_wgpu`] checks
/// them): WebGPU's defaults for compute (storage buffers per stage,
/// workgroup size and storage, workgroups per dimension) and for the
/// uniform parameter block each dispatch binds at a dynamic offset, which
/// are the limits every kernel of wgarray's is checked against
/// (`testing::check_portability`); the limits that only size arrays
/// (`max_storage_buffer_binding_size`, `max_buffer_size`) are not
/// required, since passing them is a typed error ([`Error::TooLarge`]).
/// Everything else is WebGL2's floor, which wgarray does not use.
pub const REQUIRED_LIMITS: wgpu::Limits = {
    let webgpu = wgpu::Limits::defaults();
    wgpu::Limits {
        max_storage_buffers_per_shader_stage: webgpu.max_storage_buffers_per_shader_stage,
        max_uniform_buffers_per_shader_stage: 1,
        max_uniform_buffer_binding_size: webgpu.max_uniform_buffer_binding_size,
        max_dynamic_uniform_buffers_per_pipeline_layout: 1,
        max_compute_workgroup_storage_size: webgpu.max_compute_workgroup_storage_size,
        max_compute_invocations_per_workgroup: webgpu.max_compute_invocations_per_workgroup,
        max_compute_workgroup_size_x: webgpu.max_compute_workgroup_size_x,
        max_compute_workgroup_size_y: webgpu.max_compute_workgroup_size_y,
        max_compute_workgroup_size_z: webgpu.max_compute_workgroup_size_z,
        max_compute_workgroups_per_dimension: webgpu.max_compute_workgroups_per_dimension,
        max_storage_buffer_binding_size: 0,
        max_buffer_size: 0,
        ..wgpu::Limits::downlevel_webgl2_defaults()
    }
};

/// What a device with downlevel `flags` and `limits` lacks for wgarray, in
/// words: the `COMPUTE_SHADERS` flag, and each limit below
/// [`REQUIRED_LIMITS`] (alignments above it), with both values.
fn missing_requirements(flags: wgpu::DownlevelFlags, limits: &wgpu::Limits) -> Vec<String> {
    let mut missing = Vec::new();
    if !flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
        missing.push("the downlevel flag COMPUTE_SHADERS (compute shaders)".to_string());
    }
    REQUIRED_LIMITS.check_limits_with_fail_fn(limits, false, |name, need, have| {
        missing.push(format!(
            "the limit {name}: wgarray needs {need}, the device has {have}"
        ));
    });
    missing
}

/// The optional features wgarray uses out of `available`: those in
/// [`OPTIONAL_FEATURES`], cooperative matrices only when
/// [`COOPERATIVE_MATRIX_ENV`] asks for them.
fn usable_features(available: wgpu::Features) -> wgpu::Features {
    let mut features = available & OPTIONAL_FEATURES;
    if !std::env::var(COOPERATIVE_MATRIX_ENV)
        .is_ok_and(|v| ["1", "on", "true"].contains(&v.trim().to_ascii_lowercase().as_str()))
    {
        features.remove(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
    }
    features
}

/// How to choose an adapter. `Default` names nothing: the best adapter of any
/// backend (see [`Device::new`]).
#[derive(Clone, Debug, Default)]
pub struct DeviceOptions {
    /// Only adapters of this backend.
    pub backend: Option<wgpu::Backend>,
    /// Only adapters whose name contains this (case-insensitive).
    pub adapter_name: Option<String>,
    /// Rank adapters by this preference: `HighPerformance` puts discrete GPUs
    /// first, `LowPower` integrated ones; `None` ranks discrete, integrated,
    /// virtual, then software.
    pub power_preference: wgpu::PowerPreference,
    /// Rank software adapters (device type `Cpu`: Mesa's lavapipe and
    /// llvmpipe, WARP) first, whatever `power_preference` says: the same
    /// results on a laptop with a GPU and on a CI machine without one
    /// ([`crate::testing`] uses this).
    pub prefer_software: bool,
    /// Where the device keeps its GEMM tuning and compiled pipelines
    /// between processes; `Default` follows `WGARRAY_CACHE_DIR`, else the
    /// user's cache directory (see [`crate::tuning`]).
    pub cache_dir: crate::tuning::CacheDir,
}

impl DeviceOptions {
    /// Options from the environment: [`BACKEND_ENV`] and [`ADAPTER_ENV`].
    ///
    /// # Errors
    /// [`Error::UnknownBackend`] when `WGARRAY_BACKEND` names no backend.
    pub fn from_env() -> Result<Self> {
        let backend = match std::env::var(BACKEND_ENV) {
            Ok(s) if !s.trim().is_empty() => Some(parse_backend(&s)?),
            _ => None,
        };
        let adapter_name = std::env::var(ADAPTER_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty());
        Ok(DeviceOptions {
            backend,
            adapter_name,
            power_preference: wgpu::PowerPreference::None,
            prefer_software: false,
            cache_dir: crate::tuning::CacheDir::Default,
        })
    }

    /// These options with the cache directory `dir` (see
    /// [`DeviceOptions::cache_dir`]).
    pub fn with_cache_dir(mut self, dir: crate::tuning::CacheDir) -> Self {
        self.cache_dir = dir;
        self
    }

    /// These options restricted to `backend`.
    pub fn with_backend(mut self, backend: wgpu::Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// These options restricted to adapters whose name contains `name`.
    pub fn with_adapter_name(mut self, name: impl Into<String>) -> Self {
        self.adapter_name = Some(name.into());
        self
    }

    /// These options with software adapters ranked first (see
    /// [`DeviceOptions::prefer_software`]).
    pub fn with_prefer_software(mut self, prefer: bool) -> Self {
        self.prefer_software = prefer;
        self
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        match self.backend {
            Some(b) => parts.push(format!("backend {b}")),
            None => parts.push("any backend".to_string()),
        }
        if let Some(n) = &self.adapter_name {
            parts.push(format!("name containing {n:?}"));
        }
        parts.join(", ")
    }
}

/// Parse a backend name: `vulkan`, `gl` (or `gles`, `opengl`), `dx12`, `metal`.
///
/// # Errors
/// [`Error::UnknownBackend`] for anything else.
pub fn parse_backend(s: &str) -> Result<wgpu::Backend> {
    match s.trim().to_ascii_lowercase().as_str() {
        "vulkan" | "vk" => Ok(wgpu::Backend::Vulkan),
        "gl" | "gles" | "opengl" => Ok(wgpu::Backend::Gl),
        "dx12" | "d3d12" => Ok(wgpu::Backend::Dx12),
        "metal" | "mtl" => Ok(wgpu::Backend::Metal),
        _ => Err(Error::UnknownBackend(s.to_string())),
    }
}

fn backends_of(backend: Option<wgpu::Backend>) -> wgpu::Backends {
    match backend {
        None => wgpu::Backends::all(),
        Some(b) => wgpu::Backends::from(b),
    }
}

/// One adapter as [`Device::enumerate`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterDescription {
    /// The driver's adapter name, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    /// The wgpu backend it is reached through.
    pub backend: wgpu::Backend,
    /// Discrete, integrated, virtual, CPU (software) or other.
    pub device_type: wgpu::DeviceType,
    /// The driver's name, e.g. `llvmpipe`; empty where wgpu does not
    /// report one (its GL backend: there `driver_info` holds the GL
    /// version string, e.g. `4.5 (Core Profile) Mesa 22.3.6`).
    pub driver: String,
    /// The driver's version string.
    pub driver_info: String,
}

impl From<wgpu::AdapterInfo> for AdapterDescription {
    fn from(i: wgpu::AdapterInfo) -> Self {
        AdapterDescription {
            name: i.name,
            backend: i.backend,
            device_type: i.device_type,
            driver: i.driver,
            driver_info: i.driver_info,
        }
    }
}

impl fmt::Display for AdapterDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {:?})",
            self.name, self.backend, self.device_type
        )
    }
}

pub(crate) fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    wgpu::Instance::new(desc)
}

fn type_rank(t: wgpu::DeviceType, pref: wgpu::PowerPreference) -> u8 {
    use wgpu::DeviceType as T;
    match (pref, t) {
        (wgpu::PowerPreference::LowPower, T::IntegratedGpu) => 0,
        (wgpu::PowerPreference::LowPower, T::DiscreteGpu) => 1,
        (_, T::DiscreteGpu) => 0,
        (_, T::IntegratedGpu) => 1,
        (_, T::VirtualGpu) => 2,
        (_, T::Cpu) => 3,
        (_, T::Other) => 4,
    }
}

fn backend_rank(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    }
}

/// wgpu's message for a refused device, with what it means where we know.
fn explain_refusal(info: &AdapterDescription, message: &str) -> String {
    if info.backend == wgpu::Backend::Gl && message.contains("Parent device is lost") {
        // See "GL adapters that refuse a device" in docs/ARCHITECTURE.md.
        format!(
            "{message} (wgpu's GL backend reports a GL call that failed while it set the \
             device up as a lost device, most often glMapBufferRange returning NULL for \
             its first staging buffer; wgpu_hal's debug log names the GL error, see \
             docs/ARCHITECTURE.md; pick another adapter with WGARRAY_BACKEND or WGARRAY_ADAPTER)"
        )
    } else {
        message.to_string()
    }
}

/// Open the first candidate that accepts, in order. `open` gives a
/// candidate's name and its attempt; refusals are logged, and returned
/// together (best ranked first) if every candidate refuses.
fn first_accepted<A, T>(
    candidates: &[A],
    requested: &str,
    mut open: impl FnMut(&A) -> (AdapterDescription, Result<T>),
) -> Result<T> {
    let mut refusals = Vec::new();
    for c in candidates {
        match open(c) {
            (_, Ok(t)) => return Ok(t),
            (info, Err(e)) => {
                let e = match e {
                    Error::RequestDevice(m) => m,
                    e => e.to_string(),
                };
                log::warn!("wgarray: {info} refused a device, trying the next adapter: {e}");
                refusals.push(format!("{info}: {e}"));
            }
        }
    }
    Err(Error::AdaptersRefused {
        requested: requested.to_string(),
        refusals,
    })
}

pub(crate) struct DeviceInner {
    /// This device's number in the process (from 0, never reused): what a
    /// compiled function's cache keys on, instead of an address.
    pub(crate) id: u64,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: AdapterDescription,
    pub(crate) pool: Arc<Pool>,
    /// The pipeline cache, limits and features kernels are built with
    /// (shared, weakly, with the device's background kernel work).
    pub(crate) kernels: Arc<kernels::Context>,
    pub(crate) live_arrays: AtomicU64,
    pub(crate) live_nodes: AtomicU64,
    /// Whether eval fuses elementwise nodes (see `graph::fuse`).
    pub(crate) fusion: AtomicBool,
    /// Kernel dispatches submitted so far.
    pub(crate) dispatches: AtomicU64,
    /// Times a loss check asked wgpu (a poll or an empty submission:
    /// [`Device::check_lost`], [`Device::probe_lost`]), for the tests that
    /// keep such checks off the hot path.
    pub(crate) loss_polls: AtomicU64,
    /// Whether memory history is on ([`Device::record_memory_history`]).
    pub(crate) history: AtomicBool,
    /// The arrays made while history is on, weakly (for memory snapshots).
    pub(crate) registry: Registry,
    /// Scalar operands shared by the ops that read them, weakly.
    pub(crate) constants: crate::graph::constants::Constants,
    /// Set by wgpu's device-lost callback, or by wgarray when wgpu refuses
    /// work without a validation error (a destroyed device). A leaf lock:
    /// nothing is called while it is held (see "Lock order" in
    /// docs/ARCHITECTURE.md).
    lost: Arc<Mutex<Option<String>>>,
    /// Errors no error scope caught (should not happen; kept, not panicked on).
    uncaptured: Arc<Mutex<Vec<String>>>,
    /// The wait limit in nanoseconds (see [`Device::set_wait_timeout`]).
    wait_timeout_ns: AtomicU64,
    /// Polls the device for asynchronous waits (`Array::to_vec_async`,
    /// `eval_async`); its thread starts at the first one.
    pub(crate) poller: crate::memory::Poller,
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // The background thread may hold the kernel context while it
        // works: stop it (after the job in hand) and join it before
        // anything of the device goes.
        self.kernels.cache.stop_warm_up();
    }
}

/// A GPU device: one wgpu adapter, device and queue, with its buffer pool and
/// kernel cache. Cheap to clone (an `Arc`); `Send + Sync`.
///
/// ```
/// let device = wgarray::Device::new_default()?;
/// println!("{}", device.info());
/// # Ok::<(), wgarray::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.inner.info)
    }
}

impl fmt::Display for Device {
    /// `device 3 (llvmpipe (LLVM 15.0.6, 256 bits), vulkan, Cpu)`: the
    /// device's number in the process (never reused) and its adapter, as
    /// errors that mix devices name them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device {} ({})", self.inner.id, self.inner.info)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Device {
    /// Every adapter wgpu can reach on this machine, in wgpu's order.
    ///
    /// Listing opens no device, so it never fails: an adapter listed here
    /// may still refuse a device (wgpu's GL backend on NVIDIA's EGL said
    /// "Parent device is lost", see docs/ARCHITECTURE.md), and
    /// [`Device::new`] then moves on to the next one. Listing probes the GL
    /// backend too, where Mesa's EGL may print "XDG_RUNTIME_DIR is invalid
    /// or not set" to stderr: see [`Device::egl_runtime_dir_note`].
    pub fn enumerate() -> Vec<AdapterDescription> {
        let inst = instance(wgpu::Backends::all());
        pollster::block_on(inst.enumerate_adapters(wgpu::Backends::all()))
            .into_iter()
            .map(|a| a.get_info().into())
            .collect()
    }

    /// A device chosen by [`DeviceOptions::from_env`]: `WGARRAY_BACKEND` and
    /// `WGARRAY_ADAPTER` if set, else the best adapter (see [`Device::new`]).
    ///
    /// # Errors
    /// As [`Device::new`], plus [`Error::UnknownBackend`].
    pub fn new_default() -> Result<Device> {
        Device::new(&DeviceOptions::from_env()?)
    }

    /// A device on the best adapter that matches `options` and accepts.
    ///
    /// Adapters are filtered by backend and name, then ranked by device type
    /// (discrete, integrated, virtual, software; `LowPower` puts integrated
    /// first) and, among equals, Vulkan, Metal and DX12 before GL. The device
    /// gets every optional feature in [`OPTIONAL_FEATURES`] the adapter has,
    /// and the adapter's own limits. An adapter that refuses the device
    /// (`request_device` fails) is skipped with a warning in the log, and
    /// the next one in rank is tried.
    ///
    /// # Errors
    /// [`Error::NoAdapter`] when nothing matches (it lists every adapter on
    /// the machine, of every backend, and its message says how to get a
    /// software driver); [`Error::AdaptersRefused`] when every matching
    /// adapter refused, with each one's refusal.
    pub fn new(options: &DeviceOptions) -> Result<Device> {
        let ranked = Device::ranked(options)?;
        first_accepted(&ranked, &options.describe(), |a| {
            (
                AdapterDescription::from(a.get_info()),
                Device::open(a, &options.cache_dir),
            )
        })
    }

    /// The adapters that match `options`, best first (see [`Device::new`]).
    ///
    /// # Errors
    /// [`Error::NoAdapter`] when none matches.
    fn ranked(options: &DeviceOptions) -> Result<Vec<wgpu::Adapter>> {
        let backends = backends_of(options.backend);
        let inst = instance(backends);
        let adapters = pollster::block_on(inst.enumerate_adapters(backends));
        let needle = options.adapter_name.as_ref().map(|n| n.to_lowercase());
        let mut ranked: Vec<wgpu::Adapter> = adapters
            .into_iter()
            .filter(|a| {
                let info = a.get_info();
                options.backend.is_none_or(|b| info.backend == b)
                    && needle
                        .as_ref()
                        .is_none_or(|n| info.name.to_lowercase().contains(n))
            })
            .collect();
        // Stable: equals keep wgpu's order.
        ranked.sort_by_key(|a| {
            let info = a.get_info();
            (
                !(options.prefer_software && info.device_type == wgpu::DeviceType::Cpu),
                type_rank(info.device_type, options.power_preference),
                backend_rank(info.backend),
            )
        });
        if ranked.is_empty() {
            // Every adapter of every backend, not only the requested one: the
            // list is there to show what could be asked for instead.
            return Err(Error::NoAdapter {
                requested: options.describe(),
                available: Device::enumerate().iter().map(|a| a.to_string()).collect(),
            });
        }
        Ok(ranked)
    }

    /// A device on a given wgpu adapter, with the features and limits
    /// [`Device::new`] requests.
    ///
    /// # Errors
    /// [`Error::RequestDevice`] when the adapter refuses.
    pub fn from_adapter(adapter: &wgpu::Adapter) -> Result<Device> {
        Device::open(adapter, &crate::tuning::CacheDir::Default)
    }

    fn open(adapter: &wgpu::Adapter, cache_dir: &crate::tuning::CacheDir) -> Result<Device> {
        let info = AdapterDescription::from(adapter.get_info());
        let features = usable_features(adapter.features());
        let experimental = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            // SAFETY: wgpu asks callers of experimental features to accept
            // that its implementation may have bugs; wgarray uses only
            // cooperative matrices, in the GEMM family that tests compare
            // with the plain path (tests/matmul.rs).
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("wgarray"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: experimental,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| Error::RequestDevice(explain_refusal(&info, &e.to_string())))?;

        let lost = Arc::new(Mutex::new(None));
        let lost_cb = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, msg| {
            log::error!("wgarray: device lost ({reason:?}): {msg}");
            *lost_cb.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{reason:?}: {msg}"));
        });
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let unc = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            log::error!("wgarray: uncaptured wgpu error: {e}");
            unc.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(e.to_string());
        }));
        Ok(Device::assemble(
            adapter, device, queue, info, features, limits, cache_dir, lost, uncaptured,
        ))
    }

    /// A device around wgpu objects already made: the pool, the kernel
    /// context and the counters.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: AdapterDescription,
        features: wgpu::Features,
        limits: wgpu::Limits,
        cache_dir: &crate::tuning::CacheDir,
        lost: Arc<Mutex<Option<String>>>,
        uncaptured: Arc<Mutex<Vec<String>>>,
    ) -> Device {
        // Software adapters' storage buffers can also be bound as uniform
        // buffers (`GemmKernel::Uniform`, which only they run).
        let pool = Arc::new(Pool::new(
            device.clone(),
            crate::memory::default_cache_limit(limits.max_buffer_size),
            info.device_type == wgpu::DeviceType::Cpu,
        ));
        let poller = crate::memory::Poller::new(device.clone());
        let id = {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed)
        };
        Device {
            inner: Arc::new(DeviceInner {
                id,
                kernels: kernels::Context::new(
                    &device, &queue, adapter, &info, limits, features, cache_dir, &pool, id,
                ),
                device,
                queue,
                info,
                pool,
                live_arrays: AtomicU64::new(0),
                live_nodes: AtomicU64::new(0),
                fusion: AtomicBool::new(crate::graph::fuse::enabled()),
                dispatches: AtomicU64::new(0),
                loss_polls: AtomicU64::new(0),
                history: AtomicBool::new(false),
                registry: Registry::default(),
                constants: Default::default(),
                lost,
                uncaptured,
                wait_timeout_ns: AtomicU64::new(DEFAULT_WAIT_TIMEOUT.as_nanos() as u64),
                poller,
            }),
        }
    }

    /// A wgarray device on the application's own wgpu `device` and `queue`,
    /// made from `adapter` (burn's `init_device` with a `WgpuSetup`, for a
    /// renderer or engine that already has a device): arrays live in
    /// buffers of that device, kernels are submitted on that queue, and
    /// [`crate::Array::wgpu_buffer`] hands an evaluated array to the
    /// application's own passes without a copy.
    ///
    /// wgarray checks what it needs of the device: compute shaders (the
    /// adapter's downlevel flag `COMPUTE_SHADERS`) and WebGPU's default
    /// compute limits ([`REQUIRED_LIMITS`]: storage buffers per stage,
    /// workgroup sizes and storage, dispatch size, uniform bindings), which
    /// every kernel of wgarray's is checked against
    /// (`testing::check_portability`). It uses the optional features
    /// ([`OPTIONAL_FEATURES`]) the device was created with (f16 arithmetic
    /// needs `SHADER_F16`, f64 arrays `SHADER_F64` and `SHADER_INT64`,
    /// [`Device::features`] says which it got), and the device's limits.
    ///
    /// Left to the application: the device's lost callback and its
    /// uncaptured-error handler (wgarray installs neither, so the
    /// application's stay; wgarray still finds a loss itself, from refused
    /// submissions and failed waits, see `docs/ARCHITECTURE.md`), and the
    /// device's life (dropping the wgarray device drops its handles only).
    ///
    /// # Ordering on the shared queue
    /// wgarray submits on `queue` at [`crate::eval`] (and read-backs,
    /// uploads, [`Device::synchronize`]), with no lock of the
    /// application's. wgpu runs one queue's submissions in order, and
    /// `Queue::write_buffer` lands before the next submission of anyone.
    /// So, for an array over the application's buffer
    /// ([`crate::Array::from_wgpu_buffer`]): what the application wrote or
    /// submitted before the eval that reads it is what wgarray reads; and
    /// for an array the application binds ([`crate::Array::wgpu_buffer`],
    /// which evaluates it): work the application submits after that call
    /// sees the array's values. Neither direction needs
    /// [`Device::synchronize`]; it is for the host (waiting until the GPU
    /// is done). Submissions from two threads are ordered by whichever
    /// `submit` runs first: order them yourself. `tests/interop.rs` checks
    /// each case.
    ///
    /// ```
    /// # let inst = wgarray::wgpu::Instance::new(wgarray::wgpu::InstanceDescriptor::new_without_display_handle());
    /// # let adapter = pollster::block_on(inst.request_adapter(&Default::default())).unwrap();
    /// // The application's own device, made as it likes.
    /// let (device, queue) =
    ///     pollster::block_on(adapter.request_device(&wgarray::wgpu::DeviceDescriptor::default()))
    ///         .unwrap();
    /// let dev = wgarray::Device::from_wgpu(&adapter, device, queue)?;
    /// let a = wgarray::Array::from_slice(&[1.0f32, 2.0], &[2], &dev)?;
    /// assert_eq!((&a * 2.0)?.to_vec::<f32>()?, [2.0, 4.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::DeviceUnsuitable`] naming every downlevel flag and limit
    /// the device lacks.
    pub fn from_wgpu(
        adapter: &wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> Result<Device> {
        let missing =
            missing_requirements(adapter.get_downlevel_capabilities().flags, &device.limits());
        if !missing.is_empty() {
            return Err(Error::DeviceUnsuitable { missing });
        }
        let info = AdapterDescription::from(adapter.get_info());
        let features = usable_features(device.features());
        let limits = device.limits();
        Ok(Device::assemble(
            adapter,
            device,
            queue,
            info,
            features,
            limits,
            &crate::tuning::CacheDir::Default,
            Arc::new(Mutex::new(None)),
            Arc::new(Mutex::new(Vec::new())),
        ))
    }

    /// One device on every adapter that matches `options` and accepts, in
    /// [`Device::new`]'s rank order: for splitting work across all the
    /// adapters a machine has (`examples/multi_adapter.rs`). An adapter
    /// that refuses a device is skipped with a warning in the log, as in
    /// [`Device::new`]. Arrays move between them with
    /// [`crate::Array::to_device`].
    ///
    /// # Errors
    /// As [`Device::new`]: [`Error::NoAdapter`] when nothing matches,
    /// [`Error::AdaptersRefused`] when every match refused.
    pub fn all(options: &DeviceOptions) -> Result<Vec<Device>> {
        let ranked = Device::ranked(options)?;
        let mut devices = Vec::new();
        let mut refusals = Vec::new();
        for a in &ranked {
            let info = AdapterDescription::from(a.get_info());
            match Device::open(a, &options.cache_dir) {
                Ok(d) => devices.push(d),
                Err(e) => {
                    log::warn!("wgarray: {info} refused a device, skipping it: {e}");
                    refusals.push(format!("{info}: {e}"));
                }
            }
        }
        if devices.is_empty() {
            return Err(Error::AdaptersRefused {
                requested: options.describe(),
                refusals,
            });
        }
        Ok(devices)
    }

    /// The adapter behind this device.
    pub fn info(&self) -> &AdapterDescription {
        &self.inner.info
    }

    /// The backend this device runs on.
    pub fn backend(&self) -> wgpu::Backend {
        self.inner.info.backend
    }

    /// The optional features ([`OPTIONAL_FEATURES`]) this device got.
    pub fn features(&self) -> wgpu::Features {
        self.inner.kernels.features
    }

    /// The device's limits (the adapter's own). The ones that matter most:
    /// `max_storage_buffer_binding_size` and `max_buffer_size` (bytes),
    /// `max_compute_workgroups_per_dimension`,
    /// `max_compute_invocations_per_workgroup`.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.inner.kernels.limits
    }

    /// [`Error::MissingFeature`] (named `op`) when this device cannot hold
    /// arrays of `dtype` (f64 without `SHADER_F64` or `SHADER_INT64`);
    /// [`Error::OpDType`] for a block format, which no op that makes
    /// elements makes.
    pub(crate) fn check_dtype(&self, op: &'static str, dtype: crate::DType) -> Result<()> {
        if dtype.is_quantized() {
            // Arrays of a block format come from their bytes only.
            return Err(Error::OpDType {
                op,
                dtype,
                takes: "element dtypes (an array of a block format comes from \
                        Array::from_blocks or a GGUF file)",
            });
        }
        match dtype.missing_feature(self.features()) {
            Some(feature) => Err(Error::MissingFeature { op, feature }),
            None => Ok(()),
        }
    }

    /// [`Error::TooLarge`] when one binding of `bytes` would pass the
    /// adapter's largest storage binding.
    pub(crate) fn check_binding(&self, op: &'static str, bytes: u64) -> Result<()> {
        let max = self.limits().max_storage_buffer_binding_size;
        if bytes > max {
            return Err(Error::TooLarge {
                op,
                limit: crate::Limit::StorageBinding,
                value: bytes,
                max,
            });
        }
        Ok(())
    }

    /// Check a result an op `op` is about to make, at the call: its shape
    /// (as [`crate::shape::check_shape`]) and its bytes against the largest
    /// storage binding, which every buffer of an array must fit.
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming `op`.
    pub(crate) fn check_array(
        &self,
        op: &'static str,
        shape: &[usize],
        dtype: crate::DType,
    ) -> Result<()> {
        crate::shape::check_shape(op, shape)?;
        self.check_binding(
            op,
            crate::transfer::device_bytes(crate::shape::numel(shape), dtype),
        )
    }

    /// What the lines "error: XDG_RUNTIME_DIR is invalid or not set in the
    /// environment." on stderr are, when that variable is unset or not a
    /// directory (`None` otherwise): Mesa's EGL prints them (usually twice)
    /// when wgpu probes the GL backend, on any program that lists or opens
    /// adapters of every backend. They are a warning of Mesa's, not an
    /// error of wgarray's, and change nothing; setting `XDG_RUNTIME_DIR` to
    /// a directory of your own (mode 700, e.g. `$(mktemp -d)`) silences
    /// them. `Error::NoAdapter` and `wgbench list` add this note.
    pub fn egl_runtime_dir_note() -> Option<&'static str> {
        let set =
            std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir());
        (!set).then_some(
            "the lines \"XDG_RUNTIME_DIR is invalid or not set\" on stderr come from \
             Mesa's EGL, probing the GL backend: a harmless warning of Mesa's, not an \
             error of wgarray's; set XDG_RUNTIME_DIR to a directory of your own \
             (mode 700, e.g. $(mktemp -d)) to silence them",
        )
    }

    /// The underlying wgpu device, for interop.
    pub fn wgpu_device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// The underlying wgpu queue, for interop.
    pub fn wgpu_queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    // ---- memory (MLX names and meanings; all bytes) ----

    /// Bytes held by live arrays and in-use staging buffers
    /// (MLX `get_active_memory`).
    pub fn active_memory(&self) -> u64 {
        self.inner.pool.stats().active
    }

    /// The most bytes active at once since creation or the last
    /// [`Device::reset_peak_memory`] (MLX `get_peak_memory`).
    pub fn peak_memory(&self) -> u64 {
        self.inner.pool.stats().peak
    }

    /// Set the peak to the current active memory (MLX `reset_peak_memory`).
    ///
    /// Differs from MLX on purpose: MLX sets the peak to 0, which makes
    /// `peak_memory() < active_memory()` until the next allocation; here
    /// the peak is never below what is active, so a peak measured over a
    /// region of code starts from what the region inherited.
    pub fn reset_peak_memory(&self) {
        self.inner.pool.reset_peak()
    }

    /// Bytes in released buffers the pool keeps for reuse (MLX `get_cache_memory`).
    pub fn cache_memory(&self) -> u64 {
        self.inner.pool.stats().cache
    }

    /// Keep at most `bytes` in the cache, evicting least recently released
    /// buffers now if needed; returns the previous limit (MLX
    /// `set_cache_limit`). 0 disables caching: released buffers go straight
    /// back to the driver.
    ///
    /// Default: the adapter's `max_buffer_size` ([`Device::limits`]), at
    /// least 256 MiB. wgpu reports no memory size, and that is the one
    /// figure an adapter gives about its memory: 2 GiB on Mesa's drivers,
    /// DX12 and GL, `maxMemoryAllocationSize` on other Vulkan drivers,
    /// `maxBufferLength` on Metal. (MLX's default is its memory limit,
    /// about all of the device's memory.)
    ///
    /// Whatever the limit, the cache also obeys the footprint rule: active
    /// plus cached memory stays within 2 times the most bytes active at once
    /// since the device was made or [`Device::clear_cache`] last ran, so a
    /// loop whose requests grow every step (a growing KV cache) cannot fill
    /// the cache with buffers it never reuses. The pool's module docs
    /// (`src/memory/pool.rs`) say why, with measurements.
    pub fn set_cache_limit(&self, bytes: u64) -> u64 {
        self.inner.pool.set_cache_limit(bytes)
    }

    /// The cache limit in bytes (see [`Device::set_cache_limit`]).
    pub fn cache_limit(&self) -> u64 {
        self.inner.pool.cache_limit()
    }

    /// Cap the device memory arrays hold at `bytes`; returns the previous
    /// limit (MLX `set_memory_limit`). Default: no limit.
    ///
    /// What it counts: the storage buffers on loan, that is every
    /// evaluated array's buffer and the intermediates and outputs of an
    /// eval ([`Device::active_memory`] less read-backs in flight). An
    /// allocation that would pass it first empties the cache, then fails
    /// with [`Error::OutOfMemory`] whose `limit` is this value; the
    /// driver's own out-of-memory maps to the same error with `limit`
    /// `u64::MAX`.
    ///
    /// What it does not count: the staging buffers a read-back copies a
    /// result into ([`crate::Array::to_vec`], [`crate::Array::to_vec_async`],
    /// [`crate::Array::read_into`], [`crate::Array::item`], [`crate::io::save_safetensors`]).
    /// They are host memory (wgpu maps them for the CPU: system memory on a
    /// discrete GPU, and on a CPU adapter all memory is), and the field's
    /// limits leave host staging out too: PyTorch's
    /// `set_per_process_memory_fraction` caps its CUDA caching allocator,
    /// not its pinned host allocator; CuPy's `MemoryPool.set_limit` caps the
    /// device pool, not its `PinnedMemoryPool`; MLX's limit governs graph
    /// evaluation (its reads copy unified memory into host objects). So a
    /// result computed within the limit can always be read back: a strided
    /// view is copied dense on the device first, which counts, and where
    /// that copy would pass the limit the read takes the bytes the view
    /// spans and gathers its elements on the host. A read fails only where
    /// the host (the driver) cannot give the staging memory:
    /// [`Error::OutOfMemory`] with `limit` `u64::MAX`. Staging in use still
    /// counts in [`Device::active_memory`] and [`Device::peak_memory`]
    /// (bytes wgarray holds), which may so pass the limit while a read is
    /// in flight.
    pub fn set_memory_limit(&self, bytes: u64) -> u64 {
        self.inner.pool.set_memory_limit(bytes)
    }

    /// Hand every cached buffer back to the driver (MLX `clear_cache`), and
    /// restart the cache's footprint rule (see [`Device::set_cache_limit`])
    /// from the memory active now: after loading a model through large
    /// temporaries, this lets the cache follow the steady state.
    pub fn clear_cache(&self) {
        self.inner.pool.clear_cache()
    }

    /// Turn memory history on or off (PyTorch
    /// `torch.cuda.memory._record_memory_history`).
    ///
    /// While it is on: every op records its name and the user's call site
    /// (`#[track_caller]` on the public ops) in the arrays it makes and in
    /// the buffers allocated for them; a registry keeps a `Weak` reference
    /// to each array made, so [`Device::memory_snapshot`] can say which
    /// arrays view each buffer; and the pool records a timeline of
    /// allocations, cache hits, releases and frees
    /// ([`Device::memory_timeline`]). It costs a clock reading per pool
    /// event and a lock per array made. Off (the default), none of it is
    /// recorded and ops pay one relaxed atomic load.
    ///
    /// Turning it on starts a fresh timeline; turning it off drops the
    /// timeline and the registry (origins already recorded stay with their
    /// arrays and buffers).
    pub fn record_memory_history(&self, enabled: bool) {
        self.inner.history.store(enabled, Ordering::SeqCst);
        if !enabled {
            self.inner.registry.clear();
        }
        self.inner.pool.set_history(enabled);
    }

    /// Every buffer alive in the driver now (on loan and cached), with its
    /// size in bytes, the op it was handed out for and the user's call site,
    /// and the shape and dtype of the arrays that view it, largest first;
    /// `Display` prints it as a table, [`MemorySnapshot::to_json`] as JSON.
    ///
    /// Every buffer is listed whether or not history is on (the pool keeps a
    /// record of each loan); origins and arrays are known for what was made
    /// while [`Device::record_memory_history`] was on.
    ///
    /// ```
    /// # let device = wgarray::Device::new_default()?;
    /// device.record_memory_history(true);
    /// let a = wgarray::Array::zeros(&[256, 256], wgarray::DType::F32, &device)?;
    /// a.eval()?;
    /// let snap = device.memory_snapshot();
    /// let b = &snap.buffers[0];
    /// assert_eq!(b.bytes, 256 * 256 * 4);
    /// assert_eq!(b.origin.unwrap().op, "full");
    /// assert_eq!(b.arrays[0].shape, vec![256, 256]);
    /// println!("{snap}");
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    pub fn memory_snapshot(&self) -> MemorySnapshot {
        MemorySnapshot::take(self)
    }

    /// The pool's events since history was last turned on, oldest first
    /// (empty while it is off): for plotting active and cached memory over
    /// time (`examples/memory_timeline.rs`) and for finding who held the
    /// memory at its peak ([`MemoryTimeline::holders_at`]).
    pub fn memory_timeline(&self) -> MemoryTimeline {
        self.inner.pool.timeline()
    }

    /// `op` (computed only when needed) and the caller's location, if
    /// memory history is on.
    #[track_caller]
    pub(crate) fn origin(&self, op: impl FnOnce() -> &'static str) -> Option<Origin> {
        if self.inner.history.load(Ordering::Relaxed) {
            Some(Origin {
                op: op(),
                location: std::panic::Location::caller(),
            })
        } else {
            None
        }
    }

    /// All memory counters at once.
    pub fn memory_stats(&self) -> MemoryStats {
        self.inner.pool.stats()
    }

    /// Arrays (handles' shared descriptors) alive on this device: for
    /// lifetime tests.
    pub fn live_arrays(&self) -> u64 {
        self.inner.live_arrays.load(Ordering::SeqCst)
    }

    /// Graph nodes alive on this device: for lifetime tests.
    pub fn live_nodes(&self) -> u64 {
        self.inner.live_nodes.load(Ordering::SeqCst)
    }

    /// wgpu callbacks that asynchronous waits registered and that have not
    /// run yet: a read-back future's buffer map ([`crate::Array::to_vec_async`]),
    /// an eval future's work-done callback ([`crate::eval_async`]). A
    /// dropped read-back future cancels its map, so this goes back at once;
    /// a dropped eval future's callback runs when the GPU finishes. For
    /// lifetime tests: 0 when nothing is pending.
    pub fn pending_callbacks(&self) -> u64 {
        self.inner.poller.outstanding()
    }

    /// Command buffers with work in them that wgarray submitted on this
    /// device's queue so far: one per eval that ran nodes (a read-back of
    /// an array that was not evaluated yet included: its copy goes in the
    /// eval's command buffer), one per read-back of an evaluated array,
    /// one per upload through a staging buffer. Not counted: the empty
    /// submissions of loss checks and [`Device::synchronize`], and the
    /// GEMM tuning's timing runs. Each submission is a hand-off to the
    /// driver's threads (and each wait for one, a wake-up): for tests
    /// that pin how many a loop makes.
    pub fn submissions(&self) -> u64 {
        self.inner.pool.submissions()
    }

    /// Kernel dispatches submitted on this device so far (each eval submits
    /// one command buffer holding its dispatches): with
    /// [`Device::set_fusion`], a measure of what fusion saves.
    pub fn dispatches(&self) -> u64 {
        self.inner.dispatches.load(Ordering::SeqCst)
    }

    /// Kernels lowered so far in their wide variant, each thread moving 16
    /// bytes of an operand per load as `vec4<u32>` (see
    /// `docs/ARCHITECTURE.md`, "Kernels"): elementwise kernels whose loads
    /// are dense (offset a multiple of 16 bytes), constant along the last
    /// dimension (a broadcast scalar, a row's statistic) or a broadcast
    /// row; reductions whose reduced dimension is unit-stride. For tests
    /// that must know which variant ran. Every eval that lowers one counts, the
    /// replays of a [`crate::Compiled`] function included.
    pub fn wide_dispatches(&self) -> u64 {
        self.inner.kernels.wide_dispatches.load(Ordering::Relaxed)
    }

    /// Turn fusion of elementwise nodes at eval on or off for this device;
    /// returns the previous setting. On by default unless the environment
    /// variable `WGARRAY_FUSION` is `0`. Off, every elementwise node is its
    /// own kernel (constants and views still fold into its loads): for
    /// checking a result against the unfused path. See `docs/ARCHITECTURE.md`
    /// ("Fusion").
    pub fn set_fusion(&self, enabled: bool) -> bool {
        self.inner.fusion.swap(enabled, Ordering::SeqCst)
    }

    /// Whether eval fuses elementwise nodes (see [`Device::set_fusion`]).
    pub fn fusion(&self) -> bool {
        self.inner.fusion.load(Ordering::SeqCst)
    }

    /// Compute pipelines created so far for evals (each kernel
    /// specialisation once, and again after a [`crate::Compiled`] handle
    /// that made it was dropped and it was asked for again). Pipelines the
    /// GEMM warm-up made are not counted (see [`Device::pipelines_warmed`]);
    /// an eval that finds one made creates none, so on a device that
    /// warmed up the figure is lower by what the warm-up made first.
    pub fn pipelines_created(&self) -> u64 {
        self.inner.kernels.cache.created()
    }

    /// Compute pipelines this device's background kernel work has created
    /// so far (one thread per device; see [`crate::tuning`]): the warm-up
    /// (the first device a process opens with a tuning file whose warm-up
    /// list is not empty compiles the GEMM kernels that earlier evals
    /// compiled, at most [`crate::tuning::WARM_UP_MAX`], so that the first
    /// GEMM of a shape class finds its pipeline made or being made), the
    /// GEMM tuning's candidates, and the GEMM kernels compiled to replace
    /// a stand-in. Not on GL, where wgpu serialises every call on one
    /// context lock (there the tuning runs inside the eval that needs it).
    /// [`crate::tuning::WARM_UP_ENV`]`=0` turns the background work off.
    pub fn pipelines_warmed(&self) -> u64 {
        self.inner.kernels.cache.warmed()
    }

    /// Block until this device's background kernel work (see
    /// [`Device::pipelines_warmed`]) has ended, running what is queued
    /// without waiting for an idle device; returns at once when there is
    /// none. For code that counts pipelines or times kernels and wants no
    /// compiles beside it, for a test that reads the tuned choice, and for
    /// a program that wants its kernels tuned and compiled before it exits
    /// (so that its next run starts with them): on a software adapter with
    /// the driver's cache empty a large GEMM tile's compile takes seconds.
    /// Never fails; a job whose kernel fails to compile logs it and goes on.
    pub fn wait_warm_up(&self) {
        self.inner.kernels.cache.wait_warm_up();
    }

    /// Background kernel jobs queued or running on this device (see
    /// [`Device::wait_warm_up`]): 0 once everything is tuned and compiled.
    pub fn background_jobs(&self) -> usize {
        self.inner.kernels.cache.background.pending()
    }

    /// This device's number in the process (from 0, in the order devices
    /// are made, never reused): what [`crate::progress`] events name a
    /// device by.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Compute pipelines the device's kernel cache holds now. Pipelines made
    /// by a [`crate::Compiled`] handle's calls leave the cache when the
    /// handle is dropped or cleared; the others stay for the device's life.
    pub fn live_pipelines(&self) -> usize {
        self.inner.kernels.cache.live()
    }

    /// Submit pending uploads and wait until all work has finished, so that
    /// wgpu frees the buffers the pool has let go of. Waits at most
    /// [`Device::wait_timeout`], without holding any lock other threads need.
    ///
    /// # Errors
    /// [`Error::DeviceLost`], [`Error::Timeout`].
    pub fn synchronize(&self) -> Result<()> {
        self.scoped(|| {
            // An empty submission flushes pending uploads (`write_buffer`),
            // which otherwise hold their buffers until the next submit.
            let index = {
                let _guard = self.inner.pool.lock_queue();
                self.inner.queue.submit([])
            };
            crate::memory::wait(
                &self.inner.device,
                Some(index),
                self.wait_timeout(),
                "synchronize",
            )
        })
    }

    /// wgpu's allocator report (Vulkan, DX12; `None` on GL): total bytes the
    /// driver allocator holds. For checking that memory really went back.
    pub fn allocator_report(&self) -> Option<wgpu::AllocatorReport> {
        self.inner.device.generate_allocator_report()
    }

    /// How long a wait for the GPU (read-back, [`Device::synchronize`]) may
    /// take before it fails with [`Error::Timeout`]. Default:
    /// [`DEFAULT_WAIT_TIMEOUT`].
    pub fn wait_timeout(&self) -> Duration {
        Duration::from_nanos(self.inner.wait_timeout_ns.load(Ordering::Relaxed))
    }

    /// Set the wait limit (see [`Device::wait_timeout`]); returns the
    /// previous one. Applies to waits that start afterwards, on every clone
    /// of this device.
    pub fn set_wait_timeout(&self, timeout: Duration) -> Duration {
        let ns = timeout.as_nanos().min(u64::MAX as u128) as u64;
        Duration::from_nanos(self.inner.wait_timeout_ns.swap(ns, Ordering::Relaxed))
    }

    /// Whether the device is lost: wgpu reported it (a driver reset, a
    /// removed GPU, [`wgpu::Device::destroy`]), or refused work in a way only
    /// a lost device does. Polls wgpu without blocking first, so a destroyed
    /// device with no work in flight is noticed at once.
    pub fn is_lost(&self) -> bool {
        self.check_lost().is_err()
    }

    /// wgpu's `wgpu::Device::destroy` marks the device invalid and reports
    /// the loss through its callback only at a later poll, once the submitted
    /// work is done; meanwhile wgpu drops new work silently. So: the flag,
    /// then a non-blocking poll, then the flag again. Calls that submit also
    /// confirm their submission ([`Device::confirm_submitted`]), which
    /// catches a loss while work is still in flight.
    pub(crate) fn check_lost(&self) -> Result<()> {
        if let Some(msg) = self.lost_message() {
            return Err(Error::DeviceLost(msg));
        }
        self.inner.loss_polls.fetch_add(1, Ordering::Relaxed);
        crate::memory::poll_now(&self.inner.device);
        match self.lost_message() {
            Some(msg) => Err(Error::DeviceLost(msg)),
            None => Ok(()),
        }
    }

    /// A loss already recorded (by wgpu's callback, or by an earlier call
    /// that found it), without asking wgpu: a lock and a look, for calls
    /// that do not reach the GPU themselves ([`crate::Array::empty`]). The
    /// first call that does reach it reports a loss nobody has seen yet.
    pub(crate) fn known_lost(&self) -> Result<()> {
        match self.lost_message() {
            Some(msg) => Err(Error::DeviceLost(msg)),
            None => Ok(()),
        }
    }

    /// [`Device::check_lost`], and when that finds nothing, an empty
    /// submission confirmed at once: the one way to see that wgpu refuses
    /// work while earlier work is still in flight. For calls that submit
    /// nothing themselves (and for error paths), not for the hot path.
    pub(crate) fn probe_lost(&self) -> Result<()> {
        self.check_lost()?;
        // An empty submission records no work, so it needs no queue lock
        // (the caller may hold it): it cannot reorder anything the pool
        // relies on.
        let index = self.inner.queue.submit([]);
        self.confirm_submitted(index).inspect_err(|e| {
            if let Error::DeviceLost(m) = e {
                self.mark_lost(m);
            }
        })
    }

    /// Whether wgpu accepted submission `index`: a zero-timeout wait, which
    /// fails only for an index no successful submission returned.
    ///
    /// # Errors
    /// [`Error::DeviceLost`] when wgpu refused it. Inside
    /// [`Device::scoped`] that is a loss only if no validation error was
    /// caught (an invalid command buffer is refused too); `scoped` decides.
    pub(crate) fn confirm_submitted(&self, index: wgpu::SubmissionIndex) -> Result<()> {
        crate::memory::poll(&self.inner.device, Some(index), Duration::ZERO).map(|_| ())
    }

    fn lost_message(&self) -> Option<String> {
        self.inner
            .lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Record a loss wgarray found itself (wgpu's callback may come later,
    /// or never for a destroyed device with work in flight).
    pub(crate) fn mark_lost(&self, msg: &str) {
        let first = {
            let mut lost = self.inner.lost.lock().unwrap_or_else(|e| e.into_inner());
            let first = lost.is_none();
            if first {
                *lost = Some(msg.to_string());
            }
            first
        };
        // Logged with the leaf lock let go (the logger is the user's code).
        if first {
            log::error!("wgarray: device lost: {msg}");
        }
    }

    /// Run `f` inside validation, out-of-memory and internal error scopes and
    /// turn whatever wgpu reports into an [`Error`].
    ///
    /// A loss comes first: a device already lost fails before `f` runs, and
    /// one lost meanwhile turns any outcome into [`Error::DeviceLost`]. When
    /// wgpu reports an error, an empty submission checks whether the device
    /// is lost (a lost device makes invalid objects, whose use is a
    /// validation error). When `f` itself returns [`Error::DeviceLost`]
    /// (wgpu refused work) and no scope caught an error, the loss is
    /// recorded, so every later call reports it.
    pub(crate) fn scoped<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.check_lost()?;
        let d = &self.inner.device;
        let internal = d.push_error_scope(wgpu::ErrorFilter::Internal);
        let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let v = pollster::block_on(validation.pop());
        let o = pollster::block_on(oom.pop());
        let i = pollster::block_on(internal.pop());
        if let Some(msg) = self.lost_message() {
            return Err(Error::DeviceLost(msg));
        }
        if o.is_some() || v.is_some() || i.is_some() {
            self.probe_lost()?;
        }
        if let Some(e) = o {
            log::error!("wgarray: wgpu out of memory: {e}");
            return Err(Error::OutOfMemory {
                requested: 0,
                active: self.active_memory(),
                limit: u64::MAX,
            });
        }
        if let Some(e) = v {
            return Err(Error::Validation(e.to_string()));
        }
        if let Some(e) = i {
            return Err(Error::Internal(e.to_string()));
        }
        if let Err(Error::DeviceLost(msg)) = &out {
            self.mark_lost(msg);
        }
        out
    }

    /// Errors wgpu raised outside any error scope since the last call.
    pub fn take_uncaptured_errors(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .inner
                .uncaptured
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(name: &str) -> AdapterDescription {
        AdapterDescription {
            name: name.to_string(),
            backend: wgpu::Backend::Gl,
            device_type: wgpu::DeviceType::DiscreteGpu,
            driver: String::new(),
            driver_info: String::new(),
        }
    }

    /// An adapter that refuses is skipped; the next in rank is opened.
    #[test]
    fn a_refusing_adapter_falls_back_to_the_next() {
        let mut tried = Vec::new();
        let got = first_accepted(&["nvidia", "llvmpipe"], "any backend", |name| {
            tried.push(*name);
            let r = match *name {
                "nvidia" => Err(Error::RequestDevice("Parent device is lost".into())),
                _ => Ok(42),
            };
            (adapter(name), r)
        });
        assert_eq!(got, Ok(42));
        assert_eq!(tried, ["nvidia", "llvmpipe"]);
    }

    /// When every adapter refuses, the error names each refusal in rank
    /// order; the first that accepts stops the search.
    #[test]
    fn every_refusal_is_reported() {
        let err = first_accepted::<_, u8>(&["a", "b"], "backend gl", |name| {
            (
                adapter(name),
                Err(Error::RequestDevice(format!("{name} says no"))),
            )
        })
        .unwrap_err();
        let Error::AdaptersRefused {
            requested,
            refusals,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(requested, "backend gl");
        assert_eq!(
            refusals,
            &[
                "a (gl, DiscreteGpu): a says no",
                "b (gl, DiscreteGpu): b says no"
            ]
        );
        assert!(err.to_string().contains("a says no; b (gl"), "{err}");
        let mut tried = 0;
        let first = first_accepted(&[1, 2, 3], "", |&i| {
            tried += 1;
            (adapter("x"), Ok::<_, Error>(i))
        });
        assert_eq!((first, tried), (Ok(1), 1));
    }

    /// Allocating and releasing through the pool asks wgpu nothing about a
    /// loss (no poll, no empty submission): `Array::empty` + drop is
    /// bookkeeping on a cache hit. Before, every `empty` probed the device
    /// (an empty submission and two polls: microseconds whatever the size).
    #[test]
    fn allocations_do_not_poll_for_a_loss() {
        let options = crate::DeviceOptions::from_env()
            .expect("WGARRAY_BACKEND names a backend")
            .with_cache_dir(crate::tuning::CacheDir::Off);
        let d = Device::new(&options).expect("a GPU adapter");
        let polls = || d.inner.loss_polls.load(Ordering::Relaxed);
        // Counted at all: an eval with nothing pending probes.
        let x = crate::Array::empty(&[7], crate::DType::F32, &d).unwrap();
        let before = polls();
        x.eval().unwrap();
        assert!(polls() > before, "the probe is not counted");
        let before = polls();
        for n in [1, 7, 1025, 1 << 20] {
            for _ in 0..10 {
                drop(crate::Array::empty(&[n], crate::DType::F32, &d).unwrap());
            }
        }
        assert_eq!(polls() - before, 0, "loss polls by 40 allocations");
    }

    /// The GL refusal seen on NVIDIA's EGL comes with what it means.
    #[test]
    fn the_gl_lost_parent_refusal_is_explained() {
        let gl = adapter("NVIDIA H200/PCIe/SSE2");
        let msg = explain_refusal(&gl, "Parent device is lost");
        assert!(msg.contains("glMapBufferRange"), "{msg}");
        let vk = AdapterDescription {
            backend: wgpu::Backend::Vulkan,
            ..gl
        };
        assert_eq!(
            explain_refusal(&vk, "Parent device is lost"),
            "Parent device is lost"
        );
    }
}
