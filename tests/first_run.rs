//! A first run on a machine whose caches are empty: the first GEMM of a
//! shape class compiles the class's default kernel only (or, on a software
//! adapter, a stand-in for a large tile the driver has not compiled), and
//! the tuning's candidates are compiled later, on the device's background
//! thread; slow work is said on standard error (`wgarray::progress`).
//! Counted (pipelines, events), never timed. On GL, where a background
//! thread cannot share the device, the tuning runs inside the first eval
//! of a class, as it did before, and that is what the tests pin there.
//!
//! Each device keeps its caches in a directory of its own, so the suite's
//! tuning file does not decide what is tested.

mod common;

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use wgarray::progress::{Event, Reporter, Work};
use wgarray::tuning::{CacheDir, ShapeClass};
use wgarray::{Array, DType, Device, DeviceOptions};

/// A device of the suite's adapter with empty caches in `dir`, and no
/// forced kernel.
fn device_in(dir: &std::path::Path) -> Device {
    let options = DeviceOptions::from_env()
        .unwrap()
        .with_cache_dir(CacheDir::At(dir.to_path_buf()));
    let d = Device::new(&options).expect("this test needs an adapter");
    d.set_gemm_kernel(None).unwrap();
    d
}

/// Every progress event of this test binary (the hook is process-wide:
/// each test reads its own device's), and a condition variable the hook
/// notifies after each one.
static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());
static EVENTED: Condvar = Condvar::new();

/// Install the recording hook (once).
fn hook() {
    static HOOKED: OnceLock<()> = OnceLock::new();
    HOOKED.get_or_init(|| {
        wgarray::progress::set_hook(Some(Arc::new(|e: &Event| {
            EVENTS.lock().unwrap().push(e.clone());
            EVENTED.notify_all();
        })));
    });
}

/// The events of the device numbered `id` among `all`.
fn of_device(all: &[Event], id: u64) -> Vec<Event> {
    all.iter()
        .filter(|e| match e {
            Event::Started { device, .. }
            | Event::Finished { device, .. }
            | Event::StandIn { device, .. } => *device == id,
            _ => false,
        })
        .cloned()
        .collect()
}

/// The events so far of the device numbered `id`, after installing the
/// recording hook (once).
fn events_of(id: u64) -> Vec<Event> {
    hook();
    of_device(&EVENTS.lock().unwrap(), id)
}

/// Block until the device numbered `id` has reported an event that `want`
/// accepts, and return its events then; `None` when none came within
/// `limit` (a bound for a broken build, not a timing: the event is
/// reported by whichever thread's poll sees the submission done, so it
/// may come just after the caller's own wait returns).
fn wait_for_event(id: u64, limit: Duration, want: impl Fn(&Event) -> bool) -> Option<Vec<Event>> {
    hook();
    let all = EVENTS.lock().unwrap();
    let (all, _) = EVENTED
        .wait_timeout_while(all, limit, |all| !of_device(all, id).iter().any(&want))
        .unwrap();
    let mine = of_device(&all, id);
    mine.iter().any(&want).then_some(mine)
}

/// An `m x k @ k x n` f32 product of random values on poisoned pool
/// memory, against an f64 host reference; returns the pipelines the
/// product's eval created (the poisoning's are not counted).
fn checked_matmul(d: &Device, (m, k, n): (usize, usize, usize), seed: u64) -> u64 {
    common::poison_pool(d, m * n);
    let mut rng = common::Rng::new(seed);
    let (x, y) = (rng.vec_f32(m * k), rng.vec_f32(k * n));
    let a = Array::from_slice(&x, &[m, k], d).unwrap();
    let b = Array::from_slice(&y, &[k, n], d).unwrap();
    let before = d.pipelines_created();
    let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    let made = d.pipelines_created() - before;
    let want = common::matmul_ref(&x, &y, 1, m, k, n);
    let err = common::rel_frobenius(&got, &want);
    assert!(err < 1e-5, "{m}x{k}x{n}: error {err}");
    made
}

/// The first medium GEMM (40 x 48 @ 48 x 72, K and N odd multiples of
/// the tiles) makes one pipeline in the eval: the class's default, or its
/// stand-in. The candidates are compiled and timed on the background
/// thread (counted as warmed, not created), and the choice is there once
/// the background work is waited for. On GL all of it happens in the eval.
#[test]
fn the_first_gemm_of_a_class_compiles_only_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    let shape = (40, 48, 72);
    assert_eq!(ShapeClass::of(shape.0, shape.2), ShapeClass::Medium);
    let cands = d.gemm_candidates(DType::F32, ShapeClass::Medium);
    assert!(cands.len() > 1, "the class is timed: {cands:?}");
    assert_eq!(d.gemm_kernel(DType::F32, ShapeClass::Medium), None);
    let by_eval = checked_matmul(&d, shape, 7);
    let before = d.pipelines_created();
    if common::is_gl(&d) {
        assert!(
            by_eval > 1,
            "GL times the candidates in the eval: {by_eval}"
        );
        assert!(d.gemm_kernel(DType::F32, ShapeClass::Medium).is_some());
        assert_eq!(d.pipelines_warmed(), 0);
        return;
    }
    assert_eq!(by_eval, 1, "the eval compiled the default kernel only");
    d.wait_warm_up();
    assert_eq!(d.background_jobs(), 0);
    assert!(d.gemm_kernel(DType::F32, ShapeClass::Medium).is_some());
    assert!(
        d.pipelines_warmed() >= 1,
        "candidates compiled in the background"
    );
    assert_eq!(
        d.pipelines_created(),
        before,
        "the tuning compiled nothing on the eval's thread"
    );
    // The next product of the class runs the choice: at most one more
    // pipeline (the chosen kernel in the product's layout), and right.
    assert!(checked_matmul(&d, shape, 8) <= 1);
    d.wait_warm_up();
}

