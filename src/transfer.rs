//! Uploads from host memory in one copy.
//!
//! `Queue::write_buffer` copies its `&[u8]` into wgpu's staging memory, so a
//! caller that first converts its data into a `Vec<u8>` copies twice.
//! [`upload`] instead hands the staging memory itself
//! (`Queue::write_buffer_with`) to a closure, which writes the elements
//! there in the device layout: one host copy from the caller's memory (a
//! slice, a memory-mapped file, a strided ndarray) to the memory wgpu
//! copies to the GPU from. Read-back, the other direction, is
//! `Array::read_into` (`src/array.rs`), which copies out of the mapped
//! read-back buffer straight into the caller's slice; a strided view read
//! without its dense copy on the device is gathered on the host through a
//! [`Span`].
//!
//! Between devices, [`Array::to_device`] joins the two: the source's
//! mapped read-back memory is copied straight into a mapped upload buffer
//! of the target's pool ([`upload_staged`]), one host copy.

use std::num::NonZeroU64;

use wgpu::WriteOnly;

use crate::graph::Primitive;
use crate::graph::primitive::ElementwiseOp;
use crate::memory::{BufferKind, Origin, PooledBuffer};
use crate::{Array, DType, Device, Error, Result};

/// Bytes `numel` elements of `dtype` take in a device buffer (before the
/// padding to [`wgpu::COPY_BUFFER_ALIGNMENT`]; whole blocks for a block
/// format).
pub(crate) fn device_bytes(numel: usize, dtype: DType) -> u64 {
    dtype.nbytes(numel) as u64
}

