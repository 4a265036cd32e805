//! `wgarray::distributed` under MPI, on localhost: every test runs on every
//! rank of `mpirun -np 2` and `-np 3`, in the same order, against host
//! references every rank computes for all ranks' inputs.
//!
//! Not a libtest harness (`harness = false`, and `test = false` so that a
//! plain `cargo test` does not run it): MPI needs every rank to make the
//! same calls in the same order, on one thread. Run it with
//! `cargo test --all-features --test distributed` (or `bash scripts/test.sh`):
//! started without an MPI launcher, it starts itself under `mpirun` with 2
//! and then 3 ranks (as root with `--allow-run-as-root`, always with
//! `--oversubscribe --bind-to none`, so that 3 ranks fit 2 cores), and
//! fails loudly when `mpirun` is missing. `WGARRAY_MPI_NP="2 3"` chooses the
//! rank counts.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use common::arrays::{of_dtype, random_values};
use common::{Rng, assert_empty, poison_pool};
use wgarray::distributed::{self, Group};
use wgarray::{Array, DType, Device, Error};

struct Ctx {
    group: Group,
    device: Device,
    rank: usize,
    size: usize,
}

fn main() -> ExitCode {
    if !distributed::launched_by_mpirun() {
        return launch();
    }
    let device = common::device();
    let group = distributed::init(&device).expect("init");
    group.set_timeout(Duration::from_secs(60));
    let ctx = Ctx {
        rank: group.rank(),
        size: group.size(),
        group,
        device,
    };
    type Test = fn(&Ctx);
    let tests: &[(&str, Test)] = &[
        (
            "reductions_match_a_host_reference",
            reductions_match_a_host_reference,
        ),
        ("max_and_min_propagate_nan", max_and_min_propagate_nan),
        (
            "all_gather_concatenates_in_rank_order",
            all_gather_concatenates_in_rank_order,
        ),
        ("broadcast_from_every_root", broadcast_from_every_root),
        (
            "send_and_recv_pair_up_in_a_ring",
            send_and_recv_pair_up_in_a_ring,
        ),
        ("empty_arrays", empty_arrays),
        (
            "mismatched_calls_fail_on_every_rank",
            mismatched_calls_fail_on_every_rank,
        ),
        (
            "bad_input_is_a_typed_error_on_every_rank",
            bad_input_is_a_typed_error_on_every_rank,
        ),
        (
            "a_receive_nobody_sends_times_out",
            a_receive_nobody_sends_times_out,
        ),
        ("split_groups", split_groups),
    ];
    let mut failed = Vec::new();
    for (name, test) in tests {
        let start = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| test(&ctx)));
        let ok = r.is_ok();
        // Every rank hears whether every rank passed, and starts the next
        // test together.
        let all_ok = distributed::all_min(
            &Array::from_slice(&[ok], &[1], &ctx.device).unwrap(),
            &ctx.group,
        )
        .and_then(|a| a.item::<bool>());
        println!(
            "rank {}/{}: {name} ... {} ({:.2} s)",
            ctx.rank,
            ctx.size,
            if ok { "ok" } else { "FAILED" },
            start.elapsed().as_secs_f64()
        );
        if !ok || all_ok != Ok(true) {
            failed.push(*name);
        }
        if all_ok.is_err() {
            eprintln!("rank {}: the group is unusable: {all_ok:?}", ctx.rank);
            break;
        }
    }
    // Last, since it breaks the group on rank 0.
    if failed.is_empty() {
        let r = catch_unwind(AssertUnwindSafe(|| {
            a_rank_that_never_joins_breaks_the_group(&ctx)
        }));
        println!(
            "rank {}/{}: a_rank_that_never_joins_breaks_the_group ... {}",
            ctx.rank,
            ctx.size,
            if r.is_ok() { "ok" } else { "FAILED" }
        );
        if r.is_err() {
            failed.push("a_rank_that_never_joins_breaks_the_group");
        }
    }
    if failed.is_empty() {
        if ctx.rank == 0 {
            println!("{} ranks: {} tests passed", ctx.size, tests.len() + 1);
        }
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "rank {}: failed (here or on another rank): {failed:?}",
            ctx.rank
        );
        ExitCode::FAILURE
    }
}

