//! The crate's error type.
//!
//! Every fallible call returns [`Result<T>`]. wgpu's own validation errors,
//! out-of-memory and device loss are caught with error scopes and the device's
//! uncaptured-error handler and come back as values of [`Error`]; none of them
//! panics.

use crate::DType;

/// The result type of every fallible call in this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in wgarray.
///
/// `Debug` shows the variant's name and then what `Display` shows, with
/// its line breaks (as `anyhow::Error` does): `Kernel: kernel `saxpy`
/// failed to compile: error: expected ';' ...` followed by naga's
/// diagnostic as it prints it. So a `#[test] fn ... -> wgarray::Result<()>`,
/// an `.unwrap()` and `main() -> Result<..>` print the readable message.
/// Match on the variant for its fields.
#[derive(thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// No adapter matched the request (or the machine has none at all).
    #[error(
        "no GPU adapter matched {requested}; adapters on this machine: [{}]. \
         On a machine without a GPU install Mesa's software drivers \
         (Debian/Ubuntu, as root: `apt-get install -y mesa-vulkan-drivers libvulkan1 libegl1 libgl1-mesa-dri`) \
         and pick a backend with WGARRAY_BACKEND=vulkan|gl|dx12|metal \
         (an adapter by name with WGARRAY_ADAPTER=<substring>){}",
        available.join(", "),
        egl_note()
    )]
    NoAdapter {
        /// What was asked for, in words (backend, name, power preference).
        requested: String,
        /// `name (backend, device type)` of every adapter on the machine, of
        /// every backend (not only the one asked for), as
        /// [`crate::Device::enumerate`] lists them.
        available: Vec<String>,
    },

    /// `WGARRAY_BACKEND` or [`crate::DeviceOptions::backend`] named no known backend.
    #[error("unknown backend {0:?}: expected one of vulkan, gl, dx12, metal")]
    UnknownBackend(String),

    /// The adapter refused to create a device.
    #[error("the adapter refused to create a device: {0}")]
    RequestDevice(String),

    /// Adapters matched, and every one of them refused to create a device
    /// ([`crate::Device::new`] tries them in rank order).
    #[error(
        "every adapter that matched {requested} refused to create a device: [{}]{}",
        refusals.join("; "),
        egl_note()
    )]
    AdaptersRefused {
        /// What was asked for, in words.
        requested: String,
        /// `name (backend, device type): wgpu's message` for each adapter
        /// tried, best ranked first.
        refusals: Vec<String>,
    },

    /// wgpu reported a validation error. This is a bug in wgarray (or in a
    /// user's own kernel); the message is wgpu's.
    #[error("wgpu validation error: {0}")]
    Validation(String),

    /// wgpu reported an internal error (for example a shader the driver could
    /// not compile).
    #[error("wgpu internal error: {0}")]
    Internal(String),

    /// A kernel failed to compile or validate. `kernel` names it.
    #[error("kernel `{kernel}` failed to compile: {message}")]
    Kernel {
        /// The kernel's name and specialisation.
        kernel: String,
        /// naga's or wgpu's message.
        message: String,
    },

    /// A GPU allocation would exceed the memory limit, or the driver ran out
    /// of memory. All figures are in bytes. `limit` is `u64::MAX` when the
    /// driver itself refused the allocation.
    #[error(
        "out of GPU memory: requested {requested} bytes with {active} bytes active (limit {limit} bytes)"
    )]
    OutOfMemory {
        /// Bytes the failed allocation asked for (after rounding).
        requested: u64,
        /// Bytes held by live arrays when it failed.
        active: u64,
        /// The memory limit in force, see [`crate::Device::set_memory_limit`].
        limit: u64,
    },

    /// The device was lost (driver reset, removal, or [`wgpu::Device::destroy`]).
    /// Every call that reaches the GPU returns this from then on; create a
    /// new [`crate::Device`].
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),

    /// The GPU did not finish within the device's wait limit
    /// ([`crate::Device::set_wait_timeout`]): a hung or very slow device.
    #[error(
        "the GPU did not finish {what} within {:.3} s (Device::set_wait_timeout sets the limit)",
        waited.as_secs_f64()
    )]
    Timeout {
        /// What was waited for, in words.
        what: &'static str,
        /// How long it was waited for.
        waited: std::time::Duration,
    },

    /// Waiting for the GPU or mapping a buffer failed.
    #[error("reading back from the GPU failed: {0}")]
    Readback(String),

    /// Shapes that must agree do not.
    #[error("shape mismatch in {op}: {lhs:?} and {rhs:?}")]
    ShapeMismatch {
        /// The operation that failed.
        op: &'static str,
        /// The first shape.
        lhs: Vec<usize>,
        /// The second shape.
        rhs: Vec<usize>,
    },

    /// Host data does not fill the requested shape.
    #[error("{len} elements cannot fill shape {shape:?} ({expected} elements)")]
    DataLength {
        /// Elements given.
        len: usize,
        /// The shape asked for.
        shape: Vec<usize>,
        /// Elements the shape holds.
        expected: usize,
    },

    /// An axis is out of range for an array of `ndim` dimensions.
    #[error("{op}: axis {axis} is out of range for an array of {ndim} dimensions")]
    InvalidAxis {
        /// The operation that failed.
        op: &'static str,
        /// The axis given (negative counts from the end).
        axis: isize,
        /// The array's number of dimensions.
        ndim: usize,
    },

    /// Dtypes that must agree do not, or an op does not take this dtype.
    #[error("{op}: {}", match other {
        Some(o) => format!("dtype {dtype} with {o} is not supported"),
        None => format!("unsupported dtype {dtype}"),
    })]
    DType {
        /// The operation that failed.
        op: &'static str,
        /// The offending dtype.
        dtype: DType,
        /// The other operand's dtype, for mixed-dtype errors.
        other: Option<DType>,
    },

    /// A read-back (`to_vec`, `item`, `read_into`, `to_vec_async`) asked
    /// for a host type of another dtype than the array's; the message says
    /// how to read it (as its own type, after `astype`, or with
    /// `to_f64_vec`, which converts any dtype).
    #[error("{}", read_dtype(op, *dtype, *requested))]
    ReadDType {
        /// The read-back called.
        op: &'static str,
        /// The array's dtype.
        dtype: DType,
        /// The dtype of the host type asked for ([`crate::Element::DTYPE`]).
        requested: DType,
    },

    /// An op does not take arrays of this dtype (a bitwise op on floats,
    /// `exp` on float64); `takes` says which dtypes it does take, or what
    /// to do instead.
    #[error("{op} does not take {dtype} arrays: it takes {takes}")]
    OpDType {
        /// The operation that failed.
        op: &'static str,
        /// The offending dtype.
        dtype: DType,
        /// What the op takes, in words (`"integer and bool arrays"`).
        takes: &'static str,
    },

    /// A host value does not fit the device dtype it converts to (an `i64`
    /// index past `i32`, in [`crate::Array::from_slice`] or a safetensors
    /// file): nothing was uploaded.
    #[error("{op}{}: element {index} ({value}) does not fit in {dtype}", match tensor {
        Some(t) => format!(", tensor `{t}`"),
        None => String::new(),
    })]
    OutOfRange {
        /// The operation that failed.
        op: &'static str,
        /// The tensor, when the value comes from a file.
        tensor: Option<String>,
        /// The element's position in row-major order.
        index: usize,
        /// Its value.
        value: i128,
        /// The device dtype it had to fit.
        dtype: DType,
    },

    /// The adapter lacks a wgpu feature the operation needs (for example
    /// `SHADER_F16` for f16 arithmetic on GL).
    #[error("{op} needs the wgpu feature {feature}, which this adapter does not have")]
    MissingFeature {
        /// The operation that failed.
        op: &'static str,
        /// The wgpu feature's name, as in `wgpu::Features`.
        feature: &'static str,
    },

    /// A size passes one of the limits an array, a kernel or the adapter
    /// has; `limit` says which, and in which unit `value` and `max` count
    /// (bytes, elements, dimensions, threads).
    #[error("{}", too_large(op, *limit, *value, *max))]
    TooLarge {
        /// The operation that failed.
        op: &'static str,
        /// Which limit was passed.
        limit: Limit,
        /// The size asked for, in `limit.unit()` (for [`Limit::Elements`],
        /// `u64::MAX`: the count overflowed).
        value: u64,
        /// The limit, in the same unit.
        max: u64,
    },

    /// A binding of a [`crate::testing::KernelTest`] does not match the
    /// shader's declaration (read from naga's module): a host element type
    /// that is not the declared one, an input bound where the shader writes,
    /// a uniform of the wrong size, a binding the shader does not declare
    /// (`wgsl` is "nothing"), or one the entry point uses that the test does
    /// not provide (`host` is "nothing").
    #[error(
        "{kernel}: @binding({binding}) `{name}`: the shader declares {wgsl}, the test binds {host}"
    )]
    BindingMismatch {
        /// The kernel test's entry point.
        kernel: String,
        /// The binding number (group 0).
        binding: u32,
        /// The WGSL variable's name (empty when the shader declares none).
        name: String,
        /// The declaration as WGSL spells it, e.g. `var<storage, read> x: array<f32>`.
        wgsl: String,
        /// What the test binds there, in words, with the Rust element type.
        host: String,
    },

    /// A kernel-test fixture file could not be written, read or understood.
    #[error("fixture {path}: {message}")]
    Fixture {
        /// The file (or `<string>` for [`crate::testing::Fixture::from_json`]).
        path: String,
        /// What went wrong.
        message: String,
    },

    /// A reduction without an identity (max, min, argmax, argmin) over
    /// axes that hold no element: there is no value to return. NumPy,
    /// PyTorch and MLX refuse these too.
    #[error(
        "{op} of an empty sequence: axes {axes:?} of shape {shape:?} hold no element, \
         and {op} has no identity"
    )]
    EmptyReduction {
        /// The reduction (`max`, `min`, `argmax`, `argmin`).
        op: &'static str,
        /// The input's shape.
        shape: Vec<usize>,
        /// The reduced axes (non-negative, sorted).
        axes: Vec<usize>,
    },

    /// Arrays from different devices were combined. Move one with
    /// [`crate::Array::to_device`].
    #[error(
        "{op}: the arrays live on different devices, {lhs} and {rhs} (move one with Array::to_device)"
    )]
    DeviceMismatch {
        /// The operation that failed (`eval` when arrays of several devices
        /// were evaluated together).
        op: &'static str,
        /// The first device, as [`crate::Device`]'s `Display` names it
        /// (`device 0 (llvmpipe (...), vulkan, Cpu)`).
        lhs: String,
        /// The other device.
        rhs: String,
    },

    /// A wgpu device the application made lacks what wgarray needs
    /// ([`crate::Device::from_wgpu`]).
    #[error("this wgpu device cannot run wgarray's kernels; it lacks {}", missing.join("; "))]
    DeviceUnsuitable {
        /// Each missing capability in words: a downlevel flag, or a limit
        /// with the value wgarray needs and the device's.
        missing: Vec<String>,
    },

    /// An application's buffer lacks a usage flag an array over it needs
    /// ([`crate::Array::from_wgpu_buffer`]).
    #[error("{op}: the buffer's usage {usage} lacks {flag}, which {why}")]
    BufferUsage {
        /// The operation that failed.
        op: &'static str,
        /// The missing flag, as `wgpu::BufferUsages` names it (`STORAGE`).
        flag: &'static str,
        /// The flags the buffer has.
        usage: String,
        /// What wgarray does with it.
        why: &'static str,
    },

    /// The ranks of a distributed call disagree (different shapes, dtypes,
    /// roots or operations, or ranks out of step; a send and its receive of
    /// different shapes or dtypes): every rank of the call returns it, with
    /// the same message listing each rank's call, and no data moved
    /// (feature `mpi`, `wgarray::distributed`).
    #[error("{op}: the ranks' calls disagree, {message}")]
    RankMismatch {
        /// The operation that failed.
        op: &'static str,
        /// What disagrees, and each rank's call.
        message: String,
    },

    /// Another rank's part of a distributed call failed on that rank
    /// before any data moved (that rank's own error says why: an array of
    /// another device, a rank out of range, a lost device); this rank's
    /// call did nothing.
    #[error(
        "{op}: rank {peer} failed its part of the call (its own error says why); no data moved"
    )]
    PeerFailed {
        /// The operation that failed.
        op: &'static str,
        /// The rank whose part failed.
        peer: usize,
    },

    /// A rank that is not in the group, or this process's own rank where
    /// a peer is needed (a send to itself).
    #[error("{op}: rank {rank} is not a peer of rank {me} in a group of {size}")]
    InvalidRank {
        /// The operation that failed.
        op: &'static str,
        /// The rank given.
        rank: usize,
        /// The group's size.
        size: usize,
        /// This process's rank.
        me: usize,
    },

    /// MPI could not start (finalised already, too little thread
    /// support), a count passes MPI's `int`, or the group is unusable
    /// after a collective timed out.
    #[error("{op}: {message}")]
    Distributed {
        /// The operation that failed.
        op: &'static str,
        /// What went wrong.
        message: String,
    },

    /// A function traced by [`crate::compile()`] needed the value of an array
    /// that depends on its inputs (it evaluated or read one back while being
    /// traced): a traced input has no value until the compiled function is
    /// called. Evaluate outside the function, or return the array instead.
    #[error(
        "compile: the traced function evaluated `{op}`, which depends on its inputs (traced inputs have no value; return the array instead)"
    )]
    Traced {
        /// The op whose value was asked for (the first one that depends on a
        /// traced input).
        op: &'static str,
    },

    /// An index outside its axis, found by an op that checks its indices
    /// ([`crate::Array::take_checked`]; `take` clamps instead).
    #[error(
        "{op}: index {index} is out of range for an axis of length {len} \
         (valid: {neg} to {last})",
        neg = -(*len as i128),
        last = *len as i128 - 1
    )]
    IndexOutOfRange {
        /// The operation that failed.
        op: &'static str,
        /// The smallest or the largest index given, whichever is out.
        index: i64,
        /// The length of the axis indexed (of the flattened array for
        /// `axis = None`).
        len: usize,
    },

    /// Any other invalid argument; the message says which.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Reading or writing a file failed: the operating system's error,
    /// kept as its kind and message (so that `Error` stays `Clone`).
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// [`std::io::Error::kind`] of the failure (`NotFound`, ...).
        kind: std::io::ErrorKind,
        /// What was being done, and the operating system's message.
        message: String,
    },

    /// A file does not follow its format (a truncated file, a header whose
    /// sizes or offsets disagree), or lacks a tensor that was asked for.
    #[error("{}{}: {message}", path.display(), match tensor {
        Some(t) => format!(", tensor `{t}`"),
        None => String::new(),
    })]
    Format {
        /// The file.
        path: std::path::PathBuf,
        /// The tensor at fault, when one is.
        tensor: Option<String>,
        /// What is wrong.
        message: String,
    },

    /// A tensor in a file has an element type that no [`DType`] holds
    /// (safetensors' F8_E4M3, C64, ...; GGUF's Q5_K, IQ4_NL, ...).
    #[error(
        "{}, tensor `{tensor}`: dtype {dtype} is not supported \
         (wgarray reads safetensors' F64, F32, F16, BF16, I64 and U64 (narrowed to 32 bits), \
         I32, U32, I16, U16, I8, U8 and BOOL, and GGUF's F32, F16, BF16, F64, I8, I16, I32, \
         Q4_0, Q4_1, Q8_0, Q4_K and Q6_K)",
        path.display()
    )]
    UnsupportedDType {
        /// The file.
        path: std::path::PathBuf,
        /// The tensor's name.
        tensor: String,
        /// The file's name for the dtype (safetensors: `F64`, `I64`, ...;
        /// GGUF: ggml's type name, `q5_K`, `iq4_nl`, ...).
        dtype: String,
    },
}

