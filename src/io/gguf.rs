//! GGUF files: ggml's format for llama.cpp's models (the published
//! specification: ggml's `docs/gguf.md`, versions 2 and 3, little-endian).
//!
//! A file is a header (magic `GGUF`, version, tensor and metadata counts),
//! typed key-value metadata (integers, floats, bools, strings, arrays of
//! any of them, nested), tensor entries (name, ggml's dimensions, ggml
//! type, offset), padding to `general.alignment` (default 32), then the
//! tensors' data, each at an offset that is a multiple of the alignment.
//!
//! Read here, not with a crate: the GGUF crates on crates.io at the time
//! of writing (`gguf-rs` 0.1, `gguf` 0.1) replace non-UTF-8 keys instead
//! of refusing them, allocate what a count in the file says before
//! checking it against the file's size, report errors without the key or
//! tensor at fault, and pull a CLI's dependencies (clap, a table printer,
//! a logger) into the library; candle's reader comes with all of
//! candle-core. The format is a few hundred lines to read with every check
//! a damaged or hostile file needs.
//!
//! # Dimensions
//!
//! ggml lists a tensor's dimensions fastest-varying first: `ne[0]` is the
//! length of a row (the last axis of a row-major array), `ne[1]` the
//! number of rows, and so on. wgarray's shape is `ne` reversed: a GGUF
//! tensor of `ne = [576, 1536]` is an array of shape `[1536, 576]` (1536
//! rows of 576 elements, a Linear layer's weight `[out, in]`, as
//! PyTorch's `nn.Linear.weight`), and a 1-D `ne = [576]` is `[576]`. A
//! block format's rows are `ne[0]` elements in whole blocks, which ggml
//! requires. [`GgufTensor::ne`] keeps ggml's order; [`GgufTensor::shape`]
//! is wgarray's.
//!
//! # Dtypes
//!
//! F32, F16, BF16, F64, I8, I16 and I32 tensors load as the dtypes of the
//! same names; Q4_0, Q4_1, Q8_0, Q4_K and Q6_K as the block formats
//! `DType::Q4_0` ... (as stored, never expanded). Every other ggml type is
//! listed (with its name) and refused when loaded
//! ([`Error::UnsupportedDType`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::transfer;
use crate::{Array, DType, Device, Error, Result};

/// Arrays inside arrays deeper than this are refused (a file of nested
/// array headers would otherwise recurse as deep as it is long).
const MAX_NESTING: usize = 8;

/// Most dimensions a tensor may have (ggml has 4; wgarray's arrays 8).
const MAX_TENSOR_DIMS: u32 = crate::shape::MAX_DIMS as u32;

/// ggml's types (`enum ggml_type`, ggml.h): id, name, elements per block,
/// bytes per block. Ids ggml removed are absent.
const GGML_TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "f32", 1, 4),
    (1, "f16", 1, 2),
    (2, "q4_0", 32, 18),
    (3, "q4_1", 32, 20),
    (6, "q5_0", 32, 22),
    (7, "q5_1", 32, 24),
    (8, "q8_0", 32, 34),
    (9, "q8_1", 32, 36),
    (10, "q2_K", 256, 84),
    (11, "q3_K", 256, 110),
    (12, "q4_K", 256, 144),
    (13, "q5_K", 256, 176),
    (14, "q6_K", 256, 210),
    (15, "q8_K", 256, 292),
    (16, "iq2_xxs", 256, 66),
    (17, "iq2_xs", 256, 74),
    (18, "iq3_xxs", 256, 98),
    (19, "iq1_s", 256, 50),
    (20, "iq4_nl", 32, 18),
    (21, "iq3_s", 256, 110),
    (22, "iq2_s", 256, 82),
    (23, "iq4_xs", 256, 136),
    (24, "i8", 1, 1),
    (25, "i16", 1, 2),
    (26, "i32", 1, 4),
    (27, "i64", 1, 8),
    (28, "f64", 1, 8),
    (29, "iq1_m", 256, 56),
    (30, "bf16", 1, 2),
    (34, "tq1_0", 256, 54),
    (35, "tq2_0", 256, 66),
    (39, "mxfp4", 32, 17),
];

/// ggml's name, elements per block and bytes per block of type `id`.
fn ggml_type(id: u32) -> Option<(&'static str, u64, u64)> {
    GGML_TYPES
        .iter()
        .find(|t| t.0 == id)
        .map(|&(_, n, b, s)| (n, b, s))
}

