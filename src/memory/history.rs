//! Memory history: what produced each buffer ([`Origin`]), and the timeline
//! of allocations, cache hits, releases and frees ([`MemoryTimeline`]) that
//! the pool records while [`crate::Device::record_memory_history`] is on.
//!
//! Like PyTorch's `torch.cuda.memory._record_memory_history`, and for the same
//! reason off by default: every event takes a clock reading and a push, and
//! every recorded op a source location, a lock and a push into the array
//! registry. With history off the pool keeps no timeline and the layers
//! above record no origins: an op pays one relaxed atomic load and a
//! slightly larger node, an allocation one branch.
//!
//! Measured (docs/PERFORMANCE.md, "Memory history"): on the
//! `eval_overhead` loop (1000 chained `x + 1`, lavapipe), recording an op
//! costs 2,148 instructions before this feature and 2,234 with history off
//! (callgrind, 45,000 ops), against 84,000 to 95,000 instructions per op
//! for the whole process: about 0.1%; eval itself is within 0.25% (two runs of one binary
//! differ by 0.15%). With history on, recording an op costs 2,554
//! instructions and eval 0.3% more.
//!
//! An [`Origin`] is an opaque label to this module: an op name and a source
//! location. The graph layer fills it in; the pool only stores and reports
//! it (this module knows nothing of arrays or graphs).

use std::collections::VecDeque;
use std::fmt;
use std::panic::Location;
use std::time::Instant;

/// What produced a buffer or an array: the op's name (the graph primitive,
/// e.g. `matmul`, `add`, `reshape`, or the constructor: `from_slice`,
/// `empty`, `read-back`) and the user's call site that recorded it (through
/// `#[track_caller]` on every public op; for an op called inside another,
/// such as the `exp` of a `softmax`, the call site of the outer one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The op's name.
    pub op: &'static str,
    /// The user's call site.
    pub location: &'static Location<'static>,
}

impl fmt::Display for Origin {
    /// `matmul at src/main.rs:12:17`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.op, self.location)
    }
}

impl Origin {
    /// `{"op": ..., "file": ..., "line": ..., "column": ...}`.
    pub(crate) fn json(&self) -> String {
        format!(
            "{{\"op\": {}, \"file\": {}, \"line\": {}, \"column\": {}}}",
            json_string(self.op),
            json_string(self.location.file()),
            self.location.line(),
            self.location.column()
        )
    }
}

/// `origin` as JSON, `null` when absent.
pub(crate) fn json_origin(origin: Option<&Origin>) -> String {
    origin.map_or_else(|| "null".to_string(), Origin::json)
}

/// `s` as a JSON string literal (RFC 8259: quote, backslash and control
/// characters escaped).
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What happened to a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryEventKind {
    /// A new buffer was created with the driver and handed out (active).
    Alloc,
    /// A cached buffer was handed out again (cache to active).
    CacheHit,
    /// The last holder let go and the buffer was kept for reuse (active to
    /// cache).
    Release,
    /// The buffer went back to the driver: let go with no room in the cache
    /// (from active), or evicted from the cache (from cache).
    Free,
}

impl MemoryEventKind {
    /// `alloc`, `cache_hit`, `release`, `free`.
    pub fn name(self) -> &'static str {
        match self {
            MemoryEventKind::Alloc => "alloc",
            MemoryEventKind::CacheHit => "cache_hit",
            MemoryEventKind::Release => "release",
            MemoryEventKind::Free => "free",
        }
    }
}

/// One event of the [`MemoryTimeline`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryEvent {
    /// Seconds since history was turned on.
    pub time_s: f64,
    /// What happened.
    pub kind: MemoryEventKind,
    /// The buffer: a number the pool gives each driver buffer when it
    /// creates it, kept across cache reuse (as in
    /// [`crate::BufferSnapshot::id`]).
    pub buffer: u64,
    /// The buffer's size in bytes (after the pool's rounding).
    pub bytes: u64,
    /// Whether it was a read-back staging buffer (else a storage buffer).
    pub readback: bool,
    /// The device's active memory in bytes just after the event.
    pub active: u64,
    /// The device's cache memory in bytes just after the event.
    pub cache: u64,
    /// What the buffer was handed out for (`Alloc`, `CacheHit`) or last
    /// handed out for (`Release`, `Free`), if that was recorded.
    pub origin: Option<Origin>,
}

/// A buffer on loan, as the timeline knows it at one moment
/// ([`MemoryTimeline::holders_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The buffer (see [`MemoryEvent::buffer`]).
    pub buffer: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// What it was handed out for, if recorded.
    pub origin: Option<Origin>,
}

/// The events the pool recorded while history was on, oldest first: a plain
/// list, for plotting active and cached memory over time (the
/// `memory_timeline` example draws it as SVG) and for finding who held the
/// memory at the peak. At most [`MemoryTimeline::CAPACITY`] events are kept;
/// older ones are dropped and counted in `dropped`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryTimeline {
    /// The events, oldest first.
    pub events: Vec<MemoryEvent>,
    /// Events dropped from the front because the timeline was full.
    pub dropped: u64,
}

