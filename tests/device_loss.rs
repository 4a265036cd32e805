//! Device loss: after `wgpu::Device::destroy` (what a driver reset or a
//! removed GPU looks like to wgpu), with no poll in between, every public
//! call that reaches the GPU returns `Error::DeviceLost`, nothing is marked
//! evaluated by work that did not run, and dropping everything stays quiet.
//! `Array::empty` does not reach the GPU on a cache hit: it reports a loss
//! once one is known, at no cost on the hot path.
//!
//! Two ways to lose the device: with the queue idle (wgpu runs its lost
//! callback at the next poll) and with work still in flight (wgpu then
//! drops new work silently and reports nothing until that work is done).

mod common;

use wgarray::testing::KernelTest;
use wgarray::{Array, DType, Device, Error};

/// Everything made before the loss.
struct Before {
    device: Device,
    evaluated: Array,
    pending: Array,
    empty: Array,
}

fn before(in_flight: bool) -> Before {
    let device = common::device();
    let mut rng = common::Rng::new(7);
    let n = 33;
    let a = Array::from_slice(&rng.vec_f32(n * n), &[n, n], &device).unwrap();
    let evaluated = (&a + 1.0).unwrap();
    evaluated.eval().unwrap();
    let pending = a.matmul(&a).unwrap();
    let empty = Array::from_slice::<f32>(&[], &[0, 3], &device).unwrap();
    if in_flight {
        // More work on the same kernels, submitted and not waited for.
        let big = Array::from_slice(&rng.vec_f32(1 << 20), &[1 << 10, 1 << 10], &device).unwrap();
        for _ in 0..4 {
            (&big + 1.0).unwrap().eval().unwrap();
        }
    } else {
        device.synchronize().unwrap();
    }
    Before {
        device,
        evaluated,
        pending,
        empty,
    }
}

fn lost<T: std::fmt::Debug>(what: &str, r: wgarray::Result<T>) {
    assert!(
        matches!(r, Err(Error::DeviceLost(_))),
        "{what} after a device loss: expected Error::DeviceLost, got {r:?}"
    );
}

/// One public call, its result reduced to success or the error.
type Call<'a> = Box<dyn Fn() -> wgarray::Result<()> + 'a>;

/// How many entry points `every_entry_point_fails` calls.
const ENTRY_POINTS: usize = 13;

/// Every entry point, in an order that starts with `first` (the first
/// call after the loss is the one that has to notice it).
fn every_entry_point_fails(first: usize, in_flight: bool) {
    let b = before(in_flight);
    let d = &b.device;
    d.wgpu_device().destroy();
    let calls: Vec<(&str, Call)> = vec![
        ("eval of a pending matmul", Box::new(|| b.pending.eval())),
        (
            "to_vec of an array evaluated before the loss",
            Box::new(|| b.evaluated.to_vec::<f32>().map(drop)),
        ),
        (
            "to_vec of a pending array",
            Box::new(|| b.pending.to_vec::<f32>().map(drop)),
        ),
        (
            "to_vec of an empty array",
            Box::new(|| b.empty.to_vec::<f32>().map(drop)),
        ),
        (
            "eval of an evaluated array",
            Box::new(|| b.evaluated.eval()),
        ),
        (
            "from_slice",
            Box::new(|| Array::from_slice(&[1.0f32, 2.0], &[2], d).map(drop)),
        ),
        (
            "scalar",
            Box::new(|| Array::scalar(3.0, DType::I32, d).map(drop)),
        ),
        (
            "arange",
            Box::new(|| Array::arange(0.0, 5.0, 1.0, DType::F32, d).map(drop)),
        ),
        (
            // A cache hit reaches no GPU: the loss is reported by `empty`
            // once known, else by the first use of what it made.
            "empty, then its read-back",
            Box::new(|| Array::empty(&[4], DType::F32, d)?.to_vec::<f32>().map(drop)),
        ),
        ("synchronize", Box::new(|| d.synchronize())),
        (
            "eval of a new graph on an evaluated input",
            Box::new(|| (&b.evaluated * 2.0)?.eval()),
        ),
        (
            "item of a reduction",
            Box::new(|| b.evaluated.sum(None, false)?.item::<f32>().map(drop)),
        ),
        (
            "a user kernel (testing::KernelTest)",
            Box::new(|| {
                KernelTest::new(
                    "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
                     @compute @workgroup_size(1) fn main() { out[0] = 1.0; }",
                    "main",
                )
                .device(d)
                .output(DType::F32, &[1])
                .run()
                .map(drop)
            }),
        ),
    ];
    let n = calls.len();
    assert_eq!(n, ENTRY_POINTS);
    for k in 0..n {
        let (what, call) = &calls[(first + k) % n];
        lost(what, call());
    }
    assert!(d.is_lost());
    assert!(
        !b.pending.is_evaluated(),
        "the pending matmul was marked evaluated by work that did not run"
    );
    // Counters still answer, and nothing went to the uncaptured handler.
    let _ = (d.active_memory(), d.memory_stats(), d.live_arrays());
    d.clear_cache();
    assert_eq!(d.take_uncaptured_errors(), Vec::<String>::new());
    // Dropping everything, then the device, stays quiet (no panic).
    let device = b.device.clone();
    drop(calls);
    drop(b);
    assert_eq!(device.live_arrays(), 0);
    assert_eq!(device.take_uncaptured_errors(), Vec::<String>::new());
    drop(device);
}

