//! [`Array`]: the user's handle. Constructors, read-back, eval, printing.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::graph::primitive::ElementwiseOp;
use crate::graph::{Node, Primitive};
use crate::memory::{BufferKind, Origin, PooledBuffer};
use crate::shape::{check_shape, contiguous_strides, numel};
use crate::{DType, Device, Element, Error, Result, Scalar};

/// Where an evaluated array's elements live: a pooled buffer read through
/// element strides from an element offset.
#[derive(Clone, Debug)]
pub(crate) struct Storage {
    pub buffer: Arc<PooledBuffer>,
    pub strides: Vec<isize>,
    pub offset: usize,
}

impl Storage {
    /// The same buffer seen through other strides and offset (a view).
    pub(crate) fn view(&self, strides: Vec<isize>, offset: usize) -> Storage {
        Storage {
            buffer: Arc::clone(&self.buffer),
            strides,
            offset,
        }
    }

    /// The output storage of an op that writes in place into this
    /// (dense) buffer.
    pub(crate) fn dense_alias(&self) -> Storage {
        self.view(self.strides.clone(), 0)
    }
}

/// Where a read-back takes an evaluated, non-empty array's elements from
/// ([`Array::read_source`]).
pub(crate) enum ReadSource {
    /// Dense row-major elements from a word-aligned offset: the array's own
    /// storage, or that of a dense copy of it (held here until the read is
    /// done).
    Dense {
        storage: Storage,
        /// Bytes per element.
        elem: usize,
        _copy: Option<Array>,
    },
    /// A strided view whose dense copy did not fit under the memory limit:
    /// the bytes it spans, its elements gathered on the host.
    Gather {
        storage: Storage,
        span: crate::transfer::Span,
    },
}

impl ReadSource {
    /// The storage whose buffer is read.
    pub(crate) fn storage(&self) -> &Storage {
        match self {
            ReadSource::Dense { storage, .. } | ReadSource::Gather { storage, .. } => storage,
        }
    }

    /// The bytes of the buffer to copy to the host, as (offset, length),
    /// both multiples of 4, for an array of `nbytes` bytes.
    pub(crate) fn range(&self, nbytes: usize) -> (u64, u64) {
        match self {
            ReadSource::Dense { storage, elem, .. } => (
                (storage.offset * elem) as u64,
                nbytes.next_multiple_of(4) as u64,
            ),
            ReadSource::Gather { span, .. } => (span.first, span.len),
        }
    }

    /// The dense row-major bytes, from the bytes [`ReadSource::range`]
    /// copied (at least the array's bytes).
    pub(crate) fn dense<'b>(&self, bytes: &'b [u8]) -> std::borrow::Cow<'b, [u8]> {
        match self {
            ReadSource::Dense { .. } => std::borrow::Cow::Borrowed(bytes),
            ReadSource::Gather { span, .. } => std::borrow::Cow::Owned(span.gather(bytes)),
        }
    }
}

pub(crate) enum State {
    /// Not evaluated: one of `node`'s outputs (the node knows which, weakly).
    Pending { node: Arc<Node> },
    /// Evaluated.
    Ready(Storage),
    /// Taken apart while dropping (see `Node::drop`).
    Released,
    /// Its eval was refused by a lost device: never computed, and never
    /// will be on this device.
    Lost,
}

/// The descriptor every handle of one array shares.
pub(crate) struct ArrayInner {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub device: Device,
    /// The op that made the array and its call site; `Some` only when memory
    /// history was on (see [`Device::record_memory_history`]).
    pub origin: Option<Origin>,
    /// A scalar operand shared by the ops that read it (`graph::constants`):
    /// never handed to the user, so only nodes hold it.
    pub shared: bool,
    state: Mutex<State>,
}