/// Started without an MPI launcher: run this binary under `mpirun` with
/// each rank count, each run within 10 minutes.
fn launch() -> ExitCode {
    let exe = std::env::current_exe().expect("the test binary's path");
    let counts = std::env::var("WGARRAY_MPI_NP").unwrap_or_else(|_| "2 3".into());
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    for np in counts.split_whitespace() {
        let mut cmd = Command::new("mpirun");
        if root {
            cmd.arg("--allow-run-as-root");
        }
        cmd.args(["--oversubscribe", "--bind-to", "none", "--timeout", "600"]);
        for var in [
            "WGARRAY_BACKEND",
            "WGARRAY_ADAPTER",
            "XDG_RUNTIME_DIR",
            "RUST_BACKTRACE",
        ] {
            if std::env::var_os(var).is_some() {
                cmd.args(["-x", var]);
            }
        }
        cmd.args(["-np", np]).arg(&exe);
        println!("running: {cmd:?}");
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("the MPI tests failed with {np} ranks ({s})");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!(
                    "the MPI tests need `mpirun` ({e}): install Open MPI \
                     (Debian/Ubuntu, as root: `bash scripts/install-deps.sh`, or \
                     `apt-get install -y libopenmpi-dev openmpi-bin`)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Every dtype this rank's device holds (all ranks use one backend).
fn dtypes(d: &Device) -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|&t| t != DType::F64 || d.features().contains(wgarray::wgpu::Features::SHADER_F64))
        .collect()
}

/// Rank `r`'s values for a test's `seed`: every rank can compute every
/// rank's.
fn values(seed: u64, r: usize, n: usize, dtype: DType) -> Vec<f64> {
    random_values(&mut Rng::new(seed * 1000 + r as u64), n, dtype)
}

/// `v` wrapped into an integer dtype's range (sums wrap, as in wgarray).
fn wrap(v: f64, dtype: DType) -> f64 {
    match dtype.integer_range() {
        Some((lo, hi)) if dtype != DType::Bool => {
            let m = (hi - lo + 1) as i128;
            ((v as i128 - lo as i128).rem_euclid(m) + lo as i128) as f64
        }
        _ => v,
    }
}

/// The reduction `op` (0 sum, 1 max, 2 min) of every rank's values.
fn reference(op: u8, per_rank: &[Vec<f64>], dtype: DType) -> Vec<f64> {
    let n = per_rank[0].len();
    (0..n)
        .map(|i| {
            let col = per_rank.iter().map(|v| v[i]);
            let r = match op {
                0 => col.sum::<f64>(),
                1 => col.fold(f64::NEG_INFINITY, f64::max),
                _ => col.fold(f64::INFINITY, f64::min),
            };
            match dtype {
                DType::Bool => (r != 0.0) as u8 as f64,
                _ => wrap(r, dtype),
            }
        })
        .collect()
}

/// `f`'s result, with the device's active memory checked: it grows by the
/// result's buffer only, and is back where it was once the result is
/// dropped.
fn checked(ctx: &Ctx, what: &str, f: impl FnOnce() -> wgarray::Result<Array>) -> Vec<f64> {
    let before = ctx.device.active_memory();
    let out = f().unwrap_or_else(|e| panic!("{what}: {e}"));
    let grown = ctx.device.active_memory() - before;
    let rounded = (out.nbytes() as u64).max(256);
    assert!(
        grown >= out.nbytes() as u64 && grown <= 2 * rounded + 2 * 16384,
        "{what}: active memory grew by {grown} for a result of {} bytes",
        out.nbytes()
    );
    let v = out.to_f64_vec().unwrap();
    drop(out);
    assert_eq!(
        ctx.device.active_memory(),
        before,
        "{what}: back to the baseline"
    );
    v
}

fn reductions_match_a_host_reference(ctx: &Ctx) {
    poison_pool(&ctx.device, 4096);
    type Reduce = fn(&Array, &Group) -> wgarray::Result<Array>;
    let ops: [(u8, &str, Reduce); 3] = [
        (0, "all_sum", distributed::all_sum),
        (1, "all_max", distributed::all_max),
        (2, "all_min", distributed::all_min),
    ];
    for dtype in dtypes(&ctx.device) {
        for n in [1usize, 7, 33, 1025] {
            let per_rank: Vec<Vec<f64>> = (0..ctx.size).map(|r| values(1, r, n, dtype)).collect();
            let x = of_dtype(&ctx.device, &per_rank[ctx.rank], &[n], dtype);
            for (op, name, f) in ops {
                let got = checked(ctx, &format!("{name} {dtype} [{n}]"), || f(&x, &ctx.group));
                assert_eq!(got, reference(op, &per_rank, dtype), "{name} {dtype} [{n}]");
            }
        }
        // A transposed view: [5, 7] seen as [7, 5].
        let per_rank: Vec<Vec<f64>> = (0..ctx.size).map(|r| values(2, r, 35, dtype)).collect();
        let x = of_dtype(&ctx.device, &per_rank[ctx.rank], &[5, 7], dtype).transpose();
        let got = checked(ctx, &format!("all_sum {dtype} transposed"), || {
            distributed::all_sum(&x, &ctx.group)
        });
        let t: Vec<Vec<f64>> = per_rank
            .iter()
            .map(|v| (0..35).map(|i| v[(i % 5) * 7 + i / 5]).collect())
            .collect();
        assert_eq!(got, reference(0, &t, dtype), "{dtype} transposed");
    }
    assert_empty(&ctx.device);
}

fn max_and_min_propagate_nan(ctx: &Ctx) {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let mut v = vec![ctx.rank as f64; 5];
        if ctx.rank == ctx.size - 1 {
            v[0] = f64::NAN;
        }
        let x = of_dtype(&ctx.device, &v, &[5], dtype);
        for f in [
            distributed::all_max,
            distributed::all_min,
            distributed::all_sum,
        ] {
            let got = f(&x, &ctx.group).unwrap().to_f64_vec().unwrap();
            assert!(got[0].is_nan(), "{dtype}: {got:?}");
            assert!(got[1..].iter().all(|g| g.is_finite()), "{dtype}: {got:?}");
        }
    }
    assert_empty(&ctx.device);
}

