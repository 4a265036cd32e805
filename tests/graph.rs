//! Lazy graph mechanics: deep chains, one-submit eval, the pipeline cache,
//! detach after eval, multi-output lifetimes, and one pending graph
//! evaluated from several threads at once.

mod common;

use common::{R, assert_empty, device};
use wgarray::{Array, DType, eval};

#[test]
fn a_chain_of_100000_ops_evaluates_and_drops_without_recursion() {
    let d = device();
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0], &[3], &d).unwrap();
    let one = Array::scalar(1.0, DType::F32, &d).unwrap();
    let mut y = x.clone();
    for _ in 0..100_000 {
        y = (&y + &one).unwrap();
    }
    assert_eq!(d.live_nodes(), 100_000);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![100_000.0, 100_001.0, 100_002.0]
    );
    // Evaluated: every intermediate node is gone.
    assert_eq!(d.live_nodes(), 0);
    drop((x, y, one));
    assert_empty(&d);
}

#[test]
fn an_unevaluated_chain_of_100000_ops_drops_without_recursion() {
    let d = device();
    let mut y = Array::zeros(&[4], DType::F32, &d).unwrap();
    for _ in 0..100_000 {
        y = (&y * &y).unwrap();
    }
    assert_eq!(d.live_nodes(), 100_001);
    drop(y);
    assert_empty(&d);
}

#[test]
fn evaluating_the_same_op_again_creates_no_pipeline() {
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &d).unwrap();
    let first = (&a + &a).unwrap();
    first.eval().unwrap();
    let after_first = d.pipelines_created();
    assert!(after_first >= 1);
    for _ in 0..5 {
        let again = (&a + &a).unwrap();
        again.eval().unwrap();
    }
    assert_eq!(
        d.pipelines_created(),
        after_first,
        "same op, same specialisation"
    );
    // A different shape of the same kind (contiguous) reuses it too.
    let b = Array::from_slice(&[1.0f32; 1025], &[1025], &d).unwrap();
    (&b + &b).unwrap().eval().unwrap();
    assert_eq!(d.pipelines_created(), after_first);
    // A new op is a new pipeline.
    (&a * &a).unwrap().eval().unwrap();
    assert_eq!(d.pipelines_created(), after_first + 1);
}

#[test]
fn eval_detaches_outputs_and_frees_intermediates() {
    let d = device();
    let x = Array::from_slice(&[1.0f32; 1024], &[1024], &d).unwrap();
    let y = (&(&x + 1.0).unwrap() * 3.0).unwrap();
    assert!(!y.is_evaluated());
    // The add, the multiply and their two scalars (lazy constants, which
    // become parameter words of the kernel at eval).
    assert_eq!(d.live_nodes(), 4);
    y.eval().unwrap();
    assert!(y.is_evaluated());
    assert_eq!(d.live_nodes(), 0);
    // x, y and the two scalars are the only live arrays; the intermediate is gone.
    assert_eq!(d.live_arrays(), 2);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![6.0; 1024]);
    drop((x, y));
    assert_empty(&d);
}

#[test]
fn eval_of_several_arrays_shares_their_ancestors() {
    let d = device();
    let x = Array::from_slice(&[2.0f32, 3.0], &[2], &d).unwrap();
    let s = (&x * &x).unwrap();
    let a = (&s + 1.0).unwrap();
    let b = (&s - 1.0).unwrap();
    let created = d.pipelines_created();
    wgarray::eval(&[&a, &b]).unwrap();
    assert!(
        s.is_evaluated(),
        "the shared ancestor was evaluated once, in the same eval"
    );
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![5.0, 10.0]);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![3.0, 8.0]);
    // The multiply, the add, the subtract, and (unfused) one fill for
    // the scalar constants.
    assert!(d.pipelines_created() <= created + 4);
}