impl ArrayInner {
    /// A descriptor; one made for an `origin` (history on) is also entered,
    /// weakly, in the device's registry for memory snapshots.
    fn new(
        shape: Vec<usize>,
        dtype: DType,
        device: &Device,
        state: State,
        origin: Option<Origin>,
    ) -> Arc<ArrayInner> {
        device.inner.live_arrays.fetch_add(1, Ordering::SeqCst);
        let inner = Arc::new(ArrayInner {
            shape,
            dtype,
            device: device.clone(),
            origin,
            shared: false,
            state: Mutex::new(state),
        });
        if origin.is_some() {
            device.inner.registry.insert(&inner);
        }
        inner
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn pending_node(&self) -> Option<Arc<Node>> {
        match &*self.lock() {
            State::Pending { node, .. } => Some(Arc::clone(node)),
            _ => None,
        }
    }

    /// Whether this array is evaluated, dense, of `shape` and `dtype`, and
    /// the only holder of its buffer, which the pool made (not the
    /// application's, `Array::from_wgpu_buffer`): then an op may write
    /// over it.
    pub(crate) fn is_sole_dense(&self, shape: &[usize], dtype: DType) -> bool {
        match &*self.lock() {
            State::Ready(s) => {
                self.shape == shape
                    && self.dtype == dtype
                    && s.offset == 0
                    && Arc::strong_count(&s.buffer) == 1
                    && !s.buffer.is_external()
                    && crate::shape::is_contiguous(shape, &s.strides)
            }
            _ => false,
        }
    }

    /// For an evaluated array: its buffer's pool id, its element offset and
    /// strides (for memory snapshots).
    pub(crate) fn buffer_view(&self) -> Option<(u64, usize, Vec<isize>)> {
        match &*self.lock() {
            State::Ready(s) => Some((s.buffer.id(), s.offset, s.strides.clone())),
            _ => None,
        }
    }

    /// The storage of an evaluated array.
    pub(crate) fn storage(&self) -> Result<Storage> {
        match &*self.lock() {
            State::Ready(s) => Ok(s.clone()),
            State::Lost => Err(Error::DeviceLost(
                "this array's eval was refused by a lost device".into(),
            )),
            _ => Err(Error::Internal(
                "an input was not evaluated before its user".into(),
            )),
        }
    }

    /// Replace the state; the old one is returned so the caller drops it
    /// outside the lock.
    pub(crate) fn set_state(&self, state: State) -> State {
        std::mem::replace(&mut *self.lock(), state)
    }

    pub(crate) fn take_state(mut self) -> State {
        let s = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(s, State::Released)
    }
}

impl Drop for ArrayInner {
    fn drop(&mut self) {
        self.device.inner.live_arrays.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A lazy n-dimensional array on a [`Device`].
///
/// Operations record a graph; nothing runs until [`Array::eval`],
/// [`crate::eval`] or a read-back ([`Array::to_vec`], [`Array::item`]).
/// Cloning is cheap (an `Arc`); clones share one descriptor, and the GPU
/// buffer goes back to the device's pool the moment the last clone, and the
/// last graph node that uses it, is gone.
///
/// ```
/// use wgarray::{Array, Device};
/// let device = Device::new_default()?;
/// let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &device)?;
/// let b = a.matmul(&a)?;
/// assert_eq!(b.to_vec::<f32>()?, vec![7.0, 10.0, 15.0, 22.0]);
/// # Ok::<(), wgarray::Error>(())
/// ```
#[derive(Clone)]
pub struct Array {
    pub(crate) inner: Arc<ArrayInner>,
}

/// Device bytes of `values` as `dtype` (each as [`DType::bits_of`] gives
/// it, little-endian), not yet padded to a whole word.
pub(crate) fn device_bytes_of(values: impl Iterator<Item = f64>, dtype: DType) -> Vec<u8> {
    let size = dtype.size_in_bytes();
    values
        .flat_map(|v| {
            let b = dtype.bits_of(v).to_le_bytes();
            b.into_iter().take(size)
        })
        .collect()
}

impl Array {
    /// Record a node and make its outputs (one per `(shape, dtype)`). With
    /// memory history on, the node and its outputs remember the op and the
    /// caller's location: every public op is `#[track_caller]` down to here.
    #[track_caller]
    pub(crate) fn from_node(
        device: &Device,
        primitive: Primitive,
        inputs: impl Into<crate::graph::Inputs>,
        outputs: Vec<(Vec<usize>, DType)>,
    ) -> Vec<Array> {
        let origin = device.origin(|| primitive.name());
        let node = Arc::new(Node::new(device, primitive, inputs, origin));
        let arrays: Vec<Array> = outputs
            .into_iter()
            .map(|(shape, dtype)| Array::output_of(&node, shape, dtype))
            .collect();
        let weak = arrays.iter().map(|a| Arc::downgrade(&a.inner)).collect();
        node.outputs.set(weak).expect("outputs are set once, here");
        arrays
    }

    /// [`Array::from_node`] for a node with one output, without the
    /// vectors around it (the eager path records one or two such nodes per
    /// op).
    #[track_caller]
    pub(crate) fn from_node1(
        device: &Device,
        primitive: Primitive,
        inputs: impl Into<crate::graph::Inputs>,
        shape: Vec<usize>,
        dtype: DType,
    ) -> Array {
        let origin = device.origin(|| primitive.name());
        let node = Arc::new(Node::new(device, primitive, inputs, origin));
        let array = Array::output_of(&node, shape, dtype);
        let weak = smallvec::smallvec![Arc::downgrade(&array.inner)];
        node.outputs.set(weak).expect("outputs are set once, here");
        array
    }

    /// A pending output of `node` (its outputs are set by the caller).
    fn output_of(node: &Arc<Node>, shape: Vec<usize>, dtype: DType) -> Array {
        Array {
            inner: ArrayInner::new(
                shape,
                dtype,
                &node.device,
                State::Pending {
                    node: Arc::clone(node),
                },
                node.origin,
            ),
        }
    }

    /// An evaluated array holding a copy of `data`, shape `shape`: one
    /// host copy, from `data` straight into wgpu's staging memory
    /// (`Queue::write_buffer_with`), which goes to the GPU with the next
    /// submission. `i64` and `u64` data become `I32` and `U32` arrays (see
    /// [`Element`]).
    ///
    /// # Errors
    /// [`Error::TooLarge`] for more than [`crate::shape::MAX_DIMS`]
    /// dimensions; [`Error::DataLength`] when `data.len()` is not the
    /// product of `shape`; [`Error::MissingFeature`] for f64 on an adapter
    /// without `SHADER_F64` and `SHADER_INT64`; [`Error::OutOfRange`] for
    /// the first `i64`/`u64` value that does not fit 32 bits (nothing is
    /// uploaded then); [`Error::TooLarge`] past the adapter's largest
    /// storage binding; [`Error::OutOfMemory`].
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], device: &Device) -> Result<Array> {
        check_shape("from_slice", shape)?;
        let expected = numel(shape);
        if data.len() != expected {
            return Err(Error::DataLength {
                len: data.len(),
                shape: shape.to_vec(),
                expected,
            });
        }
        device.check_dtype("from_slice", T::DTYPE)?;
        if let Some((index, value)) = T::first_out_of_range(data) {
            return Err(Error::OutOfRange {
                op: "from_slice",
                tensor: None,
                index,
                value,
                dtype: T::DTYPE,
            });
        }
        // One copy: from `data` straight into wgpu's staging memory.
        let origin = device.origin(|| "from_slice");
        let bytes = crate::transfer::device_bytes(data.len(), T::DTYPE);
        let buffer = crate::transfer::upload(device, "from_slice", bytes, origin, |dst| {
            T::write_device(data, dst)
        })?;
        Ok(Array::ready(shape, T::DTYPE, device, buffer, origin))
    }

