//! The JSON a run writes and `compare` reads: the adapter's identity, the
//! driver, the backend, wgarray's version, the git commit when known, the
//! date, and every figure with its unit, timer, spread and check.
//!
//! [`FORMAT_VERSION`] changes whenever a field changes meaning or goes; a
//! file of another version is refused with a message that says so.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The value of `format` in every file.
pub const FORMAT: &str = "wgbench";
/// The version of this layout.
pub const FORMAT_VERSION: u32 = 1;

/// One `wgbench run`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] of the wgbench that wrote it.
    pub format_version: u32,
    /// `CARGO_PKG_VERSION` of the wgarray it was built from.
    pub wgarray_version: String,
    /// `git rev-parse HEAD` of the source tree, `-dirty` appended when it
    /// had uncommitted changes; `None` when the binary runs away from it.
    pub git_commit: Option<String>,
    /// Start of the run, UTC, RFC 3339.
    pub date: String,
    /// `smoke`, `quick` or `full`.
    pub suite: String,
    /// The command line.
    pub command: Vec<String>,
    pub host: Host,
    /// One entry per adapter, in the order they ran.
    pub runs: Vec<AdapterRun>,
}

/// The machine the run was on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Host {
    pub os: String,
    pub arch: String,
    /// `model name` from /proc/cpuinfo (Linux).
    pub cpu: Option<String>,
    pub logical_cpus: usize,
    /// Threads `matrixmultiply` may use for the CPU sgemm (at most 4, its
    /// maximum; it uses fewer on small shapes).
    pub cpu_sgemm_threads: usize,
    /// /proc/loadavg's 1, 5 and 15 minute figures before and after (Linux):
    /// how busy the machine was.
    pub load_average_start: Option<[f64; 3]>,
    pub load_average_end: Option<[f64; 3]>,
}

/// Everything measured on one adapter.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AdapterRun {
    pub adapter: AdapterIdentity,
    pub limits: Limits,
    /// The optional wgpu features wgarray uses (`SHADER_F16`, `SUBGROUP`,
    /// `TIMESTAMP_QUERY`) that this adapter has.
    pub features: Vec<String>,
    /// What times what on this adapter, in words.
    pub timing_note: String,
    /// Set when no device could be created; then `figures` is empty.
    pub error: Option<String>,
    /// Wall-clock seconds the adapter's suite took.
    pub seconds: f64,
    pub figures: Vec<Figure>,
}

