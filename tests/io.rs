//! wgarray::io (safetensors in and out) against files the `safetensors`
//! crate writes and reads itself; uploads from borrowed memory and
//! `read_into`. Every error case checks that nothing stays on the device.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::{Rng, device};
use safetensors::tensor::TensorView;
use safetensors::{Dtype as FileDType, SafeTensors};
use wgarray::half::{bf16, f16};
use wgarray::io::{SafetensorsFile, load_safetensors, save_safetensors};
use wgarray::{Array, DType, Device, Element, Error, Slice};

/// A directory under the system's temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("wgarray-io-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .expect("read scratch dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One tensor as the file holds it: dtype, shape, little-endian bytes.
#[derive(Clone)]
struct HostTensor {
    name: String,
    dtype: FileDType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl HostTensor {
    fn view(&self) -> TensorView<'_> {
        TensorView::new(self.dtype, self.shape.clone(), &self.bytes).expect("tensor view")
    }
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Random host data of `dtype` and `shape` in safetensors' layout.
fn random_tensor(rng: &mut Rng, name: &str, dtype: FileDType, shape: &[usize]) -> HostTensor {
    let n = numel(shape);
    let bytes: Vec<u8> = match dtype {
        FileDType::F32 => (0..n)
            .flat_map(|_| (rng.f32() * 100.0).to_le_bytes())
            .collect(),
        FileDType::F16 => (0..n)
            .flat_map(|_| f16::from_f32(rng.f32() * 100.0).to_le_bytes())
            .collect(),
        FileDType::BF16 => (0..n)
            .flat_map(|_| bf16::from_f32(rng.f32() * 100.0).to_le_bytes())
            .collect(),
        FileDType::I32 => (0..n)
            .flat_map(|_| (rng.next_u64() as i32).to_le_bytes())
            .collect(),
        FileDType::U32 => (0..n)
            .flat_map(|_| (rng.next_u64() as u32).to_le_bytes())
            .collect(),
        FileDType::BOOL => (0..n).map(|_| (rng.next_u64() & 1) as u8).collect(),
        FileDType::F64 => (0..n)
            .flat_map(|_| (rng.f32() as f64).to_le_bytes())
            .collect(),
        FileDType::F8_E4M3 | FileDType::U8 | FileDType::I8 => {
            (0..n).map(|_| rng.next_u64() as u8).collect()
        }
        FileDType::U16 | FileDType::I16 => (0..n)
            .flat_map(|_| (rng.next_u64() as u16).to_le_bytes())
            .collect(),
        // In the 32-bit range (by sign extension for I64).
        FileDType::I64 => (0..n)
            .flat_map(|_| (rng.next_u64() as i32 as i64).to_le_bytes())
            .collect(),
        FileDType::U64 => (0..n)
            .flat_map(|_| (rng.next_u64() as u32 as u64).to_le_bytes())
            .collect(),
        other => panic!("no generator for {other:?}"),
    };
    HostTensor {
        name: name.to_string(),
        dtype,
        shape: shape.to_vec(),
        bytes,
    }
}

fn write_with_crate(path: &Path, tensors: &[HostTensor], meta: Option<HashMap<String, String>>) {
    let views = tensors.iter().map(|t| (t.name.clone(), t.view()));
    safetensors::serialize_to_file(views, meta, path).expect("safetensors crate writes");
}

/// The array's elements as little-endian bytes in safetensors' layout,
/// read back through the typed API (an independent path from the file
/// writer's raw copy).
fn file_bytes_of(a: &Array) -> Vec<u8> {
    macro_rules! le {
        ($t:ty) => {
            a.to_vec::<$t>()
                .unwrap()
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect()
        };
    }
    match a.dtype() {
        DType::F32 => le!(f32),
        DType::F16 => le!(f16),
        DType::BF16 => le!(bf16),
        DType::F64 => le!(f64),
        DType::I32 => le!(i32),
        DType::U32 => le!(u32),
        DType::I16 => le!(i16),
        DType::U16 => le!(u16),
        DType::I8 => le!(i8),
        DType::U8 => le!(u8),
        DType::Bool => a
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .map(|&b| b as u8)
            .collect(),
        d => panic!("{d} has no elements to write"),
    }
}

fn dtype_of(d: FileDType) -> DType {
    match d {
        FileDType::F32 => DType::F32,
        FileDType::F16 => DType::F16,
        FileDType::BF16 => DType::BF16,
        FileDType::I32 => DType::I32,
        FileDType::U32 => DType::U32,
        FileDType::BOOL => DType::Bool,
        FileDType::I8 => DType::I8,
        FileDType::U8 => DType::U8,
        FileDType::I16 => DType::I16,
        FileDType::U16 => DType::U16,
        FileDType::F64 => DType::F64,
        other => panic!("{other:?}"),
    }
}

/// Every supported dtype at odd sizes (1, 7, 33, 1025 elements, a scalar,
/// an empty tensor): the crate writes, wgarray loads; wgarray saves, and the
/// bytes are the crate's own for the same tensors.
#[test]
fn every_dtype_round_trips_through_files_of_the_safetensors_crate() {
    let device = device();
    let dir = Scratch::new("round-trip");
    let mut rng = Rng::new(7);
    let mut dtypes = vec![
        FileDType::F32,
        FileDType::F16,
        FileDType::BF16,
        FileDType::I32,
        FileDType::U32,
        FileDType::BOOL,
        FileDType::I8,
        FileDType::U8,
        FileDType::I16,
        FileDType::U16,
    ];
    if device
        .features()
        .contains(wgarray::wgpu::Features::SHADER_F64 | wgarray::wgpu::Features::SHADER_INT64)
    {
        dtypes.push(FileDType::F64);
    }
    let shapes: [&[usize]; 6] = [&[1], &[7], &[3, 11], &[1025], &[], &[0, 3]];
    let mut tensors = Vec::new();
    for (i, &d) in dtypes.iter().enumerate() {
        for (j, s) in shapes.iter().enumerate() {
            tensors.push(random_tensor(&mut rng, &format!("t{i}.{j}"), d, s));
        }
    }
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    let original = dir.path("crate.safetensors");
    write_with_crate(&original, &tensors, Some(meta.clone()));

    let file = SafetensorsFile::open(&original).unwrap();
    assert_eq!(file.metadata(), Some(&meta));
    assert_eq!(file.names().len(), tensors.len());
    let loaded = load_safetensors(&original, &device).unwrap();
    assert_eq!(loaded.len(), tensors.len());
    for t in &tensors {
        let a = &loaded[&t.name];
        assert_eq!(a.shape(), &t.shape[..], "{}", t.name);
        assert_eq!(a.dtype(), dtype_of(t.dtype), "{}", t.name);
        assert!(a.is_evaluated());
        assert_eq!(file_bytes_of(a), t.bytes, "{}", t.name);
        assert_eq!(file.dtype(&t.name).unwrap(), dtype_of(t.dtype));
        assert_eq!(file.shape(&t.name).unwrap(), &t.shape[..]);
    }

    // Back out: the same bytes as the crate writes for the same tensors.
    let saved = dir.path("wgarray.safetensors");
    let pairs: Vec<(&str, &Array)> = tensors
        .iter()
        .map(|t| (&t.name[..], &loaded[&t.name]))
        .collect();
    save_safetensors(&saved, &pairs).unwrap();
    let reference =
        safetensors::serialize(tensors.iter().map(|t| (t.name.clone(), t.view())), None).unwrap();
    assert_eq!(std::fs::read(&saved).unwrap(), reference);

    // With metadata, the crate reads back what was written.
    let with_meta = dir.path("meta.safetensors");
    wgarray::io::save_safetensors_with_metadata(&with_meta, &pairs, Some(&meta)).unwrap();
    let bytes = std::fs::read(&with_meta).unwrap();
    let (_, md) = SafeTensors::read_metadata(&bytes).unwrap();
    assert_eq!(md.metadata().as_ref(), Some(&meta));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for t in &tensors {
        let v = st.tensor(&t.name).unwrap();
        assert_eq!(
            (v.dtype(), v.shape(), v.data()),
            (t.dtype, &t.shape[..], &t.bytes[..])
        );
    }
    drop(pairs);
    drop((loaded, file));
    common::assert_empty(&device);
    assert_eq!(
        dir.files(),
        [
            "crate.safetensors",
            "meta.safetensors",
            "wgarray.safetensors"
        ]
    );
}

/// Views and unevaluated arrays are saved dense and row-major.
#[test]
fn save_evaluates_lazy_arrays_and_writes_views_dense() {
    let device = device();
    let dir = Scratch::new("views");
    let mut rng = Rng::new(11);
    let (r, c) = (7, 33);
    let x = rng.vec_f32(r * c);
    let a = Array::from_slice(&x, &[r, c], &device).unwrap();
    let t = a.transpose(); // [c, r], strided
    let s = a
        .slice(&[Slice::new(Some(1), Some(7), 2), Slice::step(3)])
        .unwrap();
    let lazy = (&a * 2.0).unwrap();
    let halfs = a.astype(DType::F16).unwrap().transpose();
    let path = dir.path("views.safetensors");
    save_safetensors(
        &path,
        &[("t", &t), ("s", &s), ("lazy", &lazy), ("h", &halfs)],
    )
    .unwrap();

    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |name: &str| -> Vec<f32> {
        st.tensor(name)
            .unwrap()
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let want_t: Vec<f32> = (0..c)
        .flat_map(|j| (0..r).map(move |i| (i, j)))
        .map(|(i, j)| x[i * c + j])
        .collect();
    assert_eq!(f32s("t"), want_t);
    assert_eq!(st.tensor("t").unwrap().shape(), [c, r]);
    let want_s: Vec<f32> = (1..7)
        .step_by(2)
        .flat_map(|i| (0..33).step_by(3).map(move |j| (i, j)))
        .map(|(i, j)| x[i * c + j])
        .collect();
    assert_eq!(f32s("s"), want_s);
    assert_eq!(f32s("lazy"), x.iter().map(|v| v * 2.0).collect::<Vec<_>>());
    let h = st.tensor("h").unwrap();
    assert_eq!(h.dtype(), FileDType::F16);
    let want_h: Vec<u8> = want_t
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect();
    assert_eq!(h.data(), &want_h[..]);
    drop((a, t, s, lazy, halfs));
    common::assert_empty(&device);
}

/// More than one storage binding's worth of tensors (128 MiB on Mesa) in
/// one file, written by the crate, loaded, saved and compared byte for
/// byte; and a single tensor over the limit is refused before anything is
/// uploaded.
#[test]
fn a_file_larger_than_one_binding() {
    let device = device();
    let dir = Scratch::new("large");
    let max = device.limits().max_storage_buffer_binding_size as usize;
    // Two tensors of 0.6 binding each: 1.2 bindings in the file.
    let n = (max / 4) * 3 / 5;
    // Plain loops and byte-wise comparisons: this test data is large and
    // the test crate is built unoptimised.
    let pattern = |seed: u32, len: usize| -> Vec<u32> {
        let mut v = Vec::with_capacity(len);
        for i in 0..len as u32 {
            v.push(i.wrapping_mul(2_654_435_761) ^ seed);
        }
        v
    };
    let a = pattern(0x1234_5678, n);
    let b = pattern(0x9abc_def0, (n / 5) * 5);
    let path = dir.path("large.safetensors");
    let views = [
        (
            "a",
            TensorView::new(FileDType::U32, vec![n], bytemuck::cast_slice(&a)).unwrap(),
        ),
        (
            "b",
            TensorView::new(FileDType::I32, vec![n / 5, 5], bytemuck::cast_slice(&b)).unwrap(),
        ),
    ];
    safetensors::serialize_to_file(views, None, &path).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > max as u64);

    let loaded = load_safetensors(&path, &device).unwrap();
    assert!(device.active_memory() > max as u64);
    assert!(loaded["a"].to_vec::<u32>().unwrap() == a, "a differs");
    let got_b = loaded["b"].to_vec::<i32>().unwrap();
    assert!(
        bytemuck::cast_slice::<i32, u32>(&got_b) == &b[..],
        "b differs"
    );
    assert_eq!(loaded["b"].shape(), [n / 5, 5]);
    drop(got_b);
    let saved = dir.path("saved.safetensors");
    save_safetensors(&saved, &[("a", &loaded["a"]), ("b", &loaded["b"])]).unwrap();
    assert!(std::fs::read(&saved).unwrap() == std::fs::read(&path).unwrap());
    drop(loaded);
    common::assert_empty(&device);

    // One tensor just over the limit: a header and a sparse data section.
    let big = dir.path("too-large.safetensors");
    let header = format!(
        r#"{{"small":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}},"big":{{"dtype":"U32","shape":[{}],"data_offsets":[8,{}]}}}}"#,
        max / 4 + 1,
        8 + max + 4
    );
    write_raw(&big, &header, 8 + max + 4);
    let err = load_safetensors(&big, &device).unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLarge {
                op: "load_safetensors",
                ..
            }
        ),
        "{err}"
    );
    common::assert_empty(&device);
}

