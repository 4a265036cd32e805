//! The GEMM's tuning cache (`wgarray::tuning`): a device's choices are
//! written to a file keyed by adapter, driver and wgarray version, a later
//! device on the same adapter reads them instead of timing, and a corrupt
//! or foreign file is ignored with a warning in the log, never an error.
//! Each test uses a directory of its own (`DeviceOptions::with_cache_dir`)
//! and clears a kernel forced by `WGARRAY_GEMM_KERNEL`, so the suite's
//! environment does not change what is tested.

mod common;

use std::sync::Mutex;

use wgarray::tuning::{CacheDir, GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device, DeviceOptions, Error};

/// Every warning logged in this test binary.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            WARNINGS.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

static RECORDER: Recorder = Recorder;

/// The warnings so far that mention `needle`.
fn warnings_about(needle: &str) -> Vec<String> {
    let _ = log::set_logger(&RECORDER).map(|()| log::set_max_level(log::LevelFilter::Warn));
    WARNINGS
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.contains(needle))
        .cloned()
        .collect()
}

/// A device of the suite's adapter keeping its caches in `dir`, with no
/// forced kernel.
fn device_in(dir: &std::path::Path) -> Device {
    // Installs the recorder before the device reads anything.
    warnings_about("");
    let options = DeviceOptions::from_env()
        .unwrap()
        .with_cache_dir(CacheDir::At(dir.to_path_buf()));
    let d = Device::new(&options).expect("this test needs an adapter");
    d.set_gemm_kernel(None).unwrap();
    d
}

/// `x [m, k] @ y [k, n]` on `d`, read back; then wait for the class's
/// timing, which runs on the device's background thread (at once on GL).
fn product_then_wait(
    d: &Device,
    x: &[f32],
    y: &[f32],
    (m, k, n): (usize, usize, usize),
) -> Vec<f32> {
    let a = Array::from_slice(x, &[m, k], d).unwrap();
    let b = Array::from_slice(y, &[k, n], d).unwrap();
    let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    d.wait_warm_up();
    got
}

/// One matrix-vector f32 GEMM (1 x 48 @ 48 x 40), checked against the
/// host's product.
fn small_gemm(d: &Device) {
    let (m, k, n) = (1, 48, 40);
    let x: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    let y: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
    let got = product_then_wait(d, &x, &y, (m, k, n));
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| x[i * k + p] * y[p * n + j]).sum();
            assert_eq!(got[i * n + j], want, "({i}, {j})");
        }
    }
}

/// `len` varied values that sum exactly in f32 for short rows:
/// `((i * mul) % modulus) / div - sub`.
fn varied(len: usize, (mul, modulus): (usize, usize), div: f32, sub: f32) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * mul) % modulus) as f32 / div - sub)
        .collect()
}

/// The class tuned here: matrix-vector, which every adapter times (more
/// than one candidate everywhere).
const CLASS: ShapeClass = ShapeClass::Gemv;

#[test]
fn choices_are_written_and_read_by_the_next_device() {
    let dir = tempfile::tempdir().unwrap();
    let first = device_in(dir.path());
    let file = first.gemm_tuning_file().expect("the cache directory is on");
    assert!(file.starts_with(dir.path()));
    assert_eq!(first.gemm_kernel(DType::F32, CLASS), None);
    small_gemm(&first);
    let chosen = first
        .gemm_kernel(DType::F32, CLASS)
        .expect("the first GEMM chose a kernel");
    let text = std::fs::read_to_string(&file).expect("the choice was written");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["owner"]["adapter"], first.info().name.as_str());
    assert_eq!(json["owner"]["crate_version"], env!("CARGO_PKG_VERSION"));
    let entry = &json["choices"]["float32 gemv"];
    assert_eq!(entry["kernel"], chosen.to_string());
    let among: Vec<String> = first
        .gemm_candidates(DType::F32, CLASS)
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(entry["candidates"], serde_json::json!(among));
    if first
        .features()
        .contains(wgarray::wgpu::Features::PIPELINE_CACHE)
    {
        let pipelines = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("pipelines-")
            })
            .count();
        assert_eq!(pipelines, 1, "the driver's pipeline cache was saved");
    }
    drop(first);
    // A later device (a later process) on the adapter takes the choice
    // without timing anything.
    let second = device_in(dir.path());
    assert_eq!(second.gemm_kernel(DType::F32, CLASS), Some(chosen));
    small_gemm(&second);
    assert!(warnings_about(&dir.path().display().to_string()).is_empty());
}

