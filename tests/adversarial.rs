//! Adversarial probes of three changes (2026-12-01):
//! 1. pipelines without workgroup-memory zeroing (090f893): every kernel
//!    with workgroup memory is run first on huge values (so a software
//!    adapter's workgroup memory, reused across workgroups and dispatches,
//!    holds them), then on the edge cases where an unwritten element would
//!    be read (partial blocks, rows shorter than a workgroup, k tails,
//!    exclusive and reverse scans, k = row length, non-power-of-two sorts,
//!    batched GEMMs), against host references;
//! 2. the tuning file v2 (104b89a): hand-written files (a choice outside its
//!    candidates, duplicated keys, kernels outside the family limits, a big
//!    file, two devices writing one file at once) never panic or error;
//! 3. tanh_f's own exp (d202884): special values, bit patterns around its
//!    thresholds, a sweep of every f32 bit pattern with a stride, the half
//!    types, and tanh fused into a reduction and a GEMM epilogue.

mod common;

use common::{Rng, device, matmul_ref, rel_frobenius};
use wgarray::half::{bf16, f16};
use wgarray::tuning::{CacheDir, GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device, DeviceOptions, Error};

const HUGE: f32 = 1.0e30;

/// Run every workgroup-memory kernel family on huge values (whole blocks,
/// whole tiles), so stale workgroup memory holds them.
fn pollute(d: &Device) {
    let big: Vec<f32> = (0..8192).map(|i| HUGE * (1.0 + (i % 7) as f32)).collect();
    let x = Array::from_slice(&big, &[2, 4096], d).unwrap();
    for a in [
        x.cumsum(Some(-1), false, true).unwrap(),
        x.cummax(Some(-1), false, true).unwrap(),
        x.sum(-1, false).unwrap(),
        x.max(-1, false).unwrap(),
        x.sort(Some(-1)).unwrap(),
        x.topk(8, -1).unwrap().0,
    ] {
        a.eval().unwrap();
    }
}

/// Host scan of `v` in rows of `len`: (sum or max), reverse, inclusive.
fn scan_ref(v: &[f32], len: usize, max: bool, reverse: bool, inclusive: bool) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for row in 0..v.len() / len {
        let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
        for q in 0..len {
            let r = if reverse { len - 1 - q } else { q };
            let x = v[row * len + r] as f64;
            let next = if max { acc.max(x) } else { acc + x };
            out[row * len + r] = if inclusive { next } else { acc };
            acc = next;
        }
    }
    out
}

