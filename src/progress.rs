//! What a device is doing that may take a while: compiling kernels for
//! their first use, and the GEMM's tuning and kernel compiles in the
//! background. For programs that should not sit silent for seconds.
//!
//! On a machine whose driver caches are empty, the first run of a program
//! compiles every kernel it uses; on Mesa's software drivers (lavapipe,
//! llvmpipe) a large GEMM tile takes seconds of LLVM's time, and it happens
//! at the kernel's first dispatch, inside whatever wait follows
//! (`to_vec`, `synchronize`). wgarray reports such work to one
//! process-wide hook ([`set_hook`]) as [`Event`]s: a piece of [`Work`]
//! started, and later finished. [`report_to_stderr`] installs the stock
//! hook, which writes one line to standard error for each piece of work
//! still running after half a second (and a second line when it ends),
//! and nothing for work that ends sooner, so a warm run prints nothing:
//!
//! ```text
//! wgarray: compiling 17 kernels for their first use on this device (later runs read the driver's cache) ...
//! wgarray: ... compiled 17 kernels in 2.4 s
//! ```
//!
//! The examples turn it on; a library user chooses (a progress bar, the
//! `log` crate, a GUI) with [`set_hook`]. Nothing is reported when no hook
//! is set, and the cost of an event without a hook is one atomic load.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! static STARTED: AtomicUsize = AtomicUsize::new(0);
//! wgarray::progress::set_hook(Some(Arc::new(|e: &wgarray::progress::Event| {
//!     if let wgarray::progress::Event::Started { .. } = e {
//!         STARTED.fetch_add(1, Ordering::Relaxed);
//!     }
//! })));
//! # wgarray::progress::set_hook(None);
//! ```

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::DType;
use crate::tuning::{GemmKernel, ShapeClass};

/// A piece of work that may take a while.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// The first dispatches of `kernels` pipelines new to the device, in one
    /// submission. Software adapters compile a kernel's machine code there
    /// (Mesa's lavapipe at the first dispatch, inside the wait that runs
    /// it): with their caches empty, from tens of milliseconds for an
    /// elementwise kernel to seconds for a large GEMM tile. Finished when
    /// the submission has run (seen by whichever thread polls the device).
    FirstDispatch { kernels: usize },
    /// The GEMM tuning times the candidate kernels for a shape class and
    /// dtype: in the background, the first time the device multiplies
    /// matrices of that class (see [`crate::tuning`]).
    Tuning { dtype: DType, class: ShapeClass },
    /// A GEMM kernel compiled in the background (its pipeline and its first
    /// dispatch) while evals run a stand-in that compiles fast (see
    /// [`crate::tuning`]): `kernel` replaces `stand_in` once made.
    Compiling {
        kernel: GemmKernel,
        stand_in: GemmKernel,
    },
}

impl std::fmt::Display for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Work::FirstDispatch { kernels } => write!(
                f,
                "compiling {kernels} kernel{} for their first use on this device",
                if *kernels == 1 { "" } else { "s" }
            ),
            Work::Tuning { dtype, class } => write!(
                f,
                "timing {} {} GEMM kernels in the background",
                dtype.name(),
                class.name()
            ),
            Work::Compiling { kernel, .. } => {
                write!(f, "compiling GEMM kernel {kernel} in the background")
            }
        }
    }
}

/// What a hook ([`set_hook`]) is told.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// `work` started on the device numbered `device` ([`crate::Device::id`]);
    /// `background`: on the device's background thread, not in a
    /// program's call.
    Started {
        device: u64,
        work: Work,
        background: bool,
    },
    /// `work` (as [`Event::Started`] said) finished after `seconds`.
    Finished {
        device: u64,
        work: Work,
        background: bool,
        seconds: f64,
    },
    /// An eval ran `stand_in` where the tuning chose `kernel`, whose
    /// machine code the driver has not compiled yet as far as wgarray
    /// knows (software adapters: see [`crate::tuning`]); `kernel` is being
    /// compiled in the background ([`Work::Compiling`]) and replaces the
    /// stand-in once made. Reported once per specialisation and device.
    StandIn {
        device: u64,
        kernel: GemmKernel,
        stand_in: GemmKernel,
    },
}

/// A progress hook: called on the thread that does the work, sometimes
/// from inside wgpu's device poll, so it must return quickly and must not
/// call wgarray or wgpu.
pub type Hook = Arc<dyn Fn(&Event) + Send + Sync>;

static HOOK: RwLock<Option<Hook>> = RwLock::new(None);
static HOOKED: AtomicBool = AtomicBool::new(false);

/// Set the process's progress hook (`None`: none); returns the previous
/// one. Every device of the process reports to it.
pub fn set_hook(hook: Option<Hook>) -> Option<Hook> {
    let mut slot = HOOK.write().unwrap_or_else(|e| e.into_inner());
    HOOKED.store(hook.is_some(), Ordering::SeqCst);
    std::mem::replace(&mut *slot, hook)
}

/// Whether a hook is set (events are worth making).
pub(crate) fn hooked() -> bool {
    HOOKED.load(Ordering::Relaxed)
}

/// Report `event` to the hook, if one is set.
pub(crate) fn emit(event: impl FnOnce() -> Event) {
    if !hooked() {
        return;
    }
    let hook = HOOK.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(h) = hook {
        h(&event());
    }
}