/// Both outputs of a split, dropped in each order, before and after eval.
#[test]
fn split_outputs_drop_in_either_order_before_and_after_eval() {
    for evaluate in [false, true] {
        for first in [0, 1] {
            let d = device();
            let x = Array::from_slice(&(0..64).map(|i| i as f32).collect::<Vec<_>>(), &[8, 8], &d)
                .unwrap();
            let h = (&x + 1.0).unwrap();
            drop(x);
            let mut parts = h.split(2, 0).unwrap();
            drop(h);
            assert_eq!(d.live_nodes(), 3, "the add, its scalar and the split");
            if evaluate {
                wgarray::eval(&[&parts[0], &parts[1]]).unwrap();
                assert_eq!(d.live_nodes(), 0);
            }
            let a = parts.remove(first);
            let b = parts.remove(0);
            drop(a);
            if !evaluate {
                // The survivor still holds the split node, its input and
                // the input's scalar.
                assert_eq!(d.live_nodes(), 3);
            }
            let want: Vec<f32> = (0..64).map(|i| i as f32 + 1.0).collect();
            let got = b.to_vec::<f32>().unwrap();
            let off = if first == 0 { 32 } else { 0 };
            assert_eq!(
                got,
                want[off..off + 32].to_vec(),
                "evaluate={evaluate} first={first}"
            );
            drop(b);
            assert_empty(&d);
        }
    }
}

#[test]
fn a_kept_split_output_evaluates_after_its_sibling_is_gone() {
    let d = device();
    let x = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[6], &d).unwrap();
    let mut parts = x.split([2], 0).unwrap();
    drop(x);
    let kept = parts.pop().unwrap();
    drop(parts);
    assert_eq!(kept.to_vec::<i32>().unwrap(), vec![3, 4, 5, 6]);
    drop(kept);
    assert_empty(&d);
}

#[test]
fn arrays_are_send_and_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Array>();
    check::<wgarray::Device>();
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let a = a.clone();
            std::thread::spawn(move || (&a * (i as f64)).unwrap().to_vec::<f32>().unwrap())
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), vec![i as f32, 2.0 * i as f32]);
    }
}

