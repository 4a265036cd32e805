//! GPU memory: the per-device buffer pool, its statistics and its history
//! (what each buffer was handed out for, and the timeline of events),
//! read-back, and waiting for the GPU (blocking here, asynchronous in
//! `pending.rs`).
//!
//! This module knows nothing about arrays or graphs. It hands out
//! [`PooledBuffer`]s and takes them back in their `Drop`, synchronously; the
//! [`Origin`] a caller attaches to a buffer is an opaque label to it.
//!
//! Every wait for the GPU here is bounded (a `timeout` from the caller,
//! the device's wait limit) and none holds the pool's queue lock: see "Lock
//! order" in docs/ARCHITECTURE.md.

mod history;
mod pending;
mod pool;

use std::time::{Duration, Instant};

pub use history::{Holder, MemoryEvent, MemoryEventKind, MemoryTimeline, Origin};
pub(crate) use history::{json_origin, json_string};
pub(crate) use pending::{MapRead, Poller, Slot, Source, read_back_async, work_done};
pub use pool::MemoryStats;
pub(crate) use pool::{
    BufferKind, PAGE, Pool, PooledBuffer, QueueGuard, default_cache_limit, round_size,
};

use crate::{Error, Result};

/// The longest single `poll` of a wait. A long wait is a loop of these:
/// wgpu's GL backend holds its context lock for the whole of one poll (and
/// clamps a poll to about 2.1 s), and another thread that cannot get that
/// lock within 6 s panics in wgpu-hal.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// The message of a [`Error::DeviceLost`] found by a refused submission.
pub(crate) const REFUSED: &str = "wgpu refused new work: the device was destroyed or lost \
     (wgpu names the reason only once the work already submitted is done)";

/// `device.poll(Wait { index, timeout })`: `Ok(true)` when the submission
/// (all work for `None`) is done, `Ok(false)` when `timeout` passed first.
///
/// # Errors
/// [`Error::DeviceLost`] when wgpu refused the submission (an index no
/// successful submission returned: the device is destroyed or lost), or
/// when the wait itself failed: wgpu 30 panics in `Device::poll` when the
/// driver reports a lost device during the wait, and that panic is caught
/// here and returned as this error.
pub(crate) fn poll(
    device: &wgpu::Device,
    index: Option<wgpu::SubmissionIndex>,
    timeout: Duration,
) -> Result<bool> {
    let poll_type = wgpu::PollType::Wait {
        submission_index: index,
        timeout: Some(timeout),
    };
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device.poll(poll_type)));
    match polled {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(wgpu::PollError::Timeout)) => Ok(false),
        Ok(Err(wgpu::PollError::WrongSubmissionIndex(..))) => {
            Err(Error::DeviceLost(REFUSED.to_string()))
        }
        Err(panic) => poll_panicked(
            panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("wgpu panicked in Device::poll"),
        ),
    }
}

/// What a panic in `device.poll(Wait)` with message `message` means.
/// wgpu-core 30 asserts, after a wait that timed out, that an empty queue
/// implies its own (stale) fence reading has reached the wait's index;
/// when another thread's poll retired the submissions in between, the
/// assertion fails though every submission is done (gfx-rs/wgpu#9958,
/// fixed after 30.0.2). The queue was empty, so the wait is satisfied:
/// `Ok(true)`. Seen in CI's 16-thread pass on lavapipe. Any other panic is
/// a lost device.
fn poll_panicked(message: &str) -> Result<bool> {
    if message.starts_with("If the queue is empty, the current submission index") {
        return Ok(true);
    }
    Err(Error::DeviceLost(format!(
        "the wait for the GPU failed: {message}"
    )))
}

/// `device.poll(Poll)`: without blocking, run whatever wgpu has to report
/// (finished maps, a lost device's callback). A panic in wgpu's poll is
/// caught and dropped: the next wait reports the loss.
pub(crate) fn poll_now(device: &wgpu::Device) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        device.poll(wgpu::PollType::Poll)
    }));
}

/// Wait, at most `timeout`, until submission `index` (all work for
/// `None`) is done: a loop of short polls ([`WAIT_SLICE`]). Holds no lock of
/// ours; call it after letting go of the queue lock.
///
/// # Errors
/// [`Error::Timeout`] when `timeout` passes; [`Error::DeviceLost`] as
/// [`poll`].
pub(crate) fn wait(
    device: &wgpu::Device,
    index: Option<wgpu::SubmissionIndex>,
    timeout: Duration,
    what: &'static str,
) -> Result<()> {
    let start = Instant::now();
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if poll(device, index.clone(), left.min(WAIT_SLICE))? {
            return Ok(());
        }
        if left.is_zero() || start.elapsed() >= timeout {
            return Err(Error::Timeout {
                what,
                waited: start.elapsed(),
            });
        }
    }
}

/// Copy `size` bytes of `src` from byte `offset` (both multiples of 4) to
/// the host and give them to `f` while they are mapped: a staging buffer
/// from `pool` (handed out for `origin`, `None` unless history is on) and
/// one copy command submitted on `queue` under the pool's queue lock; then,
/// with the lock let go (so other threads keep evaluating),
/// [`map_read_with`] waits at most `timeout`.
///
/// # Errors
/// [`Error::OutOfMemory`] for the staging buffer; as [`map_read_with`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_back<R>(
    pool: &std::sync::Arc<Pool>,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    offset: u64,
    size: u64,
    origin: Option<Origin>,
    timeout: Duration,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R> {
    let (staging, index) = pool.copy_to_staging(queue, src, offset, size, origin)?;
    map_read_with(pool.device(), staging.buffer(), ..size, index, timeout, f)
}

