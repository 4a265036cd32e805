//! The application's own wgpu: arrays over its buffers
//! ([`Array::from_wgpu_buffer`]) and its passes over arrays' buffers
//! ([`Array::wgpu_buffer`]). The device side is
//! [`crate::Device::from_wgpu`]; the ordering rules on a shared queue are
//! in its docs, and `tests/interop.rs` checks them.

use std::sync::Arc;

use crate::memory::PooledBuffer;
use crate::shape::{check_shape, contiguous_strides, numel};
use crate::{Array, DType, Device, Error, Limit, Result};

/// The usage flags an array over an application's buffer needs, with what
/// wgarray does with each.
const NEEDED_USAGES: [(wgpu::BufferUsages, &str, &str); 2] = [
    (
        wgpu::BufferUsages::STORAGE,
        "STORAGE",
        "wgarray's kernels read every array through a storage binding",
    ),
    (
        wgpu::BufferUsages::COPY_SRC,
        "COPY_SRC",
        "read-back (to_vec) and Array::to_device copy an array out",
    ),
];

/// An evaluated array's buffer, for binding in the application's own
/// passes ([`Array::wgpu_buffer`]): the buffer, and the byte range the
/// array's elements take in it, row-major in wgarray's device layout (see
/// [`DType`]: 1- and 2-byte dtypes packed little-endian into 32-bit words,
/// bool one `u32` per element, f64 two words, low first).
///
/// The view keeps the buffer on loan from the pool (it counts as active
/// memory): while it lives, wgarray hands the buffer to no other array,
/// even if the array itself is dropped. Submit the work that uses it
/// before dropping the view; wgarray's later work on the buffer is then
/// ordered after that work on the queue. A bind group made from it must
/// not be used after the view is gone.
#[derive(Clone, Debug)]
pub struct WgpuBuffer {
    buffer: Arc<PooledBuffer>,
    offset: u64,
    size: u64,
}

impl WgpuBuffer {
    /// The wgpu buffer (the device's own for arrays wgarray computed, the
    /// application's for arrays over its buffers).
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.buffer()
    }

    /// Where the array's first element starts, in bytes from the start of
    /// the buffer: 0 for an array wgarray computed; a view's offset for a
    /// contiguous slice (not always a multiple of the device's
    /// `min_storage_buffer_offset_alignment`, nor of 4 for a 1- or 2-byte
    /// dtype).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The bytes the elements take: [`Array::nbytes`] (not rounded to a
    /// word; the buffer has room for the rounding).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The range as a binding of [`WgpuBuffer::offset`] and
    /// [`WgpuBuffer::size`] rounded up to a whole word (storage bindings
    /// are whole words); the whole buffer for an empty array. A storage
    /// binding also needs the offset to be a multiple of the device's
    /// `min_storage_buffer_offset_alignment` (256 on most adapters), which
    /// arrays wgarray computed meet (offset 0): for a view that does not,
    /// bind [`WgpuBuffer::buffer`] whole and index from the offset.
    pub fn binding(&self) -> wgpu::BufferBinding<'_> {
        wgpu::BufferBinding {
            buffer: self.buffer.buffer(),
            offset: self.offset,
            size: wgpu::BufferSize::new(self.size.next_multiple_of(4)),
        }
    }
}

