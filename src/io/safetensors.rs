//! The safetensors format (Hugging Face, <https://github.com/huggingface/safetensors>):
//! an 8-byte little-endian header length `N`, `N` bytes of JSON
//! (`{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//! "__metadata__": {"key": "value"}}`, padded with spaces to a multiple of
//! 8), then the data section; offsets count bytes from the start of the
//! data section, and every element is little-endian. Parsing and checking
//! the header is the `safetensors` crate's (`SafeTensors::read_metadata`);
//! this module maps the file, uploads the tensors' bytes to the device in
//! one copy each, and writes files in the order and header layout of the
//! crate's own `serialize`, so that the same tensors give the same bytes.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ::safetensors::SafeTensors;
use ::safetensors::tensor::{Dtype as FileDType, Metadata, TensorInfo};

use crate::transfer;
use crate::{Array, DType, Device, Error, Result};

/// The device dtype of a file dtype, if wgarray has one: I64 and U64
/// (PyTorch's index dtype) load as I32 and U32, every value checked.
fn device_dtype(d: FileDType) -> Option<DType> {
    Some(match d {
        FileDType::F64 => DType::F64,
        FileDType::F32 => DType::F32,
        FileDType::F16 => DType::F16,
        FileDType::BF16 => DType::BF16,
        FileDType::I64 | FileDType::I32 => DType::I32,
        FileDType::U64 | FileDType::U32 => DType::U32,
        FileDType::I16 => DType::I16,
        FileDType::U16 => DType::U16,
        FileDType::I8 => DType::I8,
        FileDType::U8 => DType::U8,
        FileDType::BOOL => DType::Bool,
        _ => return None,
    })
}

/// The file dtype of a device dtype.
fn file_dtype(d: DType) -> FileDType {
    match d {
        DType::F64 => FileDType::F64,
        DType::F32 => FileDType::F32,
        DType::F16 => FileDType::F16,
        DType::BF16 => FileDType::BF16,
        DType::I32 => FileDType::I32,
        DType::U32 => FileDType::U32,
        DType::I16 => FileDType::I16,
        DType::U16 => FileDType::U16,
        DType::I8 => FileDType::I8,
        DType::U8 => FileDType::U8,
        DType::Bool => FileDType::BOOL,
        // Refused by `save_safetensors` before it asks: safetensors has no
        // block formats.
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => FileDType::U8,
    }
}

/// Bytes one element of `d` takes in a file (a bool takes one).
fn file_size_in_bytes(d: DType) -> usize {
    file_dtype(d).bitsize() / 8
}

/// The first element of little-endian I64 (`signed`) or U64 `bytes` that
/// does not fit 32 bits, as its index and value.
fn first_wide_out_of_range(bytes: &[u8], signed: bool) -> Option<(usize, i128)> {
    bytes.chunks_exact(8).enumerate().find_map(|(i, c)| {
        let c: [u8; 8] = c.try_into().expect("8 bytes");
        let v = if signed {
            i64::from_le_bytes(c) as i128
        } else {
            u64::from_le_bytes(c) as i128
        };
        let fits = if signed {
            i32::try_from(v).is_ok()
        } else {
            u32::try_from(v).is_ok()
        };
        (!fits).then_some((i, v))
    })
}

/// A safetensors file, memory-mapped, its header parsed and checked.
///
/// [`SafetensorsFile::open`] reads nothing but the header; each
/// [`SafetensorsFile::load`] copies one tensor's bytes from the map straight
/// into wgpu's staging memory (no `Vec` in between), so the operating
/// system reads only the tensors you load. Like candle's
/// `MmapedSafetensors`.
///
/// ```no_run
/// use wgarray::{Device, io::SafetensorsFile};
/// let device = Device::new_default()?;
/// let file = SafetensorsFile::open("model.safetensors")?;
/// for name in file.names() {
///     println!("{name}: {:?} {:?}", file.dtype(name), file.shape(name)?);
/// }
/// let w = file.load("embeddings.word_embeddings.weight", &device)?;
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// The file must not change while it is open: the map reads it in place
/// (as every memory-mapping loader does).
pub struct SafetensorsFile {
    path: PathBuf,
    map: memmap2::Mmap,
    /// Offset of the data section in the file, in bytes.
    data_start: usize,
    metadata: Metadata,
    /// Tensor names in the order of their data in the file.
    names: Vec<String>,
}