impl Error {
    /// The variant's name (`"InvalidAxis"`), as `Debug` prints it.
    pub fn variant_name(&self) -> &'static str {
        match self {
            Error::NoAdapter { .. } => "NoAdapter",
            Error::UnknownBackend(..) => "UnknownBackend",
            Error::RequestDevice(..) => "RequestDevice",
            Error::AdaptersRefused { .. } => "AdaptersRefused",
            Error::Validation(..) => "Validation",
            Error::Internal(..) => "Internal",
            Error::Kernel { .. } => "Kernel",
            Error::OutOfMemory { .. } => "OutOfMemory",
            Error::DeviceLost(..) => "DeviceLost",
            Error::Timeout { .. } => "Timeout",
            Error::Readback(..) => "Readback",
            Error::ShapeMismatch { .. } => "ShapeMismatch",
            Error::DataLength { .. } => "DataLength",
            Error::InvalidAxis { .. } => "InvalidAxis",
            Error::DType { .. } => "DType",
            Error::ReadDType { .. } => "ReadDType",
            Error::OpDType { .. } => "OpDType",
            Error::OutOfRange { .. } => "OutOfRange",
            Error::MissingFeature { .. } => "MissingFeature",
            Error::TooLarge { .. } => "TooLarge",
            Error::BindingMismatch { .. } => "BindingMismatch",
            Error::Fixture { .. } => "Fixture",
            Error::EmptyReduction { .. } => "EmptyReduction",
            Error::DeviceMismatch { .. } => "DeviceMismatch",
            Error::Traced { .. } => "Traced",
            Error::IndexOutOfRange { .. } => "IndexOutOfRange",
            Error::InvalidArgument(..) => "InvalidArgument",
            Error::Io { .. } => "Io",
            Error::Format { .. } => "Format",
            Error::UnsupportedDType { .. } => "UnsupportedDType",
            Error::DeviceUnsuitable { .. } => "DeviceUnsuitable",
            Error::BufferUsage { .. } => "BufferUsage",
            Error::RankMismatch { .. } => "RankMismatch",
            Error::PeerFailed { .. } => "PeerFailed",
            Error::InvalidRank { .. } => "InvalidRank",
            Error::Distributed { .. } => "Distributed",
        }
    }
}