    /// An evaluated array of `bytes`, already in the device layout, made by
    /// the constructor `op`.
    #[track_caller]
    fn upload(
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
        device: &Device,
        op: &'static str,
    ) -> Result<Array> {
        let origin = device.origin(|| op);
        let buffer = crate::transfer::upload(device, op, bytes.len() as u64, origin, |dst| {
            crate::transfer::write_device_bytes(dst, bytes)
        })?;
        Ok(Array::ready(shape, dtype, device, buffer, origin))
    }

    /// An evaluated array of `shape` and `dtype` whose elements are
    /// unspecified (NumPy `empty`): a buffer straight from the pool, with
    /// whatever an earlier array left in it, or zeros if it is new. For
    /// outputs that a kernel will overwrite, and for measuring the pool.
    ///
    /// Nothing reaches the GPU here (a cache hit is bookkeeping), so a lost
    /// device is reported here only once it is known (wgpu reported it, or
    /// an earlier call found it): as with PyTorch's caching allocator, the
    /// first call that uses the GPU reports a loss nobody has seen yet.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for more than [`crate::shape::MAX_DIMS`]
    /// dimensions or past the adapter's largest storage binding;
    /// [`Error::MissingFeature`] for f64 without `SHADER_F64`;
    /// [`Error::OutOfMemory`]; [`Error::DeviceLost`] once the loss is known.
    #[track_caller]
    pub fn empty(shape: &[usize], dtype: DType, device: &Device) -> Result<Array> {
        check_shape("empty", shape)?;
        device.check_dtype("empty", dtype)?;
        let bytes = numel(shape).saturating_mul(dtype.size_in_bytes()) as u64;
        device.check_binding("empty", bytes)?;
        // The known loss only: no poll, no submission (the probe that was
        // here made every allocation an empty submission and a wait).
        device.known_lost()?;
        let dev = &device.inner;
        let origin = device.origin(|| "empty");
        let buffer = {
            let guard = dev.pool.lock_queue();
            dev.pool
                .acquire(&guard, bytes, BufferKind::Storage, origin)?
        };
        Ok(Array::ready(shape, dtype, device, buffer, origin))
    }

    pub(crate) fn ready(
        shape: &[usize],
        dtype: DType,
        device: &Device,
        buffer: PooledBuffer,
        origin: Option<Origin>,
    ) -> Array {
        Array::ready_strided(
            shape,
            dtype,
            device,
            buffer,
            contiguous_strides(shape),
            0,
            origin,
        )
    }