fn all_gather_concatenates_in_rank_order(ctx: &Ctx) {
    for dtype in dtypes(&ctx.device) {
        // Rank r gives r rows (rank 0 none) of 3: uneven, one empty.
        let rows = |r: usize| r;
        let per_rank: Vec<Vec<f64>> = (0..ctx.size)
            .map(|r| values(3, r, rows(r) * 3, dtype))
            .collect();
        let x = of_dtype(
            &ctx.device,
            &per_rank[ctx.rank],
            &[rows(ctx.rank), 3],
            dtype,
        );
        let before = ctx.device.active_memory();
        let g = distributed::all_gather(&x, &ctx.group).unwrap();
        assert_eq!(g.shape(), [(0..ctx.size).map(rows).sum::<usize>(), 3]);
        let want: Vec<f64> = per_rank.concat();
        assert_eq!(g.to_f64_vec().unwrap(), want, "{dtype}");
        drop(g);
        assert_eq!(ctx.device.active_memory(), before);
        // Scalars gather into a vector of one element per rank.
        let s = of_dtype(&ctx.device, &[ctx.rank as f64], &[], dtype);
        let g = distributed::all_gather(&s, &ctx.group).unwrap();
        assert_eq!(g.shape(), [ctx.size]);
        let want: Vec<f64> = (0..ctx.size)
            .map(|r| common::arrays::round_to(r as f64, dtype))
            .collect();
        assert_eq!(g.to_f64_vec().unwrap(), want, "{dtype} scalars");
    }
    // Odd sizes of a packed dtype: 7 i8 per rank.
    let per_rank: Vec<Vec<f64>> = (0..ctx.size).map(|r| values(4, r, 7, DType::I8)).collect();
    let x = of_dtype(&ctx.device, &per_rank[ctx.rank], &[7], DType::I8);
    let g = distributed::all_gather(&x, &ctx.group).unwrap();
    assert_eq!(g.to_f64_vec().unwrap(), per_rank.concat());
    drop((x, g));
    assert_empty(&ctx.device);
}

fn broadcast_from_every_root(ctx: &Ctx) {
    for root in 0..ctx.size {
        for dtype in [DType::F32, DType::F16, DType::U8, DType::Bool] {
            let per_rank: Vec<Vec<f64>> = (0..ctx.size).map(|r| values(5, r, 33, dtype)).collect();
            let x = of_dtype(&ctx.device, &per_rank[ctx.rank], &[3, 11], dtype);
            let got = distributed::broadcast(&x, root, &ctx.group).unwrap();
            assert_eq!(got.shape(), [3, 11]);
            let want: Vec<f64> = per_rank[root]
                .iter()
                .map(|&v| common::arrays::round_to(v, dtype))
                .collect();
            assert_eq!(got.to_f64_vec().unwrap(), want, "root {root} {dtype}");
        }
    }
    assert_empty(&ctx.device);
}

