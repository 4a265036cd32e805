//! Every GEMM kernel family, forced with `Device::set_gemm_kernel`, against
//! an f64 reference: the workgroup-memory GPU family and the split-K
//! matrix-vector family run on software adapters too, so they are checked
//! here without a GPU (the whole suite can also be run through one kernel
//! with `WGARRAY_GEMM_KERNEL`, see `wgarray::tuning`).
//!
//! Shapes cover every shape class with edges in M, N and K (K not a
//! multiple of the family's K step), batches with a broadcast operand, a
//! bias, row-major, transposed and strided (scalar-load) operands, and the
//! half types. Error bounds as in tests/matmul.rs.

mod common;

use common::{HUGE, Rng, device, matmul_ref, poison_pool, rel_frobenius};
use half::{bf16, f16};
use wgarray::tuning::{GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device, Error, Slice};

/// The kernels every adapter must accept, then those that need subgroups
/// or cooperative matrices.
/// One or two tiles per family (the register family's defaults are
/// tested throughout tests/matmul.rs): few, because each kernel compiles
/// about a dozen variants here, and a compile costs up to a second on
/// llvmpipe.
const ALWAYS: &[&str] = &[
    "register 8 8 4 1",
    "shared 16 16 8 2 8",
    "shared 16 16 4 1 16",
    "shared 16 16 8 2 16",
    "splitk 16 16 0",
];
const IF_SUBGROUPS: &[&str] = &["splitk 8 8 1"];
const IF_COOP: &[&str] = &[
    "coop 16 0 1",
    "coop 8 0 2",
    "coop 16 1 2",
    "coop 16 1 4",
    "coop 8 1 2",
];

fn round_to(dtype: DType, x: &[f32]) -> Vec<f32> {
    match dtype {
        DType::F16 => x.iter().map(|&v| f16::from_f32(v).to_f32()).collect(),
        DType::BF16 => x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect(),
        _ => x.to_vec(),
    }
}

#[derive(Clone, Copy, Debug)]
enum Layout {
    RowMajor,
    /// A transposed view of the stored transpose (vec4 loads along the
    /// outer dimension).
    Transposed,
    /// Every other stored column (scalar loads).
    Strided,
}

/// `values` (`[batch, rows, cols]`, exact in `dtype`) as an array of
/// `dtype` laid out as `layout`.
fn operand(
    d: &Device,
    values: &[f32],
    [batch, rows, cols]: [usize; 3],
    layout: Layout,
    dtype: DType,
) -> Array {
    let mut stored = Vec::new();
    let shape = match layout {
        Layout::RowMajor => {
            stored.extend_from_slice(values);
            [batch, rows, cols]
        }
        Layout::Transposed => {
            for b in 0..batch {
                for j in 0..cols {
                    for i in 0..rows {
                        stored.push(values[(b * rows + i) * cols + j]);
                    }
                }
            }
            [batch, cols, rows]
        }
        Layout::Strided => {
            for &v in values {
                stored.extend([v, f32::NAN]);
            }
            [batch, rows, 2 * cols]
        }
    };
    let base = Array::from_slice(&stored, &shape, d)
        .unwrap()
        .astype(dtype)
        .unwrap();
    match layout {
        Layout::RowMajor => base,
        Layout::Transposed => base.swapaxes(1, 2).unwrap(),
        Layout::Strided => base
            .slice(&[Slice::FULL, Slice::FULL, Slice::new(None, None, 2)])
            .unwrap(),
    }
}