/// A file with `header` (padded to 8 bytes) and a data section of
/// `data_len` zero bytes (sparse).
fn write_raw(path: &Path, header: &str, data_len: usize) {
    let mut h = header.as_bytes().to_vec();
    h.resize(h.len().next_multiple_of(8), b' ');
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(&h);
    std::fs::write(path, &bytes).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len((bytes.len() + data_len) as u64).unwrap();
}

/// Device state that must not change on an error path.
fn snapshot(device: &Device) -> (u64, u64, u64) {
    (
        device.active_memory(),
        device.live_arrays(),
        device.live_nodes(),
    )
}

#[test]
fn bad_files_are_typed_errors_and_leave_nothing_on_the_device() {
    let device = device();
    let dir = Scratch::new("errors");
    let mut rng = Rng::new(3);
    // Something live already, so "back to the start" is not just "zero".
    let keep = Array::from_slice(&rng.vec_f32(33), &[33], &device).unwrap();
    let start = snapshot(&device);

    // A path that does not exist.
    let missing = dir.path("missing.safetensors");
    match load_safetensors(&missing, &device).unwrap_err() {
        Error::Io { path, kind, .. } => {
            assert_eq!(path, missing);
            assert_eq!(kind, std::io::ErrorKind::NotFound);
        }
        e => panic!("{e}"),
    }
    // A directory.
    assert!(matches!(
        load_safetensors(&dir.0, &device),
        Err(Error::Io { .. })
    ));
    assert_eq!(snapshot(&device), start);

    // A valid file of three tensors, then cut short.
    let tensors = vec![
        random_tensor(&mut rng, "a", FileDType::F32, &[7, 33]),
        random_tensor(&mut rng, "b", FileDType::F16, &[7]),
        random_tensor(&mut rng, "c", FileDType::I32, &[1025]),
    ];
    let good = dir.path("good.safetensors");
    write_with_crate(&good, &tensors, None);
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 5]).unwrap();
    match load_safetensors(&truncated, &device).unwrap_err() {
        Error::Format {
            path,
            tensor,
            message,
        } => {
            assert_eq!(path, truncated);
            // The crate writes by dtype alignment, largest first: b (F16)
            // is last, and its data is what was cut.
            assert_eq!(tensor.as_deref(), Some("b"), "{message}");
        }
        e => panic!("{e}"),
    }
    // Cut inside the header, and inside the length.
    for cut in [20, 5, 0] {
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        let err = load_safetensors(&truncated, &device).unwrap_err();
        assert!(
            matches!(err, Error::Format { tensor: None, .. }),
            "cut at {cut}: {err}"
        );
    }
    assert_eq!(snapshot(&device), start);

    // Headers that lie about sizes: offsets that disagree with the shape,
    // and a shape whose data runs past the end of the file.
    let liar = dir.path("liar.safetensors");
    write_raw(
        &liar,
        r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}}"#,
        12,
    );
    let err = load_safetensors(&liar, &device).unwrap_err();
    assert!(
        matches!(&err, Error::Format { tensor: Some(t), .. } if t == "x"),
        "{err}"
    );
    assert!(err.to_string().contains("liar.safetensors"), "{err}");
    write_raw(
        &liar,
        r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1000],"data_offsets":[8,4008]}}"#,
        16,
    );
    let err = load_safetensors(&liar, &device).unwrap_err();
    assert!(
        matches!(&err, Error::Format { tensor: Some(t), .. } if t == "y"),
        "{err}"
    );
    // Not JSON at all.
    write_raw(&liar, "{not json", 0);
    assert!(matches!(
        load_safetensors(&liar, &device),
        Err(Error::Format { tensor: None, .. })
    ));
    assert_eq!(snapshot(&device), start);

    // An unsupported dtype: named, and the supported tensors before it in
    // the file are not uploaded either.
    let mixed = dir.path("mixed.safetensors");
    write_with_crate(
        &mixed,
        &[
            random_tensor(&mut rng, "ok", FileDType::F32, &[7]),
            random_tensor(&mut rng, "fp8", FileDType::F8_E4M3, &[3]),
        ],
        None,
    );
    match load_safetensors(&mixed, &device).unwrap_err() {
        Error::UnsupportedDType { tensor, dtype, .. } => {
            assert_eq!((tensor.as_str(), dtype.as_str()), ("fp8", "F8_E4M3"));
        }
        e => panic!("{e}"),
    }
    let file = SafetensorsFile::open(&mixed).unwrap();
    assert!(matches!(
        file.load("fp8", &device),
        Err(Error::UnsupportedDType { .. })
    ));
    assert!(matches!(
        file.load("nope", &device),
        Err(Error::Format {
            tensor: Some(_),
            ..
        })
    ));
    assert_eq!(file.load("ok", &device).unwrap().size(), 7);
    drop(file);
    assert_eq!(snapshot(&device), start);

    // Out of memory after a tensor is up (`a`, 924 bytes, fits; `c`, 4100
    // bytes, does not): it goes back too.
    device.clear_cache();
    let limit = device.set_memory_limit(device.active_memory() + 2048);
    let allocations = device.memory_stats().allocations;
    let err = load_safetensors(&good, &device).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    assert_eq!(
        device.memory_stats().allocations,
        allocations + 1,
        "a was up"
    );
    device.set_memory_limit(limit);
    assert_eq!(snapshot(&device), start);

    // Errors keep `Error: Clone + PartialEq`.
    let e = load_safetensors(&missing, &device).unwrap_err();
    assert_eq!(e.clone(), e);
    drop(keep);
    common::assert_empty(&device);
}