impl Array {
    /// An array of `shape` and `dtype` over the application's own wgpu
    /// `buffer` from byte `offset`, without a copy: evaluated at once, its
    /// elements are the buffer's bytes in wgarray's device layout (see
    /// [`DType`]; row-major, 1- and 2-byte dtypes packed little-endian,
    /// bool one `u32` 0 or 1 per element, f64 two words, low first), for a
    /// `device` made on the same wgpu device ([`Device::from_wgpu`]).
    ///
    /// The array keeps a handle to the buffer (a wgpu `Buffer` clone), so
    /// the buffer lives at least as long as the array and every array and
    /// graph node that reads it. It is never returned to wgarray's pool,
    /// reused for another array, or written by wgarray (no op writes its
    /// result over it, as ops may over a buffer only they hold); its bytes
    /// are not active memory but count in [`crate::MemoryStats::external`]
    /// while an array holds it. Don't `destroy()` it meanwhile.
    ///
    /// wgarray reads the buffer when the work that reads it is submitted,
    /// at the eval of an array computed from it (or a read-back), not when
    /// this array is made: see "Ordering on the shared queue" in
    /// [`Device::from_wgpu`].
    ///
    /// ```
    /// # let inst = wgarray::wgpu::Instance::new(wgarray::wgpu::InstanceDescriptor::new_without_display_handle());
    /// # let adapter = pollster::block_on(inst.request_adapter(&Default::default())).unwrap();
    /// # let (device, queue) = pollster::block_on(adapter.request_device(&Default::default())).unwrap();
    /// use wgarray::wgpu::{self, util::DeviceExt};
    /// use wgarray::{Array, DType, Device};
    /// let buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
    ///     label: Some("the application's"),
    ///     contents: bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]),
    ///     usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    /// });
    /// let dev = Device::from_wgpu(&adapter, device, queue)?;
    /// let a = Array::from_wgpu_buffer(&buffer, 4, &[3], DType::F32, &dev)?;
    /// assert_eq!((&a * 2.0)?.to_vec::<f32>()?, [4.0, 6.0, 8.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// In this order: [`Error::TooLarge`] for more than
    /// [`crate::shape::MAX_DIMS`] dimensions; [`Error::MissingFeature`]
    /// for f64 on a device without `SHADER_F64` and `SHADER_INT64`;
    /// [`Error::BufferUsage`] naming the first flag of `STORAGE` and
    /// `COPY_SRC` the buffer lacks; [`Error::InvalidArgument`] for an
    /// `offset` that is not a multiple of the dtype's size, or elements
    /// (their last word) past the end of the buffer; [`Error::TooLarge`]
    /// for a buffer larger than the device's largest storage binding
    /// (kernels bind the whole buffer); [`Error::InvalidArgument`] for a
    /// buffer of another wgpu device; [`Error::DeviceLost`].
    #[track_caller]
    pub fn from_wgpu_buffer(
        buffer: &wgpu::Buffer,
        offset: u64,
        shape: &[usize],
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        const OP: &str = "from_wgpu_buffer";
        check_shape(OP, shape)?;
        device.check_dtype(OP, dtype)?;
        let usage = buffer.usage();
        if let Some((_, flag, why)) = NEEDED_USAGES.iter().find(|(u, ..)| !usage.contains(*u)) {
            return Err(Error::BufferUsage {
                op: OP,
                flag,
                usage: format!("{usage:?}"),
                why,
            });
        }
        let elem = dtype.size_in_bytes() as u64;
        if !offset.is_multiple_of(elem) {
            return Err(Error::InvalidArgument(format!(
                "{OP}: byte offset {offset} is not a multiple of {elem}, the size of one {dtype}"
            )));
        }
        let nbytes = numel(shape) as u64 * elem;
        let end = (offset + nbytes).next_multiple_of(4);
        if end > buffer.size() {
            return Err(Error::InvalidArgument(format!(
                "{OP}: {} elements of {dtype} from byte {offset} end at byte {end} \
                 (rounded to a whole word), past the buffer's {} bytes",
                numel(shape),
                buffer.size()
            )));
        }
        let max = device.limits().max_storage_buffer_binding_size;
        if buffer.size() > max {
            return Err(Error::TooLarge {
                op: OP,
                limit: Limit::StorageBinding,
                value: buffer.size(),
                max,
            });
        }
        same_wgpu_device(device, buffer)?;
        let origin = device.origin(|| OP);
        let pooled = device.inner.pool.adopt(buffer.clone());
        Ok(Array::ready_strided(
            shape,
            dtype,
            device,
            pooled,
            contiguous_strides(shape),
            (offset / elem) as usize,
            origin,
        ))
    }

    /// The buffer of this array, evaluated (its graph is evaluated and
    /// submitted first if it is pending), for binding in the application's
    /// own passes on the same wgpu device ([`Device::from_wgpu`]), without
    /// a copy: see [`WgpuBuffer`] for the range and how long it is valid.
    /// Work the application submits on the queue after this call sees the
    /// array's values, with no [`Device::synchronize`] needed.
    ///
    /// # Errors
    /// The errors of [`crate::eval`]; [`Error::InvalidArgument`] for a
    /// strided view (a transpose, a step slice, a broadcast): make it
    /// dense with [`Array::contiguous`] first.
    pub fn wgpu_buffer(&self) -> Result<WgpuBuffer> {
        self.eval()?;
        let storage = self.inner.storage()?;
        if !crate::shape::is_contiguous(self.shape(), &storage.strides) {
            return Err(Error::InvalidArgument(format!(
                "wgpu_buffer: the array of shape {:?} is a strided view (element strides {:?}); \
                 make it dense with .contiguous() first",
                self.shape(),
                storage.strides
            )));
        }
        let elem = self.dtype().size_in_bytes() as u64;
        Ok(WgpuBuffer {
            offset: storage.offset as u64 * elem,
            size: self.nbytes() as u64,
            buffer: storage.buffer,
        })
    }
}

/// [`Error::InvalidArgument`] when `buffer` belongs to another wgpu device
/// than `device`'s: wgpu refuses a bind group that mixes devices, so one
/// bind group of the buffer alone tells (made, never used). A buffer of
/// another `wgpu::Instance` is worse: wgpu-core keeps ids per instance, and
/// its id lookup asserts (a panic, printed by the panic hook) before it
/// changes anything; that panic is caught here and becomes the same error.
fn same_wgpu_device(device: &Device, buffer: &wgpu::Buffer) -> Result<()> {
    let d = device.wgpu_device();
    let check = || {
        device.scoped(|| {
            let layout = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("wgarray from_wgpu_buffer check"),
                entries: &[wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only: true },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                }],
            });
            let _group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("wgarray from_wgpu_buffer check"),
                layout: &layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: 0,
                    resource: buffer.as_entire_binding(),
                }],
            });
            Ok(())
        })
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).unwrap_or_else(|p| {
        Err(Error::Validation(
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("wgpu panicked")
                .to_string(),
        ))
    });
    match r {
        Err(Error::Validation(m)) => Err(Error::InvalidArgument(format!(
            "from_wgpu_buffer: wgpu refused the buffer on {device} \
             (a buffer of another wgpu device?): {m}"
        ))),
        r => r,
    }
}