/// The wgarray dtype of ggml type `id`, if wgarray has one.
fn device_dtype(id: u32) -> Option<DType> {
    Some(match id {
        0 => DType::F32,
        1 => DType::F16,
        2 => DType::Q4_0,
        3 => DType::Q4_1,
        8 => DType::Q8_0,
        12 => DType::Q4K,
        14 => DType::Q6K,
        24 => DType::I8,
        25 => DType::I16,
        26 => DType::I32,
        28 => DType::F64,
        30 => DType::BF16,
        _ => return None,
    })
}

/// A metadata value of a GGUF file (`gguf_metadata_value_type`).
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// `UINT8` (type 0).
    U8(u8),
    /// `INT8` (1).
    I8(i8),
    /// `UINT16` (2).
    U16(u16),
    /// `INT16` (3).
    I16(i16),
    /// `UINT32` (4).
    U32(u32),
    /// `INT32` (5).
    I32(i32),
    /// `FLOAT32` (6).
    F32(f32),
    /// `BOOL` (7): one byte, 0 or 1.
    Bool(bool),
    /// `STRING` (8): UTF-8.
    String(String),
    /// `ARRAY` (9): values of one type (arrays may nest).
    Array(Vec<GgufValue>),
    /// `UINT64` (10).
    U64(u64),
    /// `INT64` (11).
    I64(i64),
    /// `FLOAT64` (12).
    F64(f64),
}

impl GgufValue {
    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a u64, if it is an integer of any type that is not
    /// negative (GGUF writers use u32 and u64 for counts alike).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an i64, if it is an integer of any type that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::I8(v) => Some(v.into()),
            GgufValue::I16(v) => Some(v.into()),
            GgufValue::I32(v) => Some(v.into()),
            GgufValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as an f64, if it is a number (integers converted).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as a bool, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, if the value is an array.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The spec's name of the value's type: `UINT8`, ..., `STRING`,
    /// `ARRAY`, `FLOAT64`.
    pub fn type_name(&self) -> &'static str {
        match self {
            GgufValue::U8(_) => "UINT8",
            GgufValue::I8(_) => "INT8",
            GgufValue::U16(_) => "UINT16",
            GgufValue::I16(_) => "INT16",
            GgufValue::U32(_) => "UINT32",
            GgufValue::I32(_) => "INT32",
            GgufValue::F32(_) => "FLOAT32",
            GgufValue::Bool(_) => "BOOL",
            GgufValue::String(_) => "STRING",
            GgufValue::Array(_) => "ARRAY",
            GgufValue::U64(_) => "UINT64",
            GgufValue::I64(_) => "INT64",
            GgufValue::F64(_) => "FLOAT64",
        }
    }
}

/// One tensor's entry in a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufTensor {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// ggml's dimensions, fastest-varying first (`ne[0]` is a row's
    /// length).
    pub ne: Vec<u64>,
    /// wgarray's shape: `ne` reversed (see the module docs).
    pub shape: Vec<usize>,
    /// ggml's type id (`enum ggml_type`: 0 f32, 1 f16, 2 q4_0, ...).
    pub ggml_type: u32,
    /// The data's offset from the start of the data section, in bytes.
    pub offset: u64,
    /// Bytes of data.
    pub nbytes: usize,
}

impl GgufTensor {
    /// ggml's name of the tensor's type (`f32`, `q4_K`, `iq4_nl`, ...).
    pub fn type_name(&self) -> &'static str {
        ggml_type(self.ggml_type).map_or("unknown", |t| t.0)
    }

    /// The dtype the tensor loads as, `None` for a ggml type wgarray has
    /// no dtype for (it is refused when loaded).
    pub fn dtype(&self) -> Option<DType> {
        device_dtype(self.ggml_type)
    }
}

