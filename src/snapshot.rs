//! Who holds the memory: [`MemorySnapshot`] ([`crate::Device::memory_snapshot`])
//! lists every buffer alive in the driver with its size, the op and call
//! site it was handed out for, and the arrays that view it, as text and as
//! JSON. PyTorch's `torch.cuda.memory._snapshot()` is the model.
//!
//! The layers split the work so that `memory/` never learns about arrays
//! (DESIGN.md): the pool lists its buffers, with the opaque
//! [`Origin`] the graph layer attached to each when it asked for it; this
//! module adds the arrays, found through a registry of `Weak` references to
//! the arrays made while history is on. The registry never keeps an array
//! alive, holds nothing while history is off, and is emptied when history is
//! turned off.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use crate::array::ArrayInner;
use crate::memory::{BufferKind, MemoryStats, Origin, json_origin, json_string};
use crate::{DType, Device};

/// The arrays made while history is on, weakly (see the module docs).
#[derive(Default)]
pub(crate) struct Registry {
    arrays: Mutex<Vec<Weak<ArrayInner>>>,
}

/// The registry prunes dead entries when it has doubled since the last
/// pruning, and not below this many entries: amortised O(1) per array.
const PRUNE_AT_LEAST: usize = 1024;

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Weak<ArrayInner>>> {
        self.arrays.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember `array` (weakly).
    pub(crate) fn insert(&self, array: &Arc<ArrayInner>) {
        let mut v = self.lock();
        if v.len() >= PRUNE_AT_LEAST && v.len().is_power_of_two() {
            v.retain(|w| w.strong_count() > 0);
        }
        v.push(Arc::downgrade(array));
    }

    /// Forget every array.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// The arrays still alive, each held (strongly) by the caller from now
    /// on: drop them without holding the pool's lock.
    fn alive(&self) -> Vec<Arc<ArrayInner>> {
        self.lock().iter().filter_map(Weak::upgrade).collect()
    }
}

/// An array that views a buffer, as [`MemorySnapshot`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayView {
    /// The array's shape.
    pub shape: Vec<usize>,
    /// The array's dtype.
    pub dtype: DType,
    /// Its first element's offset into the buffer, in elements.
    pub offset: usize,
    /// Its strides in elements (signed: negative steps reverse).
    pub strides: Vec<isize>,
    /// The op that made the array (a view op for a view) and where it was
    /// called from.
    pub origin: Option<Origin>,
}

/// One buffer alive in the driver, as [`MemorySnapshot`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferSnapshot {
    /// The pool's number for the buffer, given when it was created and kept
    /// while it is reused from the cache (as in
    /// [`crate::MemoryEvent::buffer`]).
    pub id: u64,
    /// Its size in bytes (requests are rounded up: 256 bytes below 16 KiB,
    /// 16 KiB pages above).
    pub bytes: u64,
    /// Whether it is a read-back staging buffer (else a storage buffer).
    pub readback: bool,
    /// Whether it sits in the cache, free for reuse (else it is active).
    pub cached: bool,
    /// The op the buffer was handed out for (last handed out for, if cached)
    /// and the user's call site; `None` when history was off then.
    pub origin: Option<Origin>,
    /// The arrays made while history was on that view the buffer now
    /// (several for views; none for a cached buffer, a staging buffer, or an
    /// array made with history off).
    pub arrays: Vec<ArrayView>,
}

/// Every buffer alive in a device's driver at one moment: what it holds and
/// who holds it ([`crate::Device::memory_snapshot`]). `Display` prints a
/// table, largest first; [`MemorySnapshot::to_json`] gives the same as JSON.
///
/// Not listed: the one kernel-parameter buffer each device keeps outside
/// the pool, and wgpu's own internal allocations.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySnapshot {
    /// The pool's counters at the same moment.
    pub stats: MemoryStats,
    /// Whether history was on (origins and arrays are recorded only then).
    pub history: bool,
    /// Every buffer: active ones first, then cached; each group largest
    /// first, ties by id.
    pub buffers: Vec<BufferSnapshot>,
}

/// `bytes` in KiB, MiB or GiB with two decimals (bytes below 1 KiB).
fn human(bytes: u64) -> String {
    const UNITS: [(&str, f64); 3] = [
        ("GiB", (1u64 << 30) as f64),
        ("MiB", (1u64 << 20) as f64),
        ("KiB", 1024.0),
    ];
    for (unit, size) in UNITS {
        if bytes as f64 >= size {
            return format!("{:.2} {unit}", bytes as f64 / size);
        }
    }
    format!("{bytes} B")
}

fn describe(origin: Option<&Origin>) -> String {
    origin.map_or_else(
        || "(not recorded: history was off)".into(),
        |o| o.to_string(),
    )
}