    /// An evaluated array over `storage` (a buffer shared with others):
    /// how lowering hands a scratch result to another family's lowering.
    pub(crate) fn from_storage(
        shape: &[usize],
        dtype: DType,
        device: &Device,
        storage: Storage,
    ) -> Array {
        Array {
            inner: ArrayInner::new(shape.to_vec(), dtype, device, State::Ready(storage), None),
        }
    }

    /// An evaluated array reading `buffer` through element `strides` from
    /// element `offset` (a view that owns its buffer).
    pub(crate) fn ready_strided(
        shape: &[usize],
        dtype: DType,
        device: &Device,
        buffer: PooledBuffer,
        strides: Vec<isize>,
        offset: usize,
        origin: Option<Origin>,
    ) -> Array {
        Array {
            inner: ArrayInner::new(
                shape.to_vec(),
                dtype,
                device,
                State::Ready(Storage {
                    buffer: Arc::new(buffer),
                    strides,
                    offset,
                }),
                origin,
            ),
        }
    }

    /// A 0-dimensional array holding `value` as `dtype`, evaluated at once
    /// (uploaded now; [`Array::full`] with shape `[]` is the lazy one).
    /// `value` converts as in [`Array::full`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an integer `value` outside an integer
    /// `dtype`'s range; [`Error::MissingFeature`] for f64 without
    /// `SHADER_F64`; [`Error::OutOfMemory`].
    #[track_caller]
    pub fn scalar(value: impl Scalar, dtype: DType, device: &Device) -> Result<Array> {
        let bits = value.value().bits("scalar", dtype)?;
        device.check_dtype("scalar", dtype)?;
        let mut bytes = bits.to_le_bytes()[..dtype.size_in_bytes()].to_vec();
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        Array::upload(&bytes, &[], dtype, device, "scalar")
    }

    /// An array of `shape` with every element `value` (NumPy `full`), of
    /// `dtype`. Lazy: no buffer until eval, where it is filled by a kernel
    /// (or, read by an elementwise kernel, passed to it as a parameter).
    ///
    /// `value` is any [`Scalar`]: `Array::full(&[2, 3], 0.5, DType::F16,
    /// &device)`, `Array::full(&[4], -1, DType::I8, &device)`. Floats
    /// round to nearest even into f16, bf16 and f32 (f64 keeps them);
    /// floats into integers truncate toward zero and saturate, as
    /// [`Array::astype`]; anything into bool is `value != 0`.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for more than [`crate::shape::MAX_DIMS`]
    /// dimensions, an element count past `usize`, or more bytes than the
    /// adapter's largest storage binding (checked at the call, naming the
    /// constructor: an array's buffer is one binding);
    /// [`Error::InvalidArgument`] for an integer `value` outside an integer
    /// `dtype`'s range (`-1` as u8: NumPy 2 refuses it too);
    /// [`Error::MissingFeature`] for f64 without `SHADER_F64`.
    #[track_caller]
    pub fn full(
        shape: &[usize],
        value: impl Scalar,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        Array::filled("full", shape, value, dtype, device)
    }

    /// [`Array::full`], its errors naming `op`.
    #[track_caller]
    fn filled(
        op: &'static str,
        shape: &[usize],
        value: impl Scalar,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        check_shape(op, shape)?;
        let bits = value.value().bits(op, dtype)?;
        device.check_dtype(op, dtype)?;
        device.check_array(op, shape, dtype)?;
        Ok(Array::full_bits(shape, bits, dtype, device))
    }

    /// A lazy 0-d constant `bits` of `dtype` read by an op as its scalar
    /// operand: while memory history is off, equal constants share one node
    /// (`graph::constants`), so a chain of `x + 1.0` records one node per op
    /// rather than two. Only ops may read it: it is never returned to the
    /// user (the fusion planner counts on it).
    #[track_caller]
    pub(crate) fn operand_constant(bits: u64, dtype: DType, device: &Device) -> Array {
        let table = &device.inner.constants;
        if device.inner.history.load(Ordering::Relaxed) {
            return Array::full_bits(&[], bits, dtype, device);
        }
        if let Some(inner) = table.get(bits, dtype) {
            return Array { inner };
        }
        let node = Arc::new(Node::new(device, Primitive::Full { bits }, vec![], None));
        let mut inner = ArrayInner::new(
            Vec::new(),
            dtype,
            device,
            State::Pending {
                node: Arc::clone(&node),
            },
            None,
        );
        Arc::get_mut(&mut inner)
            .expect("just made, not yet shared")
            .shared = true;
        node.outputs
            .set(smallvec::smallvec![Arc::downgrade(&inner)])
            .expect("outputs are set once, here");
        table.put(bits, dtype, Arc::downgrade(&inner));
        Array { inner }
    }

