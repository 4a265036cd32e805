//! The buffer pool.
//!
//! # Policy
//!
//! * **Granularity.** Requests are rounded up to 256 bytes (wgpu's
//!   `min_storage_buffer_offset_alignment` on most adapters) below one page,
//!   and to whole pages ([`PAGE`], 16 KiB) above.
//! * **Reuse.** A cached buffer of `c` bytes serves a request of `n` bytes
//!   (after rounding) only if `n <= c < min(2n, n + 2 pages)`; the smallest
//!   such buffer wins. This is MLX's `BufferCache::reuse_from_cache` policy
//!   (mlx/backend/metal/allocator.cpp): a small request never takes a much
//!   larger buffer (no waste), and a large one tolerates at most two pages of
//!   slack (no churn between sizes that differ by a little). There are no
//!   power-of-two size classes, so a 513 MiB array holds 513 MiB.
//! * **Eviction.** Least recently released first, when the cache exceeds the
//!   cache limit or when an allocation would exceed the memory limit.
//! * **Release** happens in [`PooledBuffer`]'s `Drop`, synchronously. A buffer
//!   that does not fit under the cache limit is dropped at once: wgpu frees
//!   its memory as soon as no submission uses it.
//!
//! # Why reuse while in flight is safe
//!
//! A buffer released while a submission (or an encoded, not yet submitted
//! command buffer) still uses it may be handed out again at once. Every
//! allocation happens while the caller holds the pool's queue lock
//! ([`Pool::lock_queue`]), and every encode-and-submit and every
//! `queue.write_buffer` happens under that same lock. So whatever work the new
//! holder records is recorded, and submitted, after the work that used the
//! buffer before, on the same `wgpu::Queue`. wgpu orders submissions on a queue
//! and, inside one compute pass, places the barriers between dispatches that
//! the WebGPU spec requires (each dispatch is its own usage scope), so the new
//! writes cannot overtake the old reads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Error, Result};

/// Page size for rounding and for the reuse window, in bytes.
pub(crate) const PAGE: u64 = 16 * 1024;
/// Rounding granule below one page, in bytes.
pub(crate) const SMALL_GRANULE: u64 = 256;

/// What a pooled buffer is for; each kind has its own usage flags and cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum BufferKind {
    /// `STORAGE | COPY_SRC | COPY_DST`: any kernel input or output.
    Storage,
    /// `MAP_READ | COPY_DST`: read-back staging.
    Readback,
}

impl BufferKind {
    fn usage(self) -> wgpu::BufferUsages {
        use wgpu::BufferUsages as U;
        match self {
            BufferKind::Storage => U::STORAGE | U::COPY_SRC | U::COPY_DST,
            BufferKind::Readback => U::MAP_READ | U::COPY_DST,
        }
    }
}

/// A snapshot of a device's memory accounting. All sizes are in bytes.
///
/// Names and meanings follow MLX (`mx.get_active_memory`,
/// `mx.get_peak_memory`, `mx.get_cache_memory`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in buffers held by live arrays, staging and parameter buffers.
    pub active: u64,
    /// The largest `active` seen since creation or the last
    /// [`crate::Device::reset_peak_memory`].
    pub peak: u64,
    /// Bytes in released buffers kept for reuse.
    pub cache: u64,
    /// Buffers now alive in the driver (active plus cached).
    pub live_buffers: u64,
    /// Buffers ever created with the driver.
    pub allocations: u64,
    /// Buffers ever handed back to the driver.
    pub frees: u64,
    /// Requests served from the cache.
    pub cache_hits: u64,
    /// Requests that created a new buffer.
    pub cache_misses: u64,
    /// Bytes ever taken from the driver.
    pub bytes_allocated: u64,
    /// Bytes ever returned to the driver.
    pub bytes_freed: u64,
}

struct Cached {
    buffer: wgpu::Buffer,
    size: u64,
}

