//! Conversions between [`crate::Array`] and other crates' array types,
//! each behind a cargo feature of the crate's name.

#[cfg(feature = "ndarray")]
mod ndarray;
