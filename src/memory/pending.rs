//! Waiting for the GPU without blocking: wgpu callbacks (buffer maps,
//! work done) turned into `Future`s, and the poller that makes them run.
//!
//! # How a future makes progress
//!
//! wgpu runs a map or work-done callback only inside `Device::poll` (on
//! the web, the browser's event loop runs it). A future here is a [`Slot`]
//! that the callback completes and wakes; someone must poll the device.
//! That is the device's [`Poller`]: one thread per device, started at the
//! first asynchronous wait, which loops while callbacks are outstanding:
//!
//! - `device.poll(Wait)` for at most [`super::WAIT_SLICE`] (50 ms): a wait
//!   inside the driver for the work in flight, which runs the callbacks of
//!   whatever finished and so wakes the futures, on this thread;
//! - when the queue is idle and a callback is still outstanding (one
//!   registered after the poll began, or a work-done callback that fires
//!   at the next poll), a wait on a condition variable, which a new
//!   registration interrupts, for at most one slice;
//! - when nothing is outstanding, a wait on the condition variable with
//!   no timeout, until the next registration or the device's drop.
//!
//! So the thread never spins: each turn of its loop either blocks in the
//! driver on work in flight or sleeps on the condition variable. A future
//! costs its executor nothing while it waits (`Future::poll` only locks
//! its slot). The poller holds none of the crate's locks while it polls
//! (see "Lock order" in docs/ARCHITECTURE.md); a slot's lock is a leaf
//! (the callback takes it under wgpu's locks; the waker is called after it
//! is let go).
//!
//! Each slot has a deadline (the device's wait limit): the poller fails a
//! slot that passes it with [`Error::Timeout`], and every slot with
//! [`Error::DeviceLost`] when a poll reports a lost device.
//!
//! # Counting
//!
//! [`Poller::outstanding`] counts callbacks registered with wgpu and not
//! yet run (or dropped by wgpu): [`crate::Device::pending_callbacks`]. A
//! dropped read-back future unmaps its buffer, which makes wgpu run the map
//! callback at once (aborted), so the count goes back at once; a dropped
//! eval future's callback runs when the GPU finishes.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::pool::{Pool, PooledBuffer};
use super::{Origin, WAIT_SLICE};
use crate::{Error, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a slot's outcome came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Source {
    /// wgpu ran the callback.
    Callback,
    /// The poller gave up on it (timeout, lost device); the callback is
    /// still registered with wgpu.
    Poller,
}

enum SlotState {
    Waiting(Option<Waker>),
    Done(Result<()>, Source),
}

/// One asynchronous wait: completed once (by its callback or by the
/// poller), read by its future. Its lock is a leaf.
pub(crate) struct Slot {
    state: Mutex<SlotState>,
    deadline: Instant,
    started: Instant,
    what: &'static str,
}