/// `Variant: message`, the message being [`std::fmt::Display`]'s with its
/// line breaks (naga's diagnostics, lists of adapters), not the escaped
/// one-line struct a derived `Debug` gives: this is what a test returning
/// `Result` and `.unwrap()` print.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {self}", self.variant_name())
    }
}

/// Which limit an [`Error::TooLarge`] hit, and its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// The adapter's largest storage buffer binding
    /// (`wgpu::Limits::max_storage_buffer_binding_size`), in bytes: one
    /// array, and one kernel binding, is at most this (128 MiB on Mesa).
    StorageBinding,
    /// The adapter's largest uniform buffer binding
    /// (`wgpu::Limits::max_uniform_buffer_binding_size`), in bytes.
    UniformBinding,
    /// The most dimensions an array has: [`crate::shape::MAX_DIMS`] (8),
    /// which kernels unravel indices over in straight-line code.
    Dimensions,
    /// The number of elements a shape holds, which must fit a `usize`
    /// (`usize::MAX` elements).
    Elements,
    /// The elements one reduction folds into one output (2^26): only a
    /// broadcast view gets there, since no buffer holds that many.
    ReducedElements,
    /// Sizes, offsets and strides that kernels index with 32-bit words, in
    /// elements (`u32::MAX`; strides from `i32::MIN`).
    KernelIndex,
    /// Threads of one dispatch, whose flat index is a `u32`.
    DispatchThreads,
}