#[test]
fn save_errors_are_typed_and_leave_no_file() {
    let device = device();
    let dir = Scratch::new("save-errors");
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &device).unwrap();
    let b = Array::from_slice(&[1i32, 2], &[2], &device).unwrap();
    let path = dir.path("x.safetensors");
    let err = save_safetensors(&path, &[("a", &a), ("a", &b)]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = save_safetensors(&path, &[("__metadata__", &a)]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let nowhere = dir.path("no/such/dir/x.safetensors");
    match save_safetensors(&nowhere, &[("a", &a)]).unwrap_err() {
        Error::Io { kind, .. } => assert_eq!(kind, std::io::ErrorKind::NotFound),
        e => panic!("{e}"),
    }
    // A failure while evaluating: no file, no temporary file.
    let lazy = (&a * 2.0).unwrap();
    let limit = device.set_memory_limit(device.active_memory());
    let err = save_safetensors(&path, &[("lazy", &lazy)]).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    device.set_memory_limit(limit);
    assert!(dir.files().is_empty(), "{:?}", dir.files());
    // Arrays of two devices in one file.
    let other = common::device();
    let c = Array::from_slice(&[1.0f32], &[1], &other).unwrap();
    save_safetensors(&path, &[("a", &a), ("c", &c), ("lazy", &lazy)]).unwrap();
    let loaded = load_safetensors(&path, &device).unwrap();
    assert_eq!(loaded["c"].to_vec::<f32>().unwrap(), [1.0]);
    assert_eq!(loaded["lazy"].to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    assert_eq!(dir.files(), ["x.safetensors"]);
    drop((a, b, lazy, loaded, c));
    common::assert_empty(&device);
}

/// `read_into` gives `to_vec`'s values without allocating: after the first
/// call, a loop that reads every step takes no new buffer from the driver.
#[test]
fn read_into_reuses_pooled_buffers_in_a_loop() {
    let device = device();
    let mut rng = Rng::new(5);
    let (r, c) = (7, 33);
    let x = rng.vec_f32(r * c);
    let mut a = Array::from_slice(&x, &[r, c], &device).unwrap();
    let mut out = vec![0.0f32; r * c];
    a.transpose().read_into(&mut out).unwrap();
    let want: Vec<f32> = (0..c)
        .flat_map(|j| (0..r).map(move |i| (i, j)))
        .map(|(i, j)| x[i * c + j])
        .collect();
    assert_eq!(out, want);

    let mut step = |a: &Array, k: usize| {
        a.read_into(&mut out).unwrap();
        let want: Vec<f32> = x.iter().map(|v| v + k as f32).collect();
        assert_eq!(out, want, "step {k}");
    };
    step(&a, 0);
    a = (&a + 1.0).unwrap();
    step(&a, 1);
    let before = device.memory_stats().allocations;
    for k in 2..6 {
        a = (&a + 1.0).unwrap();
        step(&a, k);
    }
    assert_eq!(
        device.memory_stats().allocations,
        before,
        "buffers created in the loop"
    );

    // Other dtypes, odd sizes.
    let h: Vec<f16> = (0..7).map(|i| f16::from_f32(i as f32 - 3.5)).collect();
    let mut hout = vec![f16::ZERO; 7];
    Array::from_slice(&h, &[7], &device)
        .unwrap()
        .read_into(&mut hout)
        .unwrap();
    assert_eq!(hout, h);
    let bits: Vec<bool> = (0..1025).map(|_| rng.next_u64() & 1 == 1).collect();
    let mut bout = vec![false; 1025];
    Array::from_slice(&bits, &[1025], &device)
        .unwrap()
        .read_into(&mut bout)
        .unwrap();
    assert_eq!(bout, bits);
    let mut empty: [i32; 0] = [];
    Array::zeros(&[0], DType::I32, &device)
        .unwrap()
        .read_into(&mut empty)
        .unwrap();

    // Wrong length or dtype: typed errors, `dst` untouched.
    let mut short = vec![9.0f32; 3];
    let err = a.read_into(&mut short).unwrap_err();
    assert!(matches!(err, Error::DataLength { len: 3, .. }), "{err}");
    assert_eq!(short, [9.0; 3]);
    let mut ints = vec![9i32; r * c];
    assert!(matches!(
        a.read_into(&mut ints),
        Err(Error::ReadDType { .. })
    ));
    assert!(ints.iter().all(|&v| v == 9));
    drop(a);
    common::assert_empty(&device);
}

/// `from_slice` writes straight into wgpu's staging memory: every dtype at
/// odd sizes (2-byte dtypes with an odd count pad to a whole word) comes
/// back as it went in.
#[test]
fn from_slice_round_trips_every_dtype_at_odd_sizes() {
    let device = device();
    let mut rng = Rng::new(9);
    // `v` uploaded and read back: as it went in.
    fn check<T: Element>(v: &[T], device: &Device) {
        let back = Array::from_slice(v, &[v.len()], device).unwrap();
        assert_eq!(
            back.to_vec::<T>().unwrap(),
            v,
            "{}",
            std::any::type_name::<T>()
        );
    }
    for n in [1, 7, 33, 1025] {
        let f = rng.vec_f32(n);
        let h: Vec<f16> = f.iter().map(|&v| f16::from_f32(v)).collect();
        let b: Vec<bf16> = f.iter().map(|&v| bf16::from_f32(v)).collect();
        let i = rng.vec_i32(n, 1000);
        let u: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        let t: Vec<bool> = (0..n).map(|_| rng.next_u64() & 1 == 1).collect();
        check(&f, &device);
        check(&h, &device);
        check(&b, &device);
        check(&i, &device);
        check(&u, &device);
        check(&t, &device);
    }
    common::assert_empty(&device);
}

/// PyTorch's int64 tensors (and uint64) load as int32 (uint32), every
/// value checked: one that does not fit is named by tensor, index and
/// value, and nothing of the file stays on the device. float64 without
/// `SHADER_F64` is `MissingFeature`.
#[test]
fn int64_tensors_narrow_with_a_range_check() {
    let device = device();
    let dir = Scratch::new("int64");
    let mut rng = Rng::new(64);
    let ok = [
        random_tensor(&mut rng, "ids", FileDType::I64, &[3, 11]),
        random_tensor(&mut rng, "counts", FileDType::U64, &[1025]),
    ];
    let path = dir.path("ok.safetensors");
    write_with_crate(&path, &ok, None);
    let loaded = load_safetensors(&path, &device).unwrap();
    let ids = &loaded["ids"];
    assert_eq!((ids.dtype(), ids.shape()), (DType::I32, &[3usize, 11][..]));
    // The file's 8-byte little-endian values.
    let words = |bytes: &[u8]| -> Vec<[u8; 8]> {
        bytes
            .chunks_exact(8)
            .map(|c| c.try_into().unwrap())
            .collect()
    };
    let want: Vec<i64> = words(&ok[0].bytes)
        .into_iter()
        .map(i64::from_le_bytes)
        .collect();
    assert_eq!(ids.to_vec::<i64>().unwrap(), want);
    let counts = &loaded["counts"];
    assert_eq!(counts.dtype(), DType::U32);
    let want: Vec<u64> = words(&ok[1].bytes)
        .into_iter()
        .map(u64::from_le_bytes)
        .collect();
    assert_eq!(counts.to_vec::<u64>().unwrap(), want);
    drop(loaded);
    common::assert_empty(&device);

    // Element 5 of `big` is 2^31: named, and `ids` before it is not
    // uploaded either.
    let mut big = random_tensor(&mut rng, "big", FileDType::I64, &[7]);
    big.bytes[40..48].copy_from_slice(&(1i64 << 31).to_le_bytes());
    let bad = dir.path("bad.safetensors");
    write_with_crate(&bad, &[ok[0].clone(), big], None);
    match load_safetensors(&bad, &device).unwrap_err() {
        e @ Error::OutOfRange { .. } => {
            let msg = e.to_string();
            let Error::OutOfRange {
                tensor,
                index,
                value,
                dtype,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(
                (tensor.as_deref(), index, value, dtype),
                (Some("big"), 5, 1 << 31, DType::I32)
            );
            assert!(msg.contains("big") && msg.contains("2147483648"), "{msg}");
        }
        e => panic!("{e}"),
    }
    common::assert_empty(&device);

    if !device
        .features()
        .contains(wgarray::wgpu::Features::SHADER_F64)
    {
        let doubles = dir.path("doubles.safetensors");
        write_with_crate(
            &doubles,
            &[random_tensor(&mut rng, "d", FileDType::F64, &[3])],
            None,
        );
        assert!(matches!(
            load_safetensors(&doubles, &device),
            Err(Error::MissingFeature { .. })
        ));
        common::assert_empty(&device);
    }
}
