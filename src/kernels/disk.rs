//! What wgarray keeps on disk between processes, per adapter: the GEMM's
//! tuned kernel choices (a small JSON file) and the driver's compiled
//! pipelines (wgpu's `PipelineCache` data, on adapters that offer
//! `Features::PIPELINE_CACHE`: Vulkan).
//!
//! Files live in one directory ([`CacheDir`]): `$WGARRAY_CACHE_DIR` if set
//! (`off` disables them), else the user's cache directory
//! (`$XDG_CACHE_HOME` or `~/.cache` on Linux and other Unix, `~/Library/Caches`
//! on macOS, `%LOCALAPPDATA%` on Windows) plus `wgarray`. Each file name
//! carries a hash of the adapter's name, backend, driver and driver version
//! and of wgarray's version, and the tuning file repeats them inside, so a
//! file from another adapter, driver or release is never used. Files are
//! written to a temporary name and renamed, so a reader sees a whole file or
//! none. A file that cannot be read, parsed or that belongs to someone else
//! is ignored with a warning in the log, never an error.

use std::path::{Path, PathBuf};

/// The environment variable that moves the cache directory, or disables
/// it with `off` (also `0`, `none`, `false`).
pub const CACHE_DIR_ENV: &str = "WGARRAY_CACHE_DIR";

/// Where a device keeps its tuning results and compiled pipelines between
/// processes (see `DeviceOptions::cache_dir`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheDir {
    /// [`CACHE_DIR_ENV`] if set, else the user's cache directory plus
    /// `wgarray` (nothing if neither can be found).
    #[default]
    Default,
    /// This directory (created when first written).
    At(PathBuf),
    /// Nothing is read or written: every process tunes afresh.
    Off,
}

impl CacheDir {
    /// The setting a value of [`CACHE_DIR_ENV`] asks for: empty means
    /// unset, `off`, `0`, `none` or `false` (any case) mean [`CacheDir::Off`],
    /// anything else is a directory.
    pub fn from_env_value(value: Option<&str>) -> CacheDir {
        match value.map(str::trim) {
            None | Some("") => CacheDir::Default,
            Some(v) if ["off", "0", "none", "false"].contains(&v.to_ascii_lowercase().as_str()) => {
                CacheDir::Off
            }
            Some(v) => CacheDir::At(PathBuf::from(v)),
        }
    }

    /// The directory this setting names now, if any.
    pub fn resolve(&self) -> Option<PathBuf> {
        match self {
            CacheDir::Off => None,
            CacheDir::At(p) => Some(p.clone()),
            CacheDir::Default => {
                match CacheDir::from_env_value(std::env::var(CACHE_DIR_ENV).ok().as_deref()) {
                    CacheDir::Default => user_cache_dir().map(|d| d.join("wgarray")),
                    other => other.resolve(),
                }
            }
        }
    }
}

/// The platform's per-user cache directory.
fn user_cache_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    }
}

/// Who a cache file belongs to: the adapter, its driver, and wgarray's
/// version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub adapter: String,
    pub backend: String,
    pub driver: String,
    pub driver_info: String,
    pub crate_version: String,
}

impl Owner {
    pub(crate) fn new(info: &crate::AdapterDescription) -> Owner {
        Owner {
            adapter: info.name.clone(),
            backend: info.backend.to_string(),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            crate_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// A file name stem: readable adapter and backend, then a hash of all
    /// of it (FNV-1a, stable across builds and platforms).
    pub(crate) fn stem(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for field in [
            &self.adapter,
            &self.backend,
            &self.driver,
            &self.driver_info,
            &self.crate_version,
        ] {
            for b in field.bytes().chain([0]) {
                h ^= b as u64;
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        let name: String = self
            .adapter
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(32)
            .collect();
        format!("{name}-{}-{h:016x}", self.backend)
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "adapter": self.adapter,
            "backend": self.backend,
            "driver": self.driver,
            "driver_info": self.driver_info,
            "crate_version": self.crate_version,
        })
    }
}

/// The contents of `path`, or `None` (with a warning unless it does not
/// exist).
pub(crate) fn read(path: &Path) -> Option<Vec<u8>> {
    match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            log::warn!("wgarray: ignoring cache file {}: {e}", path.display());
            None
        }
    }
}

/// Write `bytes` to `path` through a temporary file and a rename, creating
/// the directory; a failure is a warning, never an error.
pub(crate) fn write(path: &Path, bytes: &[u8]) {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "tmp{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let result = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        log::warn!(
            "wgarray: could not write cache file {}: {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_value_picks_the_setting() {
        assert_eq!(CacheDir::from_env_value(None), CacheDir::Default);
        assert_eq!(CacheDir::from_env_value(Some(" ")), CacheDir::Default);
        for off in ["off", "OFF", "0", "none", "false"] {
            assert_eq!(CacheDir::from_env_value(Some(off)), CacheDir::Off, "{off}");
        }
        assert_eq!(
            CacheDir::from_env_value(Some("/tmp/x")),
            CacheDir::At(PathBuf::from("/tmp/x"))
        );
        assert_eq!(CacheDir::Off.resolve(), None);
        assert_eq!(
            CacheDir::At(PathBuf::from("/a")).resolve(),
            Some(PathBuf::from("/a"))
        );
    }

    #[test]
    fn stems_differ_by_every_field() {
        let o = Owner {
            adapter: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            backend: "vulkan".into(),
            driver: "llvmpipe".into(),
            driver_info: "Mesa 22.3.6".into(),
            crate_version: "0.1.0".into(),
        };
        let s = o.stem();
        assert!(
            s.starts_with("llvmpipe--llvm-15-0-6--256-bits--vulkan-"),
            "{s}"
        );
        let mut other = o.clone();
        other.driver_info = "Mesa 23".into();
        assert_ne!(other.stem(), s);
        let mut other = o.clone();
        other.crate_version = "0.2.0".into();
        assert_ne!(other.stem(), s);
        assert_eq!(o.clone().stem(), s);
    }
}