impl std::fmt::Debug for SafetensorsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafetensorsFile")
            .field("path", &self.path)
            .field("bytes", &self.map.len())
            .field("tensors", &self.names.len())
            .finish()
    }
}

/// A tensor checked for loading: its dtype on the device and in the file,
/// shape and bytes in the file.
struct Planned<'a> {
    dtype: DType,
    file: FileDType,
    shape: &'a [usize],
    bytes: &'a [u8],
}

impl SafetensorsFile {
    /// Open and map `path` and check its header: every tensor's offsets
    /// must match its shape and dtype, lie inside the file, and together
    /// cover the data section exactly. Nothing is uploaded.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened or mapped (its `kind`
    /// is `NotFound` for a missing file); [`Error::Format`] for a file that
    /// is not valid safetensors (too short, a header that is not JSON, a
    /// truncated data section, offsets that disagree with a shape), naming
    /// the tensor at fault where one is.
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile> {
        let path = path.as_ref();
        let map = super::map_file(path)?;
        let (header_len, metadata) =
            SafeTensors::read_metadata(&map).map_err(|e| format_error(path, &map, &e))?;
        let names = metadata.offset_keys();
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            data_start: 8 + header_len,
            map,
            metadata,
            names,
        })
    }

    /// The file's path, as given to [`SafetensorsFile::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensors' names, in the order of their data in the file.
    pub fn names(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    /// The `__metadata__` map of the header (string keys and values), if
    /// the file has one.
    pub fn metadata(&self) -> Option<&HashMap<String, String>> {
        self.metadata.metadata().as_ref()
    }

    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.metadata.info(name).ok_or_else(|| Error::Format {
            path: self.path.clone(),
            tensor: Some(name.to_string()),
            message: "no tensor of this name in the file".into(),
        })
    }

    /// The shape of tensor `name`.
    ///
    /// # Errors
    /// [`Error::Format`] when the file has no tensor `name`.
    pub fn shape(&self, name: &str) -> Result<&[usize]> {
        Ok(&self.info(name)?.shape)
    }

    /// The dtype tensor `name` will have on the device: F32, F16, BF16,
    /// F64, I32, U32, I16, U16, I8, U8 and BOOL load as themselves, I64 and
    /// U64 as I32 and U32 (each value range-checked by `load`). F64 loads
    /// only on a device with `SHADER_F64` (`load` returns
    /// [`Error::MissingFeature`] elsewhere).
    ///
    /// # Errors
    /// [`Error::UnsupportedDType`] for a file dtype that no [`DType`] holds
    /// (the F8, F6 and F4 formats, C64, ...); [`Error::Format`] when the
    /// file has no tensor `name`.
    pub fn dtype(&self, name: &str) -> Result<DType> {
        let info = self.info(name)?;
        device_dtype(info.dtype).ok_or_else(|| Error::UnsupportedDType {
            path: self.path.clone(),
            tensor: name.to_string(),
            dtype: format!("{:?}", info.dtype),
        })
    }

    /// Check that tensor `name` can be loaded to `device`.
    fn plan(&self, name: &str, device: &Device) -> Result<Planned<'_>> {
        let dtype = self.dtype(name)?;
        let info = self.info(name)?;
        let (begin, end) = info.data_offsets;
        // In range: `read_metadata` checked the offsets against the file.
        let bytes = &self.map[self.data_start + begin..self.data_start + end];
        crate::shape::check_shape("load_safetensors", &info.shape)?;
        device.check_dtype("load_safetensors", dtype)?;
        // The file's element size: I64 and U64 load as I32 and U32.
        let numel = bytes.len() / (info.dtype.bitsize() / 8);
        device.check_binding("load_safetensors", transfer::device_bytes(numel, dtype))?;
        if matches!(info.dtype, FileDType::I64 | FileDType::U64)
            && let Some((index, value)) =
                first_wide_out_of_range(bytes, info.dtype == FileDType::I64)
        {
            return Err(Error::OutOfRange {
                op: "load_safetensors",
                tensor: Some(name.to_string()),
                index,
                value,
                dtype,
            });
        }
        Ok(Planned {
            dtype,
            file: info.dtype,
            shape: &info.shape,
            bytes,
        })
    }

    fn upload(&self, t: &Planned<'_>, device: &Device) -> Result<Array> {
        let numel = t.bytes.len() / (t.file.bitsize() / 8);
        let size = transfer::device_bytes(numel, t.dtype);
        let origin = device.origin(|| "load_safetensors");
        let buffer = transfer::upload(device, "load_safetensors", size, origin, |dst| {
            if matches!(t.file, FileDType::I64 | FileDType::U64) {
                // The low 4 bytes of each little-endian value: `plan`
                // checked that every value fits.
                let (head, mut tail) = dst.split_at(numel * 4);
                let (words, _) = head.into_chunks::<4>();
                words.write_iter(t.bytes.chunks_exact(8).map(|c| [c[0], c[1], c[2], c[3]]));
                tail.fill(0);
            } else {
                transfer::write_host_bytes(dst, t.bytes, t.dtype)
            }
        })?;
        Ok(Array::ready(t.shape, t.dtype, device, buffer, origin))
    }

    /// Tensor `name` as an evaluated array on `device`: its bytes copied
    /// once, from the map into wgpu's staging memory (1- and 2-byte dtypes
    /// packed as in the file and padded to a whole 4-byte word, a BOOL byte
    /// widened to the device's `u32`, I64 and U64 narrowed to 32 bits).
    /// The copy to the GPU happens with the next submission.
    ///
    /// # Errors
    /// [`Error::Format`] when the file has no tensor `name`;
    /// [`Error::UnsupportedDType`]; [`Error::OutOfRange`] for the first
    /// I64/U64 value that does not fit 32 bits (named by its row-major
    /// index; nothing is uploaded); [`Error::MissingFeature`] for F64 on an
    /// adapter without `SHADER_F64`; [`Error::TooLarge`] when the tensor
    /// exceeds the adapter's largest storage binding (128 MiB on Mesa);
    /// [`Error::OutOfMemory`]. Nothing stays allocated on an error.
    pub fn load(&self, name: &str, device: &Device) -> Result<Array> {
        let planned = self.plan(name, device)?;
        self.upload(&planned, device)
    }

    /// Every tensor, by name, as evaluated arrays on `device`. Every
    /// tensor is checked (dtype, size) before the first is uploaded, and
    /// pending uploads are flushed every 64 MiB so that wgpu's staging
    /// memory stays bounded.
    ///
    /// # Errors
    /// As [`SafetensorsFile::load`], for the first tensor at fault; on an
    /// error no array is left and the memory is back in the pool.
    pub fn load_all(&self, device: &Device) -> Result<HashMap<String, Array>> {
        let planned = self
            .names
            .iter()
            .map(|name| self.plan(name, device))
            .collect::<Result<Vec<_>>>()?;
        super::upload_all(self.names.iter().zip(&planned), device, |(name, t)| {
            Ok((name.clone(), self.upload(t, device)?, t.bytes.len() as u64))
        })
    }
}