/// A large product (96 x 64 @ 64 x 256) whose default register tile no
/// process has compiled on this adapter runs a stand-in on a software
/// adapter (said once, as an event), with the right result, while the
/// background thread compiles the real tile (a piece of work with a start
/// and an end). Not on GL (no background thread), nor on GPUs.
#[test]
fn a_large_tile_new_to_the_driver_runs_a_stand_in_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    events_of(d.id());
    let by_eval = checked_matmul(&d, (96, 64, 256), 11);
    d.wait_warm_up();
    let events = events_of(d.id());
    let stand_ins: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::StandIn {
                kernel, stand_in, ..
            } => Some((*kernel, *stand_in)),
            _ => None,
        })
        .collect();
    let compiled_in_background = events.iter().any(|e| {
        matches!(
            e,
            Event::Finished {
                work: Work::Compiling { .. },
                background: true,
                ..
            }
        )
    });
    let software = d.info().device_type == wgarray::wgpu::DeviceType::Cpu;
    if common::is_gl(&d) || !software {
        assert_eq!(stand_ins, vec![], "no stand-in");
        assert!(!compiled_in_background);
        return;
    }
    assert_eq!(stand_ins.len(), 1, "one stand-in, said once: {events:?}");
    let (kernel, stand_in) = stand_ins[0];
    assert_ne!(kernel, stand_in);
    assert_eq!(by_eval, 1, "the eval compiled the stand-in only");
    assert!(
        compiled_in_background,
        "{kernel} compiled in the background"
    );
    // The same product again on the same device: no second stand-in.
    checked_matmul(&d, (96, 64, 256), 12);
    d.wait_warm_up();
    let again = events_of(d.id())
        .iter()
        .filter(|e| matches!(e, Event::StandIn { .. }))
        .count();
    assert!(again <= 2, "at most one more, for a newly tuned kernel");
}

/// A device's first eval reports its first dispatches (the driver compiles
/// there on software adapters) as work with a start and an end; a device
/// dropped with tuning queued goes at once, and neither the background
/// work nor the first-dispatch report keeps memory: active memory is 0
/// after the arrays go, before and after the background work.
#[test]
fn first_dispatches_are_reported_and_background_work_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    events_of(d.id());
    checked_matmul(&d, (33, 48, 40), 3);
    d.synchronize().unwrap();
    common::assert_empty(&d);
    let events = events_of(d.id());
    let started = events.iter().any(|e| {
        matches!(e, Event::Started { work: Work::FirstDispatch { kernels }, background: false, .. } if *kernels >= 1)
    });
    assert!(started, "{events:?}");
    // The end is reported by whichever thread's poll sees the submission
    // done: wait for the event itself.
    d.synchronize().unwrap();
    let ended = wait_for_event(d.id(), Duration::from_secs(60), |e| {
        matches!(
            e,
            Event::Finished {
                work: Work::FirstDispatch { .. },
                ..
            }
        )
    });
    assert!(ended.is_some(), "{:?}", events_of(d.id()));
    d.wait_warm_up();
    common::assert_empty(&d);
    // Dropped with a class's tuning queued (Vulkan): the drop joins the
    // background thread, and the next device works.
    let e = device_in(dir.path());
    checked_matmul(&e, (1, 300, 77), 4);
    drop(e);
    let f = device_in(dir.path());
    checked_matmul(&f, (1, 300, 77), 5);
    f.wait_warm_up();
    common::assert_empty(&f);
}

/// A writer the tests read back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The stock reporter: slow work gets a line when it starts and one when
/// it ends; work that ends within the delay writes nothing; stand-ins
/// write nothing.
#[test]
fn the_reporter_says_slow_work_once_and_quick_work_not() {
    let work = Work::FirstDispatch { kernels: 3 };
    let started = Event::Started {
        device: 0,
        work: work.clone(),
        background: false,
    };
    let finished = Event::Finished {
        device: 0,
        work,
        background: false,
        seconds: 2.0,
    };
    let out = Shared::default();
    let at_once = Reporter::new(Box::new(out.clone()), std::time::Duration::ZERO);
    at_once.event(&started);
    at_once.event(&finished);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        text,
        "wgarray: compiling 3 kernels for their first use on this device ...\n\
         wgarray: ... compiled 3 kernels in 2.0 s\n"
    );
    let quiet = Shared::default();
    let later = Reporter::new(Box::new(quiet.clone()), std::time::Duration::from_secs(60));
    later.event(&started);
    later.event(&finished);
    assert!(quiet.0.lock().unwrap().is_empty());
}