fn send_and_recv_pair_up_in_a_ring(ctx: &Ctx) {
    let (next, prev) = (
        (ctx.rank + 1) % ctx.size,
        (ctx.rank + ctx.size - 1) % ctx.size,
    );
    for (dtype, n) in [
        (DType::F32, 1025usize),
        (DType::F16, 7),
        (DType::I8, 33),
        (DType::Bool, 5),
    ] {
        let mine = values(6, ctx.rank, n, dtype);
        let x = of_dtype(&ctx.device, &mine, &[n], dtype);
        let like = Array::empty(&[n], dtype, &ctx.device).unwrap();
        let want: Vec<f64> = values(6, prev, n, dtype)
            .iter()
            .map(|&v| common::arrays::round_to(v, dtype))
            .collect();
        // Even ranks send first, odd ranks receive first: every send finds
        // its receive (with 3 ranks, rank 2 sends to rank 0 while rank 0
        // sends to rank 1, which receives first).
        let got = if ctx.rank % 2 == 0 {
            distributed::send(&x, next, &ctx.group).unwrap();
            distributed::recv_like(&like, prev, &ctx.group).unwrap()
        } else {
            let got = distributed::recv(&[n], dtype, prev, &ctx.group).unwrap();
            distributed::send(&x, next, &ctx.group).unwrap();
            got
        };
        assert_eq!(got.to_f64_vec().unwrap(), want, "{dtype}");
    }
    assert_empty(&ctx.device);
}

fn empty_arrays(ctx: &Ctx) {
    for shape in [&[0usize][..], &[3, 0], &[0, 4]] {
        let x = Array::zeros(shape, DType::F32, &ctx.device).unwrap();
        for f in [
            distributed::all_sum,
            distributed::all_max,
            distributed::all_min,
        ] {
            let y = f(&x, &ctx.group).unwrap();
            assert_eq!((y.shape(), y.size()), (shape, 0));
        }
        let b = distributed::broadcast(&x, ctx.size - 1, &ctx.group).unwrap();
        assert_eq!(b.shape(), shape);
    }
    let x = Array::zeros(&[0, 4], DType::I16, &ctx.device).unwrap();
    let g = distributed::all_gather(&x, &ctx.group).unwrap();
    assert_eq!(g.shape(), [0, 4]);
    drop((x, g));
    assert_empty(&ctx.device);
}

/// `r`, which must be the error every rank gets for a call that does not
/// fit together: [`Error::RankMismatch`] of `op` whose message contains
/// `why`.
fn mismatch(r: wgarray::Result<Array>, op: &str, why: &str) {
    match r {
        Err(Error::RankMismatch { op: o, message }) => {
            assert_eq!(o, op);
            assert!(message.contains(why), "{message}");
        }
        r => panic!("{op}: expected RankMismatch ({why}), got {r:?}"),
    }
}

fn mismatched_calls_fail_on_every_rank(ctx: &Ctx) {
    let d = &ctx.device;
    let base = d.active_memory();
    // Shapes.
    {
        let x = Array::ones(&[ctx.rank + 2], DType::F32, d).unwrap();
        mismatch(
            distributed::all_sum(&x, &ctx.group),
            "all_sum",
            "different shapes",
        );
        mismatch(
            distributed::broadcast(&x, 0, &ctx.group),
            "broadcast",
            "different shapes",
        );
    }
    // Dtypes.
    {
        let dtype = if ctx.rank == 0 {
            DType::F32
        } else {
            DType::I32
        };
        let x = Array::ones(&[4], dtype, d).unwrap();
        mismatch(
            distributed::all_max(&x, &ctx.group),
            "all_max",
            "different dtypes",
        );
        mismatch(
            distributed::all_gather(&x, &ctx.group),
            "all_gather",
            "different dtypes",
        );
    }
    // Operations.
    {
        let x = Array::ones(&[4], DType::F32, d).unwrap();
        let r = if ctx.rank == 0 {
            distributed::all_max(&x, &ctx.group)
        } else {
            distributed::all_sum(&x, &ctx.group)
        };
        let op = if ctx.rank == 0 { "all_max" } else { "all_sum" };
        mismatch(r, op, "different operations");
        // Roots.
        let root = usize::from(ctx.rank == 0);
        mismatch(
            distributed::broadcast(&x, root, &ctx.group),
            "broadcast",
            "different roots",
        );
    }
    // all_gather: the first axis may differ, the others not.
    {
        let x = Array::ones(&[2, ctx.rank + 1], DType::F32, d).unwrap();
        mismatch(
            distributed::all_gather(&x, &ctx.group),
            "all_gather",
            "past the first axis",
        );
    }
    assert_eq!(d.active_memory(), base);
    // The group is still usable.
    let one = Array::ones(&[3], DType::F32, d).unwrap();
    let s = distributed::all_sum(&one, &ctx.group).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![ctx.size as f32; 3]);
    drop((one, s));
    assert_empty(d);
}