#[test]
fn corrupt_and_foreign_files_are_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = device_in(dir.path()).gemm_tuning_file().unwrap();
    let name = file.display().to_string();
    // A file as this build writes it: the choice among `candidates`.
    let file_of =
        |version: u64, owner: &serde_json::Value, kernel: &str, candidates: &[GemmKernel]| {
            let among: Vec<String> = candidates.iter().map(|k| k.to_string()).collect();
            serde_json::json!({
                "format": "wgarray-gemm-tuning",
                "version": version,
                "owner": owner,
                "choices": { "float32 gemv": { "kernel": kernel, "candidates": among } },
            })
            .to_string()
        };
    // Learn the owner block this adapter writes.
    let probe = device_in(dir.path());
    let candidates = probe.gemm_candidates(DType::F32, CLASS);
    small_gemm(&probe);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let owner = written["owner"].clone();
    drop(probe);
    let valid = |owner: &serde_json::Value, kernel: &str| file_of(2, owner, kernel, &candidates);
    let mut foreign = owner.clone();
    foreign["driver_info"] = "another driver".into();
    // Version 1 wrote the kernel's name alone, without its candidates.
    let version_1 = serde_json::json!({
        "format": "wgarray-gemm-tuning",
        "version": 1,
        "owner": owner,
        "choices": { "float32 gemv": "register 16 1 1 4" },
    })
    .to_string();
    let cases = [
        ("garbage", b"\x00\xffnot json".to_vec()),
        ("truncated", valid(&owner, "register 16 1 1 4")[..40].into()),
        ("foreign", valid(&foreign, "register 16 1 1 4").into_bytes()),
        ("version 1", version_1.into_bytes()),
        (
            "bad kernel",
            valid(&owner, "register 99 99 1 1").into_bytes(),
        ),
    ];
    for (what, bytes) in cases {
        std::fs::write(&file, &bytes).unwrap();
        let before = warnings_about(&name).len();
        let d = device_in(dir.path());
        assert_eq!(d.gemm_kernel(DType::F32, CLASS), None, "{what}");
        assert!(warnings_about(&name).len() > before, "{what}: no warning");
        // The GEMM works, and the file is rewritten whole.
        small_gemm(&d);
        let again = device_in(dir.path());
        assert!(again.gemm_kernel(DType::F32, CLASS).is_some(), "{what}");
    }
    // A choice made among other candidates (an earlier build of the same
    // version) is not taken: the class is timed again among this build's
    // candidates, and the entry rewritten.
    let stale = "register 16 1 1 4".parse::<GemmKernel>().unwrap();
    let mut others = candidates.clone();
    others.retain(|k| *k != stale);
    others.push(stale);
    others.push("register 8 8 8 4".parse().unwrap());
    std::fs::write(&file, file_of(2, &owner, "register 16 1 1 4", &others)).unwrap();
    let d = device_in(dir.path());
    assert_eq!(
        d.gemm_kernel(DType::F32, CLASS),
        None,
        "a stale choice is taken"
    );
    small_gemm(&d);
    let retuned = d.gemm_kernel(DType::F32, CLASS).expect("timed again");
    assert!(
        candidates
            .iter()
            .any(|k| k.to_string() == retuned.to_string()),
        "{retuned}"
    );
    drop(d);
    let rewritten: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let among: Vec<String> = candidates.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        rewritten["choices"]["float32 gemv"]["candidates"],
        serde_json::json!(among)
    );
    // A valid file of this adapter (a choice among its candidates) is
    // taken as it is.
    let last = *candidates.last().unwrap();
    std::fs::write(&file, valid(&owner, &last.to_string())).unwrap();
    let d = device_in(dir.path());
    assert_eq!(d.gemm_kernel(DType::F32, CLASS), Some(last));
    small_gemm(&d);
}