#[test]
fn scans_after_huge_values_read_no_stale_workgroup_memory() {
    let d = device();
    let mut rng = Rng::new(601);
    let mut failures = Vec::new();
    for (rows, len) in [(1, 1), (3, 7), (2, 65), (1, 257), (2, 1025), (1, 3000)] {
        let v = rng.vec_f32(rows * len);
        let x = Array::from_slice(&v, &[rows, len], &d).unwrap();
        for max in [false, true] {
            for reverse in [false, true] {
                for inclusive in [false, true] {
                    pollute(&d);
                    let got = if max {
                        x.cummax(Some(-1), reverse, inclusive)
                    } else {
                        x.cumsum(Some(-1), reverse, inclusive)
                    };
                    let got = got.unwrap().to_vec::<f32>().unwrap();
                    let want = scan_ref(&v, len, max, reverse, inclusive);
                    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        // cummax's exclusive identity is -inf (or the
                        // dtype's lowest): compare it exactly.
                        let ok = if w.is_infinite() {
                            g as f64 == w || g == f32::MIN
                        } else {
                            (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs())
                        };
                        if !ok {
                            failures.push(format!(
                                "{rows}x{len} max {max} rev {reverse} incl {inclusive} [{i}]: {g} vs {w}"
                            ));
                            break;
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Empty arrays through the workgroup-memory kernels after huge values:
/// the right shapes (and sums of nothing are zero), no error.
#[test]
fn empty_arrays_through_workgroup_memory_kernels() {
    let d = device();
    pollute(&d);
    for shape in [[0usize, 300], [0, 2000], [3, 0]] {
        let x = Array::from_slice(&[] as &[f32], &shape, &d).unwrap();
        assert_eq!(x.cumsum(Some(-1), true, false).unwrap().shape(), &shape[..]);
        assert_eq!(x.sort(Some(-1)).unwrap().shape(), &shape[..]);
        let s = x.sum(-1, false).unwrap();
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![0.0; shape[0]]);
        if shape[1] >= 5 {
            let (v, i) = x.topk(5, -1).unwrap();
            assert_eq!(v.shape(), &[0, 5]);
            assert_eq!(i.to_vec::<u32>().unwrap(), Vec::<u32>::new());
        }
        let a = Array::from_slice(&[] as &[f32], &[shape[0], shape[1]], &d).unwrap();
        let b = Array::full(&[shape[1], 9], 1.0, DType::F32, &d).unwrap();
        let p = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(p, vec![0.0; shape[0] * 9], "{shape:?}");
    }
}

/// A row of more than 256 blocks (pass 2 walks several block totals per
/// thread, some threads none): cummax exactly, and an i32 cumsum.
#[test]
fn scans_of_more_than_256_blocks_after_huge_values() {
    let d = device();
    let mut rng = Rng::new(605);
    let len = 300_001;
    let v = rng.vec_f32(len);
    let ints: Vec<i32> = rng.vec_i32(len, 100);
    let x = Array::from_slice(&v, &[len], &d).unwrap();
    let xi = Array::from_slice(&ints, &[len], &d).unwrap();
    for reverse in [false, true] {
        for inclusive in [false, true] {
            pollute(&d);
            let got = x
                .cummax(None, reverse, inclusive)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            let want = scan_ref(&v, len, true, reverse, inclusive);
            let bad = got
                .iter()
                .zip(&want)
                .position(|(&g, &w)| !(g as f64 == w || (w.is_infinite() && g == f32::MIN)));
            assert_eq!(bad, None, "cummax rev {reverse} incl {inclusive}");
            pollute(&d);
            let got = xi
                .cumsum(None, reverse, inclusive)
                .unwrap()
                .to_vec::<i32>()
                .unwrap();
            let mut acc = 0i32;
            let mut want = vec![0; len];
            for q in 0..len {
                let r = if reverse { len - 1 - q } else { q };
                let next = acc + ints[r];
                want[r] = if inclusive { next } else { acc };
                acc = next;
            }
            assert!(got == want, "i32 cumsum rev {reverse} incl {inclusive}");
        }
    }
}

#[test]
fn reductions_sorts_and_topk_after_huge_values() {
    let d = device();
    let mut rng = Rng::new(602);
    let mut failures = Vec::new();
    for (rows, len) in [
        (1, 1),
        (5, 7),
        (3, 33),
        (2, 255),
        (2, 300),
        (1, 1000),
        (2, 1025),
        (1, 2049),
    ] {
        let v = rng.vec_f32(rows * len);
        let x = Array::from_slice(&v, &[rows, len], &d).unwrap();
        pollute(&d);
        let sum = x.sum(-1, false).unwrap().to_vec::<f32>().unwrap();
        pollute(&d);
        let min = x.min(-1, false).unwrap().to_vec::<f32>().unwrap();
        pollute(&d);
        let sorted = x.sort(Some(-1)).unwrap().to_vec::<f32>().unwrap();
        let k = len.min(64);
        pollute(&d);
        let (tv, ti) = x.topk(k, -1).unwrap();
        let (tv, ti) = (tv.to_vec::<f32>().unwrap(), ti.to_vec::<u32>().unwrap());
        // k = the whole row too (every list slot a real element).
        pollute(&d);
        let all = if len <= 64 {
            Some(x.topk(len, -1).unwrap().0.to_vec::<f32>().unwrap())
        } else {
            None
        };
        for r in 0..rows {
            let row = &v[r * len..(r + 1) * len];
            let s: f64 = row.iter().map(|&x| x as f64).sum();
            if (sum[r] as f64 - s).abs() > 1e-4 * (1.0 + len as f64) {
                failures.push(format!("sum {rows}x{len} row {r}: {} vs {s}", sum[r]));
            }
            let m = row.iter().copied().fold(f32::INFINITY, f32::min);
            if min[r] != m {
                failures.push(format!("min {rows}x{len} row {r}: {} vs {m}", min[r]));
            }
            let mut want = row.to_vec();
            want.sort_by(f32::total_cmp);
            if sorted[r * len..(r + 1) * len] != want[..] {
                failures.push(format!("sort {rows}x{len} row {r}"));
            }
            want.reverse();
            if tv[r * k..(r + 1) * k] != want[..k] {
                failures.push(format!("topk {k} of {rows}x{len} row {r}"));
            }
            for q in 0..k {
                if row[ti[r * k + q] as usize] != tv[r * k + q] {
                    failures.push(format!("topk index {rows}x{len} row {r} [{q}]"));
                }
            }
            if let Some(all) = &all
                && all[r * len..(r + 1) * len] != want[..]
            {
                failures.push(format!("topk {len} of {rows}x{len} row {r}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

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
        for dims in [
            [1, 1, 1, 1],
            [1, 1, 37, 70],
            [1, 7, 33, 5],
            [3, 17, 19, 9],
            [2, 65, 3, 131],
        ] {
            for transposed in [false, true] {
                if let Some(e) = gemm_after_huge(&d, &mut rng, kernel, dims, transposed) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------- tuning

/// A device on the suite's adapter keeping its caches in `dir`.
fn device_in(dir: &std::path::Path) -> Device {
    let options = DeviceOptions::from_env()
        .unwrap()
        .with_cache_dir(CacheDir::At(dir.to_path_buf()));
    let d = Device::new(&options).expect("this test needs an adapter");
    d.set_gemm_kernel(None).unwrap();
    d
}

/// A 1 x 48 @ 48 x 40 product (matrix-vector class), checked exactly
/// (small integers).
fn small_gemv(d: &Device) {
    let (k, n) = (48, 40);
    let x: Vec<f32> = (0..k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    let y: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
    let a = Array::from_slice(&x, &[1, k], d).unwrap();
    let b = Array::from_slice(&y, &[k, n], d).unwrap();
    let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    for j in 0..n {
        let want: f32 = (0..k).map(|p| x[p] * y[p * n + j]).sum();
        assert_eq!(got[j], want, "column {j}");
    }
}

/// The owner block this adapter writes into `dir`'s tuning file.
fn owner_of(dir: &std::path::Path) -> (std::path::PathBuf, serde_json::Value, Vec<GemmKernel>) {
    let d = device_in(dir);
    small_gemv(&d);
    let file = d.gemm_tuning_file().unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let cands = d.gemm_candidates(DType::F32, ShapeClass::Gemv);
    (file, written["owner"].clone(), cands)
}

fn names(ks: &[GemmKernel]) -> Vec<String> {
    ks.iter().map(|k| k.to_string()).collect()
}

/// Kernel strings and structs outside the family limits, whose limit
/// arithmetic overflows u32: typed errors, never a panic (debug builds
/// check overflow).
#[test]
fn kernels_with_overflowing_parameters_are_invalid_not_a_panic() {
    for s in [
        "splitk 64 67108865 0",
        "splitk 64 4294967295 1",
        "splitk 2 2147483648 0",
        "register 4294967295 4294967295 4294967295 4294967295",
        "shared 4294967295 4294967295 4294967292 4294967295 4294967292",
        "coop 16 0 4294967295",
    ] {
        let r = std::panic::catch_unwind(|| s.parse::<GemmKernel>());
        assert!(
            matches!(r, Ok(Err(Error::InvalidArgument(_)))),
            "{s:?}: {:?}",
            r.map_err(|_| "panicked")
        );
    }
    let m = u32::MAX;
    for k in [
        GemmKernel::SplitK {
            ks: 64,
            cq: m,
            subgroups: false,
        },
        GemmKernel::Shared {
            wg_x: m,
            wg_y: m,
            tm: m - 3,
            nv: m,
            bk: m - 3,
        },
        GemmKernel::Coop {
            size: m,
            half: false,
            frags: m,
        },
    ] {
        let r = std::panic::catch_unwind(|| (k.is_valid(), k.workgroup_bytes()));
        assert!(matches!(r, Ok((false, _))), "{k:?}");
    }
    let d = device();
    let k = GemmKernel::SplitK {
        ks: 64,
        cq: 67_108_865,
        subgroups: false,
    };
    assert!(matches!(
        d.set_gemm_kernel(Some(k)),
        Err(Error::InvalidArgument(_))
    ));
}

/// Hand-written files: never a panic or an error; an entry that is not a
/// choice among this build's candidates is timed again.
#[test]
fn hand_written_tuning_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (file, owner, cands) = owner_of(dir.path());
    let entry = |kernel: &str, among: &[String]| serde_json::json!({ "kernel": kernel, "candidates": among });
    let file_with = |choices: serde_json::Value| {
        serde_json::json!({
            "format": "wgarray-gemm-tuning",
            "version": 2,
            "owner": owner,
            "choices": choices,
        })
        .to_string()
    };
    let current = names(&cands);
    // A usable kernel that is not among the candidates it claims to be
    // chosen among.
    let outsider = ["register 8 8 4 1", "register 4 4 4 1"]
        .into_iter()
        .find(|k| !current.iter().any(|c| c == k))
        .unwrap();
    let mut doubled = current.clone();
    doubled.extend(current.clone());
    let overflow = file_with(serde_json::json!({
        "float32 gemv": entry("splitk 64 67108865 0", &current),
        "float32 medium": entry(&current[0], &["splitk 64 67108865 0".to_string()]),
    }));
    // Duplicated keys: serde keeps one; written by hand.
    let duplicated = format!(
        "{{\"format\": \"wgarray-gemm-tuning\", \"version\": 2, \"owner\": {owner}, \"choices\": {{\
         \"float32 gemv\": {}, \"float32 gemv\": {}}}}}",
        entry(&current[0], &current),
        entry(outsider, &current)
    );
    let mut many = serde_json::Map::new();
    for i in 0..20_000 {
        many.insert(format!("float32 class{i}"), entry(&current[0], &current));
    }
    many.insert("float32 gemv".into(), entry(outsider, &current));
    let cases = [
        (
            "a choice outside its candidates",
            file_with(serde_json::json!({ "float32 gemv": entry(outsider, &current) })),
        ),
        (
            "duplicated candidates",
            file_with(serde_json::json!({ "float32 gemv": entry(&current[0], &doubled) })),
        ),
        ("overflowing kernels", overflow),
        ("duplicated keys", duplicated),
        ("a big file", file_with(serde_json::Value::Object(many))),
        (
            "candidates not a list",
            file_with(
                serde_json::json!({ "float32 gemv": { "kernel": current[0], "candidates": "all" } }),
            ),
        ),
        (
            "an entry not an object",
            file_with(serde_json::json!({ "float32 gemv": [1, 2, 3] })),
        ),
    ];
    for (what, text) in cases {
        std::fs::write(&file, &text).unwrap();
        let d = std::panic::catch_unwind(|| device_in(dir.path()))
            .unwrap_or_else(|_| panic!("{what}: the device panicked reading the file"));
        let taken = d.gemm_kernel(DType::F32, ShapeClass::Gemv);
        assert!(
            taken.is_none_or(|k| cands.contains(&k)),
            "{what}: took {taken:?}, not one of {current:?}"
        );
        small_gemv(&d);
        let chosen = d.gemm_kernel(DType::F32, ShapeClass::Gemv).expect(what);
        assert!(cands.contains(&chosen), "{what}: chose {chosen}");
    }
}

/// A directory where the tuning file goes: not read, not written, with
/// warnings; GEMMs run and choose as without a file.
#[test]
fn a_directory_in_place_of_the_tuning_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = device_in(dir.path()).gemm_tuning_file().unwrap();
    std::fs::create_dir_all(file.join("inside")).unwrap();
    let d = device_in(dir.path());
    assert_eq!(d.gemm_kernel(DType::F32, ShapeClass::Gemv), None);
    small_gemv(&d);
    assert!(d.gemm_kernel(DType::F32, ShapeClass::Gemv).is_some());
    assert!(file.join("inside").is_dir());
}

/// Two devices on one adapter tune and write the same file at the same
/// time: the file stays valid, the next device reads a choice.
#[test]
fn two_devices_writing_one_tuning_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let d = device_in(&path);
                small_gemv(&d);
                if i == 1 {
                    // A second class from the second device (a 77 x 384
                    // product is the medium class).
                    let a = Array::full(&[77, 96], 0.5, DType::F32, &d).unwrap();
                    let b = Array::full(&[96, 384], 2.0, DType::F32, &d).unwrap();
                    let p = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
                    assert!(p.iter().all(|&v| v == 96.0));
                }
                d.gemm_tuning_file().unwrap()
            })
        })
        .collect();
    let files: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(files[0], files[1]);
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).expect("the file is whole");
    assert_eq!(json["version"], 2);
    let next = device_in(&path);
    assert!(next.gemm_kernel(DType::F32, ShapeClass::Gemv).is_some());
    // No stray temporary files.
    let stray: Vec<_> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

// ------------------------------------------------------------------ tanh

/// The distance of `got` from `want` in units of the f32 spacing at
/// `want`.
fn ulps(got: f32, want: f64) -> f64 {
    let w = want.abs().max(f32::MIN_POSITIVE as f64);
    let e = w.log2().floor();
    let ulp = 2f64.powf(e - 23.0);
    (got as f64 - want).abs() / ulp
}

fn tanh_of(d: &Device, x: &[f32]) -> Vec<f32> {
    Array::from_slice(x, &[x.len()], d)
        .unwrap()
        .tanh()
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn tanh_special_values_and_thresholds() {
    let d = device();
    let mut x: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x807f_ffff),
        f32::MAX,
        f32::MIN,
        10.0,
        -10.0,
        9.0,
        20.0,
        1e-30,
    ];
    // Around the polynomial's threshold (0x3f0c9f54, log(3)/2), 10, 9.01
    // (where tanh rounds to 1), 2^-12, and ln2-multiples (k changes).
    for centre in [
        0x3f0c_9f54u32,
        10f32.to_bits(),
        9.01f32.to_bits(),
        0x3980_0000,
        (std::f32::consts::LN_2 / 2.0).to_bits(),
        (3.0 * std::f32::consts::LN_2 / 2.0).to_bits(),
        (23.0 * std::f32::consts::LN_2 / 2.0).to_bits(),
        0x0080_0000,
    ] {
        for dlt in -100i32..=100 {
            let b = (centre as i32 + dlt) as u32;
            x.push(f32::from_bits(b));
            x.push(f32::from_bits(b | 0x8000_0000));
        }
    }
    let got = tanh_of(&d, &x);
    let mut worst = (0.0, 0.0f32);
    for (&xi, &g) in x.iter().zip(&got) {
        let want = (xi as f64).tanh();
        if xi == 0.0 || xi.is_infinite() {
            assert_eq!(g.to_bits(), (want as f32).to_bits(), "tanh({xi:e})");
            continue;
        }
        if xi.is_subnormal() {
            assert_eq!(g.to_bits(), xi.to_bits(), "tanh({xi:e}) is itself");
            continue;
        }
        let u = ulps(g, want);
        if u > worst.0 {
            worst = (u, xi);
        }
    }
    assert!(
        worst.0 <= 1.5,
        "{} ulp at {:e} ({:#x})",
        worst.0,
        worst.1,
        worst.1.to_bits()
    );
    // NaN: NaN, its payload and sign kept.
    let nans = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xff80_0001),
    ];
    for (n, g) in nans.iter().zip(tanh_of(&d, &nans)) {
        assert!(g.is_nan(), "tanh({:#x}) = {g}", n.to_bits());
        assert_eq!(g.to_bits(), n.to_bits(), "NaN payload and sign");
    }
}

/// Every 4099th f32 bit pattern (about a million values, every binade):
/// within 1.5 ulp of f64's tanh, odd, and |tanh| <= 1.
#[test]
fn tanh_over_a_sweep_of_every_bit_pattern() {
    let d = device();
    let x: Vec<f32> = (0..(1u64 << 32))
        .step_by(4099)
        .map(|b| f32::from_bits(b as u32))
        .filter(|v| !v.is_nan())
        .collect();
    let got = tanh_of(&d, &x);
    let mut worst = (0.0, 0.0f32);
    for (&xi, &g) in x.iter().zip(&got) {
        let want = (xi as f64).tanh();
        assert!(g.abs() <= 1.0, "tanh({xi:e}) = {g}");
        let u = ulps(g, want);
        if u > worst.0 {
            worst = (u, xi);
        }
    }
    assert!(
        worst.0 <= 1.5,
        "{} ulp at {:e} ({:#x})",
        worst.0,
        worst.1,
        worst.1.to_bits()
    );
}

/// Dense sweeps where the two formulas and the exp's reduction work:
/// every 37th f32 in [0.01, 10] (about 1.2 million), within 1.5 ulp.
#[test]
fn tanh_dense_over_its_working_range() {
    let d = device();
    let x: Vec<f32> = (0.01f32.to_bits()..=10f32.to_bits())
        .step_by(37)
        .map(f32::from_bits)
        .collect();
    let got = tanh_of(&d, &x);
    let mut worst = (0.0, 0.0f32);
    for (&xi, &g) in x.iter().zip(&got) {
        let u = ulps(g, (xi as f64).tanh());
        if u > worst.0 {
            worst = (u, xi);
        }
    }
    eprintln!("tanh worst {} ulp at {:e}", worst.0, worst.1);
    assert!(
        worst.0 <= 1.5,
        "{} ulp at {:e} ({:#x})",
        worst.0,
        worst.1,
        worst.1.to_bits()
    );
}

#[test]
fn tanh_in_half_types_fused_reductions_and_gemm_epilogues() {
    let d = device();
    let mut rng = Rng::new(604);
    let x: Vec<f32> = (0..4099).map(|_| rng.f32() * 12.0).collect();
    // Half types: computed in f32, rounded once: within one unit of the
    // half type's spacing of f64's tanh.
    for dtype in [DType::BF16, DType::F16] {
        let a = match dtype {
            DType::F16 => Array::from_slice(
                &x.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>(),
                &[x.len()],
                &d,
            ),
            _ => Array::from_slice(
                &x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>(),
                &[x.len()],
                &d,
            ),
        };
        let a = match a {
            Ok(a) => a,
            Err(Error::MissingFeature { .. }) => continue,
            Err(e) => panic!("{dtype:?}: {e}"),
        };
        let got = match a
            .tanh()
            .and_then(|t| t.astype(DType::F32))
            .and_then(|t| t.to_vec::<f32>())
        {
            Ok(g) => g,
            Err(Error::MissingFeature { .. }) => continue,
            Err(e) => panic!("{dtype:?}: {e}"),
        };
        let held = a.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        for (&h, &g) in held.iter().zip(&got) {
            let want = (h as f64).tanh();
            let (step, rounded) = match dtype {
                DType::F16 => (
                    2f64.powi(want.abs().max(6.1e-5).log2().floor() as i32 - 10),
                    f16::from_f64(want).to_f64(),
                ),
                _ => (
                    2f64.powi(want.abs().max(1e-38).log2().floor() as i32 - 7),
                    bf16::from_f64(want).to_f64(),
                ),
            };
            assert!(
                (g as f64 - want).abs() <= step,
                "{dtype:?} tanh({h}) = {g}, want {want} (rounded {rounded})"
            );
        }
    }
    // x.tanh().sum() over rows (a reduction with a fused prologue), and a
    // chain.
    let a = Array::from_slice(&x[..4096], &[4, 1024], &d).unwrap();
    let s = a
        .tanh()
        .unwrap()
        .sum(-1, false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let c = ((a.tanh().unwrap() * 2.0f32).unwrap() + 1.0f32)
        .unwrap()
        .tanh()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for r in 0..4 {
        let want: f64 = x[r * 1024..(r + 1) * 1024]
            .iter()
            .map(|&v| (v as f64).tanh())
            .sum();
        assert!(
            (s[r] as f64 - want).abs() < 1e-3,
            "row {r}: {} vs {want}",
            s[r]
        );
    }
    for (i, &g) in c.iter().enumerate() {
        let t = ((x[i] as f64).tanh() as f32 as f64 * 2.0 + 1.0) as f32 as f64;
        // The first tanh's 1.5 ulp (up to 1.8e-7) doubled, then the
        // second's: 5e-7 absolute.
        assert!(
            (g as f64 - t.tanh()).abs() <= 5e-7,
            "chain [{i}]: {g} vs {}",
            t.tanh()
        );
    }
    // A GEMM whose product's tanh runs in its epilogue.
    let (m, k, n) = (7, 33, 65);
    let xa = rng.vec_f32(m * k);
    let xb = rng.vec_f32(k * n);
    let p = Array::from_slice(&xa, &[m, k], &d)
        .unwrap()
        .matmul(&Array::from_slice(&xb, &[k, n], &d).unwrap())
        .unwrap()
        .tanh()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let want = matmul_ref(&xa, &xb, 1, m, k, n);
    for (i, (&g, &w)) in p.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w.tanh()).abs() < 1e-5,
            "[{i}]: {g} vs {}",
            w.tanh()
        );
    }
}