fn bad_input_is_a_typed_error_on_every_rank(ctx: &Ctx) {
    let d = &ctx.device;
    let other = common::device();
    // An array of another device on the last rank: its own error there,
    // PeerFailed naming it on the others.
    let last = ctx.size - 1;
    let x = if ctx.rank == last {
        Array::ones(&[4], DType::F32, &other).unwrap()
    } else {
        Array::ones(&[4], DType::F32, d).unwrap()
    };
    for (op, r) in [
        ("all_sum", distributed::all_sum(&x, &ctx.group)),
        ("all_gather", distributed::all_gather(&x, &ctx.group)),
        ("broadcast", distributed::broadcast(&x, 0, &ctx.group)),
    ] {
        match r {
            Err(Error::DeviceMismatch { op: o, lhs, rhs }) if ctx.rank == last => {
                assert_eq!(o, op);
                assert_eq!((lhs, rhs), (d.to_string(), other.to_string()));
            }
            Err(Error::PeerFailed { op: o, peer }) if ctx.rank != last => {
                assert_eq!((o, peer), (op, last));
            }
            r => panic!("rank {}: {op}: {r:?}", ctx.rank),
        }
    }
    drop(x);
    // A root out of range: on every rank, or on rank 0 alone.
    let x = Array::ones(&[4], DType::F32, d).unwrap();
    match distributed::broadcast(&x, ctx.size, &ctx.group) {
        Err(Error::InvalidRank {
            op: "broadcast",
            rank,
            size,
            me,
        }) => {
            assert_eq!((rank, size, me), (ctx.size, ctx.size, ctx.rank))
        }
        r => panic!("{r:?}"),
    }
    let root = if ctx.rank == 0 { ctx.size + 5 } else { 0 };
    match distributed::broadcast(&x, root, &ctx.group) {
        Err(Error::InvalidRank { .. }) if ctx.rank == 0 => {}
        Err(Error::PeerFailed { peer: 0, .. }) if ctx.rank != 0 => {}
        r => panic!("rank {}: {r:?}", ctx.rank),
    }
    // Sends to no one: refused at once, nothing sent.
    if ctx.rank == 0 {
        for dst in [ctx.size, 0] {
            assert!(matches!(
                distributed::send(&x, dst, &ctx.group),
                Err(Error::InvalidRank { op: "send", .. })
            ));
        }
        assert!(matches!(
            distributed::recv(&[4], DType::F32, ctx.size + 1, &ctx.group),
            Err(Error::InvalidRank { op: "recv", .. })
        ));
    }
    // A send and a recv_like of different dtypes: both sides say so.
    if ctx.rank < 2 {
        let peer = 1 - ctx.rank;
        let r = if ctx.rank == 0 {
            distributed::send(&x, peer, &ctx.group).map(|()| x.clone())
        } else {
            let like = Array::zeros(&[4], DType::I32, d).unwrap();
            distributed::recv_like(&like, peer, &ctx.group)
        };
        let op = if ctx.rank == 0 { "send" } else { "recv" };
        mismatch(
            r,
            op,
            "rank 0 sends float32 [4] and rank 1 expects int32 [4]",
        );
        // A recv_like of another device's array: the sender is told.
        let r = if ctx.rank == 0 {
            distributed::send(&x, peer, &ctx.group).map(|()| x.clone())
        } else {
            let like = Array::zeros(&[4], DType::F32, &other).unwrap();
            distributed::recv_like(&like, peer, &ctx.group)
        };
        match r {
            Err(Error::PeerFailed {
                op: "send",
                peer: 1,
            }) if ctx.rank == 0 => {}
            Err(Error::DeviceMismatch {
                op: "recv_like", ..
            }) if ctx.rank == 1 => {}
            r => panic!("rank {}: {r:?}", ctx.rank),
        }
        // A send of another device's array: the receiver is told.
        let r = if ctx.rank == 0 {
            let y = Array::ones(&[4], DType::F32, &other).unwrap();
            distributed::send(&y, peer, &ctx.group).map(|()| y)
        } else {
            distributed::recv(&[4], DType::F32, peer, &ctx.group)
        };
        match r {
            Err(Error::DeviceMismatch { op: "send", .. }) if ctx.rank == 0 => {}
            Err(Error::PeerFailed {
                op: "recv",
                peer: 0,
            }) if ctx.rank == 1 => {}
            r => panic!("rank {}: {r:?}", ctx.rank),
        }
        // A receiver with no memory for the data: it says so before any
        // data moves, and the sender does not wait.
        let r = if ctx.rank == 0 {
            let big = Array::zeros(&[1 << 16], DType::F32, d).unwrap();
            distributed::send(&big, peer, &ctx.group).map(|()| big)
        } else {
            let old = d.set_memory_limit(d.active_memory() + 1024);
            let r = distributed::recv(&[1 << 16], DType::F32, peer, &ctx.group);
            d.set_memory_limit(old);
            r
        };
        match r {
            Err(Error::PeerFailed {
                op: "send",
                peer: 1,
            }) if ctx.rank == 0 => {}
            Err(Error::OutOfMemory { .. }) if ctx.rank == 1 => {}
            r => panic!("rank {}: {r:?}", ctx.rank),
        }
    }
    drop(x);
    distributed::barrier(&ctx.group).unwrap();
    assert_empty(d);
    assert_empty(&other);
}