impl MemorySnapshot {
    /// Take a snapshot of `device` (see [`crate::Device::memory_snapshot`]).
    pub(crate) fn take(device: &Device) -> MemorySnapshot {
        let dev = &device.inner;
        let arrays = dev.registry.alive();
        let mut views: Vec<(u64, ArrayView)> = arrays
            .iter()
            .filter_map(|a| {
                let (id, offset, strides) = a.buffer_view()?;
                Some((
                    id,
                    ArrayView {
                        shape: a.shape.clone(),
                        dtype: a.dtype,
                        offset,
                        strides,
                        origin: a.origin,
                    },
                ))
            })
            .collect();
        let (records, stats) = dev.pool.buffers();
        // Our strong references go now, outside the pool's lock: an array
        // whose other holders let go meanwhile returns its buffer here.
        drop(arrays);
        views.sort_by_key(|(id, _)| *id);
        let mut buffers: Vec<BufferSnapshot> = records
            .into_iter()
            .map(|r| {
                let from = views.partition_point(|(id, _)| *id < r.id);
                let to = views.partition_point(|(id, _)| *id <= r.id);
                BufferSnapshot {
                    id: r.id,
                    bytes: r.bytes,
                    readback: r.kind == BufferKind::Readback,
                    cached: r.cached,
                    origin: r.origin,
                    arrays: if r.cached {
                        Vec::new()
                    } else {
                        views[from..to].iter().map(|(_, v)| v.clone()).collect()
                    },
                }
            })
            .collect();
        buffers.sort_by(|a, b| {
            (a.cached, std::cmp::Reverse(a.bytes), a.id).cmp(&(
                b.cached,
                std::cmp::Reverse(b.bytes),
                b.id,
            ))
        });
        MemorySnapshot {
            stats,
            history: dev.history.load(std::sync::atomic::Ordering::Relaxed),
            buffers,
        }
    }

    /// The snapshot as JSON:
    /// `{"active", "peak", "cache", "history", "buffers": [{"id", "bytes",
    /// "readback", "cached", "origin", "arrays": [{"shape", "dtype",
    /// "offset", "strides", "origin"}]}]}`, sizes in bytes, each `origin`
    /// `{"op", "file", "line", "column"}` or `null`. Written by hand (a few
    /// dozen lines) rather than with serde, which would join the default
    /// dependency tree for this one method.
    pub fn to_json(&self) -> String {
        let list = |items: Vec<String>| format!("[{}]", items.join(", "));
        let buffers = self
            .buffers
            .iter()
            .map(|b| {
                let arrays = b
                    .arrays
                    .iter()
                    .map(|a| {
                        format!(
                            "{{\"shape\": {}, \"dtype\": {}, \"offset\": {}, \"strides\": {}, \
                             \"origin\": {}}}",
                            list(a.shape.iter().map(|d| d.to_string()).collect()),
                            json_string(&a.dtype.to_string()),
                            a.offset,
                            list(a.strides.iter().map(|d| d.to_string()).collect()),
                            json_origin(a.origin.as_ref())
                        )
                    })
                    .collect();
                format!(
                    "{{\"id\": {}, \"bytes\": {}, \"readback\": {}, \"cached\": {}, \
                     \"origin\": {}, \"arrays\": {}}}",
                    b.id,
                    b.bytes,
                    b.readback,
                    b.cached,
                    json_origin(b.origin.as_ref()),
                    list(arrays)
                )
            })
            .collect();
        format!(
            "{{\"active\": {}, \"peak\": {}, \"cache\": {}, \"history\": {}, \"buffers\": {}}}",
            self.stats.active,
            self.stats.peak,
            self.stats.cache,
            self.history,
            list(buffers)
        )
    }
}

/// Cached buffers `Display` lists one by one; the rest are summed up in a
/// line (JSON lists them all).
const CACHED_SHOWN: usize = 8;

impl fmt::Display for MemorySnapshot {
    /// A summary line, then one line per active buffer (largest first) with
    /// the arrays that view it indented below, then the largest cached
    /// buffers (at most 8; a last line sums up the others):
    ///
    /// ```text
    /// 2 buffers active (4.00 MiB, peak 4.00 MiB), 1 cached (1.00 MiB); history on
    ///     4.00 MiB  #3 active  matmul at src/main.rs:9:15
    ///               f32[1024, 1024] matmul at src/main.rs:9:15
    ///               f32[1024, 1024] transpose at src/main.rs:10:15
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let active = self.buffers.iter().filter(|b| !b.cached).count();
        writeln!(
            f,
            "{active} buffers active ({}, peak {}), {} cached ({}); history {}",
            human(self.stats.active),
            human(self.stats.peak),
            self.buffers.len() - active,
            human(self.stats.cache),
            if self.history { "on" } else { "off" }
        )?;
        let mut cached = 0;
        for b in &self.buffers {
            if b.cached {
                cached += 1;
                if cached > CACHED_SHOWN {
                    continue;
                }
            }
            let what = match (b.cached, b.readback) {
                (true, _) => "cached",
                (false, true) => "read-back",
                (false, false) => "active",
            };
            writeln!(
                f,
                "{:>12}  #{} {what}  {}",
                human(b.bytes),
                b.id,
                describe(b.origin.as_ref())
            )?;
            for a in &b.arrays {
                let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
                writeln!(
                    f,
                    "{:>12}  {}[{}] {}",
                    "",
                    a.dtype,
                    dims.join(", "),
                    describe(a.origin.as_ref())
                )?;
            }
        }
        if cached > CACHED_SHOWN {
            let rest: u64 = self
                .buffers
                .iter()
                .filter(|b| b.cached)
                .skip(CACHED_SHOWN)
                .map(|b| b.bytes)
                .sum();
            writeln!(
                f,
                "{:>12}  ... and {} smaller cached buffers",
                human(rest),
                cached - CACHED_SHOWN
            )?;
        }
        Ok(())
    }
}
