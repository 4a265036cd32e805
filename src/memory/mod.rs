//! GPU memory: the per-device buffer pool, its statistics, and its history
//! (what each buffer was handed out for, and the timeline of events).
//!
//! This module knows nothing about arrays or graphs. It hands out
//! [`PooledBuffer`]s and takes them back in their `Drop`, synchronously; the
//! [`Origin`] a caller attaches to a buffer is an opaque label to it.

mod history;
mod pool;

pub use history::{Holder, MemoryEvent, MemoryEventKind, MemoryTimeline, Origin};
pub(crate) use history::{json_origin, json_string};
pub use pool::MemoryStats;
pub(crate) use pool::{BufferKind, Pool, PooledBuffer, QueueGuard, default_cache_limit};

/// Copy `size` bytes of `src` from byte `offset` (both multiples of 4) to
/// the host and give them to `f` while they are mapped: a staging buffer
/// from `pool` (handed out for `origin`, `None` unless history is on), one
/// copy command submitted on `queue` under the pool's queue lock, then
/// [`map_read_with`].
///
/// # Errors
/// [`crate::Error::OutOfMemory`] for the staging buffer,
/// [`crate::Error::Readback`] when waiting or mapping fails.
pub(crate) fn read_back<R>(
    pool: &std::sync::Arc<Pool>,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    offset: u64,
    size: u64,
    origin: Option<Origin>,
    f: impl FnOnce(&[u8]) -> R,
) -> crate::Result<R> {
    let guard = pool.lock_queue();
    let staging = pool.acquire(&guard, size, BufferKind::Readback, origin)?;
    let mut encoder = pool
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("wgarray read-back"),
        });
    encoder.copy_buffer_to_buffer(src, offset, staging.buffer(), 0, size);
    let index = queue.submit([encoder.finish()]);
    map_read_with(pool.device(), staging.buffer(), ..size, index, f)
}

/// Map `range` of a `MAP_READ` buffer once submission `index` is done, copy
/// the bytes out and unmap it.
///
/// # Errors
/// [`crate::Error::Readback`] when waiting or mapping fails.
pub(crate) fn map_read(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    range: std::ops::RangeTo<u64>,
    index: wgpu::SubmissionIndex,
) -> crate::Result<Vec<u8>> {
    map_read_with(device, buffer, range, index, <[u8]>::to_vec)
}

/// As [`map_read`], but `f` gets the mapped bytes in place (no copy).
pub(crate) fn map_read_with<R>(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    range: std::ops::RangeTo<u64>,
    index: wgpu::SubmissionIndex,
    f: impl FnOnce(&[u8]) -> R,
) -> crate::Result<R> {
    let err = |e: &dyn std::fmt::Display| crate::Error::Readback(e.to_string());
    let slice = buffer.slice(range);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        })
        .map_err(|e| err(&e))?;
    rx.recv().map_err(|e| err(&e))?.map_err(|e| err(&e))?;
    let out = f(&slice.get_mapped_range().map_err(|e| err(&e))?);
    buffer.unmap();
    Ok(out)
}