fn a_receive_nobody_sends_times_out(ctx: &Ctx) {
    if ctx.rank == 0 {
        let old = ctx.group.set_timeout(Duration::from_millis(500));
        let t = Instant::now();
        let r = distributed::recv(&[4], DType::F32, 1, &ctx.group);
        ctx.group.set_timeout(old);
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
    // Rank 1 sends only once rank 0's receive has timed out.
    distributed::barrier(&ctx.group).unwrap();
    // Cancelled cleanly: the pair still talks.
    if ctx.rank < 2 {
        let x = Array::from_slice(&[ctx.rank as f32; 4], &[4], &ctx.device).unwrap();
        if ctx.rank == 1 {
            distributed::send(&x, 0, &ctx.group).unwrap();
        } else {
            let got = distributed::recv(&[4], DType::F32, 1, &ctx.group).unwrap();
            assert_eq!(got.to_vec::<f32>().unwrap(), [1.0; 4]);
        }
    }
    distributed::barrier(&ctx.group).unwrap();
    assert_empty(&ctx.device);
}

fn split_groups(ctx: &Ctx) {
    let sub = ctx.group.split((ctx.rank % 2) as i32, -1).unwrap();
    let members: Vec<usize> = (0..ctx.size).filter(|r| r % 2 == ctx.rank % 2).collect();
    assert_eq!(sub.size(), members.len());
    assert_eq!(sub.rank(), ctx.rank / 2);
    let x = Array::from_slice(&[ctx.rank as i32], &[1], &ctx.device).unwrap();
    let s = distributed::all_sum(&x, &sub).unwrap();
    assert_eq!(
        s.item::<i32>().unwrap(),
        members.iter().sum::<usize>() as i32
    );
    // Reversed by key.
    let rev = ctx.group.split(0, (ctx.size - ctx.rank) as i32).unwrap();
    assert_eq!(rev.rank(), ctx.size - 1 - ctx.rank);
    assert!(matches!(
        ctx.group.split(if ctx.rank == 0 { -1 } else { 0 }, 0),
        Err(Error::InvalidArgument(_)) | Err(Error::PeerFailed { .. })
    ));
    drop((x, s));
    assert_empty(&ctx.device);
}

/// Rank 0 waits for a barrier the others join only after its timeout: a
/// typed error within the bound, the group broken for every later call on
/// rank 0; the others' barrier completes against rank 0's abandoned one
/// (which finishes before MPI is finalised).
fn a_rank_that_never_joins_breaks_the_group(ctx: &Ctx) {
    if ctx.rank == 0 {
        ctx.group.set_timeout(Duration::from_millis(300));
        let t = Instant::now();
        let r = distributed::barrier(&ctx.group);
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let x = Array::ones(&[2], DType::F32, &ctx.device).unwrap();
        match distributed::all_sum(&x, &ctx.group) {
            Err(Error::Distributed {
                op: "all_sum",
                message,
            }) => {
                assert!(message.contains("unusable"), "{message}")
            }
            r => panic!("{r:?}"),
        }
        drop(x);
        assert_empty(&ctx.device);
    } else {
        std::thread::sleep(Duration::from_millis(1500));
        distributed::barrier(&ctx.group).unwrap();
    }
}
