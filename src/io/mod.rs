//! Arrays in files: safetensors in and out, GGUF in.
//!
//! - [`load_safetensors`]: every tensor of a `.safetensors` file, uploaded
//!   to a device (MLX `mx.load`, candle `candle_core::safetensors::load`).
//! - [`SafetensorsFile`]: the file opened (memory-mapped, header checked),
//!   for loading tensors one at a time by name.
//! - [`save_safetensors`], [`save_safetensors_with_metadata`]: arrays to a
//!   file (MLX `mx.save_safetensors`).
//! - [`GgufFile`], [`load_gguf`]: llama.cpp's GGUF files, their metadata
//!   and tensors, quantized ones in their block formats as stored (MLX
//!   `mx.load("model.gguf")`, candle's `gguf_file`).
//!
//! Conversions to and from `ndarray` are `Array::from_ndarray` and
//! `Array::to_ndarray`, behind the `ndarray` feature.

mod gguf;
mod safetensors;

pub use self::gguf::{GgufFile, GgufTensor, GgufValue, load_gguf};
pub use self::safetensors::{
    SafetensorsFile, load_safetensors, save_safetensors, save_safetensors_with_metadata,
};

/// `path` opened and memory-mapped read-only.
///
/// The map is sound as long as no one truncates or rewrites the file while
/// it lives, which the documentation of the types that hold one
/// ([`GgufFile`], [`SafetensorsFile`]) asks for.
///
/// # Errors
/// [`crate::Error::Io`] when the file cannot be opened or mapped.
fn map_file(path: &std::path::Path) -> crate::Result<memmap2::Mmap> {
    use crate::Error;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, "cannot open", &e))?;
    // SAFETY: read-only; see above for the file staying as it is.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, "cannot map", &e))
}

/// While loading, pending uploads are flushed to the GPU (and wgpu's
/// staging memory for them freed) each time this many bytes are queued, so
/// that loading a file holds at most about this much staging memory.
const FLUSH_BYTES: u64 = 64 << 20;

/// Every tensor of `planned` (each checked before the first is uploaded)
/// through `upload`, which gives its name, its array and the bytes it
/// queued, into a map by name; pending uploads are flushed every
/// [`FLUSH_BYTES`].
///
/// # Errors
/// The first of `upload`'s errors, or of the flushes; the arrays made so
/// far are dropped, their memory back in the pool.
fn upload_all<T>(
    planned: impl ExactSizeIterator<Item = T>,
    device: &crate::Device,
    mut upload: impl FnMut(T) -> crate::Result<(String, crate::Array, u64)>,
) -> crate::Result<std::collections::HashMap<String, crate::Array>> {
    let mut out = std::collections::HashMap::with_capacity(planned.len());
    let mut pending = 0u64;
    for t in planned {
        let (name, array, bytes) = upload(t)?;
        out.insert(name, array);
        pending += bytes;
        if pending >= FLUSH_BYTES {
            device.synchronize()?;
            pending = 0;
        }
    }
    Ok(out)
}