/// `[batch, m, k] @ [k, n] (+ bias [n])` for `kernel` in `dtype`; `None` if
/// right, else what went wrong.
#[allow(clippy::too_many_arguments)]
fn check(
    d: &Device,
    rng: &mut Rng,
    dtype: DType,
    [batch, m, k, n]: [usize; 4],
    la: Layout,
    lb: Layout,
    bias: bool,
) -> Option<String> {
    let tol = match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 1e-5,
    };
    let x = round_to(dtype, &rng.vec_f32(batch * m * k));
    let y = round_to(dtype, &rng.vec_f32(k * n));
    let c = round_to(dtype, &rng.vec_f32(n));
    let a = operand(d, &x, [batch, m, k], la, dtype);
    let b = operand(d, &y, [1, k, n], lb, dtype)
        .reshape(&[k, n])
        .unwrap();
    let (alpha, beta) = (0.5f32, 2.0f32);
    let got = if bias {
        let cb = Array::from_slice(&c, &[n], d)
            .unwrap()
            .astype(dtype)
            .unwrap();
        cb.addmm(&a, &b, alpha, beta)
    } else {
        a.matmul(&b)
    };
    let got = got
        .and_then(|r| r.astype(DType::F32))
        .and_then(|r| r.to_vec::<f32>());
    let got = match got {
        Ok(g) => g,
        Err(e) => return Some(format!("error {e}")),
    };
    let mut want = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        let xb = &x[bi * m * k..(bi + 1) * m * k];
        let r = matmul_ref(xb, &y, 1, m, k, n);
        want.extend(r.iter().enumerate().map(|(i, &v)| {
            if bias {
                alpha as f64 * v + beta as f64 * c[i % n] as f64
            } else {
                v
            }
        }));
    }
    let err = rel_frobenius(&got, &want);
    (err >= tol).then(|| format!("error {err:e}"))
}

/// How each test here that forces kernels starts: a device whose pool
/// holds `poison` elements of poison, a generator seeded with `seed`, and
/// no failures yet (they are reported together by [`finish`]).
fn start(seed: u64, poison: usize) -> (Device, Rng, Vec<String>) {
    let d = device();
    poison_pool(&d, poison);
    (d, Rng::new(seed), Vec::new())
}

/// [`check`] in f32 of each `([batch, m, k, n], bias)` of `cases` with
/// `tile` forced, A laid out as `la` and B as `lb`; each failure named by
/// the tile and the case.
fn check_tile(
    d: &Device,
    rng: &mut Rng,
    tile: &str,
    (la, lb): (Layout, Layout),
    cases: impl IntoIterator<Item = ([usize; 4], bool)>,
    failures: &mut Vec<String>,
) {
    d.set_gemm_kernel(Some(tile.parse().unwrap())).unwrap();
    for (dims @ [batch, m, k, n], bias) in cases {
        if let Some(e) = check(d, rng, DType::F32, dims, la, lb, bias) {
            failures.push(format!("{tile} {batch}x{m}x{k}x{n} bias {bias}: {e}"));
        }
    }
}