impl MemoryTimeline {
    /// The most events kept (the newest); at about 80 bytes each, 80 MiB.
    pub const CAPACITY: usize = 1 << 20;

    /// The index of the first event with the most active memory, or `None`
    /// for an empty timeline.
    pub fn peak_index(&self) -> Option<usize> {
        let max = self.events.iter().map(|e| e.active).max()?;
        self.events.iter().position(|e| e.active == max)
    }

    /// The buffers on loan just after event `index`, largest first (ties by
    /// buffer id): the events up to `index` replayed. Buffers handed out
    /// before the timeline starts (before history was on, or dropped from a
    /// full timeline) are not known to it and not listed.
    pub fn holders_at(&self, index: usize) -> Vec<Holder> {
        let mut live: std::collections::BTreeMap<u64, Holder> = Default::default();
        for e in self.events.iter().take(index.saturating_add(1)) {
            match e.kind {
                MemoryEventKind::Alloc | MemoryEventKind::CacheHit => {
                    live.insert(
                        e.buffer,
                        Holder {
                            buffer: e.buffer,
                            bytes: e.bytes,
                            origin: e.origin,
                        },
                    );
                }
                MemoryEventKind::Release | MemoryEventKind::Free => {
                    live.remove(&e.buffer);
                }
            }
        }
        let mut out: Vec<Holder> = live.into_values().collect();
        out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.buffer.cmp(&b.buffer)));
        out
    }

    /// The timeline as JSON: `{"dropped": n, "events": [{"time_s", "kind",
    /// "buffer", "bytes", "readback", "active", "cache", "origin"}, ...]}`,
    /// `origin` being `{"op", "file", "line", "column"}` or `null`.
    pub fn to_json(&self) -> String {
        let mut out = format!("{{\"dropped\": {}, \"events\": [", self.dropped);
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!(
                "{{\"time_s\": {}, \"kind\": \"{}\", \"buffer\": {}, \"bytes\": {}, \
                 \"readback\": {}, \"active\": {}, \"cache\": {}, \"origin\": {}}}",
                json_f64(e.time_s),
                e.kind.name(),
                e.buffer,
                e.bytes,
                e.readback,
                e.active,
                e.cache,
                json_origin(e.origin.as_ref())
            ));
        }
        out.push_str("]}");
        out
    }
}

/// A finite f64 as a JSON number (`0` for NaN or infinities, which JSON
/// cannot hold; times are never either).
fn json_f64(x: f64) -> String {
    if x.is_finite() {
        format!("{x:?}")
    } else {
        "0".to_string()
    }
}

/// The pool's recorder: a bounded queue of events and the clock they are
/// timed against.
pub(crate) struct Recorder {
    start: Instant,
    events: VecDeque<MemoryEvent>,
    dropped: u64,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Recorder {
            start: Instant::now(),
            events: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Append an event; `time_s` is filled in here.
    pub(crate) fn push(&mut self, mut event: MemoryEvent) {
        if self.events.len() == MemoryTimeline::CAPACITY {
            self.events.pop_front();
            self.dropped += 1;
        }
        event.time_s = self.start.elapsed().as_secs_f64();
        self.events.push_back(event);
    }

    pub(crate) fn timeline(&self) -> MemoryTimeline {
        MemoryTimeline {
            events: self.events.iter().copied().collect(),
            dropped: self.dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: MemoryEventKind, buffer: u64, bytes: u64, active: u64) -> MemoryEvent {
        MemoryEvent {
            time_s: 0.0,
            kind,
            buffer,
            bytes,
            readback: false,
            active,
            cache: 0,
            origin: None,
        }
    }

    #[test]
    fn holders_replay_the_events() {
        use MemoryEventKind::*;
        let t = MemoryTimeline {
            events: vec![
                ev(Alloc, 1, 100, 100),
                ev(Alloc, 2, 300, 400),
                ev(Release, 1, 100, 300),
                ev(CacheHit, 1, 100, 400),
                ev(Free, 7, 50, 400), // evicted, never seen on loan
                ev(Free, 2, 300, 100),
            ],
            dropped: 0,
        };
        assert_eq!(t.peak_index(), Some(1));
        let ids = |i| t.holders_at(i).iter().map(|h| h.buffer).collect::<Vec<_>>();
        assert_eq!(ids(0), vec![1]);
        assert_eq!(ids(1), vec![2, 1], "largest first");
        assert_eq!(ids(2), vec![2]);
        assert_eq!(ids(3), vec![2, 1]);
        assert_eq!(ids(5), vec![1]);
        assert_eq!(MemoryTimeline::default().peak_index(), None);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
    }

    #[test]
    fn the_recorder_keeps_the_newest_events() {
        let mut r = Recorder::new();
        for i in 0..MemoryTimeline::CAPACITY as u64 + 3 {
            r.push(ev(MemoryEventKind::Alloc, i, 1, 1));
        }
        let t = r.timeline();
        assert_eq!(t.dropped, 3);
        assert_eq!(t.events.len(), MemoryTimeline::CAPACITY);
        assert_eq!(t.events[0].buffer, 3);
    }
}