    /// A lazy constant of a checked shape and a dtype the device has whose
    /// every element has the bits `bits` (as [`DType::bits_of`] gives them).
    #[track_caller]
    pub(crate) fn full_bits(shape: &[usize], bits: u64, dtype: DType, device: &Device) -> Array {
        Array::from_node1(
            device,
            Primitive::Full { bits },
            vec![],
            shape.to_vec(),
            dtype,
        )
    }

    /// `full(shape, 0, dtype)` (NumPy `zeros`).
    ///
    /// # Errors
    /// As [`Array::full`].
    #[track_caller]
    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Array> {
        check_shape("zeros", shape)?;
        device.check_dtype("zeros", dtype)?;
        device.check_array("zeros", shape, dtype)?;
        Ok(Array::full_bits(shape, 0, dtype, device))
    }

    /// `full(shape, 1, dtype)` (NumPy `ones`).
    ///
    /// # Errors
    /// As [`Array::full`].
    #[track_caller]
    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Array> {
        Array::filled("ones", shape, true, dtype, device)
    }

    /// NumPy's `arange(start, stop, step)`: `ceil((stop - start) / step)`
    /// values `start + i * step`, computed in f64 and converted to `dtype`
    /// as [`Array::full`] converts (floats round to nearest even, integers
    /// truncate toward zero). Computed on the host and uploaded at the call.
    ///
    /// An infinite `step` gives `[start]` when it points from `start`
    /// towards `stop`, else an empty array, as NumPy (since 1.15) and MLX.
    ///
    /// Differs from NumPy and MLX on purpose: with an integer `dtype` and a
    /// fractional `start` or `step`, each value is `start + i * step`
    /// truncated (`arange(0.0, 3.0, 0.5, DType::I32)` is `[0, 0, 1, 1, 2,
    /// 2]`), where NumPy and MLX convert `start` and `start + step` first
    /// and step by their difference (six zeros): the values you asked for,
    /// not an artefact of the conversion order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the argument when `step` is 0 or
    /// NaN, or `start` or `stop` is not finite; [`Error::MissingFeature`]
    /// for f64 without `SHADER_F64`; [`Error::TooLarge`] past the adapter's
    /// largest storage binding.
    #[track_caller]
    pub fn arange(
        start: f64,
        stop: f64,
        step: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        let bad = |arg: &str, why: &str| {
            Err(Error::InvalidArgument(format!(
                "arange({start}, {stop}, {step}): `{arg}` {why}"
            )))
        };
        if !start.is_finite() {
            return bad("start", "must be finite");
        }
        if !stop.is_finite() {
            return bad("stop", "must be finite");
        }
        if step == 0.0 || step.is_nan() {
            return bad("step", "must be non-zero and not NaN");
        }
        let n = if step.is_infinite() {
            usize::from((stop - start) * step.signum() > 0.0)
        } else {
            ((stop - start) / step).ceil().max(0.0) as usize
        };
        device.check_dtype("arange", dtype)?;
        // Refuse before building the host vector.
        device.check_binding("arange", n.saturating_mul(dtype.size_in_bytes()) as u64)?;
        let values: Vec<f64> = (0..n)
            .map(|i| {
                if i == 0 {
                    start
                } else {
                    start + i as f64 * step
                }
            })
            .collect();
        Array::from_f64_values(&values, dtype, device, "arange")
    }

    /// An evaluated 1-D array of `values` converted to `dtype` as
    /// [`DType::bits_of`] converts, made by the constructor `op` (which
    /// checked the size against the adapter's limit and the dtype against
    /// its features before building `values`).
    #[track_caller]
    pub(crate) fn from_f64_values(
        values: &[f64],
        dtype: DType,
        device: &Device,
        op: &'static str,
    ) -> Result<Array> {
        let mut bytes = device_bytes_of(values.iter().copied(), dtype);
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        Array::upload(&bytes, &[values.len()], dtype, device, op)
    }

    /// The shape: one length per dimension (`[]` for a scalar).
    pub fn shape(&self) -> &[usize] {
        &self.inner.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.inner.shape.len()
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        numel(&self.inner.shape)
    }

    /// Bytes the elements take on the device: `size() *
    /// dtype().size_in_bytes()`, or for a block format its packed size
    /// ([`DType::nbytes`]: `size() / block_size() * size_in_bytes()`).
    pub fn nbytes(&self) -> usize {
        self.inner.dtype.nbytes(self.size())
    }