struct State {
    /// Cached buffers by (kind, size, release tick).
    free: BTreeMap<(BufferKind, u64, u64), wgpu::Buffer>,
    /// The same buffers by release tick, for LRU eviction.
    lru: BTreeMap<u64, (BufferKind, u64)>,
    tick: u64,
    cache_limit: u64,
    memory_limit: u64,
    stats: MemoryStats,
}

impl State {
    fn evict_oldest(&mut self) -> bool {
        let Some((tick, (kind, size))) = self.lru.pop_first() else {
            return false;
        };
        let buffer = self.free.remove(&(kind, size, tick));
        debug_assert!(buffer.is_some());
        self.stats.cache -= size;
        self.free_to_driver(Cached {
            buffer: buffer.expect("pool lru and free maps agree"),
            size,
        });
        true
    }

    fn free_to_driver(&mut self, c: Cached) {
        self.stats.frees += 1;
        self.stats.bytes_freed += c.size;
        self.stats.live_buffers -= 1;
        // Dropping the handle is enough: wgpu keeps the buffer alive while a
        // submission or an encoded command uses it, and frees it afterwards.
        drop(c.buffer);
    }

    fn trim_cache_to(&mut self, bytes: u64) {
        while self.stats.cache > bytes && self.evict_oldest() {}
    }
}

/// The per-device buffer pool. See the module docs for the policy.
pub(crate) struct Pool {
    device: wgpu::Device,
    state: Mutex<State>,
    queue_lock: Mutex<()>,
}

/// Proof that the caller holds the pool's queue lock: see "Why reuse while in
/// flight is safe" in the module docs.
pub(crate) struct QueueGuard<'a>(#[allow(dead_code)] MutexGuard<'a, ()>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Round a request to the pool's granularity (see the module docs).
pub(crate) fn round_size(bytes: u64) -> u64 {
    let bytes = bytes.max(4);
    if bytes <= PAGE {
        bytes.div_ceil(SMALL_GRANULE) * SMALL_GRANULE
    } else {
        bytes.div_ceil(PAGE) * PAGE
    }
}

impl Pool {
    pub(crate) fn new(device: wgpu::Device) -> Self {
        Pool {
            device,
            state: Mutex::new(State {
                free: BTreeMap::new(),
                lru: BTreeMap::new(),
                tick: 0,
                cache_limit: u64::MAX,
                memory_limit: u64::MAX,
                stats: MemoryStats::default(),
            }),
            queue_lock: Mutex::new(()),
        }
    }

