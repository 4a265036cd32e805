//! `wgbench gemm`: every GEMM kernel an adapter may choose, and a grid of
//! workgroup-memory tiles, timed on one shape: which family and tile a GPU
//! runs fastest, beside the one the device's tuning chose
//! (`wgarray::tuning`).
//!
//! Each kernel is forced with `Device::set_gemm_kernel`, its result checked
//! at sampled positions against f64 dot products of the very inputs (the
//! bound of the `run` suite's matmul check), then timed: the median of
//! `--samples` evaluations, each of enough products in one submission to
//! last about 20 ms, host wall clock around the submission and the wait.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use wgarray::tuning::{GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device};

use crate::cases::matmul::{Inputs, column};
use crate::cases::upload;
use crate::measure::{self, Outcome};
use crate::{Stop, adapters, out, writable};

#[derive(clap::Args, Debug)]
pub struct GemmArgs {
    /// Only adapters whose name contains this (case-insensitive).
    #[arg(long, env = "WGARRAY_ADAPTER", value_name = "SUBSTR")]
    adapter: Option<String>,
    /// Only adapters of this backend: vulkan, gl, dx12, metal (empty: any).
    #[arg(long, env = "WGARRAY_BACKEND", value_name = "B")]
    backend: Option<String>,
    /// The product's M, K and N.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4096,4096,4096",
        value_name = "M,K,N"
    )]
    shape: Vec<usize>,
    /// Dtypes of both operands (comma-separated): f32, f16, bf16.
    #[arg(long, value_delimiter = ',', default_value = "f32,f16,bf16", value_parser = crate::accuracy::dtype)]
    dtypes: Vec<DType>,
    /// A kernel to time beside the tuning's candidates, as the tuning file
    /// writes it (e.g. "shared 16 16 8 2 8"); may be repeated.
    #[arg(long = "kernel", value_name = "KERNEL")]
    kernels: Vec<String>,
    /// Also time every workgroup-memory tile of a grid (workgroups of 128
    /// to 256 threads, 4 to 16 rows and 4 to 16 columns per thread, K steps
    /// of 8 to 32) that the device can run: for the first dtype all of
    /// them, for the others the six fastest of the first.
    #[arg(long)]
    sweep: bool,
    /// B's layout: `row` (`[K, N]` row-major, `x @ w`) or `transposed` (a
    /// transposed view of a row-major `[N, K]`: `x @ w.T`, PyTorch's
    /// `nn.Linear` weights).
    #[arg(long, value_parser = ["row", "transposed"], default_value = "row")]
    b_layout: String,
    /// Timed evaluations per kernel (the median is reported).
    #[arg(long, default_value_t = 5, value_name = "N")]
    samples: usize,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One kernel's result on one dtype.
struct Timed {
    kernel: GemmKernel,
    /// GFLOP/s and median seconds per product, or why not.
    result: Result<(f64, f64), String>,
}

/// The workgroup-memory tiles `--sweep` tries (those valid with at most
/// 128 accumulators per thread; the device further drops those it cannot
/// run).
fn grid() -> Vec<GemmKernel> {
    let mut v = Vec::new();
    for (wg_x, wg_y) in [(16, 16), (32, 8), (8, 32), (16, 8), (8, 16)] {
        for tm in [4, 8, 16] {
            for nv in [1, 2, 4] {
                for bk in [8, 16, 32] {
                    let k = GemmKernel::Shared {
                        wg_x,
                        wg_y,
                        tm,
                        nv,
                        bk,
                    };
                    if k.is_valid() && tm * nv <= 32 {
                        v.push(k);
                    }
                }
            }
        }
    }
    v
}