/// The end of a test that forced kernels: the default choice back, and
/// every failure it collected reported at once.
fn finish(d: &Device, failures: Vec<String>) {
    d.set_gemm_kernel(None).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The kernels `d` accepts: all of [`ALWAYS`] (asserted), and those of the
/// others its features allow.
fn kernels(d: &Device) -> Vec<GemmKernel> {
    let mut out = Vec::new();
    for s in ALWAYS.iter().chain(IF_SUBGROUPS).chain(IF_COOP) {
        let k: GemmKernel = s.parse().unwrap();
        match d.set_gemm_kernel(Some(k)) {
            Ok(_) => out.push(k),
            Err(Error::MissingFeature { .. }) if !ALWAYS.contains(s) => {}
            Err(e) => panic!("{s}: {e}"),
        }
    }
    let subgroups = d.features().contains(wgarray::wgpu::Features::SUBGROUP);
    let coop = !d.cooperative_matrix_properties().is_empty();
    if !subgroups {
        assert!(
            !out.iter()
                .any(|k| IF_SUBGROUPS.contains(&k.to_string().as_str()))
        );
    }
    assert_eq!(out.iter().any(|k| k.family() == "coop"), coop);
    d.set_gemm_kernel(None).unwrap();
    out
}

/// Whether `kernel` compiles too slowly on `d` for more than a few
/// variants: the workgroup-memory family on llvmpipe through GL (about a
/// minute per variant with a cold Mesa shader cache). There it is checked
/// in one shape and layout of f32, the rest on Vulkan.
fn slow_to_compile(d: &Device, kernel: GemmKernel) -> bool {
    common::is_gl(d) && kernel.family() == "shared"
}

/// The operand layouts and bias choices `kernel` is checked in.
fn layouts(d: &Device, kernel: GemmKernel) -> Vec<(Layout, Layout, bool)> {
    let all = [
        (Layout::Transposed, Layout::Transposed, true),
        (Layout::RowMajor, Layout::RowMajor, false),
        (Layout::Strided, Layout::Strided, false),
    ];
    let keep = if slow_to_compile(d, kernel) {
        1
    } else {
        all.len()
    };
    all[..keep].to_vec()
}

#[test]
fn every_family_in_f32_every_layout_and_edge() {
    let (d, mut rng, mut failures) = start(41, 1 << 20);
    let shapes = [[1, 1, 37, 70], [1, 7, 33, 5], [2, 130, 19, 131]];
    for kernel in kernels(&d) {
        d.set_gemm_kernel(Some(kernel)).unwrap();
        let t = std::time::Instant::now();
        // The last shape has edges in M, N and K and a batch.
        let skip = if slow_to_compile(&d, kernel) { 2 } else { 0 };
        for &dims in &shapes[skip..] {
            for (la, lb, bias) in layouts(&d, kernel) {
                if let Some(e) = check(&d, &mut rng, DType::F32, dims, la, lb, bias) {
                    failures.push(format!(
                        "{kernel} {dims:?} A {la:?} B {lb:?} bias {bias}: {e}"
                    ));
                }
            }
        }
        eprintln!("{kernel}: {:.2} s", t.elapsed().as_secs_f64());
    }
    finish(&d, failures);
}

#[test]
fn every_family_in_the_half_types() {
    let (d, mut rng, mut failures) = start(43, 1 << 20);
    let mut dtypes = vec![DType::BF16];
    if d.features().contains(wgarray::wgpu::Features::SHADER_F16) {
        dtypes.push(DType::F16);
    }
    for kernel in kernels(&d) {
        d.set_gemm_kernel(Some(kernel)).unwrap();
        if slow_to_compile(&d, kernel) {
            continue;
        }
        for &dtype in &dtypes {
            for (dims, la, lb) in [
                ([1, 1, 37, 70], Layout::RowMajor, Layout::Transposed),
                ([2, 65, 19, 131], Layout::Transposed, Layout::Strided),
            ] {
                if let Some(e) = check(&d, &mut rng, dtype, dims, la, lb, true) {
                    failures.push(format!(
                        "{kernel} {dtype:?} {dims:?} A {la:?} B {lb:?}: {e}"
                    ));
                }
            }
        }
    }
    finish(&d, failures);
}

#[test]
fn forcing_checks_the_kernel_and_the_adapter() {
    let d = device();
    common::assert_not_kernels(&[
        "register 0 8 4 1",
        "shared 16 16 3 1 8",
        "splitk 3 8 0",
        "tiles 1 2",
        "",
    ]);
    let outside = GemmKernel::Register {
        wg_x: 64,
        wg_y: 64,
        tm: 1,
        nv: 1,
    };
    assert!(matches!(
        d.set_gemm_kernel(Some(outside)),
        Err(Error::InvalidArgument(_))
    ));
    if d.cooperative_matrix_properties().is_empty() {
        let coop: GemmKernel = "coop 8 0 2".parse().unwrap();
        assert!(matches!(
            d.set_gemm_kernel(Some(coop)),
            Err(Error::MissingFeature { .. })
        ));
    }
    let k: GemmKernel = "shared 16 16 8 2 8".parse().unwrap();
    assert_eq!(d.set_gemm_kernel(Some(k)).unwrap(), None);
    assert_eq!(d.set_gemm_kernel(None).unwrap(), Some(k));
}

/// Register tiles with an even `nv` read a row-major f32 B two column
/// quads at a time (`vec4<u64>` loads) on software adapters with
/// `SHADER_INT64`, when B's offset and row stride are multiples of eight
/// elements: K of 1, 7, 33 and 1025, N a multiple of eight or not (the
/// vec4 path), batched with a bias, and B a view starting 8 or 4 elements
/// into its buffer, against the f64 reference.
#[test]
fn pair_loads_of_b_at_odd_sizes_and_offsets() {
    let (d, mut rng, mut failures) = start(47, 1 << 20);
    for tile in ["register 8 1 1 4", "register 8 8 4 2"] {
        let cases = [1, 7, 33, 1025].into_iter().flat_map(|k| {
            [40, 36].into_iter().flat_map(move |n| {
                [(1, 1, false), (2, 9, true)].map(|(batch, m, bias)| ([batch, m, k, n], bias))
            })
        });
        let layouts = (Layout::RowMajor, Layout::RowMajor);
        check_tile(&d, &mut rng, tile, layouts, cases, &mut failures);
        // B = w[:, skip..skip + 40] of a [33, 48] w: row stride 48, offset
        // 8 (pairs) or 4 (vec4 loads).
        for skip in [8isize, 4] {
            let (k, n) = (33, 40);
            let x = rng.vec_f32(k);
            let w = rng.vec_f32(k * 48);
            let a = Array::from_slice(&x, &[1, k], &d).unwrap();
            let b = Array::from_slice(&w, &[k, 48], &d)
                .unwrap()
                .slice(&[Slice::FULL, Slice::new(Some(skip), Some(skip + 40), 1)])
                .unwrap();
            let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
            let y: Vec<f32> = (0..k * n)
                .map(|i| w[(i / n) * 48 + skip as usize + i % n])
                .collect();
            let err = rel_frobenius(&got, &matmul_ref(&x, &y, 1, 1, k, n));
            if err >= 1e-5 {
                failures.push(format!("{tile} view at {skip}: error {err:e}"));
            }
        }
    }
    finish(&d, failures);
}

/// The wide matrix-vector class's 1024-column register tile (`register 8
/// 1 1 32`, 128 columns per thread, a candidate on software adapters):
/// one row of A, N of two whole workgroups and a part (2056, pair loads
/// where the adapter has them), not a multiple of eight (2052, vec4
/// loads) and under one workgroup (1000), K of 7 and 1025, against the
/// f64 reference on a poisoned pool.
#[test]
fn the_1024_column_matrix_vector_tile() {
    let (d, mut rng, mut failures) = start(59, 1 << 22);
    let cases = [7, 1025]
        .into_iter()
        .flat_map(|k| [2056, 2052, 1000].map(|n| ([1, 1, k, n], false)));
    let layouts = (Layout::RowMajor, Layout::RowMajor);
    check_tile(
        &d,
        &mut rng,
        "register 8 1 1 32",
        layouts,
        cases,
        &mut failures,
    );
    finish(&d, failures);
}

/// `x @ W^T` (A row-major, B a transposed view) with K a multiple of eight
/// reads both operands eight k per load (`vec4<u64>`) on software adapters
/// with `SHADER_INT64`: the medium tiles with one and with four rows of
/// threads (the latter with an odd number of column quads, in one case:
/// each variant is a cold compile in CI), K of 8, 40 and 1032 (and 36,
/// which takes the vec4 path), M of 1, 9 and 77, N a multiple of four or
/// not, batched with a bias, and operands that are views starting 8 or 4
/// elements into their buffers (the latter the vec4 path), against the
/// f64 reference.
#[test]
fn pair_k_loads_of_x_times_w_transposed() {
    let (d, mut rng, mut failures) = start(53, 1 << 20);
    let all: &[_] = &[(1, 77, 40, false), (2, 9, 7, true), (1, 1, 36, true)];
    for (tile, ks, cases, skips) in [
        (
            "register 8 1 16 4",
            &[8, 40, 1032, 36][..],
            all,
            &[8isize, 4][..],
        ),
        ("register 8 4 8 3", &[40][..], &all[..1], &[8][..]),
    ] {
        let shapes = ks.iter().flat_map(|&k| {
            cases
                .iter()
                .map(move |&(batch, m, n, bias)| ([batch, m, k, n], bias))
        });
        let layouts = (Layout::RowMajor, Layout::Transposed);
        check_tile(&d, &mut rng, tile, layouts, shapes, &mut failures);
        // A = x[:, skip..skip + 40] of a [9, 56] x, B = w[:, skip..skip +
        // 40]^T of a [12, 56] w: row strides 56, offsets 8 (pairs) or 4.
        for &skip in skips {
            let (m, k, n) = (9, 40, 12);
            let x = rng.vec_f32(m * 56);
            let w = rng.vec_f32(n * 56);
            let cols = [Slice::FULL, Slice::new(Some(skip), Some(skip + 40), 1)];
            let a = Array::from_slice(&x, &[m, 56], &d)
                .unwrap()
                .slice(&cols)
                .unwrap();
            let b = Array::from_slice(&w, &[n, 56], &d)
                .unwrap()
                .slice(&cols)
                .unwrap();
            let got = a.matmul(&b.transpose()).unwrap().to_vec::<f32>().unwrap();
            let at = |v: &[f32], i: usize, j: usize| v[i * 56 + skip as usize + j];
            let xa: Vec<f32> = (0..m * k).map(|i| at(&x, i / k, i % k)).collect();
            let yb: Vec<f32> = (0..k * n).map(|i| at(&w, i % n, i / n)).collect();
            let err = rel_frobenius(&got, &matmul_ref(&xa, &yb, 1, m, k, n));
            if err >= 1e-5 {
                failures.push(format!("{tile} views at {skip}: error {err:e}"));
            }
        }
    }
    finish(&d, failures);
}

/// Workgroup memory: a tile is valid up to 64 KiB of staging, and a device
/// runs it only within its own `max_compute_workgroup_storage_size`
/// (lavapipe and llvmpipe: 32 KiB; WebGPU's default 16 KiB; NVIDIA 48 KiB).
#[test]
fn workgroup_memory_bounds_the_tiles_a_device_runs() {
    let d = device();
    let limit = d.limits().max_compute_workgroup_storage_size as u64;
    // 128 x 128 blocks, K steps of 8, 16 and 32: 16, 32 and 64 KiB.
    for (bk, bytes) in [(8, 16384), (16, 32768), (32, 65536)] {
        let k: GemmKernel = format!("shared 16 16 8 2 {bk}").parse().unwrap();
        assert_eq!(k.workgroup_bytes(), bytes);
        assert_eq!(d.gemm_kernel_usable(k, DType::F32), bytes <= limit, "{k}");
        let forced = d.set_gemm_kernel(Some(k));
        if bytes <= limit {
            assert!(forced.is_ok(), "{k}: {forced:?}");
        } else {
            assert!(
                matches!(forced, Err(Error::MissingFeature { .. })),
                "{k}: {forced:?}"
            );
        }
    }
    d.set_gemm_kernel(None).unwrap();
    // Beyond 64 KiB no device runs it: not a kernel.
    assert!(matches!(
        "shared 16 16 16 2 32".parse::<GemmKernel>(),
        Err(Error::InvalidArgument(_))
    ));
    // Every candidate the tuning would time is one the device can run,
    // the class's default first.
    for class in ShapeClass::ALL {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let c = d.gemm_candidates(dtype, class);
            assert!(!c.is_empty(), "{class:?} {dtype}");
            assert!(
                c.iter().all(|k| d.gemm_kernel_usable(*k, dtype)),
                "{class:?} {dtype}: {c:?}"
            );
        }
    }
}