    /// The wgpu device the pool allocates from.
    pub(crate) fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Take the lock that orders allocation with encoding and submission.
    pub(crate) fn lock_queue(&self) -> QueueGuard<'_> {
        QueueGuard(lock(&self.queue_lock))
    }

    /// A buffer of at least `bytes` bytes (rounded, see the module docs).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the memory limit would be exceeded even
    /// after emptying the cache, or when the driver refuses the allocation.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        _queue: &QueueGuard<'_>,
        bytes: u64,
        kind: BufferKind,
    ) -> Result<PooledBuffer> {
        let n = round_size(bytes);
        let mut st = lock(&self.state);
        let window = (2 * n).min(n + 2 * PAGE);
        let hit = st
            .free
            .range((kind, n, 0)..(kind, window, 0))
            .next()
            .map(|(k, _)| *k);
        if let Some(key) = hit {
            let buffer = st.free.remove(&key).expect("key just found");
            st.lru.remove(&key.2);
            st.stats.cache -= key.1;
            st.stats.cache_hits += 1;
            st.stats.active += key.1;
            st.stats.peak = st.stats.peak.max(st.stats.active);
            return Ok(self.wrap(buffer, key.1, kind));
        }
        st.stats.cache_misses += 1;
        // Make room under the memory limit: first the cache, then give up.
        let limit = st.memory_limit;
        if st.stats.active + st.stats.cache + n > limit {
            let keep = limit.saturating_sub(st.stats.active + n);
            st.trim_cache_to(keep);
        }
        if st.stats.active + n > limit {
            return Err(Error::OutOfMemory {
                requested: n,
                active: st.stats.active,
                limit,
            });
        }
        let buffer = match self.create(n, kind) {
            Ok(b) => b,
            Err(_) if st.stats.cache > 0 => {
                // The driver is full: give it our cache back and try once more.
                st.trim_cache_to(0);
                self.create(n, kind).map_err(|_| Error::OutOfMemory {
                    requested: n,
                    active: st.stats.active,
                    limit: u64::MAX,
                })?
            }
            Err(_) => {
                return Err(Error::OutOfMemory {
                    requested: n,
                    active: st.stats.active,
                    limit: u64::MAX,
                });
            }
        };
        st.stats.allocations += 1;
        st.stats.live_buffers += 1;
        st.stats.bytes_allocated += n;
        st.stats.active += n;
        st.stats.peak = st.stats.peak.max(st.stats.active);
        Ok(self.wrap(buffer, n, kind))
    }

    fn wrap(self: &Arc<Self>, buffer: wgpu::Buffer, size: u64, kind: BufferKind) -> PooledBuffer {
        PooledBuffer {
            buffer: Some(buffer),
            size,
            kind,
            pool: Arc::clone(self),
        }
    }

    /// Create a buffer, catching wgpu's out-of-memory and validation errors
    /// (a size above `max_buffer_size` is a validation error).
    fn create(
        &self,
        size: u64,
        kind: BufferKind,
    ) -> std::result::Result<wgpu::Buffer, wgpu::Error> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgarray pool"),
            size,
            usage: kind.usage(),
            mapped_at_creation: false,
        });
        let v = pollster::block_on(val.pop());
        let o = pollster::block_on(oom.pop());
        match o.or(v) {
            Some(e) => Err(e),
            None => Ok(buffer),
        }
    }

    fn release(&self, buffer: wgpu::Buffer, size: u64, kind: BufferKind) {
        let mut st = lock(&self.state);
        st.stats.active -= size;
        if size > st.cache_limit {
            st.free_to_driver(Cached { buffer, size });
            return;
        }
        let keep = st.cache_limit - size;
        st.trim_cache_to(keep);
        st.tick += 1;
        let tick = st.tick;
        st.free.insert((kind, size, tick), buffer);
        st.lru.insert(tick, (kind, size));
        st.stats.cache += size;
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        lock(&self.state).stats
    }

    pub(crate) fn reset_peak(&self) {
        let mut st = lock(&self.state);
        st.stats.peak = st.stats.active;
    }

    pub(crate) fn set_cache_limit(&self, bytes: u64) -> u64 {
        let mut st = lock(&self.state);
        let prev = std::mem::replace(&mut st.cache_limit, bytes);
        st.trim_cache_to(bytes);
        prev
    }

    pub(crate) fn set_memory_limit(&self, bytes: u64) -> u64 {
        let mut st = lock(&self.state);
        std::mem::replace(&mut st.memory_limit, bytes)
    }

    pub(crate) fn clear_cache(&self) {
        lock(&self.state).trim_cache_to(0);
    }
}

/// A buffer on loan from the pool. Its `Drop` gives it back, synchronously.
pub(crate) struct PooledBuffer {
    buffer: Option<wgpu::Buffer>,
    size: u64,
    kind: BufferKind,
    pool: Arc<Pool>,
}

impl PooledBuffer {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("present until drop")
    }
}

impl std::fmt::Debug for PooledBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PooledBuffer({:?}, {} bytes)", self.kind, self.size)
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.release(buffer, self.size, self.kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding() {
        assert_eq!(round_size(0), 256);
        assert_eq!(round_size(1), 256);
        assert_eq!(round_size(257), 512);
        assert_eq!(round_size(PAGE), PAGE);
        assert_eq!(round_size(PAGE + 1), 2 * PAGE);
        // 513 MiB stays 513 MiB.
        assert_eq!(round_size(513 << 20), 513 << 20);
    }
}