/// Every tensor of the safetensors file at `path`, by name, as evaluated
/// arrays on `device` (F64, F32, F16, BF16, I32, U32, I16, U16, I8, U8
/// and BOOL tensors, and I64 and U64 ones narrowed to I32 and U32 with
/// every value checked; see
/// [`SafetensorsFile`] for loading some of them). The file is read
/// through a memory map and each tensor is copied once, from the map into
/// wgpu's staging memory.
///
/// ```no_run
/// use wgarray::{Device, io};
/// let device = Device::new_default()?;
/// let weights = io::load_safetensors("model.safetensors", &device)?;
/// let w = &weights["encoder.layer.0.attention.self.query.weight"];
/// println!("{:?} {}", w.shape(), w.dtype());
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or mapped (kind
/// `NotFound` for a missing one); [`Error::Format`] for a file that is not
/// valid safetensors (truncated, or a header whose sizes or offsets are
/// wrong), naming the tensor where one is at fault;
/// [`Error::UnsupportedDType`] naming the first tensor of another dtype;
/// [`Error::TooLarge`] for a tensor larger than the adapter's largest
/// storage binding; [`Error::OutOfMemory`]. On every error nothing is left
/// on the device.
pub fn load_safetensors(path: impl AsRef<Path>, device: &Device) -> Result<HashMap<String, Array>> {
    SafetensorsFile::open(path)?.load_all(device)
}

/// Write `tensors` to a safetensors file at `path` (replacing it), without
/// `__metadata__`: see [`save_safetensors_with_metadata`].
///
/// ```
/// use wgarray::{Array, DType, Device, io};
/// let device = Device::new_default()?;
/// let w = Array::ones(&[2, 3], DType::F32, &device)?; // lazy: evaluated here
/// let b = Array::from_slice(&[1i32, 2, 3], &[3], &device)?;
/// let path = std::env::temp_dir().join(format!("doc-{}.safetensors", std::process::id()));
/// io::save_safetensors(&path, &[("w", &w), ("b", &b)])?;
/// assert_eq!(io::load_safetensors(&path, &device)?["b"].to_vec::<i32>()?, [1, 2, 3]);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// As [`save_safetensors_with_metadata`].
pub fn save_safetensors<S: AsRef<str>>(
    path: impl AsRef<Path>,
    tensors: &[(S, &Array)],
) -> Result<()> {
    save_safetensors_with_metadata(path, tensors, None)
}

/// Write `tensors` (name, array) and the string map `metadata` (the
/// header's `__metadata__`) to a safetensors file at `path`.
///
/// Unevaluated arrays are evaluated first (one [`crate::eval`] per
/// device); then each array is read back (views dense, in row-major
/// order) and its bytes go from the mapped read-back buffer to the file,
/// one tensor at a time, so host memory holds no copy of the whole set.
/// The data is laid out as the `safetensors` crate's `serialize` lays it
/// (by dtype alignment, then by name), so a file written here is byte for
/// byte the one that crate writes for the same tensors. The file is
/// written beside `path` under a temporary name and renamed over it at the
/// end: an existing file is never left half-written.
///
/// # Errors
/// [`Error::InvalidArgument`] for a name given twice or the reserved name
/// `__metadata__`; [`Error::OpDType`] for an array of a block format
/// (safetensors has none); the errors of [`crate::eval`] and
/// [`Array::to_vec`]; [`Error::Io`] when the file cannot be written
/// (then no temporary file is left behind).
pub fn save_safetensors_with_metadata<S: AsRef<str>>(
    path: impl AsRef<Path>,
    tensors: &[(S, &Array)],
    metadata: Option<&HashMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let mut seen = HashSet::new();
    for (name, _) in tensors {
        let name = name.as_ref();
        if name == "__metadata__" {
            return Err(Error::InvalidArgument(
                "save_safetensors: `__metadata__` is reserved for the header's metadata".into(),
            ));
        }
        if !seen.insert(name) {
            return Err(Error::InvalidArgument(format!(
                "save_safetensors: the name `{name}` is given twice"
            )));
        }
    }
    let Some(file_name) = path.file_name() else {
        return Err(Error::InvalidArgument(format!(
            "save_safetensors: {} names no file",
            path.display()
        )));
    };

    if let Some((_, a)) = tensors.iter().find(|(_, a)| a.dtype().is_quantized()) {
        return Err(Error::OpDType {
            op: "save_safetensors",
            dtype: a.dtype(),
            takes: "element dtypes (safetensors has no block formats: dequantize first)",
        });
    }
    // Evaluate what is pending, one submission per device.
    let mut devices: Vec<&Device> = Vec::new();
    for (_, a) in tensors {
        if !devices.contains(&a.device()) {
            devices.push(a.device());
        }
    }
    for d in devices {
        let group: Vec<&Array> = tensors
            .iter()
            .map(|(_, a)| *a)
            .filter(|a| a.device() == d)
            .collect();
        crate::eval(&group)?;
    }

    // The order and header of `safetensors::serialize`.
    let mut order: Vec<(&str, &Array)> = tensors.iter().map(|(n, a)| (n.as_ref(), *a)).collect();
    order.sort_by(|(ln, la), (rn, ra)| {
        file_dtype(ra.dtype())
            .cmp(&file_dtype(la.dtype()))
            .then(ln.cmp(rn))
    });
    let mut infos = Vec::with_capacity(order.len());
    let mut offset = 0usize;
    for (name, a) in &order {
        let n = a.size() * file_size_in_bytes(a.dtype());
        infos.push((
            name.to_string(),
            TensorInfo {
                dtype: file_dtype(a.dtype()),
                shape: a.shape().to_vec(),
                data_offsets: (offset, offset + n),
            },
        ));
        offset += n;
    }
    let header_error = |e: &dyn std::fmt::Display| Error::Format {
        path: path.to_path_buf(),
        tensor: None,
        message: format!("cannot make the header: {e}"),
    };
    let meta = Metadata::new(metadata.cloned(), infos).map_err(|e| header_error(&e))?;
    let mut header = serde_json::to_vec(&meta).map_err(|e| header_error(&e))?;
    header.resize(header.len().next_multiple_of(8), b' ');

    // Unique per process and call: concurrent saves never share one.
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        ".wgarray-{}-{}.tmp",
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = path.with_file_name(tmp_name);
    let write = || -> Result<()> {
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, "cannot create", &e))?;
        let werr = |e: std::io::Error| Error::io(&tmp, "cannot write", &e);
        let mut w = BufWriter::with_capacity(1 << 20, file);
        w.write_all(&(header.len() as u64).to_le_bytes())
            .map_err(werr)?;
        w.write_all(&header).map_err(werr)?;
        for (_, a) in &order {
            a.read_mapped(|bytes| write_file_bytes(&mut w, bytes, a.dtype()))?
                .map_err(werr)?;
        }
        w.into_inner().map_err(|e| werr(e.into_error()))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, "cannot replace", &e))
    };
    let result = write();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Write device bytes of `dtype` in the file's layout: as they are, but a