impl Slot {
    /// Record the outcome and wake the future, unless one was recorded
    /// already (the first wins). Returns whether this call recorded it.
    fn complete(&self, r: Result<()>, source: Source) -> bool {
        let waker = {
            let mut s = lock(&self.state);
            match &mut *s {
                SlotState::Done(..) => return false,
                SlotState::Waiting(w) => {
                    let w = w.take();
                    *s = SlotState::Done(r, source);
                    w
                }
            }
        };
        // Woken with the leaf lock let go: the waker is the executor's code.
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    fn is_done(&self) -> bool {
        matches!(&*lock(&self.state), SlotState::Done(..))
    }

    /// The outcome once there is one; otherwise remember `cx`'s waker.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<(Result<()>, Source)> {
        let mut s = lock(&self.state);
        match &mut *s {
            SlotState::Done(r, src) => Poll::Ready((r.clone(), *src)),
            SlotState::Waiting(w) => {
                match w {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    _ => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

/// The callback's side of a slot: handed to wgpu inside the callback
/// closure. Counted outstanding from its creation until it completes or
/// wgpu drops it unrun. Holds no device: a callback wgpu keeps cannot keep
/// the device alive.
pub(crate) struct Completion {
    /// `None` once completed.
    slot: Option<Arc<Slot>>,
    outstanding: Arc<AtomicI64>,
}

impl Completion {
    /// Complete the slot from wgpu's callback.
    pub(crate) fn complete(mut self, r: Result<()>) {
        self.finish(r);
    }

    /// Stop counting the callback outstanding, then complete the slot:
    /// in this order, so that a future woken by the completion already
    /// sees [`Poller::outstanding`] without it.
    fn finish(&mut self, r: Result<()>) {
        if let Some(slot) = self.slot.take() {
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
            slot.complete(r, Source::Callback);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        // wgpu dropped the callback without running it (a no-op after
        // `complete`).
        self.finish(Err(Error::Readback(
            "wgpu dropped the callback without running it".into(),
        )));
    }
}

struct PollState {
    slots: Vec<Weak<Slot>>,
    running: bool,
    shutdown: bool,
}

struct Shared {
    device: wgpu::Device,
    state: Mutex<PollState>,
    wake: Condvar,
    outstanding: Arc<AtomicI64>,
}

/// The device's poller (see the module docs). Dropping it (with the
/// device) stops its thread and waits for it.
pub(crate) struct Poller {
    shared: Arc<Shared>,
    /// The thread, once started: joined on drop, so that its clone of the
    /// `wgpu::Device` is gone before the device's owner goes on (a thread
    /// still releasing a Vulkan device while the process exits crashed
    /// lavapipe: a double free, about 1 run in 100).
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Poller {
    pub(crate) fn new(device: wgpu::Device) -> Poller {
        Poller {
            shared: Arc::new(Shared {
                device,
                state: Mutex::new(PollState {
                    slots: Vec::new(),
                    running: false,
                    shutdown: false,
                }),
                wake: Condvar::new(),
                outstanding: Arc::new(AtomicI64::new(0)),
            }),
            thread: Mutex::new(None),
        }
    }

    /// Callbacks registered with wgpu that have not run yet.
    pub(crate) fn outstanding(&self) -> u64 {
        self.shared.outstanding.load(Ordering::SeqCst).max(0) as u64
    }

    /// A new slot for a wait on `what`, failing after `timeout`, and its
    /// completion (counted outstanding from now): give the completion to a
    /// wgpu callback, then [`Poller::watch`] the slot.
    pub(crate) fn slot(&self, what: &'static str, timeout: Duration) -> (Arc<Slot>, Completion) {
        let now = Instant::now();
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState::Waiting(None)),
            deadline: now
                .checked_add(timeout)
                .unwrap_or(now + Duration::from_secs(1 << 40)),
            started: now,
            what,
        });
        self.shared.outstanding.fetch_add(1, Ordering::SeqCst);
        let completion = Completion {
            slot: Some(Arc::clone(&slot)),
            outstanding: Arc::clone(&self.shared.outstanding),
        };
        (slot, completion)
    }

    /// Make sure the device is polled until `slot` is done: enter it in
    /// the poller's list (for its deadline and for a loss), start the
    /// thread if it is not running, and wake it.
    ///
    /// # Errors
    /// [`Error::Internal`] when the thread cannot be started.
    pub(crate) fn watch(&self, slot: &Arc<Slot>) -> Result<()> {
        if cfg!(target_arch = "wasm32") {
            // The browser runs the callbacks.
            return Ok(());
        }
        let start = {
            let mut st = lock(&self.shared.state);
            st.slots.retain(|w| w.strong_count() > 0);
            st.slots.push(Arc::downgrade(slot));
            !std::mem::replace(&mut st.running, true)
        };
        if start {
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name("wgarray-poller".into())
                .spawn(move || run(&shared));
            match spawned {
                Ok(handle) => *lock(&self.thread) = Some(handle),
                Err(e) => {
                    lock(&self.shared.state).running = false;
                    return Err(Error::Internal(format!(
                        "cannot start the thread that polls the device: {e}"
                    )));
                }
            }
        }
        self.shared.wake.notify_all();
        Ok(())
    }
}

impl Drop for Poller {
    /// Stop the thread and wait for it (at most one poll slice, 50 ms),
    /// unless this drop runs on the thread itself (a waker it called
    /// dropped the last handle to the device).
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.wake.notify_all();
        let handle = lock(&self.thread).take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            // A panic on the thread has already been reported; nothing
            // more to do with it here.
            let _ = h.join();
        }
    }
}

/// The poller thread's loop (see the module docs).
fn run(shared: &Shared) {
    loop {
        // Sleep until something is outstanding.
        {
            let mut st = lock(&shared.state);
            loop {
                if st.shutdown {
                    st.running = false;
                    return;
                }
                st.slots
                    .retain(|w| w.upgrade().is_some_and(|s| !s.is_done()));
                if shared.outstanding.load(Ordering::SeqCst) > 0 || !st.slots.is_empty() {
                    break;
                }
                st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        }
        match super::poll(&shared.device, None, WAIT_SLICE) {
            Ok(idle) => {
                if idle && shared.outstanding.load(Ordering::SeqCst) > 0 {
                    // Nothing in flight, yet a callback is due: it runs at
                    // the next poll. Sleep one slice at most (a new
                    // registration wakes us at once).
                    let st = lock(&shared.state);
                    if !st.shutdown {
                        drop(
                            shared
                                .wake
                                .wait_timeout(st, WAIT_SLICE)
                                .unwrap_or_else(|e| e.into_inner()),
                        );
                    }
                }
            }
            Err(e) => fail_all(shared, &e),
        }
        expire(shared);
    }
}

/// The live slots, upgraded (outside the poller's lock when used).
fn live_slots(shared: &Shared) -> Vec<Arc<Slot>> {
    lock(&shared.state)
        .slots
        .iter()
        .filter_map(Weak::upgrade)
        .collect()
}

fn fail_all(shared: &Shared, e: &Error) {
    for s in live_slots(shared) {
        s.complete(Err(e.clone()), Source::Poller);
    }
}

fn expire(shared: &Shared) {
    let now = Instant::now();
    for s in live_slots(shared) {
        if now >= s.deadline {
            s.complete(
                Err(Error::Timeout {
                    what: s.what,
                    waited: now - s.started,
                }),
                Source::Poller,
            );
        }
    }
}

/// A read-back in flight: the copy of `size` bytes is submitted and the
/// staging buffer's map requested; the bytes are read when the slot says
/// the map is done.
pub(crate) struct MapRead {
    staging: Option<PooledBuffer>,
    size: u64,
    slot: Arc<Slot>,
    /// Whether a map is requested or active (so the buffer must be
    /// unmapped before it goes back to the pool).
    mapped: bool,
}

/// Start an asynchronous read-back of `size` bytes of `src` from byte
/// `offset` (both multiples of 4): as [`super::read_back`], a staging
/// buffer from `pool` and one copy submitted under the pool's queue lock;
/// then, with the lock let go, the map is requested and the slot watched
/// by `poller`. Nothing waits.
///
/// # Errors
/// [`Error::OutOfMemory`] for the staging buffer; [`Error::Internal`]
/// when the poller cannot start.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_back_async(
    pool: &Arc<Pool>,
    queue: &wgpu::Queue,
    poller: &Poller,
    src: &wgpu::Buffer,
    offset: u64,
    size: u64,
    origin: Option<Origin>,
    timeout: Duration,
) -> Result<MapRead> {
    let (staging, _) = pool.copy_to_staging(queue, src, offset, size, origin)?;
    let (slot, completion) = poller.slot("an asynchronous read-back", timeout);
    staging
        .buffer()
        .slice(..size)
        .map_async(wgpu::MapMode::Read, move |r| {
            completion.complete(r.map_err(|e| Error::Readback(e.to_string())));
        });
    let read = MapRead {
        staging: Some(staging),
        size,
        slot,
        mapped: true,
    };
    poller.watch(&read.slot)?;
    Ok(read)
}

impl MapRead {
    /// Once the map is done, give `f` the bytes, unmap, and return the
    /// staging buffer to the pool.
    pub(crate) fn poll_with<R>(
        &mut self,
        cx: &mut Context<'_>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Poll<Result<R>> {
        let Some(staging) = &self.staging else {
            return Poll::Ready(Err(Error::Internal(
                "a read-back future was polled after it completed".into(),
            )));
        };
        let (r, source) = match self.slot.poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(x) => x,
        };
        if r.is_err() && source == Source::Callback {
            // The map failed: the buffer is not mapped.
            self.mapped = false;
        }
        let out = r.and_then(|()| {
            staging
                .buffer()
                .slice(..self.size)
                .get_mapped_range()
                .map_err(|e| Error::Readback(e.to_string()))
                .map(|v| f(&v))
        });
        self.release();
        Poll::Ready(out)
    }

    /// Unmap (cancelling a pending map: wgpu runs its callback at once)
    /// and hand the staging buffer back to the pool.
    fn release(&mut self) {
        if let Some(staging) = self.staging.take() {
            if std::mem::replace(&mut self.mapped, false) {
                staging.buffer().unmap();
            }
            drop(staging);
        }
    }
}

impl Drop for MapRead {
    fn drop(&mut self) {
        self.release();
    }
}

/// A wait for all work submitted to the queue so far (wgpu's
/// `on_submitted_work_done`), watched by `poller`.
///
/// # Errors
/// [`Error::Internal`] when the poller cannot start.
pub(crate) fn work_done(
    queue: &wgpu::Queue,
    poller: &Poller,
    timeout: Duration,
) -> Result<Arc<Slot>> {
    let (slot, completion) = poller.slot("an asynchronous eval", timeout);
    queue.on_submitted_work_done(move || completion.complete(Ok(())));
    poller.watch(&slot)?;
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{Array, Device};

    /// Dropping the device joins its poller thread: when the drop returns,
    /// the thread (and its clone of the `wgpu::Device`) is gone. A thread
    /// left running crashed lavapipe at process exit (a double free).
    #[test]
    fn dropping_the_device_joins_its_poller() {
        let device = Device::new_default().expect("a GPU adapter");
        let a = Array::from_slice(&[1.0f32, 2.0], &[2], &device).unwrap();
        let b = a.exp().unwrap();
        pollster::block_on(crate::eval_async(&[&b])).unwrap();
        let shared = Arc::downgrade(&device.inner.poller.shared);
        assert!(device.inner.poller.thread.lock().unwrap().is_some());
        drop((a, b, device));
        assert_eq!(
            shared.strong_count(),
            0,
            "the poller thread outlived its device"
        );
    }
}