pub fn run(args: GemmArgs) -> Result<(), Stop> {
    let [m, k, n] = args.shape[..] else {
        return Err(Stop::Input(format!(
            "--shape takes M,K,N (three sizes), not {:?}",
            args.shape
        )));
    };
    if m == 0 || k == 0 || n == 0 || args.samples == 0 {
        return Err(Stop::Input("sizes and --samples must be positive".into()));
    }
    let extra: Vec<GemmKernel> = args
        .kernels
        .iter()
        .map(|s| {
            s.parse()
                .map_err(|e| Stop::Input(format!("--kernel {s:?}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    if let Some(p) = &args.json {
        writable(p)?;
    }
    let chosen = adapters::chosen(&args.backend, &args.adapter)?;
    let inputs = Inputs::new(m, k, n);
    let transposed = args.b_layout == "transposed";
    let class = if transposed {
        ShapeClass::of_layout(m, n, 1, k as isize)
    } else {
        ShapeClass::of(m, n)
    };
    // B as stored: row-major [K, N], or [N, K] (then viewed transposed).
    let b_stored: Vec<f32> = if transposed {
        (0..n * k).map(|i| inputs.b[(i % k) * n + i / k]).collect()
    } else {
        inputs.b.clone()
    };
    let flop = 2.0 * (m * k * n) as f64;
    let mut runs = Vec::new();
    let mut failures = 0;
    for adapter in &chosen {
        let identity = adapters::identity(adapter);
        let device = Device::from_adapter(adapter).map_err(|e| {
            Stop::Failed(format!(
                "{}: could not open the adapter: {e}",
                identity.name
            ))
        })?;
        device.wait_warm_up(); // its compiles would share the CPU with the timing
        let limits = device.limits();
        out(&format!(
            "{} ({}, {}): {m} x {k} x {n}, class {}; workgroup memory {} bytes, {} threads; \
             subgroups {:?}; cooperative matrices: {}\n",
            identity.name,
            identity.backend,
            identity.driver,
            class.name(),
            limits.max_compute_workgroup_storage_size,
            limits.max_compute_invocations_per_workgroup,
            adapter
                .features()
                .contains(wgpu::Features::SUBGROUP)
                .then(|| {
                    let info = adapter.get_info();
                    (info.subgroup_min_size, info.subgroup_max_size)
                }),
            coop_list(&device),
        ));
        let mut dtypes_json = Vec::new();
        let mut first: Vec<Timed> = Vec::new();
        for (di, &dtype) in args.dtypes.iter().enumerate() {
            let mut list = device.gemm_candidates(dtype, class);
            list.extend(extra.iter().copied());
            if args.sweep {
                if di == 0 {
                    list.extend(grid());
                } else {
                    list.extend(fastest(&first, 6));
                }
            }
            for k in extra
                .iter()
                .filter(|k| !device.gemm_kernel_usable(**k, dtype))
            {
                out(&format!(
                    "  {}: {k} not timed: this device cannot run it for this dtype\n",
                    column(dtype)
                ));
            }
            let mut seen = std::collections::HashSet::new();
            list.retain(|k| device.gemm_kernel_usable(*k, dtype) && seen.insert(*k));
            let (a, b) = match (
                upload(&inputs.a, &[m, k], dtype, &device),
                if transposed {
                    upload(&b_stored, &[n, k], dtype, &device).map(|b| b.transpose())
                } else {
                    upload(&b_stored, &[k, n], dtype, &device)
                },
            ) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e @ wgarray::Error::MissingFeature { .. }), _)
                | (_, Err(e @ wgarray::Error::MissingFeature { .. })) => {
                    out(&format!("  {}: skipped: {e}\n", column(dtype)));
                    continue;
                }
                (Err(e), _) | (_, Err(e)) => {
                    out(&format!(
                        "  {}: cannot upload the operands: {e}\n",
                        column(dtype)
                    ));
                    failures += 1;
                    continue;
                }
            };
            // The tuned choice: what a first product picks.
            let tuned = match a.matmul(&b).and_then(|c| c.eval()) {
                Ok(()) => {
                    // The timing runs on the device's background thread.
                    device.wait_warm_up();
                    device.gemm_kernel(dtype, class)
                }
                Err(e @ wgarray::Error::MissingFeature { .. }) => {
                    out(&format!("  {}: skipped: {e}\n", column(dtype)));
                    continue;
                }
                Err(e) => {
                    out(&format!(
                        "  {}: the tuned product failed: {e}\n",
                        column(dtype)
                    ));
                    failures += 1;
                    None
                }
            };
            let mut timed = Vec::new();
            for &kernel in &list {
                let result = time_kernel(&device, &inputs, dtype, &a, &b, kernel, args.samples)
                    .map(|s| (flop / s / 1e9, s));
                if result.is_err() {
                    failures += 1;
                }
                timed.push(Timed { kernel, result });
            }
            let _ = device.set_gemm_kernel(None);
            timed.sort_by(|x, y| {
                let rate = |t: &Timed| t.result.as_ref().map_or(-1.0, |r| r.0);
                rate(y).total_cmp(&rate(x))
            });
            out(&table(dtype, &timed, tuned));
            dtypes_json.push(json!({
                "dtype": column(dtype),
                "tuned": tuned.map(|k| k.to_string()),
                "kernels": timed.iter().map(|t| match &t.result {
                    Ok((gflops, s)) => json!({
                        "kernel": t.kernel.to_string(),
                        "gflops": gflops,
                        "median_s": s,
                    }),
                    Err(why) => json!({"kernel": t.kernel.to_string(), "error": why}),
                }).collect::<Vec<_>>(),
            }));
            if di == 0 {
                first = timed;
            }
        }
        runs.push(json!({
            "adapter": identity,
            "shape": [m, k, n],
            "dtypes": dtypes_json,
        }));
    }
    if let Some(p) = &args.json {
        let doc = json!({
            "format": "wgbench-gemm",
            "wgarray_version": env!("CARGO_PKG_VERSION"),
            "date": crate::report::utc_now(),
            "runs": runs,
        });
        let text = serde_json::to_string_pretty(&doc).expect("a JSON value serialises");
        std::fs::write(p, text + "\n")
            .map_err(|e| Stop::Input(format!("cannot write {}: {e}", p.display())))?;
    }
    if failures > 0 {
        return Err(Stop::Failed(format!(
            "{failures} kernel(s) failed their check or could not run (see above)"
        )));
    }
    Ok(())
}

/// The device's cooperative-matrix configurations, `MxNxK A->C` each.
fn coop_list(device: &Device) -> String {
    let props = device.cooperative_matrix_properties();
    if props.is_empty() {
        return "none".into();
    }
    props
        .iter()
        .map(|p| {
            format!(
                "{}x{}x{} {:?}->{:?}",
                p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `count` fastest workgroup-memory kernels of `timed`.
fn fastest(timed: &[Timed], count: usize) -> Vec<GemmKernel> {
    timed
        .iter()
        .filter(|t| t.result.is_ok() && t.kernel.family() == "shared")
        .take(count)
        .map(|t| t.kernel)
        .collect()
}

/// Force `kernel`, check its product, then time it: median seconds per
/// product.
fn time_kernel(
    device: &Device,
    inputs: &Inputs,
    dtype: DType,
    a: &Array,
    b: &Array,
    kernel: GemmKernel,
    samples: usize,
) -> Result<f64, String> {
    let err = |e: wgarray::Error| e.to_string();
    device.set_gemm_kernel(Some(kernel)).map_err(err)?;
    let c = a.matmul(b).map_err(err)?;
    let values = c.to_f64_vec().map_err(err)?;
    drop(c);
    inputs
        .compare(dtype, column(dtype), &values, |r, got, want, tol| {
            measure::check(r, got, want, tol)
        })
        .map_err(|o| match o {
            Outcome::Fail(why) | Outcome::Skip(why) => why,
        })?;
    let batch = |reps: usize| -> Result<f64, String> {
        let outs = (0..reps)
            .map(|_| a.matmul(b))
            .collect::<wgarray::Result<Vec<_>>>()
            .map_err(err)?;
        let t = Instant::now();
        wgarray::eval(&outs.iter().collect::<Vec<_>>()).map_err(err)?;
        device.synchronize().map_err(err)?;
        Ok(t.elapsed().as_secs_f64() / reps as f64)
    };
    let once = batch(1)?;
    let reps = ((0.02 / once.max(1e-7)).ceil() as usize).clamp(1, 16);
    let mut xs = (0..samples)
        .map(|_| batch(reps))
        .collect::<Result<Vec<_>, _>>()?;
    xs.sort_by(f64::total_cmp);
    Ok(xs[xs.len() / 2])
}

fn table(dtype: DType, timed: &[Timed], tuned: Option<GemmKernel>) -> String {
    let mut s = format!(
        "  {} (tuned choice: {})\n",
        column(dtype),
        tuned.map_or("none".into(), |k| k.to_string())
    );
    for t in timed {
        let mark = if Some(t.kernel) == tuned { " *" } else { "" };
        match &t.result {
            Ok((gflops, secs)) => {
                let _ = writeln!(
                    s,
                    "    {:24} {:>10.1} GFLOP/s {:>9.3} ms{mark}",
                    t.kernel.to_string(),
                    gflops,
                    secs * 1e3
                );
            }
            Err(why) => {
                let _ = writeln!(s, "    {:24} FAILED: {why}", t.kernel.to_string());
            }
        }
    }
    s
}