impl Limit {
    /// The unit its figures count: `bytes`, `elements`, `dimensions`,
    /// `threads`.
    pub fn unit(self) -> &'static str {
        match self {
            Limit::StorageBinding | Limit::UniformBinding => "bytes",
            Limit::Dimensions => "dimensions",
            Limit::Elements | Limit::ReducedElements | Limit::KernelIndex => "elements",
            Limit::DispatchThreads => "threads",
        }
    }

    /// The limit in words, as the error message says it.
    pub fn what(self) -> &'static str {
        match self {
            Limit::StorageBinding => {
                "the adapter's largest storage binding (max_storage_buffer_binding_size)"
            }
            Limit::UniformBinding => {
                "the adapter's largest uniform binding (max_uniform_buffer_binding_size)"
            }
            Limit::Dimensions => "the most dimensions an array has",
            Limit::Elements => "the most elements a shape holds",
            Limit::ReducedElements => "the most elements one reduction folds into one output",
            Limit::KernelIndex => "the 32-bit index range of wgarray's kernels",
            Limit::DispatchThreads => "the most threads of one dispatch (a u32 index)",
        }
    }
}

fn too_large(op: &str, limit: Limit, value: u64, max: u64) -> String {
    let unit = limit.unit();
    match limit {
        Limit::Elements => {
            format!("{op}: the shape holds more elements than a usize counts ({max})")
        }
        _ => format!("{op}: {value} {unit}, but {} is {max} {unit}", limit.what()),
    }
}

