//! `distributed::all_sum` of f32 arrays from 1 KiB to 64 MiB against MPI's
//! own `MPI_Allreduce` of host buffers of the same size, in the same run,
//! on 2 ranks (feature `mpi`):
//!
//! ```sh
//! cargo bench --features mpi --bench all_sum
//! ```
//!
//! Not criterion: every rank must make the same calls, and criterion
//! chooses its iteration counts per process. Started without an MPI
//! launcher, the bench starts itself under `mpirun -np 2` (as root with
//! `--allow-run-as-root`, always `--oversubscribe --bind-to none`);
//! `WGARRAY_MPI_NP` chooses another rank count. Each size: two warm-up
//! calls, then `reps` timed calls, each between barriers, of the whole
//! `all_sum` (read-back, the call exchange, `MPI_Allreduce`, upload, and
//! `Device::synchronize` so that the result is on the device), and the same
//! number of `MPI_Allreduce`s of a host `Vec<f32>`; the median of each.
//! Bandwidth is the array's bytes over the median time (MPI's "algorithm
//! bandwidth"). Rank 0 prints the table; the floor (at 64 MiB, `all_sum` at
//! least 0.5 of MPI's bandwidth) is checked and printed.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use wgarray::{Array, Device, distributed};

const SIZES: [usize; 9] = [
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
];

fn main() -> ExitCode {
    if !distributed::launched_by_mpirun() {
        return launch();
    }
    let device = Device::new_default().expect("a device");
    device.wait_warm_up();
    let group = distributed::init(&device).expect("init");
    group.set_timeout(Duration::from_secs(300));
    let world = SimpleCommunicator::world();
    let rank = group.rank();
    if rank == 0 {
        println!(
            "all_sum on {} ranks, {} ({:?}); machine shared, medians of the reps",
            group.size(),
            device.info(),
            device.backend()
        );
        println!(
            "{:>9} {:>5} {:>12} {:>10} {:>12} {:>10} {:>7}",
            "bytes", "reps", "all_sum ms", "GB/s", "MPI ms", "GB/s", "ratio"
        );
    }
    let mut floor = None;
    for &bytes in &SIZES {
        let n = bytes / 4;
        let reps = (64usize << 20).div_ceil(bytes).clamp(5, 200);
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 + rank as f32).collect();
        let x = Array::from_slice(&host, &[n], &device).unwrap();
        x.eval().unwrap();
        device.synchronize().unwrap();
        let mut recv = vec![0f32; n];
        let time_ours = |reps: usize| -> Vec<f64> {
            (0..reps)
                .map(|_| {
                    distributed::barrier(&group).unwrap();
                    let t = Instant::now();
                    let y = distributed::all_sum(&x, &group).unwrap();
                    device.synchronize().unwrap();
                    let s = t.elapsed().as_secs_f64();
                    drop(y);
                    s
                })
                .collect()
        };
        let mut time_mpi = |reps: usize| -> Vec<f64> {
            (0..reps)
                .map(|_| {
                    world.barrier();
                    let t = Instant::now();
                    world.all_reduce_into(&host[..], &mut recv[..], SystemOperation::sum());
                    t.elapsed().as_secs_f64()
                })
                .collect()
        };
        // Warm-up, then the timed runs interleaved in halves, so that a
        // burst of load from another process slows both.
        time_ours(2);
        time_mpi(2);
        let mut ours = time_ours(reps.div_ceil(2));
        let mut theirs = time_mpi(reps.div_ceil(2));
        ours.extend(time_ours(reps / 2));
        theirs.extend(time_mpi(reps / 2));
        // The result is right (every rank's values summed).
        let check = distributed::all_sum(&x, &group)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let size = group.size() as f32;
        let ranks_sum = (0..group.size()).sum::<usize>() as f32;
        assert!(
            check
                .iter()
                .enumerate()
                .all(|(i, &v)| v == (i % 1000) as f32 * size + ranks_sum),
            "all_sum's result"
        );
        let (a, m) = (median(&mut ours), median(&mut theirs));
        let gbs = |s: f64| bytes as f64 / s / 1e9;
        if rank == 0 {
            println!(
                "{bytes:>9} {reps:>5} {:>12.3} {:>10.3} {:>12.3} {:>10.3} {:>7.2}",
                a * 1e3,
                gbs(a),
                m * 1e3,
                gbs(m),
                m / a
            );
        }
        if bytes == 64 << 20 {
            floor = Some(m / a);
        }
    }
    if rank == 0 {
        let ratio = floor.unwrap_or(0.0);
        println!(
            "floor at 64 MiB: all_sum at {ratio:.2} of MPI_Allreduce's bandwidth (needs >= 0.5): {}",
            if ratio >= 0.5 { "met" } else { "NOT MET" }
        );
    }
    ExitCode::SUCCESS
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Started without an MPI launcher: this binary under `mpirun`.
fn launch() -> ExitCode {
    let exe = std::env::current_exe().expect("the bench's path");
    let np = std::env::var("WGARRAY_MPI_NP").unwrap_or_else(|_| "2".into());
    let mut cmd = Command::new("mpirun");
    if Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
    {
        cmd.arg("--allow-run-as-root");
    }
    cmd.args(["--oversubscribe", "--bind-to", "none"]);
    for var in ["WGARRAY_BACKEND", "WGARRAY_ADAPTER", "XDG_RUNTIME_DIR"] {
        if std::env::var_os(var).is_some() {
            cmd.args(["-x", var]);
        }
    }
    cmd.args(["-np", np.trim()]).arg(exe);
    match cmd.status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("the benchmark failed under mpirun ({s})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("the benchmark needs `mpirun` ({e}): bash scripts/install-deps.sh");
            ExitCode::FAILURE
        }
    }
}
