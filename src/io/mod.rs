//! Arrays in files: safetensors in and out.
//!
//! - [`load_safetensors`]: every tensor of a `.safetensors` file, uploaded
//!   to a device (MLX `mx.load`, candle `candle_core::safetensors::load`).
//! - [`SafetensorsFile`]: the file opened (memory-mapped, header checked),
//!   for loading tensors one at a time by name.
//! - [`save_safetensors`], [`save_safetensors_with_metadata`]: arrays to a
//!   file (MLX `mx.save_safetensors`).
//!
//! Conversions to and from `ndarray` are `Array::from_ndarray` and
//! `Array::to_ndarray`, behind the `ndarray` feature.

mod safetensors;

pub use self::safetensors::{
    SafetensorsFile, load_safetensors, save_safetensors, save_safetensors_with_metadata,
};
