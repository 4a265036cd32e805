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