/// A GGUF file, memory-mapped, its header parsed and checked.
///
/// [`GgufFile::open`] reads the header (metadata and tensor entries) and
/// checks every tensor's data against the file; [`GgufFile::load`] copies
/// one tensor's bytes from the map straight into wgpu's staging memory, in
/// its own dtype (a block format as stored), so the operating system reads
/// only the tensors you load.
///
/// ```no_run
/// use wgarray::{DType, Device, io::GgufFile};
/// let device = Device::new_default()?;
/// let file = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
/// let arch = file.get("general.architecture").and_then(|v| v.as_str());
/// let q = file.load("blk.0.attn_q.weight", &device)?; // [576, 576] of q4_1
/// let x = wgarray::Array::ones(&[1, 576], DType::F32, &device)?;
/// let y = wgarray::quantized_matmul(&x, &q, None, None, true, None, None)?;
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// The file must not change while it is open: the map reads it in place.
pub struct GgufFile {
    path: PathBuf,
    map: memmap2::Mmap,
    version: u32,
    alignment: u64,
    metadata: Vec<(String, GgufValue)>,
    keys: HashMap<String, usize>,
    tensors: Vec<GgufTensor>,
    index: HashMap<String, usize>,
    /// Offset of the data section in the file, in bytes.
    data_start: usize,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("bytes", &self.map.len())
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// Reads the header: a cursor over the file's bytes that fails with
/// [`Error::Format`] instead of reading past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    fn error(&self, tensor: Option<&str>, message: String) -> Error {
        Error::Format {
            path: self.path.to_path_buf(),
            tensor: tensor.map(str::to_string),
            message,
        }
    }

    /// The next `n` bytes; `what` says what was being read (for the error).
    fn take(
        &mut self,
        n: u64,
        tensor: Option<&str>,
        what: &dyn Fn() -> String,
    ) -> Result<&'a [u8]> {
        let left = self.bytes.len() - self.at;
        if n > left as u64 {
            return Err(self.error(
                tensor,
                format!(
                    "truncated: {} needs {n} bytes at byte {}, the file has {left} more",
                    what(),
                    self.at
                ),
            ));
        }
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(
        &mut self,
        t: Option<&str>,
        what: &dyn Fn() -> String,
    ) -> Result<[u8; N]> {
        Ok(self.take(N as u64, t, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, t: Option<&str>, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(t, what)?))
    }

    fn u64(&mut self, t: Option<&str>, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(t, what)?))
    }

    /// A GGUF string (u64 length, UTF-8 bytes).
    fn string(
        &mut self,
        t: Option<&str>,
        what: &dyn Fn() -> String,
    ) -> Result<std::result::Result<String, Vec<u8>>> {
        let len = self.u64(t, what)?;
        let bytes = self.take(len, t, what)?;
        Ok(String::from_utf8(bytes.to_vec()).map_err(|e| e.into_bytes()))
    }

    fn left(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }
}

/// The smallest number of bytes one value of metadata type `ty` takes (a
/// bound on how many of them fit what is left of the file).
fn min_value_bytes(ty: u32) -> u64 {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        // A string's or an array's length (and an array's type).
        8 | 10..=12 => 8,
        _ => 12,
    }
}

/// Read one metadata value of type `ty` for `key`.
fn value(r: &mut Reader<'_>, ty: u32, key: &str, depth: usize) -> Result<GgufValue> {
    let what = || format!("the value of `{key}`");
    let bad = |r: &Reader<'_>, m: String| r.error(None, format!("metadata `{key}`: {m}"));
    Ok(match ty {
        0 => GgufValue::U8(r.array::<1>(None, &what)?[0]),
        1 => GgufValue::I8(r.array::<1>(None, &what)?[0] as i8),
        2 => GgufValue::U16(u16::from_le_bytes(r.array(None, &what)?)),
        3 => GgufValue::I16(i16::from_le_bytes(r.array(None, &what)?)),
        4 => GgufValue::U32(u32::from_le_bytes(r.array(None, &what)?)),
        5 => GgufValue::I32(i32::from_le_bytes(r.array(None, &what)?)),
        6 => GgufValue::F32(f32::from_le_bytes(r.array(None, &what)?)),
        7 => match r.array::<1>(None, &what)?[0] {
            0 => GgufValue::Bool(false),
            1 => GgufValue::Bool(true),
            b => return Err(bad(r, format!("a BOOL is 0 or 1, this one is {b}"))),
        },
        8 => match r.string(None, &what)? {
            Ok(s) => GgufValue::String(s),
            Err(_) => return Err(bad(r, "the string is not UTF-8".into())),
        },
        9 => {
            if depth >= MAX_NESTING {
                return Err(bad(r, format!("arrays nested deeper than {MAX_NESTING}")));
            }
            let elem = r.u32(None, &what)?;
            let len = r.u64(None, &what)?;
            if elem > 12 {
                return Err(bad(r, format!("an array of unknown value type {elem}")));
            }
            if len > r.left() / min_value_bytes(elem) {
                return Err(bad(
                    r,
                    format!(
                        "an array of {len} values cannot fit the {} bytes left in the file",
                        r.left()
                    ),
                ));
            }
            let mut v = Vec::with_capacity(len as usize);
            for _ in 0..len {
                v.push(value(r, elem, key, depth + 1)?);
            }
            GgufValue::Array(v)
        }
        10 => GgufValue::U64(u64::from_le_bytes(r.array(None, &what)?)),
        11 => GgufValue::I64(i64::from_le_bytes(r.array(None, &what)?)),
        12 => GgufValue::F64(f64::from_le_bytes(r.array(None, &what)?)),
        _ => return Err(bad(r, format!("unknown value type {ty}"))),
    })
}