/// `". Note: ..."` when Mesa's EGL warning about XDG_RUNTIME_DIR may have
/// been printed before this error (see
/// [`crate::Device::egl_runtime_dir_note`]), else nothing.
fn egl_note() -> String {
    crate::Device::egl_runtime_dir_note()
        .map(|n| format!(". Note: {n}"))
        .unwrap_or_default()
}

/// The host type that reads `dtype` back, as Rust spells it.
fn host_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::F16 => "half::f16",
        DType::BF16 => "half::bf16",
        DType::F64 => "f64",
        DType::I32 => "i32",
        DType::U32 => "u32",
        DType::I16 => "i16",
        DType::U16 => "u16",
        DType::I8 => "i8",
        DType::U8 => "u8",
        DType::Bool => "bool",
        // No host element type reads a block format (see `read_dtype`).
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => "u8",
    }
}

/// The variant's name in `DType::F64` form.
fn dtype_path(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "DType::F32",
        DType::F16 => "DType::F16",
        DType::BF16 => "DType::BF16",
        DType::F64 => "DType::F64",
        DType::I32 => "DType::I32",
        DType::U32 => "DType::U32",
        DType::I16 => "DType::I16",
        DType::U16 => "DType::U16",
        DType::I8 => "DType::I8",
        DType::U8 => "DType::U8",
        DType::Bool => "DType::Bool",
        DType::Q4_0 => "DType::Q4_0",
        DType::Q4_1 => "DType::Q4_1",
        DType::Q8_0 => "DType::Q8_0",
        DType::Q4K => "DType::Q4K",
        DType::Q6K => "DType::Q6K",
    }
}