    /// The device the array lives on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Whether the array has been evaluated.
    pub fn is_evaluated(&self) -> bool {
        matches!(&*self.inner.lock(), State::Ready(_))
    }

    /// Evaluate this array (see [`crate::eval`]).
    ///
    /// # Errors
    /// As [`crate::eval`].
    pub fn eval(&self) -> Result<()> {
        crate::eval(&[self])
    }

    /// Evaluate, then copy the elements back in row-major order. A strided
    /// view is copied dense on the device first; where that copy would pass
    /// the memory limit, the bytes it spans are read and gathered on the
    /// host. The staging buffer is not counted against the limit
    /// ([`Device::set_memory_limit`]), so a result that was computed can be
    /// read.
    ///
    /// # Errors
    /// [`Error::ReadDType`] when `T` is not this array's dtype (its
    /// message says how to read it); the errors of [`crate::eval`];
    /// [`Error::Readback`] when mapping fails; [`Error::OutOfMemory`] (with
    /// `limit` `u64::MAX`) when the driver cannot give the staging buffer.
    #[track_caller]
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_read::<T>("to_vec")?;
        self.read_mapped(T::from_device_bytes)
    }

    /// [`Error::ReadDType`] naming `op` unless `T` reads this array's dtype.
    pub(crate) fn check_read<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::ReadDType {
                op,
                dtype: self.dtype(),
                requested: T::DTYPE,
            });
        }
        Ok(())
    }

    /// Evaluate, then copy the elements in row-major order into `dst`,
    /// without allocating host memory: the bytes go from the mapped
    /// read-back buffer (from the device's pool, reused from one call to
    /// the next) straight into `dst`. For loops that read every step. (A
    /// strided view whose dense copy would pass the memory limit is
    /// gathered on the host first, into a temporary: see
    /// [`Device::set_memory_limit`].)
    ///
    /// ```
    /// use wgarray::{Array, Device};
    /// let device = Device::new_default()?;
    /// let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &device)?;
    /// let mut out = [0.0f32; 4];
    /// a.transpose().read_into(&mut out)?;
    /// assert_eq!(out, [1.0, 3.0, 2.0, 4.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ReadDType`] when `T` is not this array's dtype;
    /// [`Error::DataLength`] when `dst.len()` is not [`Array::size`];
    /// the errors of [`crate::eval`]; [`Error::Readback`] when mapping
    /// fails. On every error `dst` is left as it was.
    pub fn read_into<T: Element>(&self, dst: &mut [T]) -> Result<()> {
        self.check_read::<T>("read_into")?;
        if dst.len() != self.size() {
            return Err(Error::DataLength {
                len: dst.len(),
                shape: self.shape().to_vec(),
                expected: self.size(),
            });
        }
        self.read_mapped(|bytes| T::copy_from_device_bytes(bytes, dst))
    }

    /// The only element of a one-element array.
    ///
    /// # Errors
    /// [`Error::ReadDType`] (naming `item`) when `T` is not this array's
    /// dtype; [`Error::InvalidArgument`] when the array does not have
    /// exactly one element; otherwise as [`Array::to_vec`].
    #[track_caller]
    pub fn item<T: Element>(&self) -> Result<T> {
        self.check_read::<T>("item")?;
        if self.size() != 1 {
            return Err(Error::InvalidArgument(format!(
                "item() needs exactly one element, the array has shape {:?}",
                self.shape()
            )));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// Evaluate, read back, and give `f` the dense row-major bytes
    /// (exactly [`Array::nbytes`]) while the read-back buffer is mapped.
    ///
    /// One evaluator: a strided view, or a 2-byte one starting mid-word, is
    /// first copied dense by a `Copy` node evaluated like any other; then
    /// the dense bytes are copied to a staging buffer and mapped. Where
    /// that copy would pass the memory limit, the bytes the view spans are
    /// read instead and its elements gathered on the host (see
    /// [`Device::set_memory_limit`]: staging is not counted).
    ///
    /// An array not evaluated yet whose result is dense is read in one
    /// submission: the copy to the staging buffer is encoded after the
    /// eval's kernels, in the same command buffer (one hand-off to the
    /// driver and one wait, not two of each; issue 36 item 3).
    #[track_caller]
    pub(crate) fn read_mapped<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let nbytes = self.nbytes();
        if nbytes > 0 && self.inner.pending_node().is_some() {
            let device = self.device();
            let dev = &device.inner;
            let origin = device.origin(|| "read-back");
            let elem = self.dtype().size_in_bytes();
            let size = nbytes.next_multiple_of(4) as u64;
            let mut staged: Option<(PooledBuffer, Storage)> = None;
            let mut copy = |guard: &crate::memory::QueueGuard<'_>,
                            encoder: &mut wgpu::CommandEncoder| {
                // Where the result is not dense, or no staging buffer can
                // be had, nothing is copied here: the read below does it
                // the long way (and says why it cannot).
                let Ok(storage) = self.inner.storage() else {
                    return;
                };
                let dense = crate::shape::is_contiguous(self.shape(), &storage.strides)
                    && (storage.offset * elem).is_multiple_of(4);
                if !dense {
                    return;
                }
                let Ok(staging) = dev.pool.acquire(guard, size, BufferKind::Readback, origin)
                else {
                    return;
                };
                encoder.copy_buffer_to_buffer(
                    storage.buffer.buffer(),
                    (storage.offset * elem) as u64,
                    staging.buffer(),
                    0,
                    size,
                );
                staged = Some((staging, storage));
            };
            let (_, index) = crate::graph::eval::evaluate_then(&[self], Some(&mut copy))?;
            if let (Some(index), Some((staging, _storage))) = (index, staged) {
                return device.scoped(|| {
                    crate::memory::map_read_with(
                        &dev.device,
                        staging.buffer(),
                        ..size,
                        index,
                        device.wait_timeout(),
                        |b| f(&b[..nbytes]),
                    )
                });
            }
        }
        let Some(source) = self.read_source()? else {
            return Ok(f(&[]));
        };
        let nbytes = self.nbytes();
        let device = self.device();
        let dev = &device.inner;
        let origin = device.origin(|| "read-back");
        let (offset, size) = source.range(nbytes);
        device.scoped(|| {
            crate::memory::read_back(
                &dev.pool,
                &dev.queue,
                source.storage().buffer.buffer(),
                offset,
                size,
                origin,
                device.wait_timeout(),
                |b| f(&source.dense(b)[..nbytes]),
            )
        })
    }

    /// Evaluate, and say where a read-back finds the elements (see
    /// [`ReadSource`]): this array's own storage when it is dense from a
    /// word-aligned offset, else that of a `Copy` of it, evaluated like any
    /// other node, or, when that copy would pass the memory limit, the
    /// bytes the view spans. `None` for an empty array (after checking the
    /// device, since nothing else will).
    #[track_caller]
    pub(crate) fn read_source(&self) -> Result<Option<ReadSource>> {
        // No loss probe when nothing is pending: the read-back's own
        // submission tells.
        crate::graph::eval::evaluate(&[self])?;
        if self.nbytes() == 0 {
            self.device().probe_lost()?;
            return Ok(None);
        }
        let storage = self.inner.storage()?;
        let elem = self.dtype().size_in_bytes();
        let aligned = crate::shape::is_contiguous(self.shape(), &storage.strides)
            && (storage.offset * elem).is_multiple_of(4);
        if aligned {
            return Ok(Some(ReadSource::Dense {
                storage,
                elem,
                _copy: None,
            }));
        }
        let copy = Array::from_node(
            self.device(),
            Primitive::Elementwise(ElementwiseOp::Copy),
            vec![self.clone()],
            vec![(self.shape().to_vec(), self.dtype())],
        )
        .pop()
        .expect("one output");
        match crate::graph::eval::evaluate(&[&copy]) {
            Ok(_) => Ok(Some(ReadSource::Dense {
                storage: copy.inner.storage()?,
                elem,
                _copy: Some(copy),
            })),
            Err(Error::OutOfMemory { .. }) => {
                let span =
                    crate::transfer::Span::of(self.shape(), &storage.strides, storage.offset, elem);
                Ok(Some(ReadSource::Gather { storage, span }))
            }
            Err(e) => Err(e),
        }
    }

    /// The values as f64, row-major (for printing and tests); for a block
    /// format, its elements dequantized to f32 ([`crate::dequantize`]).
    ///
    /// # Errors
    /// As [`Array::to_vec`].
    #[track_caller]
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(match self.dtype() {
            DType::F32 => self.to_vec::<f32>()?.into_iter().map(f64::from).collect(),
            DType::F16 => self
                .to_vec::<half::f16>()?
                .into_iter()
                .map(|x| x.to_f64())
                .collect(),
            DType::BF16 => self
                .to_vec::<half::bf16>()?
                .into_iter()
                .map(|x| x.to_f64())
                .collect(),
            DType::F64 => self.to_vec::<f64>()?,
            DType::I32 => self.to_vec::<i32>()?.into_iter().map(f64::from).collect(),
            DType::U32 => self.to_vec::<u32>()?.into_iter().map(f64::from).collect(),
            DType::I16 => self.to_vec::<i16>()?.into_iter().map(f64::from).collect(),
            DType::U16 => self.to_vec::<u16>()?.into_iter().map(f64::from).collect(),
            DType::I8 => self.to_vec::<i8>()?.into_iter().map(f64::from).collect(),
            DType::U8 => self.to_vec::<u8>()?.into_iter().map(f64::from).collect(),
            DType::Bool => self
                .to_vec::<bool>()?
                .into_iter()
                .map(|b| b as u8 as f64)
                .collect(),
            // A block format's values are its dequantized elements.
            DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => {
                crate::dequantize(self, None, None, None, None, DType::F32)?.to_f64_vec()?
            }
        })
    }
}