impl GgufFile {
    /// Open and map `path`, parse its header and check it: the magic,
    /// version 2 or 3, every metadata value (types, UTF-8 keys and
    /// strings, bools 0 or 1, counts that fit the file, no key twice,
    /// `general.alignment` a power of two), and every tensor (a UTF-8 name
    /// given once, at most 8 dimensions whose product fits, a known ggml
    /// type whose blocks tile `ne[0]`, an offset that is a multiple of the
    /// alignment, data inside the file). Nothing is uploaded.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened or mapped;
    /// [`Error::Format`] for every check above, naming the tensor (its
    /// `tensor` field) or the metadata key (in the message) at fault.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let map = super::map_file(path)?;
        let mut r = Reader {
            bytes: &map,
            at: 0,
            path,
        };
        let header = || "the header".to_string();
        let magic = r.array::<4>(None, &header)?;
        if &magic != b"GGUF" {
            return Err(r.error(
                None,
                format!("not a GGUF file: it starts with {magic:02x?}, not the magic `GGUF`"),
            ));
        }
        let version = r.u32(None, &header)?;
        if version != 2 && version != 3 {
            let why = if matches!(version.swap_bytes(), 2 | 3) {
                " (a big-endian file: wgarray reads little-endian ones)"
            } else {
                ""
            };
            return Err(r.error(
                None,
                format!("GGUF version {version} is not supported{why}; versions 2 and 3 are"),
            ));
        }
        let n_tensors = r.u64(None, &header)?;
        let n_kv = r.u64(None, &header)?;
        // A key-value pair takes at least 8 + 4 + 1 bytes, a tensor entry
        // 8 + 4 + 4 + 8: counts past what the file can hold are
        // refused before anything is allocated for them.
        if n_kv > r.left() / 13 {
            return Err(r.error(
                None,
                format!(
                    "{n_kv} metadata pairs cannot fit a file of {} bytes",
                    map.len()
                ),
            ));
        }
        if n_tensors > r.left() / 24 {
            return Err(r.error(
                None,
                format!(
                    "{n_tensors} tensors cannot fit a file of {} bytes",
                    map.len()
                ),
            ));
        }
        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut keys = HashMap::with_capacity(n_kv as usize);
        for i in 0..n_kv {
            let what = || format!("metadata key {i}");
            let key = match r.string(None, &what)? {
                Ok(k) => k,
                Err(bytes) => {
                    return Err(r.error(
                        None,
                        format!(
                            "metadata key {i} (`{}`) is not UTF-8",
                            String::from_utf8_lossy(&bytes)
                        ),
                    ));
                }
            };
            let ty = r.u32(None, &|| format!("the type of `{key}`"))?;
            let v = value(&mut r, ty, &key, 0)?;
            if keys.insert(key.clone(), metadata.len()).is_some() {
                return Err(r.error(None, format!("metadata `{key}` is given twice")));
            }
            metadata.push((key, v));
        }
        let alignment =
            match metadata.get(keys.get("general.alignment").copied().unwrap_or(usize::MAX)) {
                None => 32,
                Some((_, GgufValue::U32(a))) if a.is_power_of_two() => u64::from(*a),
                Some((_, v)) => {
                    return Err(r.error(
                        None,
                        format!(
                            "metadata `general.alignment` must be a UINT32 power of two, got {v:?}"
                        ),
                    ));
                }
            };
        let mut tensors: Vec<GgufTensor> = Vec::with_capacity(n_tensors as usize);
        let mut index = HashMap::with_capacity(n_tensors as usize);
        for i in 0..n_tensors {
            let name = match r.string(None, &|| format!("the name of tensor {i}"))? {
                Ok(n) => n,
                Err(bytes) => {
                    let lossy = String::from_utf8_lossy(&bytes).into_owned();
                    return Err(
                        r.error(Some(&lossy), format!("the name of tensor {i} is not UTF-8"))
                    );
                }
            };
            let t = Some(name.as_str());
            let what = || format!("the entry of tensor `{name}`");
            let nd = r.u32(t, &what)?;
            if nd > MAX_TENSOR_DIMS {
                return Err(r.error(
                    t,
                    format!("{nd} dimensions; at most {MAX_TENSOR_DIMS} are read"),
                ));
            }
            let mut ne = Vec::with_capacity(nd as usize);
            for _ in 0..nd {
                ne.push(r.u64(t, &what)?);
            }
            let ty = r.u32(t, &what)?;
            let offset = r.u64(t, &what)?;
            let Some((type_name, block, bytes)) = ggml_type(ty) else {
                return Err(r.error(t, format!("unknown ggml type {ty}")));
            };
            let numel = ne.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
            let numel = match numel {
                Some(n) if n <= usize::MAX as u64 && n <= u64::MAX / bytes => n,
                _ => {
                    return Err(r.error(
                        t,
                        format!("absurd dimensions {ne:?}: their product overflows"),
                    ));
                }
            };
            if ne.first().is_some_and(|&d| d % block != 0) {
                return Err(r.error(
                    t,
                    format!(
                        "ne[0] = {} is not a whole number of {type_name} blocks of {block}",
                        ne[0]
                    ),
                ));
            }
            if offset % alignment != 0 {
                return Err(r.error(
                    t,
                    format!(
                        "its data offset {offset} is not a multiple of the alignment {alignment}"
                    ),
                ));
            }
            if index.insert(name.clone(), tensors.len()).is_some() {
                return Err(r.error(t, "the tensor is listed twice".into()));
            }
            tensors.push(GgufTensor {
                shape: ne.iter().rev().map(|&d| d as usize).collect(),
                ne,
                ggml_type: ty,
                offset,
                nbytes: (numel / block * bytes) as usize,
                name,
            });
        }
        let data_start = (r.at as u64).next_multiple_of(alignment);
        for t in &tensors {
            let end = data_start
                .checked_add(t.offset)
                .and_then(|s| s.checked_add(t.nbytes as u64));
            if end.is_none_or(|e| e > map.len() as u64) {
                return Err(r.error(
                    Some(&t.name),
                    format!(
                        "its {} bytes of data at offset {} (from byte {data_start}) run past the \
                         end of the file ({} bytes): a truncated file",
                        t.nbytes,
                        t.offset,
                        map.len()
                    ),
                ));
            }
        }
        Ok(GgufFile {
            path: path.to_path_buf(),
            version,
            alignment,
            metadata,
            keys,
            tensors,
            index,
            data_start: data_start as usize,
            map,
        })
    }

    /// The file's path, as given to [`GgufFile::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format's version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data section's alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Every metadata pair, in the file's order.
    pub fn metadata(&self) -> &[(String, GgufValue)] {
        &self.metadata
    }

    /// The metadata value of `key` (`general.architecture`,
    /// `llama.block_count`, `tokenizer.ggml.tokens`, ...).
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    /// Every tensor's entry, in the file's order.
    pub fn tensors(&self) -> &[GgufTensor] {
        &self.tensors
    }

    /// The tensors' names, in the file's order.
    pub fn names(&self) -> Vec<&str> {
        self.tensors.iter().map(|t| t.name.as_str()).collect()
    }

    /// The entry of tensor `name`.
    ///
    /// # Errors
    /// [`Error::Format`] when the file has no tensor `name`.
    pub fn tensor(&self, name: &str) -> Result<&GgufTensor> {
        self.index
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| Error::Format {
                path: self.path.clone(),
                tensor: Some(name.to_string()),
                message: "no tensor of this name in the file".into(),
            })
    }

    /// The bytes of tensor `name`'s data, as stored (ggml's layout: rows
    /// of `ne[0]` elements, a block format's in whole blocks), read in
    /// place from the map: for host references, or for joining tensors
    /// before an upload.
    ///
    /// # Errors
    /// [`Error::Format`] when the file has no tensor `name`.
    pub fn data(&self, name: &str) -> Result<&[u8]> {
        let t = self.tensor(name)?;
        let start = self.data_start + t.offset as usize;
        Ok(&self.map[start..start + t.nbytes])
    }

    /// The dtype tensor `name` loads as.
    ///
    /// # Errors
    /// [`Error::Format`] when the file has no tensor `name`;
    /// [`Error::UnsupportedDType`] (with ggml's type name) for a type
    /// wgarray has no dtype for.
    pub fn dtype(&self, name: &str) -> Result<DType> {
        let t = self.tensor(name)?;
        t.dtype().ok_or_else(|| Error::UnsupportedDType {
            path: self.path.clone(),
            tensor: name.to_string(),
            dtype: t.type_name().to_string(),
        })
    }

    /// Check that tensor `name` can be loaded to `device`.
    fn plan(&self, name: &str, device: &Device) -> Result<(DType, &GgufTensor)> {
        let dtype = self.dtype(name)?;
        let t = self.tensor(name)?;
        crate::shape::check_shape("load_gguf", &t.shape)?;
        if !dtype.is_quantized() {
            device.check_dtype("load_gguf", dtype)?;
        }
        device.check_binding("load_gguf", t.nbytes as u64)?;
        Ok((dtype, t))
    }

    fn upload(&self, dtype: DType, t: &GgufTensor, device: &Device) -> Result<Array> {
        let bytes = self.data(&t.name)?;
        let origin = device.origin(|| "load_gguf");
        let size = transfer::device_bytes(crate::shape::numel(&t.shape), dtype);
        let buffer = transfer::upload(device, "load_gguf", size, origin, |dst| {
            transfer::write_device_bytes(dst, bytes)
        })?;
        Ok(Array::ready(&t.shape, dtype, device, buffer, origin))
    }

    /// Tensor `name` as an evaluated array on `device`, of shape
    /// [`GgufTensor::shape`] (ggml's `ne` reversed) and its own dtype: its
    /// bytes copied once, from the map into wgpu's staging memory, as
    /// stored (a block format's blocks are not expanded). The copy to the
    /// GPU happens with the next submission.
    ///
    /// # Errors
    /// [`Error::Format`] when the file has no tensor `name`;
    /// [`Error::UnsupportedDType`] for a ggml type wgarray has no dtype for
    /// (Q5_K, IQ4_NL, ...); [`Error::MissingFeature`] for F64 on an adapter
    /// without `SHADER_F64`; [`Error::TooLarge`] past the adapter's largest
    /// storage binding; [`Error::OutOfMemory`]. Nothing stays allocated on
    /// an error.
    pub fn load(&self, name: &str, device: &Device) -> Result<Array> {
        let (dtype, t) = self.plan(name, device)?;
        self.upload(dtype, t, device)
    }

    /// Every tensor, by name, as evaluated arrays on `device`. Every
    /// tensor is checked (type, size) before the first is uploaded, and
    /// pending uploads are flushed every 64 MiB so that wgpu's staging
    /// memory stays bounded.
    ///
    /// # Errors
    /// As [`GgufFile::load`], for the first tensor at fault; on an error no
    /// array is left and the memory is back in the pool.
    pub fn load_all(&self, device: &Device) -> Result<HashMap<String, Array>> {
        let planned = self
            .tensors
            .iter()
            .map(|t| self.plan(&t.name, device))
            .collect::<Result<Vec<_>>>()?;
        super::upload_all(planned.into_iter(), device, |(dtype, t)| {
            Ok((
                t.name.clone(),
                self.upload(dtype, t, device)?,
                t.nbytes as u64,
            ))
        })
    }
}

/// Every tensor of the GGUF file at `path`, by name, as evaluated arrays
/// on `device` in their own dtypes (see [`GgufFile`]; its
/// [`GgufFile::metadata`] has the file's metadata).
///
/// # Errors
/// As [`GgufFile::open`] and [`GgufFile::load_all`].
pub fn load_gguf(path: impl AsRef<Path>, device: &Device) -> Result<HashMap<String, Array>> {
    GgufFile::open(path)?.load_all(device)
}