/// Who the adapter is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdapterIdentity {
    pub name: String,
    /// `Vulkan`, `Gl`, `Dx12`, `Metal`.
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu`, `Other`.
    pub device_type: String,
    /// PCI vendor and device ids (0 where the backend has none).
    pub vendor: u32,
    pub device: u32,
    pub driver: String,
    pub driver_info: String,
}

impl AdapterIdentity {
    /// `name (backend)`, how tables and plots name it.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.backend)
    }
}

/// The limits that matter to wgarray (bytes where sizes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Limits {
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_size: [u32; 3],
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_storage_buffers_per_shader_stage: u32,
}

/// The benchmark families. Each makes one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    Matmul,
    Bandwidth,
    Reduction,
    Dispatch,
    Pool,
    Minilm,
    Llm,
}

impl Group {
    pub const ALL: [Group; 7] = [
        Group::Matmul,
        Group::Bandwidth,
        Group::Reduction,
        Group::Dispatch,
        Group::Pool,
        Group::Minilm,
        Group::Llm,
    ];

    /// The table's title.
    pub fn title(self) -> &'static str {
        match self {
            Group::Matmul => "matmul (GFLOP/s = 2 M K N / median time)",
            Group::Bandwidth => "memory bandwidth (GB/s = bytes read + written / median time)",
            Group::Reduction => "reduction, softmax, layer_norm over the last axis",
            Group::Dispatch => {
                "a chain of small ops, read back (wgarray: fused into one kernel; unfused: \
                 one dispatch per op, the dispatch overhead)"
            }
            Group::Pool => {
                "allocate and release one buffer (pool: Array::empty + drop, a cache hit; \
                 cache limit 0: every release frees, every allocation creates)"
            }
            Group::Minilm => "all-MiniLM-L6-v2 sentence embeddings",
            Group::Llm => "smollm2 decode (SmolLM2-135M-Instruct Q4_1: tokens/s = 1 / median step)",
        }
    }
}

/// ok, failed (an error, or a result that disagreed with the host
/// reference: then there is no value), or skipped (with the reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
    Skipped,
}

/// Which clock timed a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timer {
    /// Wall clock on the host around the whole call, waiting for the device
    /// included (`Instant`).
    Host,
    /// The GPU's timestamps at the start and end of the compute pass
    /// (`TIMESTAMP_QUERY`), converted with the queue's timestamp period.
    GpuTimestamps,
}

/// The work one call does, from which its figure is computed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// Floating-point operations (2 M K N for a matmul): GFLOP/s.
    Flop(f64),
    /// Bytes read plus bytes written by an ideal kernel: GB/s (10^9).
    Bytes(f64),
    /// Ops in a chain: microseconds per op (lower is better).
    Ops(f64),
    /// Buffers allocated and released: per second.
    Allocations(f64),
    /// Sentences embedded: per second.
    Sentences(f64),
    /// Tokens generated: per second.
    Tokens(f64),
}

impl Work {
    pub fn unit(&self) -> &'static str {
        match self {
            Work::Flop(_) => "GFLOP/s",
            Work::Bytes(_) => "GB/s",
            Work::Ops(_) => "us/op",
            Work::Allocations(_) => "alloc/s",
            Work::Sentences(_) => "sentences/s",
            Work::Tokens(_) => "tokens/s",
        }
    }
    pub fn higher_is_better(&self) -> bool {
        !matches!(self, Work::Ops(_))
    }
}

/// Seconds per call over the timed samples.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Stats {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// Median absolute deviation from the median.
    pub mad_s: f64,
    pub samples: usize,
    /// Untimed calls after the checked first call (which compiled the
    /// pipelines), and the seconds they took.
    pub warmup_calls: usize,
    pub warmup_s: f64,
}

/// How a result was checked before it was timed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Check {
    /// What it was compared with, e.g. "f64 host reference".
    pub reference: String,
    /// How many values were compared.
    pub compared: usize,
    pub max_abs_err: f64,
    /// The largest error as a fraction of its tolerance (< 1 passes).
    pub max_err_over_tolerance: f64,
}

/// One measured figure: a cell of a table (`group`, `row`, `column`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    pub group: Group,
    /// E.g. `1024x1024x1024` (M x K x N), `a + b`, `4 KiB`.
    pub row: String,
    /// E.g. `f32`, `CPU sgemm`, `raw wgpu`, `wgarray`.
    pub column: String,
    pub status: Status,
    /// The reason for failed and skipped figures; a note for ok ones.
    pub message: Option<String>,
    /// The figure in `unit`; `None` unless `status` is ok.
    pub value: Option<f64>,
    pub unit: String,
    pub higher_is_better: bool,
    pub work: Option<Work>,
    pub timer: Option<Timer>,
    /// Seconds per call by `timer`.
    pub time: Option<Stats>,
    /// Host seconds per call beside GPU timestamps, when `timer` is GPU.
    pub host_time: Option<Stats>,
    pub check: Option<Check>,
}

impl Figure {
    /// `group / row / column`: the key `compare` matches figures by.
    pub fn key(&self) -> String {
        format!(
            "{} / {} / {}",
            group_name(self.group),
            self.row,
            self.column
        )
    }
}

/// The group's name as the JSON writes it.
pub fn group_name(g: Group) -> String {
    serde_json::to_value(g)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

impl Report {
    /// Read a file `wgbench run --json` wrote.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read, is not JSON, is not
    /// a wgbench result, has another [`FORMAT_VERSION`], or lacks fields.
    pub fn load(path: &Path) -> Result<Report, String> {
        let shown = path.display();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{shown} is not JSON: {e}"))?;
        if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format!(
                "{shown} is not a wgbench result (no \"format\": \"{FORMAT}\"); \
                 `wgbench run --json FILE` writes one"
            ));
        }
        let version = v.get("format_version").and_then(|f| f.as_u64());
        if version != Some(FORMAT_VERSION as u64) {
            let by = v
                .get("wgarray_version")
                .and_then(|f| f.as_str())
                .unwrap_or("unknown");
            let version = version.map_or("none".to_string(), |n| n.to_string());
            return Err(format!(
                "{shown} has wgbench format version {version} (written by wgarray {by}); this \
                 wgbench (wgarray {}) reads format version {FORMAT_VERSION}: re-run `wgbench run` \
                 with this version, or compare with the wgbench that wrote it",
                env!("CARGO_PKG_VERSION")
            ));
        }
        serde_json::from_value(v).map_err(|e| format!("{shown}: malformed wgbench result: {e}"))
    }
}

/// Now, UTC, as RFC 3339 (`2026-11-30T15:04:05Z`).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant, "chrono-Compatible Low-Level Date Algorithms").
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The source tree's commit, when the binary runs where it was built from.
pub fn git_commit() -> Option<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "HEAD"]).filter(|s| !s.is_empty())?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// /proc/loadavg's three figures (Linux).
pub fn load_average() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The CPU's model name from /proc/cpuinfo (Linux).
pub fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(super::civil_from_days(20_787), (2026, 11, 30));
    }
}
