//! A device's background kernel work: one thread per device at most, which
//! runs queued jobs in order (the warm-up's compiles, the GEMM tuning, the
//! compile of a GEMM kernel that replaces its stand-in; see
//! `docs/ARCHITECTURE.md`, "Matmul" and "Threads").
//!
//! Jobs that use the device's queue for long (tuning, compiling a kernel
//! through its first dispatch: on lavapipe that dispatch's LLVM compile
//! runs inside whichever wait executes it, seconds for a large GEMM tile
//! with the driver's cache empty) wait for an idle device: no submission
//! of evals in flight and none for [`IDLE`], or someone waiting for the
//! background work ([`Background::wait`]), or [`STARVED`] since the job
//! was queued (a program that never pauses still gets its kernels tuned,
//! one job at a time). The thread holds the kernel cache weakly, ends when
//! the queue is empty, and is stopped after the job in hand and joined
//! when the device goes ([`Background::stop`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::KernelCache;

/// How long the device must have had no eval in flight (no submission,
/// no pipeline compiled for an eval) before a job that waits for an idle
/// device starts: longer than the host's gaps between a program's evals
/// (a model's weights uploaded, a batch tokenized), since the job then
/// holds the device for seconds on a software adapter with its caches
/// empty.
pub(crate) const IDLE: Duration = Duration::from_secs(1);

/// How long such a job waits for an idle device at most.
pub(crate) const STARVED: Duration = Duration::from_secs(30);

/// How often the thread looks again while it waits for an idle device.
const LOOK: Duration = Duration::from_millis(20);

/// One job: what it is (for logs), whether it waits for an idle device,
/// and the work, given the device's kernel cache.
pub(crate) struct Job {
    pub what: String,
    pub idle: bool,
    pub run: JobFn,
}

/// A job's work, given the device's kernel cache.
pub(crate) type JobFn = Box<dyn FnOnce(&Arc<KernelCache>) + Send>;

/// The queue, the thread and the device's activity.
#[derive(Default)]
pub(crate) struct Background {
    state: Mutex<State>,
    /// Signalled when the queue or `running` changes, or a waiter arrives.
    changed: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Asks the thread to stop after the job in hand (the device goes).
    stop: AtomicBool,
    /// Submissions of evals in flight and when the last one was made or
    /// finished ([`Background::submitted`], [`Background::finished`]).
    busy: Mutex<Busy>,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<(Job, Instant)>,
    /// A thread runs (a job in hand, or about to look at the queue).
    running: bool,
    /// Threads in [`Background::wait`]: jobs need not wait for idleness.
    waiters: usize,
}

#[derive(Default)]
struct Busy {
    in_flight: usize,
    last: Option<Instant>,
}