/// A pooled storage buffer holding `bytes` bytes that `fill` writes.
///
/// `fill` gets wgpu's staging memory for the buffer's first
/// `bytes.next_multiple_of(4)` bytes (writes must be whole words,
/// `COPY_BUFFER_ALIGNMENT`) and must write all of it: what it leaves
/// unwritten is unspecified. It is not called when `bytes` is 0. The copy
/// to the GPU happens before the next submission on the device's queue.
///
/// # Errors
/// [`Error::TooLarge`] (named `op`) when `bytes` exceed the adapter's
/// largest storage binding; [`Error::OutOfMemory`]; [`Error::DeviceLost`]
/// when the device is lost (wgpu refuses the staging write). On every
/// error the buffer is back in the pool.
pub(crate) fn upload(
    device: &Device,
    op: &'static str,
    bytes: u64,
    origin: Option<Origin>,
    fill: impl FnOnce(WriteOnly<'_, [u8]>),
) -> Result<PooledBuffer> {
    device.check_binding(op, bytes)?;
    let size = bytes.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    let dev = &device.inner;
    // Acquire and write under the queue lock: see "Why reuse while in
    // flight is safe" in src/memory/pool.rs.
    let guard = dev.pool.lock_queue();
    device.check_lost()?;
    let buffer = dev
        .pool
        .acquire(&guard, size, BufferKind::Storage, origin)?;
    if let Some(size) = NonZeroU64::new(size) {
        device.scoped(|| {
            // `write_buffer_with`, not `write_buffer`: wgpu drops a write to
            // a lost device silently, while this says so (`None`, and no
            // validation error: `scoped` records the loss).
            let mut view = dev
                .queue
                .write_buffer_with(buffer.buffer(), 0, size)
                .ok_or_else(|| Error::DeviceLost(crate::memory::REFUSED.into()))?;
            fill(view.slice(..));
            Ok(())
        })?;
    }
    drop(guard);
    Ok(buffer)
}

impl Array {
    /// This array on `device` (PyTorch `Tensor.to(device)`, MLX arrays
    /// on another stream's device): same shape, dtype and values.
    ///
    /// On the array's own device, a plain copy: lazy, one dispatch at
    /// eval, like any op (and fused with what reads it). On another
    /// device, through host memory, now: the array is evaluated on its
    /// device, read back, and its mapped bytes copied straight into a
    /// mapped upload buffer of `device`'s pool, which is copied into the
    /// result on `device`'s queue (one host copy; both staging buffers go
    /// back to their pools' caches, so a loop of moves reuses their
    /// memory), so the result is evaluated and holds no reference to the
    /// source. Two wgpu devices
    /// share no memory, so there is no device-to-device path in wgpu
    /// (see "Scale-out" in `docs/ARCHITECTURE.md`).
    ///
    /// ```
    /// use wgarray::{Array, Device};
    /// let a_dev = Device::new_default()?;
    /// let b_dev = Device::new_default()?; // another device, maybe another adapter
    /// let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &a_dev)?;
    /// let b = (&a * 2.0)?.to_device(&b_dev)?;
    /// assert_eq!(b.device(), &b_dev);
    /// assert_eq!(b.to_vec::<f32>()?, [2.0, 4.0, 6.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// On the same device none. Across devices: [`Error::MissingFeature`]
    /// when `device` cannot hold the dtype (f64 on GL);
    /// [`Error::TooLarge`] past `device`'s largest storage binding; the
    /// errors of [`crate::eval`] and of the read-back on the array's own
    /// device; [`Error::OutOfMemory`] and [`Error::DeviceLost`] on
    /// `device`. Nothing is left allocated on either device on error.
    #[track_caller]
    pub fn to_device(&self, device: &Device) -> Result<Array> {
        const OP: &str = "to_device";
        if self.device() == device {
            return Ok(Array::from_node(
                device,
                Primitive::Elementwise(ElementwiseOp::Copy),
                vec![self.clone()],
                vec![(self.shape().to_vec(), self.dtype())],
            )
            .pop()
            .expect("one output"));
        }
        device.check_dtype(OP, self.dtype())?;
        let bytes = device_bytes(self.size(), self.dtype());
        device.check_binding(OP, bytes)?;
        let origin = device.origin(|| OP);
        let (buffer, ()) = self.read_mapped(|src| {
            upload_staged(device, OP, src.len() as u64, origin, |dst| {
                write_device_bytes(dst, src);
                Ok(())
            })
        })??;
        Ok(Array::ready(
            self.shape(),
            self.dtype(),
            device,
            buffer,
            origin,
        ))
    }
}

/// A pooled storage buffer of `bytes` bytes that `fill` writes through a
/// mapped upload buffer (`BufferKind::Upload`, from the pool, so its memory
/// is reused from one call to the next rather than fresh each time as
/// wgpu's own staging for `write_buffer` is), then copied on the queue.
/// For data another library writes (MPI receives straight into it, no host
/// copy). `fill` gets the first `bytes.next_multiple_of(4)` bytes, may
/// only write them (the memory may be write-combined), and must write all
/// of them; it is called (with an empty range) when `bytes` is 0. The
/// result is on the device when this returns, as far as the queue goes:
/// later submissions see it.
///
/// # Errors
/// [`Error::TooLarge`] (named `op`) past the largest storage binding;
/// [`Error::OutOfMemory`]; [`Error::DeviceLost`], [`Error::Timeout`] while
/// mapping; `fill`'s own error. On every error both buffers are back in the
/// pool.
pub(crate) fn upload_staged<R>(
    device: &Device,
    op: &'static str,
    bytes: u64,
    origin: Option<Origin>,
    fill: impl FnOnce(WriteOnly<'_, [u8]>) -> Result<R>,
) -> Result<(PooledBuffer, R)> {
    device.check_binding(op, bytes)?;
    let size = bytes.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    let dev = &device.inner;
    let (staging, buffer) = {
        // See "Why reuse while in flight is safe" in src/memory/pool.rs.
        let guard = dev.pool.lock_queue();
        device.check_lost()?;
        let staging = dev.pool.acquire(&guard, size, BufferKind::Upload, origin)?;
        let buffer = dev
            .pool
            .acquire(&guard, size, BufferKind::Storage, origin)?;
        (staging, buffer)
    };
    if size == 0 {
        let r = fill(WriteOnly::from_mut(&mut [][..]))?;
        return Ok((buffer, r));
    }
    let r = device.scoped(|| {
        crate::memory::map_write_with(
            &dev.device,
            staging.buffer(),
            size,
            device.wait_timeout(),
            fill,
        )?
    })?;
    device.scoped(|| {
        let guard = dev.pool.lock_queue();
        let mut encoder = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgarray upload"),
            });
        encoder.copy_buffer_to_buffer(staging.buffer(), 0, buffer.buffer(), 0, size);
        let index = dev.queue.submit([encoder.finish()]);
        dev.pool.submitted(&guard);
        drop(guard);
        device.confirm_submitted(index)
    })?;
    // The staging buffer goes back to the pool: its next user maps it,
    // which waits for this copy.
    drop(staging);
    Ok((buffer, r))
}

/// Copy `src`, bytes already in the device layout, to the start of `dst`
/// and zero the rest of `dst` (the padding to a whole word).
///
/// # Panics
/// When `src` is longer than `dst` (a bug in the caller).
pub(crate) fn write_device_bytes(dst: WriteOnly<'_, [u8]>, src: &[u8]) {
    let (mut head, mut tail) = dst.split_at(src.len());
    head.copy_from_slice(src);
    tail.fill(0);
}