#[test]
fn a_damaged_pipeline_cache_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    if !d
        .features()
        .contains(wgarray::wgpu::Features::PIPELINE_CACHE)
    {
        // GL: nothing to damage; the tuning file alone is tested above.
        assert!(common::is_gl(&d) || d.backend() != wgarray::wgpu::Backend::Vulkan);
        return;
    }
    small_gemm(&d);
    drop(d);
    let path = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("pipelines-")
        })
        .expect("the pipeline cache was saved");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let before = warnings_about(&path.display().to_string()).len();
    let d = device_in(dir.path());
    assert!(warnings_about(&path.display().to_string()).len() > before);
    small_gemm(&d);
}

#[test]
fn an_off_cache_directory_writes_nothing() {
    let options = DeviceOptions::from_env()
        .unwrap()
        .with_cache_dir(CacheDir::Off);
    let d = Device::new(&options).unwrap();
    assert_eq!(d.gemm_tuning_file(), None);
    small_gemm(&d);
}

/// `x @ w.T` with `w: [n, k]` row-major (PyTorch's `nn.Linear` layout) is
/// its own shape class, [`ShapeClass::GemvT`], chosen and remembered apart
/// from [`ShapeClass::Gemv`]; against an f64 reference at odd sizes, in
/// the half types, batched, and with a strided `w` (every other stored
/// column: not unit-stride along K, so the row-major class).
#[test]
fn transposed_weight_matrix_vector_is_its_own_class() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    common::poison_pool(&d, 1 << 20);
    let mut rng = common::Rng::new(17);
    let mut dtypes = vec![DType::F32, DType::BF16];
    if d.features().contains(wgarray::wgpu::Features::SHADER_F16) {
        dtypes.push(DType::F16);
    }
    let round = |dtype: DType, v: Vec<f32>| -> Vec<f32> {
        match dtype {
            DType::F16 => v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
            DType::BF16 => v
                .iter()
                .map(|&x| half::bf16::from_f32(x).to_f32())
                .collect(),
            _ => v,
        }
    };
    let mut failures = Vec::new();
    // (batch, k, n, strided w, dtype)
    let mut cases = Vec::new();
    for k in [1, 7, 33, 1025] {
        for n in [1, 7, 33, 1025] {
            cases.push((1, k, n, false, DType::F32));
        }
    }
    cases.extend([(3, 33, 70, false, DType::F32), (2, 37, 9, true, DType::F32)]);
    for &dtype in &dtypes[1..] {
        cases.extend([(1, 33, 70, false, dtype), (2, 1025, 7, false, dtype)]);
    }
    for (batch, k, n, strided, dtype) in cases {
        let x = round(dtype, rng.vec_f32(batch * k));
        let w = round(dtype, rng.vec_f32(n * k));
        let a = Array::from_slice(&x, &[batch, 1, k], &d)
            .unwrap()
            .astype(dtype)
            .unwrap();
        let wt = if strided {
            // [n, 2k] with w in the even columns, NaN in the odd ones.
            let stored: Vec<f32> = w.iter().flat_map(|&v| [v, f32::NAN]).collect();
            Array::from_slice(&stored, &[n, 2 * k], &d)
                .unwrap()
                .astype(dtype)
                .unwrap()
                .slice(&[wgarray::Slice::FULL, wgarray::Slice::new(None, None, 2)])
                .unwrap()
        } else {
            Array::from_slice(&w, &[n, k], &d)
                .unwrap()
                .astype(dtype)
                .unwrap()
        };
        let got = a
            .matmul(&wt.transpose())
            .and_then(|r| r.astype(DType::F32))
            .and_then(|r| r.to_vec::<f32>());
        // w.T as [k, n] row-major for the reference.
        let b: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
        let mut want = Vec::new();
        for bi in 0..batch {
            want.extend(common::matmul_ref(&x[bi * k..(bi + 1) * k], &b, 1, 1, k, n));
        }
        let tol = match dtype {
            DType::F16 => 2e-3,
            DType::BF16 => 1.6e-2,
            _ => 1e-5,
        };
        match got {
            Ok(g) => {
                let err = common::rel_frobenius(&g, &want);
                if err >= tol {
                    failures.push(format!(
                        "{dtype:?} {batch}x1x{k}x{n} strided {strided}: {err:e}"
                    ));
                }
            }
            Err(e) => failures.push(format!("{dtype:?} {batch}x1x{k}x{n}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Both matrix-vector classes ran (the strided w and n = 1 are the
    // row-major class), each with its own choice (timed in the
    // background), both written.
    d.wait_warm_up();
    let text = std::fs::read_to_string(d.gemm_tuning_file().unwrap()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (class, key) in [(ShapeClass::Gemv, "gemv"), (ShapeClass::GemvT, "gemvt")] {
        let chosen = d.gemm_kernel(DType::F32, class).expect("chosen");
        assert_eq!(
            json["choices"][format!("float32 {key}")]["kernel"],
            chosen.to_string()
        );
    }
    assert_eq!(ShapeClass::from_name("gemvt"), Some(ShapeClass::GemvT));
}

/// Tuning checks each candidate's product before it may be chosen (a
/// kernel a driver miscompiles is never picked): every candidate of the
/// matrix-vector class, which every adapter times, passes that check here,
/// in each dtype the adapter has, and the products are right.
#[test]
fn every_timed_candidate_passes_the_product_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let (k, n) = (300, 77);
        let x = varied(k, (7, 13), 8.0, 0.75);
        let y = varied(k * n, (5, 11), 4.0, 1.25);
        let a = Array::from_slice(&x, &[1, k], &d).unwrap().astype(dtype);
        let b = Array::from_slice(&y, &[k, n], &d).unwrap().astype(dtype);
        let (Ok(a), Ok(b)) = (a, b) else {
            continue;
        };
        let got = match a.matmul(&b).and_then(|c| c.astype(DType::F32)) {
            Ok(c) => c.to_vec::<f32>().unwrap(),
            Err(wgarray::Error::MissingFeature { .. }) => continue,
            Err(e) => panic!("{dtype}: {e}"),
        };
        d.wait_warm_up();
        assert!(d.gemm_kernel(dtype, CLASS).is_some(), "{dtype}: tuned");
        for j in 0..n {
            // Multiples of 1/32: each sum exact in f32, then one rounding.
            let want: f32 = (0..k).map(|p| x[p] * y[p * n + j]).sum();
            assert!(
                (got[j] - want).abs() <= want.abs() * 1e-2,
                "{dtype} [{j}]: {} vs {want}",
                got[j]
            );
        }
    }
    assert_eq!(warnings_about("wrong"), Vec::<String>::new());
}

/// A medium product `x @ w.T` (`w: [n, k]` row-major) is tuned on a proxy
/// with B in that layout (software adapters read it eight k per load, and
/// the tiles rank differently than on a row-major B): every candidate
/// passes the product check there, a choice is recorded for the class, and
/// the product (M = 40, K = 48, N = 72, a transposed view) is right
/// against an f64 reference.
#[test]
fn a_transposed_medium_product_is_tuned_in_its_layout() {
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    let (m, k, n) = (40, 48, 72);
    let x = varied(m * k, (7, 13), 8.0, 0.75);
    let w = varied(n * k, (5, 11), 4.0, 1.25);
    let a = Array::from_slice(&x, &[m, k], &d).unwrap();
    let b = Array::from_slice(&w, &[n, k], &d).unwrap().transpose();
    let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(
        ShapeClass::of_layout(m, n, 1, k as isize),
        ShapeClass::Medium
    );
    d.wait_warm_up();
    assert!(d.gemm_kernel(DType::F32, ShapeClass::Medium).is_some());
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                .sum();
            let g = got[i * n + j] as f64;
            assert!(
                (g - want).abs() <= 1e-5 * want.abs().max(1.0),
                "({i}, {j}): {g} vs {want}"
            );
        }
    }
    assert_eq!(warnings_about("wrong"), Vec::<String>::new());
}