#[test]
fn every_call_after_a_loss_with_the_queue_idle_is_device_lost() {
    // Each entry point once as the first call after the loss.
    for first in 0..ENTRY_POINTS {
        every_entry_point_fails(first, false);
    }
}

#[test]
fn every_call_after_a_loss_with_work_in_flight_is_device_lost() {
    for first in 0..ENTRY_POINTS {
        every_entry_point_fails(first, true);
    }
}

/// The case the old test hid with a poll: `eval` of a pending matmul right
/// after the loss must neither succeed nor mark the array evaluated.
#[test]
fn eval_after_a_loss_marks_nothing_evaluated() {
    for in_flight in [false, true] {
        let b = before(in_flight);
        b.device.wgpu_device().destroy();
        lost("eval", b.pending.eval());
        assert!(!b.pending.is_evaluated(), "in flight: {in_flight}");
        lost("to_vec", b.pending.to_vec::<f32>());
    }
}

/// A display of an array after the loss says so instead of panicking.
#[test]
fn printing_after_a_loss_says_the_device_is_lost() {
    let b = before(false);
    b.device.wgpu_device().destroy();
    let shown = format!("{}", b.evaluated);
    assert!(shown.contains("lost"), "{shown}");
}

/// `Array::empty` checks only the loss already known (no poll, no
/// submission: an allocation is a cache hit's bookkeeping): right after
/// the loss it may still hand out a buffer, of a cached size or a new one,
/// whose first use reports the loss; from then on `empty` reports it too.
#[test]
fn empty_reports_a_loss_once_known() {
    for in_flight in [false, true] {
        let b = before(in_flight);
        let d = &b.device;
        // 1000 f32 is a cached size; 3 MiB + 4 bytes was never allocated.
        drop(Array::empty(&[1000], DType::F32, d).unwrap());
        d.wgpu_device().destroy();
        for n in [1000, (3 << 18) + 1] {
            match Array::empty(&[n], DType::F32, d) {
                Ok(e) => lost("a read-back of empty's array", e.to_vec::<f32>()),
                Err(e) => assert!(matches!(e, Error::DeviceLost(_)), "{e:?}"),
            }
        }
        assert!(d.is_lost(), "in flight: {in_flight}");
        lost(
            "empty once the loss is known",
            Array::empty(&[4], DType::F32, d),
        );
        assert_eq!(d.take_uncaptured_errors(), Vec::<String>::new());
    }
}