/// Write `src`, elements of `dtype` in the host layout of
/// [`crate::Element::as_host_bytes`] (every dtype as on the device but
/// `bool`, one byte per element, any non-zero byte true), into `dst` in the
/// device layout (a bool becomes a `u32` 0 or 1), and zero the rest of
/// `dst`.
///
/// # Panics
/// When the converted `src` is longer than `dst` (a bug in the caller).
pub(crate) fn write_host_bytes(dst: WriteOnly<'_, [u8]>, src: &[u8], dtype: DType) {
    if dtype != DType::Bool {
        return write_device_bytes(dst, src);
    }
    let (head, mut tail) = dst.split_at(src.len() * 4);
    let (words, _) = head.into_chunks::<4>();
    words.write_iter(src.iter().map(|&b| u32::from(b != 0).to_ne_bytes()));
    tail.fill(0);
}

/// The bytes of a buffer a strided view of `shape` reads (element `offset`,
/// element `strides`, `elem` bytes an element), from the first word its
/// lowest element touches to the last word its highest does, and how to
/// gather its elements from them in row-major order. For a read-back that
/// cannot copy the view dense on the device first (see
/// `Array::read_mapped`).
#[derive(Clone, Debug)]
pub(crate) struct Span {
    shape: Vec<usize>,
    strides: Vec<isize>,
    /// The first element's byte position in the span's bytes.
    start: usize,
    elem: usize,
    /// The span's first byte in the buffer (a multiple of 4).
    pub first: u64,
    /// The span's length in bytes (a multiple of 4).
    pub len: u64,
}

impl Span {
    /// The span of a non-empty view.
    pub(crate) fn of(shape: &[usize], strides: &[isize], offset: usize, elem: usize) -> Span {
        let (mut lo, mut hi) = (offset as isize, offset as isize);
        for (&n, &s) in shape.iter().zip(strides) {
            let reach = (n.max(1) as isize - 1) * s;
            lo += reach.min(0);
            hi += reach.max(0);
        }
        let first = (lo as usize * elem) / 4 * 4;
        let end = ((hi as usize + 1) * elem).next_multiple_of(4);
        Span {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            start: offset * elem - first,
            elem,
            first: first as u64,
            len: (end - first) as u64,
        }
    }

    /// The view's elements in row-major order, dense, from the span's
    /// `bytes`.
    pub(crate) fn gather(&self, bytes: &[u8]) -> Vec<u8> {
        let n: usize = self.shape.iter().product();
        let mut out = Vec::with_capacity(n * self.elem);
        let mut index = vec![0usize; self.shape.len()];
        let mut at = self.start as isize;
        let elem = self.elem as isize;
        for _ in 0..n {
            out.extend_from_slice(&bytes[at as usize..at as usize + self.elem]);
            // Next index, last axis fastest.
            for d in (0..self.shape.len()).rev() {
                index[d] += 1;
                at += self.strides[d] * elem;
                if index[d] < self.shape[d] {
                    break;
                }
                at -= self.strides[d] * elem * self.shape[d] as isize;
                index[d] = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bytes_become_device_bytes_with_zero_padding() {
        let mut out = [0xAAu8; 16];
        write_host_bytes(WriteOnly::from_mut(&mut out[..]), &[1, 0, 7], DType::Bool);
        let words: Vec<u32> = out
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, [1, 0, 1, 0]);

        let mut out = [0xAAu8; 8];
        write_host_bytes(
            WriteOnly::from_mut(&mut out[..]),
            &[1, 2, 3, 4, 5, 6],
            DType::F16,
        );
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 0, 0]);
    }

    #[test]
    fn a_span_gathers_transposed_reversed_and_broadcast_views() {
        // A [2, 3] f32 buffer of 0..6 from element 1 (one leading element).
        let bytes: Vec<u8> = (0..7u32).flat_map(|v| v.to_le_bytes()).collect();
        let read = |shape: &[usize], strides: &[isize], offset: usize| {
            let s = super::Span::of(shape, strides, offset, 4);
            let b = &bytes[s.first as usize..(s.first + s.len) as usize];
            let v: Vec<u32> = s
                .gather(b)
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (v, s.first, s.len)
        };
        // The transpose of [[1, 2, 3], [4, 5, 6]].
        assert_eq!(read(&[3, 2], &[1, 3], 1), (vec![1, 4, 2, 5, 3, 6], 4, 24));
        // Its last row reversed, and a column broadcast.
        assert_eq!(read(&[3], &[-1], 6), (vec![6, 5, 4], 16, 12));
        assert_eq!(read(&[2, 2], &[3, 0], 2), (vec![2, 2, 5, 5], 8, 16));
        // 2-byte elements from an odd element: whole words around them.
        let s = super::Span::of(&[2], &[2], 3, 2);
        assert_eq!((s.first, s.len, s.start), (4, 8, 2));
    }
}