/// bool's `u32` becomes one byte.
fn write_file_bytes(w: &mut impl Write, bytes: &[u8], dtype: DType) -> std::io::Result<()> {
    if dtype != DType::Bool {
        return w.write_all(bytes);
    }
    let mut chunk = [0u8; 4096];
    for words in bytes.chunks(4 * chunk.len()) {
        for (out, word) in chunk.iter_mut().zip(words.chunks_exact(4)) {
            *out = u8::from(word != [0, 0, 0, 0]);
        }
        w.write_all(&chunk[..words.len() / 4])?;
    }
    Ok(())
}

/// The error for a file whose header the `safetensors` crate rejected,
/// naming the tensor at fault where [`diagnose`] finds it.
fn format_error(path: &Path, file: &[u8], err: &::safetensors::SafeTensorError) -> Error {
    let (tensor, message) = match diagnose(file) {
        Some((tensor, message)) => (Some(tensor), message),
        None => (None, format!("not a valid safetensors file: {err}")),
    };
    Error::Format {
        path: path.to_path_buf(),
        tensor,
        message,
    }
}

/// Which tensor a rejected header is wrong about, and how: offsets that
/// disagree with the shape and dtype, data past the end of the file, a gap
/// or an overlap. `None` when the header cannot be parsed or no single
/// tensor is at fault.
fn diagnose(file: &[u8]) -> Option<(String, String)> {
    let n = usize::try_from(u64::from_le_bytes(file.get(..8)?.try_into().ok()?)).ok()?;
    let header = file.get(8..8usize.checked_add(n)?)?;
    let data_len = file.len() - 8 - n;
    let json: HashMap<String, serde_json::Value> = serde_json::from_slice(header).ok()?;
    let mut entries = Vec::with_capacity(json.len());
    for (name, value) in json {
        if name != "__metadata__" {
            let info: TensorInfo = serde_json::from_value(value).ok()?;
            entries.push((name, info));
        }
    }
    entries.sort_by_key(|(_, info)| info.data_offsets);
    let mut expected_begin = 0;
    for (name, info) in entries {
        let (begin, end) = info.data_offsets;
        let size = info
            .shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|numel| numel.checked_mul(info.dtype.bitsize()))
            .map(|bits| bits.div_ceil(8));
        let Some(size) = size else {
            return Some((name, format!("shape {:?} overflows", info.shape)));
        };
        if end < begin || end - begin != size {
            return Some((
                name,
                format!(
                    "the header says {:?} of {:?} ({size} bytes) at offsets {begin}..{end} \
                     ({} bytes)",
                    info.shape,
                    info.dtype,
                    end as i128 - begin as i128
                ),
            ));
        }
        if end > data_len {
            return Some((
                name,
                format!(
                    "its data ends at byte {end} of the data section, which holds {data_len} \
                     bytes: the file is truncated or its header is wrong"
                ),
            ));
        }
        if begin != expected_begin {
            return Some((
                name,
                format!(
                    "its data begins at byte {begin} of the data section, where {expected_begin} \
                     was expected (tensors overlap or leave a gap)"
                ),
            ));
        }
        expected_begin = end;
    }
    None
}