/// NumPy's print threshold: arrays with more elements are summarised.
const PRINT_THRESHOLD: usize = 1000;
/// NumPy's `edgeitems`: elements shown at each end of a summarised axis.
const EDGE_ITEMS: usize = 3;

fn format_value(v: f64, dtype: DType) -> String {
    match dtype {
        DType::Bool => (if v != 0.0 { "True" } else { "False" }).to_string(),
        d if d.is_integer() => format!("{v}"),
        _ if v.is_nan() => "nan".to_string(),
        _ if v.is_infinite() => (if v > 0.0 { "inf" } else { "-inf" }).to_string(),
        // NumPy prints integral floats as `1.`.
        _ if v.fract() == 0.0 && v.abs() < 1e16 => format!("{v:.0}."),
        d if d == DType::F32 || d.is_quantized() => format!("{}", v as f32),
        _ => format!("{v}"),
    }
}

/// Pad float strings so their decimal points line up, as NumPy does:
/// integer parts right-aligned, fractions left-aligned.
fn align_decimal_points(strings: &mut [String]) {
    let split = |s: &str| match s.find('.') {
        Some(i) => (i, s.len() - i),
        None => (s.len(), 0),
    };
    let int_w = strings.iter().map(|s| split(s).0).max().unwrap_or(0);
    let frac_w = strings.iter().map(|s| split(s).1).max().unwrap_or(0);
    for s in strings.iter_mut() {
        let (i, f) = split(s);
        *s = format!("{}{s}{}", " ".repeat(int_w - i), " ".repeat(frac_w - f));
    }
}