// Probes of the pipelines without workgroup-memory zeroing (090f893):
// huge values first (`common::pollute`), then the edge cases where an
// unwritten element would be read.

/// `[batch, m, k] @ [k, n]` with `kernel` forced, after a product of
/// huge values through the same kernel: the error, or what went wrong.
fn gemm_after_huge(
    d: &Device,
    rng: &mut Rng,
    kernel: GemmKernel,
    dims: [usize; 4],
    transposed: bool,
) -> Option<String> {
    let [batch, m, k, n] = dims;
    d.set_gemm_kernel(Some(kernel)).unwrap();
    // Whole tiles of huge values (64 is a multiple of every block here).
    let h = Array::full(&[64, 64], HUGE as f64, DType::F32, d).unwrap();
    h.matmul(&h).unwrap().eval().unwrap();
    let hv = Array::full(&[1, 64], HUGE as f64, DType::F32, d).unwrap();
    hv.matmul(&h).unwrap().eval().unwrap();
    let x = rng.vec_f32(batch * m * k);
    let y = rng.vec_f32(k * n);
    let (a, b) = if transposed {
        // Views of the stored transposes (vec4 loads along the other
        // dimension: the staging code's other modes).
        let xt: Vec<f32> = (0..batch * k * m)
            .map(|i| {
                let (bi, kk, r) = (i / (k * m), i / m % k, i % m);
                x[(bi * m + r) * k + kk]
            })
            .collect();
        let yt: Vec<f32> = (0..n * k).map(|i| y[(i % k) * n + i / k]).collect();
        (
            Array::from_slice(&xt, &[batch, k, m], d)
                .unwrap()
                .swapaxes(1, 2)
                .unwrap(),
            Array::from_slice(&yt, &[n, k], d)
                .unwrap()
                .swapaxes(0, 1)
                .unwrap(),
        )
    } else {
        (
            Array::from_slice(&x, &[batch, m, k], d).unwrap(),
            Array::from_slice(&y, &[k, n], d).unwrap(),
        )
    };
    let got = a.matmul(&b).and_then(|p| p.to_vec::<f32>());
    d.set_gemm_kernel(None).unwrap();
    let got = match got {
        Ok(g) => g,
        Err(e) => return Some(format!("{kernel} {dims:?} transposed {transposed}: {e}")),
    };
    let y_batched: Vec<f32> = (0..batch).flat_map(|_| y.iter().copied()).collect();
    let want = matmul_ref(&x, &y_batched, batch, m, k, n);
    let err = rel_frobenius(&got, &want);
    (err.is_nan() || err >= 1e-5)
        .then(|| format!("{kernel} {dims:?} transposed {transposed}: relative error {err:e}"))
}

