//! Many threads, one device; many devices at once; bounded waits.
//!
//! Every stress test runs its work on spawned threads and the test thread
//! waits with a watchdog: a deadlock fails the test, naming what did not
//! finish, instead of hanging the suite. (docs/ARCHITECTURE.md, "Lock
//! order", says which locks these tests exercise.)

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use wgarray::{Array, Axes, Error};

/// Far above what the work takes on 2 busy cores (seconds): reaching it
/// means a deadlock, not a slow machine.
const WATCHDOG: Duration = Duration::from_secs(120);

type Job = Box<dyn FnOnce() + Send>;

/// Run each job on its own thread; fail if one panics (with its message)
/// or if they are not all done within [`WATCHDOG`] (naming the ones that
/// are not). A job left hanging is abandoned: the test fails regardless.
fn run_with_watchdog(jobs: Vec<(String, Job)>) {
    let (tx, rx) = mpsc::channel::<(String, Result<(), String>)>();
    let mut pending: Vec<String> = Vec::new();
    for (name, job) in jobs {
        let tx = tx.clone();
        pending.push(name.clone());
        std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "a panic".into())
                });
                let _ = tx.send((name, r));
            })
            .expect("spawn");
    }
    drop(tx);
    let start = Instant::now();
    while !pending.is_empty() {
        let left = WATCHDOG.saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok((name, Ok(()))) => pending.retain(|p| *p != name),
            Ok((name, Err(msg))) => panic!("{name} failed: {msg}"),
            Err(_) => panic!(
                "deadlock? after {:?}, these threads have not finished: {}",
                start.elapsed(),
                pending.join(", ")
            ),
        }
    }
}

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// Eight threads build and evaluate graphs on one device; some share the
/// same unevaluated inputs (a pending chain, and both outputs of one
/// pending two-output node), so one thread's eval evaluates what another
/// is about to use. Meanwhile a ninth thread empties the cache and reads the
/// memory counters, and a tenth reads back and synchronizes.
#[test]
fn many_threads_on_one_device_with_shared_pending_inputs() {
    const WORKERS: usize = 8;
    const ROUNDS: usize = 12;
    let device = common::device();
    let n = 1025;
    let x: Vec<f32> = common::Rng::new(3).vec_f32(n);
    let base = Array::from_slice(&x, &[n], &device).unwrap();
    // Unevaluated, shared by every worker.
    let shared = (&(&base * 0.5).unwrap() + 1.0).unwrap();
    let m = Array::from_slice(&x, &[25, 41], &device).unwrap();
    let (mean, var) = m.moments(1, false, 0).unwrap();
    let want_shared: Vec<f64> = x.iter().map(|&v| v as f64 * 0.5 + 1.0).collect();
    let want_mean: Vec<f64> = (0..25)
        .map(|r| (0..41).map(|c| x[r * 41 + c] as f64).sum::<f64>() / 41.0)
        .collect();
    let want_var: Vec<f64> = (0..25)
        .map(|r| {
            (0..41)
                .map(|c| (x[r * 41 + c] as f64 - want_mean[r]).powi(2))
                .sum::<f64>()
                / 41.0
        })
        .collect();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for w in 0..WORKERS {
        let (device, shared, mean, var) =
            (device.clone(), shared.clone(), mean.clone(), var.clone());
        let (want_shared, want_mean, want_var) =
            (want_shared.clone(), want_mean.clone(), want_var.clone());
        let done = Arc::clone(&done);
        jobs.push((
            format!("worker {w}"),
            Box::new(move || {
                let mut rng = common::Rng::new(100 + w as u64);
                for round in 0..ROUNDS {
                    let k = (w * ROUNDS + round) as f64;
                    // A graph on the shared pending input.
                    let y = (&shared + k).unwrap();
                    let want: Vec<f64> = want_shared.iter().map(|v| v + k).collect();
                    close(&y.to_vec::<f32>().unwrap(), &want, "shared + k");
                    // The two outputs of one pending node, split between threads.
                    let stat = if w % 2 == 0 { &mean } else { &var };
                    let want = if w % 2 == 0 { &want_mean } else { &want_var };
                    close(
                        &(stat * 1.0).unwrap().to_vec::<f32>().unwrap(),
                        want,
                        "moments",
                    );
                    // A private graph: upload, matmul, reduction.
                    let a = rng.vec_f32(7 * 33);
                    let b = rng.vec_f32(33 * 5);
                    let av = Array::from_slice(&a, &[7, 33], &device).unwrap();
                    let bv = Array::from_slice(&b, &[33, 5], &device).unwrap();
                    let c = av
                        .matmul(&bv)
                        .unwrap()
                        .sum(Axes::from(1isize), false)
                        .unwrap();
                    let want: Vec<f64> = common::matmul_ref(&a, &b, 1, 7, 33, 5)
                        .chunks(5)
                        .map(|r| r.iter().sum())
                        .collect();
                    close(&c.to_vec::<f32>().unwrap(), &want, "matmul rows");
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
        ));
    }
    {
        let (device, done) = (device.clone(), Arc::clone(&done));
        jobs.push((
            "cache clearer".into(),
            Box::new(move || {
                let mut rounds = 0u64;
                while done.load(std::sync::atomic::Ordering::SeqCst) < WORKERS || rounds < 10 {
                    device.clear_cache();
                    let s = device.memory_stats();
                    assert!(s.peak >= s.active, "{s:?}");
                    let _ = (
                        device.active_memory(),
                        device.cache_memory(),
                        device.peak_memory(),
                    );
                    rounds += 1;
                    std::thread::yield_now();
                }
            }),
        ));
    }
    {
        let (device, done, base) = (device.clone(), Arc::clone(&done), base.clone());
        jobs.push((
            "reader".into(),
            Box::new(move || {
                let mut rounds = 0u64;
                while done.load(std::sync::atomic::Ordering::SeqCst) < WORKERS || rounds < 10 {
                    assert_eq!(base.to_vec::<f32>().unwrap()[..4], x[..4]);
                    device.synchronize().unwrap();
                    rounds += 1;
                }
            }),
        ));
    }
    run_with_watchdog(jobs);
    assert!(shared.is_evaluated());
    drop((shared, mean, var, base, m));
    device.synchronize().unwrap();
    common::assert_empty(&device);
    assert!(device.take_uncaptured_errors().is_empty());
}

/// Eight devices created at the same moment (a barrier), each used at once
/// by its thread, then dropped.
#[test]
fn many_devices_created_and_used_at_once() {
    const DEVICES: usize = 8;
    let barrier = Arc::new(Barrier::new(DEVICES));
    let jobs: Vec<(String, Job)> = (0..DEVICES)
        .map(|t| {
            let barrier = Arc::clone(&barrier);
            let job: Job = Box::new(move || {
                barrier.wait();
                let device = common::device();
                let x: Vec<f32> = common::Rng::new(t as u64).vec_f32(33);
                let a = Array::from_slice(&x, &[33], &device).unwrap();
                let y = (&(&a * 2.0).unwrap() - 1.0)
                    .unwrap()
                    .sum(None, false)
                    .unwrap();
                let want: f64 = x.iter().map(|&v| v as f64 * 2.0 - 1.0).sum();
                close(&y.to_vec::<f32>().unwrap(), &[want], "sum");
                device.synchronize().unwrap();
                drop((a, y));
                common::assert_empty(&device);
            });
            (format!("device {t}"), job)
        })
        .collect();
    run_with_watchdog(jobs);
}

/// A read-back that the GPU cannot finish in time fails with
/// `Error::Timeout` instead of waiting on; the staging buffer goes back to
/// the pool unmapped, and the device works on (the same read-back succeeds
/// once the limit is back).
#[test]
fn a_read_back_past_the_wait_limit_is_a_timeout_and_leaves_the_device_usable() {
    let device = common::device();
    // Large enough (2 GFLOP) that no software adapter finishes it in the
    // moment between the submission and the first poll, even when other
    // work delays this thread.
    let n = 1024;
    let x: Vec<f32> = common::Rng::new(5).vec_f32(n * n);
    let a = Array::from_slice(&x, &[n, n], &device).unwrap();
    // A sample of the product's entries, from f64 dot products.
    let close = |got: &[f32]| {
        (0..64).all(|s| {
            let (i, j) = ((s * 389) % n, (s * 613 + 7) % n);
            let want: f64 = (0..n)
                .map(|k| x[i * n + k] as f64 * x[k * n + j] as f64)
                .sum();
            (got[i * n + j] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs())
        })
    };
    // The first matmul of a shape class may time GEMM candidates (tuning,
    // waiting for each): do that now, so the timed read-back below waits
    // for its own work only.
    a.matmul(&a).unwrap().eval().unwrap();
    device.synchronize().unwrap();
    let before = device.active_memory();
    assert_eq!(device.wait_timeout(), wgarray::DEFAULT_WAIT_TIMEOUT);
    // Nothing finishes within zero seconds of its submission.
    let prev = device.set_wait_timeout(Duration::ZERO);
    assert_eq!(prev, wgarray::DEFAULT_WAIT_TIMEOUT);
    // llvmpipe (Mesa's GL) runs the work inside the submission itself, so
    // there nothing is left to wait for and the read-back succeeds.
    let synchronous = device.backend() == wgarray::wgpu::Backend::Gl
        && device.info().device_type == wgarray::wgpu::DeviceType::Cpu;
    // A thread preempted between the submission and its poll (a loaded
    // machine) may find the work done: such a read-back is checked and the
    // product made afresh, up to three times; one of them must time out.
    let mut attempt = 0;
    let (c, r) = loop {
        let c = a.matmul(&a).unwrap();
        let r = c.to_vec::<f32>();
        match &r {
            Ok(got) if synchronous || attempt < 2 => {
                assert!(close(got));
                if synchronous {
                    device.set_wait_timeout(prev);
                    return;
                }
                attempt += 1;
            }
            _ => break (c, r),
        }
    };
    assert!(
        matches!(r, Err(Error::Timeout { .. })),
        "expected a timeout, got {:?}",
        r.as_ref().map(|v| v.len())
    );
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("set_wait_timeout"), "{msg}");
    assert!(matches!(
        device.synchronize(),
        Err(Error::Timeout { .. }) | Ok(())
    ));
    // The array was computed; only the wait gave up.
    assert!(c.is_evaluated());
    device.set_wait_timeout(Duration::from_secs(60));
    let got = c.to_vec::<f32>().unwrap();
    assert!(close(&got));
    device.synchronize().unwrap();
    drop(c);
    assert_eq!(
        device.active_memory(),
        before,
        "the staging buffer went back"
    );
    assert!(device.take_uncaptured_errors().is_empty());
}
