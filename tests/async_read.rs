//! Asynchronous evaluation and read-back (`eval_async`,
//! `Array::to_vec_async`): many read-backs in flight on one current-thread
//! executor, results against host references, strided and empty arrays,
//! typed errors through the future, timeouts, and lifetimes: a future
//! dropped before it completes leaves no map pending and no memory held.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{Rng, assert_empty, device};
use wgarray::{Array, DType, Error, Slice};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Poll `f` once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    std::pin::Pin::new(f).poll(&mut cx)
}

/// 100 read-backs of 100 different lazy arrays, all in flight at once,
/// awaited on one thread by a current-thread runtime (the futures are
/// spawned, so they must be `Send + 'static`).
#[test]
fn a_hundred_concurrent_read_backs_on_one_thread() {
    let d = device();
    let x: Vec<f32> = Rng::new(1).vec_f32(1025);
    let a = Array::from_slice(&x, &[1025], &d).unwrap();
    let rt = runtime();
    let results = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..100 {
            let y = (&a * i as f64).unwrap();
            // The read is submitted here; the task only waits.
            let fut = y.to_vec_async::<f32>();
            set.spawn(async move { (i, fut.await) });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            out.push(r.unwrap());
        }
        out
    });
    assert_eq!(results.len(), 100);
    for (i, r) in results {
        let v = r.unwrap();
        for (k, (&g, &x)) in v.iter().zip(&x).enumerate() {
            assert_eq!(g, x * i as f32, "read {i}[{k}]");
        }
    }
    drop(a);
    assert_eq!(d.pending_callbacks(), 0);
    assert_empty(&d);
}

/// Futures dropped before their first poll, after a poll that found them
/// pending, and after completion: each returns its staging buffer and
/// cancels its map at once.
#[test]
fn dropping_a_read_back_future_leaks_nothing() {
    let d = device();
    {
        let x = Array::from_slice(&Rng::new(2).vec_f32(4099), &[4099], &d).unwrap();
        let mut futures: Vec<_> = (0..20)
            .map(|i| (&x + i as f64).unwrap().to_vec_async::<f32>())
            .collect();
        // Half dropped unpolled.
        futures.truncate(10);
        // Five polled once (most likely pending), then dropped.
        for f in futures.iter_mut().take(5) {
            let _ = poll_once(f);
        }
        futures.drain(..5);
        // The rest awaited.
        let rt = runtime();
        for (i, f) in futures.into_iter().enumerate() {
            let v = rt.block_on(f).unwrap();
            assert_eq!(v.len(), 4099, "read {i}");
        }
    }
    assert_eq!(d.pending_callbacks(), 0, "a map is left pending");
    assert_empty(&d);
    // The pool's staging buffers are reusable: another read works.
    let y = Array::from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
    assert_eq!(
        runtime().block_on(y.to_vec_async::<f32>()).unwrap(),
        vec![1.0, 2.0]
    );
}

#[test]
fn strided_empty_and_every_dtype() {
    let d = device();
    let rt = runtime();
    let v: Vec<i32> = (0..77).collect();
    let x = Array::from_slice(&v, &[7, 11], &d).unwrap();
    let t = x
        .transpose()
        .slice(&[Slice::step(2), Slice::new(None, None, -3)])
        .unwrap();
    assert_eq!(
        rt.block_on(t.to_vec_async::<i32>()).unwrap(),
        t.to_vec::<i32>().unwrap()
    );
    let h = Array::from_slice(&[half::f16::from_f32(1.5); 3], &[3], &d).unwrap();
    let h1 = h.slice(&[Slice::range(1, 2)]).unwrap();
    assert_eq!(
        rt.block_on(h1.to_vec_async::<half::f16>()).unwrap(),
        vec![half::f16::from_f32(1.5)]
    );
    let b = Array::from_slice(&[true, false, true], &[3], &d).unwrap();
    assert_eq!(
        rt.block_on(b.logical_not().unwrap().to_vec_async::<bool>())
            .unwrap(),
        vec![false, true, false]
    );
    let e = Array::zeros(&[0, 5], DType::F32, &d).unwrap();
    assert_eq!(
        rt.block_on(e.to_vec_async::<f32>()).unwrap(),
        Vec::<f32>::new()
    );
    let u = Array::full(&[5], 3.0, DType::U32, &d).unwrap();
    assert_eq!(rt.block_on(u.to_vec_async::<u32>()).unwrap(), vec![3; 5]);
}