/// `[batch, m, k, n]` of the probes after huge values: one element, a
/// row, edges in M, N and K, a batch, and a small K under a large tile.
const AFTER_HUGE: [[usize; 4]; 5] = [
    [1, 1, 1, 1],
    [1, 1, 37, 70],
    [1, 7, 33, 5],
    [3, 17, 19, 9],
    [2, 65, 3, 131],
];

#[test]
fn forced_gemm_families_after_huge_values() {
    let d = device();
    let mut rng = Rng::new(603);
    let mut failures = Vec::new();
    // GL compiles the workgroup-memory family for about a minute per
    // variant on llvmpipe (tests/gemm_families.rs checks it there): only the
    // split-K and register families on GL.
    let gl = common::is_gl(&d);
    for name in [
        "shared 16 16 4 1 16",
        "shared 16 16 8 2 8",
        "splitk 16 16 0",
        "splitk 8 8 1",
        "register 8 8 4 1",
    ] {
        let kernel: GemmKernel = name.parse().unwrap();
        if !d.gemm_kernel_usable(kernel, DType::F32) || (gl && kernel.family() == "shared") {
            continue;
        }
        for dims in AFTER_HUGE {
            for transposed in [false, true] {
                if let Some(e) = gemm_after_huge(&d, &mut rng, kernel, dims, transposed) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