thread_local! {
    /// This thread is a device's background thread.
    static ON_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a background thread (its pipelines are
/// counted as warmed, and it never waits for its own queue).
pub(crate) fn on_background_thread() -> bool {
    ON_THREAD.with(|t| t.get())
}

/// Ends a background thread's turn if a job panics (a driver's panic,
/// say): the queue is dropped and every waiter woken. (A turn that ends
/// normally ends in [`Background::next`].)
struct End(Weak<KernelCache>);

impl Drop for End {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        if let Some(cache) = self.0.upgrade() {
            let bg = &cache.background;
            let mut state = lock(&bg.state);
            log::warn!(
                "wgarray: a background kernel job panicked; {} queued jobs dropped",
                state.jobs.len()
            );
            state.jobs.clear();
            state.running = false;
            bg.changed.notify_all();
        }
    }
}

impl Background {
    /// Queue `jobs` and start the thread if none runs. `cache` is the
    /// cache this `Background` belongs to.
    pub(crate) fn push(&self, cache: &Arc<KernelCache>, jobs: Vec<Job>) {
        if jobs.is_empty() || self.stop.load(Ordering::SeqCst) {
            return;
        }
        // Jobs are queued from evals: the device is busy now.
        self.touch();
        let mut state = lock(&self.state);
        let now = Instant::now();
        state.jobs.extend(jobs.into_iter().map(|j| (j, now)));
        self.changed.notify_all();
        if state.running {
            return;
        }
        state.running = true;
        drop(state);
        // The previous thread has ended its turn (`running` was down):
        // join it before its handle is replaced.
        if let Some(old) = lock(&self.thread).take()
            && old.thread().id() != std::thread::current().id()
        {
            let _ = old.join();
        }
        let weak = Arc::downgrade(cache);
        let spawned = std::thread::Builder::new()
            .name("wgarray background".into())
            .spawn(move || run(weak));
        match spawned {
            Ok(handle) => *lock(&self.thread) = Some(handle),
            Err(e) => {
                log::warn!("wgarray: no background thread ({e}); its jobs are dropped");
                let mut state = lock(&self.state);
                state.jobs.clear();
                state.running = false;
                self.changed.notify_all();
            }
        }
    }

    /// Jobs queued or in hand.
    pub(crate) fn pending(&self) -> usize {
        let state = lock(&self.state);
        state.jobs.len() + usize::from(state.running)
    }

    /// Wait until no job is queued or in hand (at once when none is); the
    /// jobs run meanwhile without waiting for an idle device. On the
    /// background thread itself, returns at once.
    pub(crate) fn wait(&self) {
        if on_background_thread() {
            return;
        }
        let mut state = lock(&self.state);
        state.waiters += 1;
        self.changed.notify_all();
        while state.running || !state.jobs.is_empty() {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.waiters -= 1;
    }

    /// Stop after the job in hand, drop the rest, and join the thread, so
    /// that when the device's drop returns no thread of wgarray's still
    /// uses its `wgpu::Device` (a thread left inside lavapipe at process
    /// exit can crash it). At most one job's time.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        {
            let mut state = lock(&self.state);
            state.jobs.clear();
            self.changed.notify_all();
        }
        let handle = lock(&self.thread).take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            // A panic on the thread was reported there.
            let _ = h.join();
        }
    }

    /// Whether [`Background::stop`] was called.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// An eval's submission was made.
    pub(crate) fn submitted(&self) {
        let mut busy = lock(&self.busy);
        busy.in_flight += 1;
        busy.last = Some(Instant::now());
    }

    /// An eval is busy on the host (compiling a pipeline).
    pub(crate) fn touch(&self) {
        lock(&self.busy).last = Some(Instant::now());
    }

    /// An eval's submission has run.
    pub(crate) fn finished(&self) {
        let mut busy = lock(&self.busy);
        busy.in_flight = busy.in_flight.saturating_sub(1);
        busy.last = Some(Instant::now());
    }

    /// Whether the device has been idle for [`IDLE`].
    fn idle(&self) -> bool {
        let busy = lock(&self.busy);
        busy.in_flight == 0 && busy.last.is_none_or(|t| t.elapsed() >= IDLE)
    }

    /// The next job the thread may start now, after waiting for an idle
    /// device where the job asks for one; `None` when the queue is empty or
    /// the thread is to stop: then its turn ends here, under the lock, so
    /// that a job queued after it starts a thread of its own.
    fn next(&self) -> Option<Job> {
        let mut state = lock(&self.state);
        loop {
            if self.stopped() || state.jobs.is_empty() {
                state.jobs.clear();
                state.running = false;
                self.changed.notify_all();
                return None;
            }
            let (job, queued) = &state.jobs[0];
            if !job.idle || state.waiters > 0 || queued.elapsed() >= STARVED || self.idle() {
                return state.jobs.pop_front().map(|(j, _)| j);
            }
            state = self
                .changed
                .wait_timeout(state, LOOK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The background thread: jobs until the queue is empty or the device
/// goes.
fn run(cache: Weak<KernelCache>) {
    ON_THREAD.with(|t| t.set(true));
    let _end = End(cache.clone());
    loop {
        // The cache is gone only after `stop`, which joins this thread:
        // holding it weakly here is for a device dropped without one.
        let Some(c) = cache.upgrade() else { return };
        let Some(job) = c.background.next() else {
            return;
        };
        log::debug!("wgarray: background job: {}", job.what);
        (job.run)(&c);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