fn format_nested(
    out: &mut String,
    values: &[String],
    shape: &[usize],
    width: usize,
    depth: usize,
    summarise: bool,
    sep: &str,
) {
    if shape.is_empty() {
        out.push_str(&format!("{:>width$}", values[0]));
        return;
    }
    let n = shape[0];
    let inner: usize = shape[1..].iter().product();
    out.push('[');
    let idx: Vec<Option<usize>> = if summarise && n > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE_ITEMS..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    for (j, i) in idx.iter().enumerate() {
        if j > 0 {
            out.push_str(if shape.len() > 1 { sep.trim_end() } else { sep });
            if shape.len() > 1 {
                out.push('\n');
                out.push_str(&"\n".repeat(shape.len() - 2));
                out.push_str(&" ".repeat(depth + 1));
            }
        }
        match i {
            Some(i) => format_nested(
                out,
                &values[i * inner..(i + 1) * inner],
                &shape[1..],
                width,
                depth + 1,
                summarise,
                sep,
            ),
            None => out.push_str("..."),
        }
    }
    out.push(']');
}

impl Array {
    fn format(&self, sep: &str, indent: usize) -> std::result::Result<String, Error> {
        let values = self.to_f64_vec()?;
        let mut strings: Vec<String> = values
            .iter()
            .map(|&v| format_value(v, self.dtype()))
            .collect();
        if self.dtype().is_float() || self.dtype().is_quantized() {
            align_decimal_points(&mut strings);
        }
        let width = strings.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut out = String::new();
        let summarise = self.size() > PRINT_THRESHOLD;
        format_nested(
            &mut out,
            &strings,
            self.shape(),
            width,
            indent,
            summarise,
            sep,
        );
        Ok(out)
    }
}

impl fmt::Display for Array {
    /// Like NumPy's `str()`: `[[1. 2.]\n [3. 4.]]`; evaluates the array.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.format(" ", 0) {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "<unevaluable array: {e}>"),
        }
    }
}

impl fmt::Debug for Array {
    /// Like NumPy's `repr()`: `array([[1., 2.], [3., 4.]], dtype=float32)`;
    /// evaluates the array.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.format(", ", 6) {
            Ok(s) => write!(f, "array({s}, dtype={})", self.dtype()),
            Err(e) => write!(
                f,
                "array(<unevaluable: {e}>, shape={:?}, dtype={})",
                self.shape(),
                self.dtype()
            ),
        }
    }
}