#[test]
fn deep_chain_drop_and_eval() -> R {
    let d = device();
    {
        let mut y = Array::ones(&[4], DType::F32, &d).unwrap();
        for _ in 0..200_000 {
            y = y.reshape(&[2, 2])?.reshape(&[4])?;
        }
        drop(y);
        let mut y = Array::ones(&[4], DType::F32, &d).unwrap();
        for _ in 0..3000 {
            y = (&y + 1.0)?;
        }
        assert_eq!(y.to_vec::<f32>()?, vec![3001.0; 4]);
        let mut v = Array::ones(&[4], DType::F32, &d).unwrap();
        for _ in 0..50_000 {
            v = v.reshape(&[2, 2])?.transpose().reshape(&[4])?;
        }
        v.eval()?;
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn multi_output_lifetimes() -> R {
    let d = device();
    let x = Array::from_slice(&(0..64).map(|v| v as f32).collect::<Vec<_>>(), &[8, 8], &d)?;
    // split: reassignment between siblings before eval
    let mut p = (&x * 2.0)?.split(4, 0)?;
    p[0] = p[3].clone();
    p.swap(1, 2);
    let keep = std::mem::replace(&mut p[2], Array::scalar(0.0, DType::F32, &d)?);
    assert_eq!(
        keep.sum(None, false)?.item::<f32>()?,
        (16..32).map(|v| 2.0 * v as f32).sum::<f32>()
    );
    drop(p);
    drop(keep);
    // divmod: drop q, eval r; drop r, eval q
    let (q, r) = x.divmod(&Array::scalar(3.0, DType::F32, &d)?)?;
    drop(q);
    assert_eq!(r.to_vec::<f32>()?[..4], [0.0, 1.0, 2.0, 0.0]);
    drop(r);
    let (q, r) = x.divmod(&Array::scalar(3.0, DType::F32, &d)?)?;
    drop(r);
    assert_eq!(q.to_vec::<f32>()?[..4], [0.0, 0.0, 0.0, 1.0]);
    drop(q);
    // moments: var only
    let (m, v) = x.moments(None, false, 0)?;
    drop(m);
    let vv = v.item::<f32>()?;
    assert!((vv - 341.25).abs() < 1e-3, "var {vv}");
    drop(v);
    // moments evaluated then one dropped, the other assigned onto it
    let (mut m, v) = x.moments(0, true, 1)?;
    eval(&[&m, &v])?;
    m = v;
    drop(m);
    drop(x);
    assert_empty(&d);
    Ok(())
}

#[test]
fn split_view_then_drop_parent_chain() -> R {
    // a split whose input is a pending chain; drop every handle but one part
    let d = device();
    {
        let x = Array::ones(&[6, 4], DType::F32, &d).unwrap();
        let y = (&x * 2.0)?.transpose();
        let mut parts = y.split([1, 3], 0)?;
        drop((x, y));
        let last = parts.pop().unwrap();
        drop(parts);
        assert_eq!(last.to_vec::<f32>()?, vec![2.0; 6]);
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn concurrent_eval_of_shared_graph() -> R {
    let d = device();
    {
        let x = Array::from_slice(
            &(0..4096).map(|v| v as f32).collect::<Vec<_>>(),
            &[64, 64],
            &d,
        )?;
        let shared = (&x.matmul(&x)? * 0.001)?; // pending
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let s = shared.clone();
                std::thread::spawn(move || -> wgarray::Result<f32> {
                    let y = (&s + t as f64)?.sum(None, false)?;
                    let parts = s.split(2, 1)?;
                    parts[t % 2].eval()?;
                    y.item::<f32>()
                })
            })
            .collect();
        let results: Vec<f32> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        let base = shared.sum(None, false)?.item::<f32>()?;
        for (t, r) in results.iter().enumerate() {
            let want = base + (t * 4096) as f32;
            assert!(
                (r - want).abs() <= 1e-4 * want.abs(),
                "thread {t}: {r} vs {want}"
            );
        }
    }
    assert_empty(&d);
    Ok(())
}

/// Equal scalar operands share one lazy constant node while memory history
/// is off (`graph::constants`): a chain of `x + 1.0` records one node per
/// op. A shared constant read by a node outside an eval stays a parameter
/// word there (never a buffer of its own), and both graphs still compute
/// their own values; with history on each scalar keeps a node of its own.
#[test]
fn equal_scalar_operands_share_one_constant_node() -> R {
    let d = device();
    let host: Vec<f32> = (0..33).map(|i| (i * 7 % 13) as f32 - 6.5).collect();
    let x = Array::from_slice(&host, &[33], &d)?;
    let y = Array::from_slice(&host[..7], &[7], &d)?;
    let a = (&x + 2.5)?;
    let b = (&y * 2.5)?;
    let c = (&a - 2.5)?;
    // Three ops, one constant between them.
    assert_eq!(d.live_nodes(), 4);
    // The constant is also read by `b`, outside this eval: still no
    // dispatch of its own.
    let before = d.dispatches();
    c.eval()?;
    assert_eq!(d.dispatches() - before, 1, "one fused kernel");
    assert_eq!(d.live_nodes(), 2, "b and the constant it reads");
    let before = d.dispatches();
    b.eval()?;
    assert_eq!(d.dispatches() - before, 1);
    assert_eq!(d.live_nodes(), 0);
    let (av, bv, cv) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?, c.to_vec::<f32>()?);
    drop((a, b, c));
    for (i, &h) in host.iter().enumerate() {
        assert_eq!(av[i], h + 2.5);
        assert_eq!(cv[i], (h + 2.5) - 2.5);
    }
    for (i, &h) in host[..7].iter().enumerate() {
        assert_eq!(bv[i], h * 2.5);
    }
    // Other values and dtypes are other constants.
    let e = (&(&x + 2.5)? + 3.5)?;
    let f = (&x.astype(DType::I32)? + 2)?;
    assert_eq!(d.live_nodes(), 2 + 2 + 2 + 1);
    assert_eq!(e.to_vec::<f32>()?[3], host[3] + 2.5 + 3.5);
    assert_eq!(f.to_vec::<i32>()?[3], host[3] as i32 + 2);
    drop((e, f));
    assert_eq!(d.live_nodes(), 0);
    // History on: each scalar is its own node, labelled by its call site.
    d.record_memory_history(true);
    let g = (&(&x + 2.5)? + 2.5)?;
    assert_eq!(d.live_nodes(), 4);
    assert_eq!(g.to_vec::<f32>()?[5], host[5] + 5.0);
    d.record_memory_history(false);
    drop((g, x, y));
    assert_empty(&d);
    Ok(())
}