fn read_dtype(op: &str, dtype: DType, requested: DType) -> String {
    if dtype.is_quantized() {
        return format!(
            "{op}: the array is {dtype}, a block format, not {requested}: read its packed \
             blocks with `to_blocks()`, or dequantize it first \
             (`dequantize(&w, None, None, None, None, DType::F32)?` reads as f32)"
        );
    }
    let (have, want) = (host_type(dtype), host_type(requested));
    let call = |t: &str| match op {
        "read_into" => format!("read_into(&mut [{t}])"),
        _ => format!("{op}::<{t}>()"),
    };
    format!(
        "{}: the array is {dtype}, not {requested}: read it as {have} (`{}`), \
         convert it on the device first (`.astype({})?.{}`), \
         or read any dtype as f64 with `to_f64_vec()`",
        call(want),
        call(have),
        dtype_path(requested),
        call(want),
    )
}

impl Error {
    /// An [`Error::DeviceMismatch`] naming `op` and devices `a` and `b`.
    pub(crate) fn device_mismatch(op: &'static str, a: &crate::Device, b: &crate::Device) -> Error {
        Error::DeviceMismatch {
            op,
            lhs: a.to_string(),
            rhs: b.to_string(),
        }
    }

    /// An [`Error::Io`] for `path`: `what` was being done when `err` came.
    pub(crate) fn io(path: &std::path::Path, what: &str, err: &std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            kind: err.kind(),
            message: format!("{what}: {err}"),
        }
    }
}