impl Pool {
    /// The first half of every read-back: `size` bytes of `src` at
    /// `offset` copied into a staging buffer of this pool (handed out for
    /// `origin`) by one command submitted on `queue` under the pool's queue
    /// lock, which is let go on return. The buffer is not mapped yet.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] for the staging buffer.
    pub(crate) fn copy_to_staging(
        self: &std::sync::Arc<Self>,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        offset: u64,
        size: u64,
        origin: Option<Origin>,
    ) -> Result<(PooledBuffer, wgpu::SubmissionIndex)> {
        let guard = self.lock_queue();
        let staging = self.acquire(&guard, size, BufferKind::Readback, origin)?;
        let mut encoder = self
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgarray read-back"),
            });
        encoder.copy_buffer_to_buffer(src, offset, staging.buffer(), 0, size);
        let index = queue.submit([encoder.finish()]);
        self.submitted(&guard);
        Ok((staging, index))
    }
}

/// Map `range` of a `MAP_READ` buffer once submission `index` is done, copy
/// the bytes out and unmap it; waits at most `timeout` in all.
///
/// # Errors
/// As [`map_read_with`].
pub(crate) fn map_read(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    range: std::ops::RangeTo<u64>,
    index: wgpu::SubmissionIndex,
    timeout: Duration,
) -> Result<Vec<u8>> {
    map_read_with(device, buffer, range, index, timeout, <[u8]>::to_vec)
}

/// As [`map_read`], but `f` gets the mapped bytes in place (no copy). On
/// any failure the buffer is left unmapped (a pending map is cancelled), so
/// it can go back to the pool.
///
/// # Errors
/// [`Error::Timeout`]; [`Error::DeviceLost`] as [`poll`];
/// [`Error::Readback`] when wgpu fails the mapping.
pub(crate) fn map_read_with<R>(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    range: std::ops::RangeTo<u64>,
    index: wgpu::SubmissionIndex,
    timeout: Duration,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R> {
    let start = Instant::now();
    let slice = buffer.slice(range);
    let rx = request_map(&slice, wgpu::MapMode::Read);
    let mapped = wait(device, Some(index), timeout, "a read-back").and_then(|()| {
        // The callback runs in whichever thread's poll saw the copy finish:
        // it may still be on its way from another thread.
        let left = timeout.saturating_sub(start.elapsed()).max(WAIT_SLICE);
        match rx.recv_timeout(left) {
            Ok(r) => r.map_err(|e| Error::Readback(e.to_string())),
            Err(_) => Err(Error::Timeout {
                what: "a buffer mapping",
                waited: start.elapsed(),
            }),
        }
    });
    unmap_after(buffer, mapped, || {
        slice
            .get_mapped_range()
            .map_err(|e| Error::Readback(e.to_string()))
            .map(|v| f(&v))
    })
}

/// Ask wgpu to map `slice` for `mode`; its answer arrives on the receiver
/// (at a poll, in whichever thread polls).
fn request_map(
    slice: &wgpu::BufferSlice<'_>,
    mode: wgpu::MapMode,
) -> std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(mode, move |r| {
        let _ = tx.send(r);
    });
    rx
}

/// `use_mapped` once `mapped` says the map succeeded, then `buffer` unmapped
/// whatever happened (a pending map is cancelled), so that it can go back
/// to the pool.
fn unmap_after<R>(
    buffer: &wgpu::Buffer,
    mapped: Result<()>,
    use_mapped: impl FnOnce() -> Result<R>,
) -> Result<R> {
    let out = mapped.and_then(|()| use_mapped());
    buffer.unmap();
    out
}

/// Map the first `size` bytes of a `MAP_WRITE` buffer for writing once the
/// GPU is done with it (it may still be the source of a copy submitted
/// earlier), give `f` the mapped memory, and unmap it; waits at most
/// `timeout`, with no lock of ours held. On any failure the buffer is left
/// unmapped (a pending map is cancelled), so it can go back to the pool.
///
/// # Errors
/// [`Error::Timeout`]; [`Error::DeviceLost`] as [`poll`];
/// [`Error::Readback`] when wgpu fails the mapping.
pub(crate) fn map_write_with<R>(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    size: u64,
    timeout: Duration,
    f: impl FnOnce(wgpu::WriteOnly<'_, [u8]>) -> R,
) -> Result<R> {
    let start = Instant::now();
    let slice = buffer.slice(..size);
    let rx = request_map(&slice, wgpu::MapMode::Write);
    let mapped = loop {
        // The callback runs at a poll once the buffer's earlier uses are
        // done (or in another thread's poll).
        if let Ok(r) = rx.try_recv() {
            break r.map_err(|e| Error::Readback(e.to_string()));
        }
        if start.elapsed() >= timeout {
            break Err(Error::Timeout {
                what: "an upload buffer's mapping",
                waited: start.elapsed(),
            });
        }
        if let Err(e) = poll(device, None, WAIT_SLICE) {
            break Err(e);
        }
    };
    unmap_after(buffer, mapped, || {
        slice
            .get_mapped_range_mut()
            .map_err(|e| Error::Readback(e.to_string()))
            .map(|mut v| f(v.slice(..)))
    })
}

#[cfg(test)]
mod tests {
    /// wgpu-core 30.0.2's assertion after a timed-out wait that raced
    /// another thread's poll (its message, as in CI's log) is a satisfied
    /// wait; another panic is a lost device.
    #[test]
    fn the_queue_empty_assertion_of_a_racing_poll_is_a_satisfied_wait() {
        let raced = "If the queue is empty, the current submission index (50) \
                     should be at least the wait submission index (52)";
        assert!(matches!(super::poll_panicked(raced), Ok(true)));
        assert!(matches!(
            super::poll_panicked("Device lost"),
            Err(crate::Error::DeviceLost(m)) if m.contains("Device lost")
        ));
    }
}