/// A span of [`Work`]: reports [`Event::Started`] now and
/// [`Event::Finished`] when it is dropped.
pub(crate) struct Span {
    device: u64,
    work: Option<Work>,
    background: bool,
    started: Instant,
}

impl Span {
    pub(crate) fn start(device: u64, work: Work, background: bool) -> Span {
        emit(|| Event::Started {
            device,
            work: work.clone(),
            background,
        });
        Span {
            device,
            work: Some(work),
            background,
            started: Instant::now(),
        }
    }

    fn end(&mut self) {
        if let Some(work) = self.work.take() {
            let seconds = self.started.elapsed().as_secs_f64();
            emit(|| Event::Finished {
                device: self.device,
                work,
                background: self.background,
                seconds,
            });
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.end();
    }
}

/// The environment variable that sets [`report_to_stderr`]'s delay in
/// milliseconds (default 500): work that ends sooner is not reported.
pub const DELAY_ENV: &str = "WGARRAY_PROGRESS_DELAY_MS";

/// The stock hook's delay: [`DELAY_ENV`], else half a second.
fn delay_from_env() -> Duration {
    std::env::var(DELAY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_millis(500), Duration::from_millis)
}

/// Install the stock hook ([`Reporter`] on standard error, with the delay
/// [`DELAY_ENV`] sets, half a second by default) as the process's
/// progress hook; returns the previous hook. What the examples call first.
pub fn report_to_stderr() -> Option<Hook> {
    let reporter = Reporter::new(Box::new(std::io::stderr()), delay_from_env());
    set_hook(Some(Arc::new(move |e: &Event| reporter.event(e))))
}

/// Lines about slow work, written to a writer: for each piece of work that
/// has run for `delay` (announced by a small thread of its own while the
/// work goes on), `wgarray: <what> ...`; when such work ends,
/// `wgarray: ... <what it did> in <seconds> s`. Work that ends within the
/// delay writes nothing. Each stand-in an eval runs writes nothing either
/// (the background compile that replaces it is work of its own).
pub struct Reporter {
    inner: Arc<ReporterInner>,
}

struct ReporterInner {
    out: Mutex<Box<dyn Write + Send>>,
    delay: Duration,
    /// Work started and not finished: (device, work, started, announced).
    open: Mutex<Vec<(u64, Work, Instant, bool)>>,
    /// A ticker thread runs (announces work past the delay).
    ticking: AtomicBool,
}

impl Reporter {
    /// A reporter writing to `out`, announcing work that runs `delay` or
    /// longer (`Duration::ZERO`: all of it, at once).
    pub fn new(out: Box<dyn Write + Send>, delay: Duration) -> Reporter {
        Reporter {
            inner: Arc::new(ReporterInner {
                out: Mutex::new(out),
                delay,
                open: Mutex::new(Vec::new()),
                ticking: AtomicBool::new(false),
            }),
        }
    }

    /// Take one event (what the hook calls).
    pub fn event(&self, event: &Event) {
        let inner = &self.inner;
        match event {
            Event::Started { device, work, .. } => {
                let now = Instant::now();
                let announce = inner.delay.is_zero();
                if announce {
                    inner.line(&format!("wgarray: {work} ..."));
                }
                lock(&inner.open).push((*device, work.clone(), now, announce));
                if !announce && !inner.ticking.swap(true, Ordering::SeqCst) {
                    let ticker = Arc::clone(inner);
                    let spawned = std::thread::Builder::new()
                        .name("wgarray progress".into())
                        .spawn(move || ticker.tick());
                    if spawned.is_err() {
                        inner.ticking.store(false, Ordering::SeqCst);
                    }
                }
            }
            Event::Finished {
                device,
                work,
                seconds,
                ..
            } => {
                let announced = {
                    let mut open = lock(&inner.open);
                    let at = open
                        .iter()
                        .position(|(d, w, _, _)| d == device && w == work);
                    at.map(|i| open.remove(i).3)
                };
                if announced == Some(true) {
                    inner.line(&format!("wgarray: ... {} in {seconds:.1} s", done(work)));
                }
            }
            Event::StandIn { .. } => {}
        }
    }
}

/// What finished work did, for the second line.
fn done(work: &Work) -> String {
    match work {
        Work::FirstDispatch { kernels } => format!(
            "compiled {kernels} kernel{}",
            if *kernels == 1 { "" } else { "s" }
        ),
        Work::Tuning { dtype, class } => {
            format!("timed the {} {} GEMM kernels", dtype.name(), class.name())
        }
        Work::Compiling { kernel, .. } => format!("compiled GEMM kernel {kernel}"),
    }
}

impl ReporterInner {
    fn line(&self, text: &str) {
        let mut out = lock(&self.out);
        // A closed standard error is not the program's problem.
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// Announce work past the delay, every 50 ms, until none is open.
    fn tick(self: Arc<Self>) {
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let due: Vec<Work> = {
                let mut open = lock(&self.open);
                if open.is_empty() {
                    self.ticking.store(false, Ordering::SeqCst);
                    // Work that started after the check above finds the
                    // flag down and starts a ticker of its own.
                    return;
                }
                open.iter_mut()
                    .filter(|(_, _, at, announced)| !announced && at.elapsed() >= self.delay)
                    .map(|(_, w, _, announced)| {
                        *announced = true;
                        w.clone()
                    })
                    .collect()
            };
            for w in due {
                self.line(&format!("wgarray: {w} ..."));
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