/// Matrix-vector products from [`GEMV_WIDE_N`] output columns on are
/// their own classes ([`ShapeClass::GemvWide`], [`ShapeClass::GemvTWide`]),
/// chosen and written apart from the narrow ones; products on both sides
/// of the boundary, in both weight layouts, at odd sizes (where the tuned
/// tile is narrowed to the columns) and through an offset view of a wider
/// weight matrix, against an f64 reference on poisoned pool memory.
#[test]
fn wide_matrix_vector_products_are_their_own_classes() {
    use wgarray::tuning::GEMV_WIDE_N;
    assert_eq!(ShapeClass::of(1, GEMV_WIDE_N - 1), ShapeClass::Gemv);
    assert_eq!(ShapeClass::of(1, GEMV_WIDE_N), ShapeClass::GemvWide);
    assert_eq!(
        ShapeClass::of_layout(1, GEMV_WIDE_N, 1, 33),
        ShapeClass::GemvTWide
    );
    assert_eq!(
        ShapeClass::of_layout(1, GEMV_WIDE_N - 1, 1, 33),
        ShapeClass::GemvT
    );
    let dir = tempfile::tempdir().unwrap();
    let d = device_in(dir.path());
    common::poison_pool(&d, 1 << 24);
    let mut rng = common::Rng::new(29);
    let mut failures = Vec::new();
    // (k, n, layout): 0 row-major w [k, n], 1 w.T of a row-major [n, k],
    // 2 the columns 8.. of a row-major [k, n + 8].
    let mut cases = Vec::new();
    for (k, n) in [
        (33, GEMV_WIDE_N),
        (7, GEMV_WIDE_N + 1),
        (1025, GEMV_WIDE_N - 1),
        (33, 384),
        (1, 1152),
        (33, 7),
    ] {
        for layout in 0..3 {
            cases.push((k, n, layout));
        }
    }
    for (k, n, layout) in cases {
        let x = rng.vec_f32(k);
        // B as [k, n] row-major, for the reference.
        let b = rng.vec_f32(k * n);
        let a = Array::from_slice(&x, &[1, k], &d).unwrap();
        let w = match layout {
            0 => Array::from_slice(&b, &[k, n], &d).unwrap(),
            1 => {
                let t: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
                Array::from_slice(&t, &[n, k], &d).unwrap().transpose()
            }
            _ => {
                let wide: Vec<f32> = (0..k * (n + 8))
                    .map(|i| {
                        let (r, c) = (i / (n + 8), i % (n + 8));
                        if c < 8 { f32::NAN } else { b[r * n + c - 8] }
                    })
                    .collect();
                Array::from_slice(&wide, &[k, n + 8], &d)
                    .unwrap()
                    .slice(&[wgarray::Slice::FULL, wgarray::Slice::new(Some(8), None, 1)])
                    .unwrap()
            }
        };
        let want = common::matmul_ref(&x, &b, 1, 1, k, n);
        match a.matmul(&w).and_then(|r| r.to_vec::<f32>()) {
            Ok(g) => {
                let err = common::rel_frobenius(&g, &want);
                if err.is_nan() || err >= 1e-5 {
                    failures.push(format!("1x{k}x{n} layout {layout}: {err:e}"));
                }
            }
            Err(e) => failures.push(format!("1x{k}x{n} layout {layout}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    d.wait_warm_up();
    let text = std::fs::read_to_string(d.gemm_tuning_file().unwrap()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for class in [
        ShapeClass::Gemv,
        ShapeClass::GemvT,
        ShapeClass::GemvWide,
        ShapeClass::GemvTWide,
    ] {
        let chosen = d.gemm_kernel(DType::F32, class).expect("chosen");
        assert_eq!(
            json["choices"][format!("float32 {}", class.name())]["kernel"],
            chosen.to_string(),
            "{class:?}"
        );
        assert_eq!(ShapeClass::from_name(class.name()), Some(class));
    }
}

/// A `m x k @ k x n` f32 product of varied values, checked against f64
/// dot products (bits equal to within the rounding of a k-term sum).
fn checked_gemm(d: &Device, (m, k, n): (usize, usize, usize)) {
    let x = varied(m * k, (7, 13), 8.0, 0.7);
    let y = varied(k * n, (5, 11), 4.0, 1.3);
    let got = product_then_wait(d, &x, &y, (m, k, n));
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| x[i * k + p] as f64 * y[p * n + j] as f64)
                .sum();
            let tol = 1e-5 * (1.0 + want.abs()) * k as f64;
            assert!(
                (got[i * n + j] as f64 - want).abs() <= tol,
                "({i}, {j}): {} against {want}",
                got[i * n + j]
            );
        }
    }
}

/// Tune the classes of `shapes` on `first` (its first GEMM of a class
/// runs the class's default while the choice is timed in the background),
/// drop it, and empty the tuning file's warm-up list, so that the next
/// device's evals run the chosen kernels from the start and list what they
/// ran. Returns the tuning file.
fn settle(
    dir: &std::path::Path,
    first: Device,
    shapes: &[(usize, usize, usize)],
) -> std::path::PathBuf {
    for &s in shapes {
        checked_gemm(&first, s);
    }
    let file = first.gemm_tuning_file().unwrap();
    drop(first);
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    json["warm"] = serde_json::json!([]);
    std::fs::write(&file, serde_json::to_string(&json).unwrap()).unwrap();
    assert!(file.starts_with(dir));
    file
}

#[test]
fn a_later_device_warms_up_the_gemm_kernels_earlier_evals_compiled() {
    let dir = tempfile::tempdir().unwrap();
    // Two products in different classes (a large tile and a small one; K
    // and N not multiples of four in the second).
    let shapes = [(96, 64, 256), (7, 33, 18)];
    let first = device_in(dir.path());
    assert_eq!(first.pipelines_warmed(), 0, "a new file has no list");
    let file = settle(dir.path(), first, &shapes);
    let first = device_in(dir.path());
    for s in shapes {
        checked_gemm(&first, s);
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let listed = json["warm"].as_array().expect("a warm-up list").clone();
    assert_eq!(
        listed.len(),
        2,
        "one entry per GEMM kernel compiled: {json}"
    );
    drop(first);
    // A hand-edited entry that names no kernel is dropped with a warning;
    // one that names a variant no eval could ask for (an eight-k pair A
    // with a plain B: its kernel text is not valid) is skipped; a
    // duplicate counts once.
    let mut edited = json.clone();
    let mut entries = listed.clone();
    entries.insert(
        0,
        serde_json::json!("float32;register 8 8 0 4;inner;inner;10000"),
    );
    entries.insert(
        0,
        serde_json::json!("float32;register 8 1 1 4;pairk;inner;00000"),
    );
    entries.push(listed[0].clone());
    edited["warm"] = serde_json::Value::Array(entries);
    std::fs::write(&file, serde_json::to_string(&edited).unwrap()).unwrap();

    // The next device with this file compiles both on its warm-up thread;
    // the same products then make no pipeline. Not on GL, which has no
    // warm-up: there the evals make both.
    let second = device_in(dir.path());
    second.wait_warm_up();
    let created = second.pipelines_created();
    for s in shapes {
        checked_gemm(&second, s);
    }
    let gemm_created = second.pipelines_created() - created;
    let warmed = if common::is_gl(&second) { 0 } else { 2 };
    assert_eq!(second.pipelines_warmed(), warmed);
    assert_eq!(
        gemm_created,
        2 - warmed,
        "the evals made what the warm-up did not (the upload and read-back make none)"
    );
    assert_eq!(
        warnings_about(&file.display().to_string())
            .iter()
            .filter(|w| w.contains("register 8 8 0 4"))
            .count(),
        1
    );
    drop(second);
    // Only the first device of a process with this file warms up.
    let third = device_in(dir.path());
    checked_gemm(&third, shapes[1]);
    assert_eq!(third.pipelines_warmed(), 0);
}

/// The uniform family's row kernel (`x @ w.T` on a software adapter; one
/// specialisation per K) is warmed up by a later device like every GEMM
/// kernel: its warm-up entry carries A's quads (K / 4). Hand-edited
/// entries with no quads or with an A row past one window are dropped
/// with a warning or skipped. (The class's choice is set in the file, so
/// that the test does not depend on what a tuning on shared cores picks.)
#[test]
fn a_later_device_warms_up_the_uniform_row_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let (k, n) = (384, 1152);
    let mut rng = common::Rng::new(41);
    let (xs, ws) = (rng.vec_f32(k), rng.vec_f32(n * k));
    let w_t: Vec<f32> = (0..k * n).map(|i| ws[(i % n) * k + i / n]).collect();
    let want = common::matmul_ref(&xs, &w_t, 1, 1, k, n);
    let run = |d: &Device| {
        let x = Array::from_slice(&xs, &[1, k], d).unwrap();
        let w = Array::from_slice(&ws, &[n, k], d).unwrap();
        let got = x.matmul(&w.transpose()).unwrap().to_vec::<f32>().unwrap();
        let err = common::rel_frobenius(&got, &want);
        assert!(err < 2e-6, "error {err}");
        // The class's timing runs in the background: wait for the choice.
        d.wait_warm_up();
    };
    let first = device_in(dir.path());
    let uniform: GemmKernel = "uniform 8 8".parse().unwrap();
    if first.info().device_type != wgarray::wgpu::DeviceType::Cpu {
        assert!(first.set_gemm_kernel(Some(uniform)).is_err());
        return;
    }
    run(&first);
    let file = first.gemm_tuning_file().unwrap();
    drop(first);
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        f(&mut json);
        std::fs::write(&file, serde_json::to_string(&json).unwrap()).unwrap();
    };
    edit(&|json| {
        json["choices"]["float32 gemvt"]["kernel"] = serde_json::json!(uniform.to_string());
        json["warm"] = serde_json::json!([]);
    });
    // A device that runs the product notes the row kernel.
    let second = device_in(dir.path());
    run(&second);
    assert_eq!(
        second.gemm_kernel(DType::F32, ShapeClass::GemvT),
        Some(uniform)
    );
    drop(second);
    let entry = "float32;uniform 8 8;scalar;scalar;00000;96";
    edit(&|json| {
        assert_eq!(json["warm"], serde_json::json!([entry]), "{json}");
        json["warm"] = serde_json::json!([
            "float32;uniform 8 8;scalar;scalar;00000;0",
            "float32;uniform 8 8;scalar;scalar;00000;4097",
            entry
        ]);
    });
    // The next one compiles it on its warm-up thread (not on GL, which
    // has no warm-up), and its product makes no pipeline.
    let third = device_in(dir.path());
    third.wait_warm_up();
    let created = third.pipelines_created();
    run(&third);
    let warmed = if common::is_gl(&third) { 0 } else { 1 };
    assert_eq!(third.pipelines_warmed(), warmed);
    assert_eq!(third.pipelines_created() - created, 1 - warmed);
    assert_eq!(
        warnings_about(&file.display().to_string())
            .iter()
            .filter(|w| w.contains("00000;0"))
            .count(),
        1
    );
}

#[test]
fn an_eval_waits_for_the_warm_up_compile_of_its_kernel() {
    // Asked for at once, each kernel is made exactly once: by the warm-up
    // (the eval waits for it) or by the eval (the warm-up then finds it).
    let dir = tempfile::tempdir().unwrap();
    let shape = (64, 48, 128);
    let first = device_in(dir.path());
    settle(dir.path(), first, &[shape]);
    let first = device_in(dir.path());
    checked_gemm(&first, shape);
    drop(first);
    let second = device_in(dir.path());
    let created = second.pipelines_created();
    checked_gemm(&second, shape);
    // The eval's own pipelines: none for the GEMM if the warm-up made it.
    let by_eval = second.pipelines_created() - created;
    second.wait_warm_up();
    assert_eq!(by_eval + second.pipelines_warmed(), 1, "made once");
}

// Hand-written and contended tuning files, and kernel names whose limit
// arithmetic overflows (the tuning file v2, 104b89a).

/// The owner block this adapter writes into `dir`'s tuning file.
fn owner_of(dir: &std::path::Path) -> (std::path::PathBuf, serde_json::Value, Vec<GemmKernel>) {
    let d = device_in(dir);
    small_gemm(&d);
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
    let d = common::device();
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
        small_gemm(&d);
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
    small_gemm(&d);
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
                small_gemm(&d);
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