#[test]
fn eval_async_evaluates_and_waits_for_the_gpu() {
    let d = device();
    let rt = runtime();
    let a = Array::from_slice(&Rng::new(3).vec_f32(33), &[33], &d).unwrap();
    let b = a.exp().unwrap();
    let c = (&b * 2.0).unwrap();
    let f = wgarray::eval_async(&[&b, &c]);
    // Submitted at the call: the arrays are evaluated already.
    assert!(b.is_evaluated() && c.is_evaluated());
    rt.block_on(f).unwrap();
    // Nothing pending: resolves after checking the device.
    rt.block_on(wgarray::eval_async(&[&c])).unwrap();
    rt.block_on(wgarray::eval_async(&[])).unwrap();
    let v = c.to_vec::<f32>().unwrap();
    let want: Vec<f32> = a
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.exp() * 2.0)
        .collect();
    for (g, w) in v.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs());
    }
    // A dropped eval future: its callback runs when the GPU is done.
    let e = (&c + 1.0).unwrap();
    drop(wgarray::eval_async(&[&e]));
    d.synchronize().unwrap();
    // The poller thread may have taken the callback from wgpu in its own
    // poll and not run it yet when this thread's wait returns: each
    // further synchronize is a poll that lets it finish; a callback that
    // never runs fails the test.
    let mut polls = 0;
    while d.pending_callbacks() > 0 && polls < 1000 {
        d.synchronize().unwrap();
        std::thread::yield_now();
        polls += 1;
    }
    assert_eq!(d.pending_callbacks(), 0, "after {polls} polls");
    drop((a, b, c, e));
    assert_empty(&d);
}

#[test]
fn errors_come_through_the_future_and_leave_nothing() {
    let d = device();
    let other = device();
    let rt = runtime();
    {
        let x = Array::from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
        let r = rt.block_on(x.to_vec_async::<i32>());
        assert!(matches!(
            r,
            Err(Error::ReadDType {
                op: "to_vec_async",
                ..
            })
        ));
        let y = Array::from_slice(&[1.0f32], &[1], &other).unwrap();
        assert!(matches!(
            rt.block_on(wgarray::eval_async(&[&x, &y])),
            Err(Error::DeviceMismatch {
                op: "eval_async",
                ..
            })
        ));
        // A future polled after it completed says so instead of panicking.
        let mut f = x.to_vec_async::<f32>();
        let v = rt.block_on(&mut f).unwrap();
        assert_eq!(v, vec![1.0, 2.0]);
        assert!(matches!(
            poll_once(&mut f),
            Poll::Ready(Err(Error::Internal(_)))
        ));
    }
    assert_eq!(d.pending_callbacks(), 0);
    assert_empty(&d);
}

/// A read-back the GPU cannot finish within the wait limit fails with
/// `Error::Timeout` through its future; the device works on afterwards.
#[test]
fn an_async_read_back_past_the_wait_limit_is_a_timeout() {
    let d = device();
    let n = 1024;
    let a = Array::from_slice(&Rng::new(5).vec_f32(n * n), &[n, n], &d).unwrap();
    let rt = runtime();
    let prev = d.set_wait_timeout(Duration::ZERO);
    let c = a.matmul(&a).unwrap();
    let r = rt.block_on(c.to_vec_async::<f32>());
    d.set_wait_timeout(prev);
    // llvmpipe (GL) finishes the work inside the submission: then there
    // is nothing to time out.
    if r.is_err() {
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    }
    let s = c.sum(None, false).unwrap();
    assert!(rt.block_on(s.to_vec_async::<f32>()).unwrap()[0].is_finite());
    d.synchronize().unwrap();
    drop((a, c, s));
    assert_eq!(d.pending_callbacks(), 0);
    assert_empty(&d);
}

/// The futures are `Send`, `'static` and `Unpin`.
#[test]
fn futures_are_send_static_and_unpin() {
    fn check<F: Future + Send + Unpin + 'static>(_: &F) {}
    let d = device();
    let x = Array::zeros(&[3], DType::F32, &d).unwrap();
    let f = x.to_vec_async::<f32>();
    check(&f);
    let e = wgarray::eval_async(&[&x]);
    check(&e);
    let mut f = pin!(f);
    let _ = runtime().block_on(f.as_mut());
}
