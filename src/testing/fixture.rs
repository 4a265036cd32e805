//! Fixtures (cargo feature `fixtures`, on by default): a kernel test with
//! its inputs, expected outputs and the adapter that failed it, saved to a
//! JSON file and replayed, so that a driver bug found once is pinned in a
//! test.
//!
//! See [`Fixture`] for the file format.

// `Disagreements`, the error of the checks here, is a test's failure report
// (128 bytes: its headline, verdict, adapters and items), made once when a
// check fails; boxing it would buy nothing but a dereference for every
// caller.
#![allow(clippy::result_large_err)]

use std::path::Path;

use serde_json::{Value, json};

use super::differential::{Disagreement, Disagreements, adapter_label, all_devices};
use super::kernel_test::{Binding, Expected, Grid, Output, OutputSpec, Pass};
use super::{KernelTest, Outputs, Tolerance};
use crate::{AdapterDescription, DType, Device, Element, Error, Result};

const FORMAT: &str = "wgarray-kernel-fixture";

/// A kernel test with its expected outputs and the adapter it failed on,
/// saved as a JSON file and replayed (cargo feature `fixtures`, on by
/// default).
///
/// # Format, version 1
///
/// One JSON object:
///
/// ```text
/// {
///   "format": "wgarray-kernel-fixture",
///   "version": 1,
///   "note": "free text: what was found, where",
///   "adapter": null | {"name", "backend" ("vulkan", "gl", "dx12", "metal"),
///                      "device_type" ("Cpu", "DiscreteGpu", ...), "driver", "driver_info"},
///   "outputs": [{"dtype": "float32", "shape": [7], "init": null | HEX}],
///   "passes": [{
///     "source": WGSL text,
///     "entry_point": "main",
///     "grid": {"workgroups": [x, y, z]} | {"threads": [x, y, z]},
///     "constants": [{"name": "alpha", "value": NUMBER}],
///     "bindings": [{"input": {"dtype": "float32", "len": 7, "data": HEX}}
///                | {"uniform": {"data": HEX, "host": "Params"}}
///                | {"output": K} | {"read_output": K} | {"write_output": K}]
///   }],
///   "expected": [{"output": K, "dtype": "float32", "data": HEX,
///                 "tolerance": {"abs": NUMBER, "rel": NUMBER, "ulps": INTEGER}}],
///   "observed": [{"output": K, "dtype": "float32", "shape": [7], "data": HEX}]
/// }
/// ```
///
/// HEX is the elements' device bytes (little-endian, row-major; bool as one
/// `u32` each; f16 and bf16 two bytes each) as lowercase hexadecimal, so
/// NaN payloads and signed zeros survive. dtypes are [`DType::name`]s. A
/// NUMBER that is not finite is written as the string `"NaN"`, `"inf"` or
/// `"-inf"`. `observed` (what the failing adapter gave) is optional. A
/// reader refuses another format or a newer version.
///
/// ```
/// use wgarray::DType;
/// use wgarray::testing::{Fixture, KernelTest, Tolerance};
///
/// let test = KernelTest::new(
///     "@group(0) @binding(0) var<storage, read_write> o: array<i32>;
///      @compute @workgroup_size(1) fn main() { o[0] = -7 / 2; }",
///     "main",
/// )
/// .output(DType::I32, &[1]);
/// let fixture = Fixture::new(&test).expect(0, &[-3i32], Tolerance::EXACT);
/// let again = Fixture::from_json(&fixture.to_json())?;
/// assert_eq!(again, fixture);
/// let outputs = again.replay()?;
/// again.check(&outputs).expect("-7 / 2 truncates to -3");
/// # Ok::<(), wgarray::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Fixture {
    /// The kernel test: sources, entry points, inputs, grids, constants.
    /// Its device is not saved.
    pub test: KernelTest,
    /// What the outputs should hold.
    pub expected: Vec<Expected>,
    /// The adapter the case was found on.
    pub adapter: Option<AdapterDescription>,
    /// The outputs that adapter gave.
    pub observed: Option<Outputs>,
    /// Free text: what was found.
    pub note: String,
}

impl Fixture {
    /// The format version this crate writes (and the newest it reads).
    pub const VERSION: u64 = 1;

    /// A fixture of `test` with no expectations yet.
    pub fn new(test: &KernelTest) -> Self {
        let mut test = test.clone();
        test.device = None;
        Fixture {
            test,
            expected: Vec::new(),
            adapter: None,
            observed: None,
            note: String::new(),
        }
    }

    /// Output `output` should hold `values` within `tolerance`.
    pub fn expect<T: Element>(mut self, output: usize, values: &[T], tolerance: Tolerance) -> Self {
        self.expected.push(Expected::new(output, values, tolerance));
        self
    }

    /// The case was found on `adapter`, which gave `observed`.
    pub fn found_on(mut self, adapter: &AdapterDescription, observed: &Outputs) -> Self {
        self.adapter = Some(adapter.clone());
        self.observed = Some(observed.clone());
        self
    }

    /// A note saved with the fixture.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// Run the test on [`default_device`](super::default_device).
    ///
    /// # Errors
    /// As [`KernelTest::run`].
    pub fn replay(&self) -> Result<Outputs> {
        self.test.run()
    }

    /// Run the test on `device`.
    ///
    /// # Errors
    /// As [`KernelTest::run`].
    pub fn replay_on(&self, device: &Device) -> Result<Outputs> {
        self.test.run_with(device)
    }

    /// A device on the adapter the case was found on (same backend and
    /// name), if this machine has it.
    ///
    /// # Errors
    /// [`Error::NoAdapter`] when no adapter was recorded or none matches.
    pub fn recorded_device(&self) -> Result<Device> {
        let no = |requested: String| Error::NoAdapter {
            requested,
            available: Device::enumerate().iter().map(|a| a.to_string()).collect(),
        };
        let Some(want) = &self.adapter else {
            return Err(no("the fixture's adapter (none recorded)".into()));
        };
        all_devices()
            .into_iter()
            .find(|(a, _)| a.backend == want.backend && a.name == want.name)
            .ok_or_else(|| no(format!("the fixture's adapter {}", adapter_label(want))))?
            .1
    }

    /// Compare `outputs` (of a replay) with every expectation.
    ///
    /// # Errors
    /// The [`Disagreements`], each naming the output, elements and values.
    pub fn check(&self, outputs: &Outputs) -> std::result::Result<(), Disagreements> {
        let items: Vec<Disagreement> = self
            .expected
            .iter()
            .filter_map(|want| {
                outputs
                    .check_expected(want)
                    .err()
                    .map(|mismatches| Disagreement::Values {
                        output: want.output,
                        got: "replay".into(),
                        want: "expected".into(),
                        mismatches,
                    })
            })
            .collect();
        if items.is_empty() {
            return Ok(());
        }
        Err(Disagreements {
            context: match &self.adapter {
                Some(a) => format!("fixture found on {}", adapter_label(a)),
                None => "fixture".into(),
            },
            tolerance: self.expected[0].tolerance,
            compared: Vec::new(),
            skipped: Vec::new(),
            items,
            verdict: None,
        })
    }

    /// [`Fixture::replay`] then [`Fixture::check`], panicking with the
    /// report or error: for tests.
    ///
    /// # Panics
    /// When the replay fails or differs from the expectations.
    #[track_caller]
    pub fn assert_replays(&self) {
        match self.replay() {
            Err(e) => panic!("fixture replay failed: {e}"),
            Ok(o) => {
                if let Err(d) = self.check(&o) {
                    panic!("{d}");
                }
            }
        }
    }

    /// The fixture as JSON (see [`Fixture`] for the format).
    pub fn to_json(&self) -> String {
        let outputs: Vec<Value> = self
            .test
            .outputs
            .iter()
            .map(|o| {
                json!({
                    "dtype": o.dtype.name(),
                    "shape": o.shape,
                    "init": o.init.as_deref().map(hex),
                })
            })
            .collect();
        let passes: Vec<Value> = self
            .test
            .passes
            .iter()
            .map(|p| {
                let bindings: Vec<Value> = p
                    .bindings
                    .iter()
                    .map(|b| match b {
                        Binding::Input { dtype, len, bytes } => {
                            json!({"input": {"dtype": dtype.name(), "len": len, "data": hex(bytes)}})
                        }
                        Binding::Uniform { bytes, host } => {
                            json!({"uniform": {"data": hex(bytes), "host": host}})
                        }
                        Binding::Output(k) => json!({ "output": k }),
                        Binding::ReadOutput(k) => json!({ "read_output": k }),
                        Binding::WriteOutput(k) => json!({ "write_output": k }),
                    })
                    .collect();
                let grid = match p.grid {
                    Grid::Workgroups(w) => json!({ "workgroups": w }),
                    Grid::Threads(t) => json!({ "threads": t }),
                };
                let constants: Vec<Value> = p
                    .constants
                    .iter()
                    .map(|(name, v)| json!({"name": name, "value": number(*v)}))
                    .collect();
                json!({
                    "source": p.source,
                    "entry_point": p.entry_point,
                    "grid": grid,
                    "constants": constants,
                    "bindings": bindings,
                })
            })
            .collect();
        let expected: Vec<Value> = self
            .expected
            .iter()
            .map(|e| {
                json!({
                    "output": e.output,
                    "dtype": e.dtype.name(),
                    "data": hex(&e.bytes),
                    "tolerance": {
                        "abs": number(e.tolerance.abs),
                        "rel": number(e.tolerance.rel),
                        "ulps": e.tolerance.ulps,
                    },
                })
            })
            .collect();
        let adapter = self.adapter.as_ref().map(|a| {
            json!({
                "name": a.name,
                "backend": a.backend.to_str(),
                "device_type": format!("{:?}", a.device_type),
                "driver": a.driver,
                "driver_info": a.driver_info,
            })
        });
        let observed = self.observed.as_ref().map(|o| {
            o.outputs
                .iter()
                .enumerate()
                .map(|(k, o)| {
                    json!({
                        "output": k,
                        "dtype": o.dtype.name(),
                        "shape": o.shape,
                        "data": hex(&o.bytes),
                    })
                })
                .collect::<Vec<_>>()
        });
        let doc = json!({
            "format": FORMAT,
            "version": Self::VERSION,
            "note": self.note,
            "adapter": adapter,
            "outputs": outputs,
            "passes": passes,
            "expected": expected,
            "observed": observed,
        });
        serde_json::to_string_pretty(&doc).expect("a JSON value always serialises")
    }

    /// A fixture from JSON (see [`Fixture`] for the format).
    ///
    /// # Errors
    /// [`Error::Fixture`] (path `<string>`) saying what is wrong: not JSON,
    /// another format, a newer version, a missing or malformed field.
    pub fn from_json(text: &str) -> Result<Fixture> {
        parse(text).map_err(|message| Error::Fixture {
            path: "<string>".into(),
            message,
        })
    }

    /// Write the fixture to `path` as JSON.
    ///
    /// # Errors
    /// [`Error::Fixture`] when the file cannot be written.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json() + "\n").map_err(|e| Error::Fixture {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Read a fixture from `path`.
    ///
    /// # Errors
    /// [`Error::Fixture`] when the file cannot be read or understood.
    pub fn load(path: impl AsRef<Path>) -> Result<Fixture> {
        let path = path.as_ref();
        let err = |message: String| Error::Fixture {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        parse(&text).map_err(err)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> std::result::Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("hex data of odd length {}", s.len()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .ok_or_else(|| format!("bad hex data at character {i}"))
        })
        .collect()
}

fn number(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else if v.is_nan() {
        json!("NaN")
    } else if v > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

type Parsed<T> = std::result::Result<T, String>;

fn field<'a>(v: &'a Value, key: &str) -> Parsed<&'a Value> {
    v.get(key).ok_or_else(|| format!("missing field `{key}`"))
}

fn str_of<'a>(v: &'a Value, key: &str) -> Parsed<&'a str> {
    field(v, key)?
        .as_str()
        .ok_or_else(|| format!("`{key}` is not a string"))
}

fn usize_of(v: &Value, key: &str) -> Parsed<usize> {
    as_usize(field(v, key)?).ok_or_else(|| format!("`{key}` is not a non-negative integer"))
}

fn as_usize(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

fn f64_of(v: &Value, key: &str) -> Parsed<f64> {
    let v = field(v, key)?;
    match v.as_str() {
        Some("NaN") => Ok(f64::NAN),
        Some("inf") => Ok(f64::INFINITY),
        Some("-inf") => Ok(f64::NEG_INFINITY),
        _ => v.as_f64().ok_or_else(|| format!("`{key}` is not a number")),
    }
}

fn array_of<'a>(v: &'a Value, key: &str) -> Parsed<&'a Vec<Value>> {
    field(v, key)?
        .as_array()
        .ok_or_else(|| format!("`{key}` is not an array"))
}

fn usizes(v: &Value, key: &str) -> Parsed<Vec<usize>> {
    array_of(v, key)?
        .iter()
        .map(|x| as_usize(x).ok_or_else(|| format!("`{key}` holds a non-integer")))
        .collect()
}

fn dims(v: &Value, key: &str) -> Parsed<[usize; 3]> {
    usizes(v, key)?
        .try_into()
        .map_err(|_| format!("`{key}` does not hold 3 counts"))
}

fn dtype_of(v: &Value, key: &str) -> Parsed<DType> {
    let name = str_of(v, key)?;
    DType::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| format!("unknown dtype `{name}`"))
}

fn data_of(v: &Value, key: &str, dtype: DType, len: usize) -> Parsed<Vec<u8>> {
    let bytes = unhex(str_of(v, key)?)?;
    if bytes.len() != len * dtype.size_in_bytes() {
        return Err(format!(
            "`{key}` holds {} bytes, not {len} elements of {dtype}",
            bytes.len()
        ));
    }
    Ok(bytes)
}

fn backend_of(name: &str) -> Parsed<wgpu::Backend> {
    [
        wgpu::Backend::Vulkan,
        wgpu::Backend::Gl,
        wgpu::Backend::Dx12,
        wgpu::Backend::Metal,
        wgpu::Backend::BrowserWebGpu,
        wgpu::Backend::Noop,
    ]
    .into_iter()
    .find(|b| b.to_str() == name)
    .ok_or_else(|| format!("unknown backend `{name}`"))
}

fn device_type_of(name: &str) -> Parsed<wgpu::DeviceType> {
    use wgpu::DeviceType as T;
    [
        T::Other,
        T::IntegratedGpu,
        T::DiscreteGpu,
        T::VirtualGpu,
        T::Cpu,
    ]
    .into_iter()
    .find(|t| format!("{t:?}") == name)
    .ok_or_else(|| format!("unknown device type `{name}`"))
}

fn parse(text: &str) -> Parsed<Fixture> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if doc.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(format!("not a {FORMAT} file (no \"format\": \"{FORMAT}\")"));
    }
    let version = field(&doc, "version")?
        .as_u64()
        .ok_or("`version` is not an integer")?;
    if version == 0 || version > Fixture::VERSION {
        return Err(format!(
            "format version {version}: this wgarray reads versions 1 to {}",
            Fixture::VERSION
        ));
    }
    let outputs = array_of(&doc, "outputs")?
        .iter()
        .map(|o| {
            let dtype = dtype_of(o, "dtype")?;
            let shape = usizes(o, "shape")?;
            let n = shape.iter().product();
            let init = match field(o, "init")? {
                Value::Null => None,
                _ => Some(data_of(o, "init", dtype, n)?),
            };
            Ok(OutputSpec { dtype, shape, init })
        })
        .collect::<Parsed<Vec<_>>>()?;
    let passes = array_of(&doc, "passes")?
        .iter()
        .map(|p| {
            let grid = field(p, "grid")?;
            let grid = if grid.get("workgroups").is_some() {
                Grid::Workgroups(dims(grid, "workgroups")?)
            } else {
                Grid::Threads(dims(grid, "threads")?)
            };
            let constants = array_of(p, "constants")?
                .iter()
                .map(|c| Ok((str_of(c, "name")?.to_string(), f64_of(c, "value")?)))
                .collect::<Parsed<Vec<_>>>()?;
            let bindings = array_of(p, "bindings")?
                .iter()
                .map(|b| {
                    if let Some(i) = b.get("input") {
                        let dtype = dtype_of(i, "dtype")?;
                        let len = usize_of(i, "len")?;
                        let bytes = data_of(i, "data", dtype, len)?;
                        Ok(Binding::Input { dtype, len, bytes })
                    } else if let Some(u) = b.get("uniform") {
                        Ok(Binding::Uniform {
                            bytes: unhex(str_of(u, "data")?)?,
                            host: str_of(u, "host")?.to_string(),
                        })
                    } else if b.get("output").is_some() {
                        Ok(Binding::Output(usize_of(b, "output")?))
                    } else if b.get("read_output").is_some() {
                        Ok(Binding::ReadOutput(usize_of(b, "read_output")?))
                    } else if b.get("write_output").is_some() {
                        Ok(Binding::WriteOutput(usize_of(b, "write_output")?))
                    } else {
                        Err(format!("unknown binding {b}"))
                    }
                })
                .collect::<Parsed<Vec<_>>>()?;
            Ok(Pass {
                source: str_of(p, "source")?.to_string(),
                entry_point: str_of(p, "entry_point")?.to_string(),
                bindings,
                grid,
                constants,
            })
        })
        .collect::<Parsed<Vec<_>>>()?;
    if passes.is_empty() {
        return Err("no passes".into());
    }
    let expected = array_of(&doc, "expected")?
        .iter()
        .map(|e| {
            let dtype = dtype_of(e, "dtype")?;
            let bytes = unhex(str_of(e, "data")?)?;
            if !bytes.len().is_multiple_of(dtype.size_in_bytes()) {
                return Err(format!(
                    "expected data of {} bytes for {dtype}",
                    bytes.len()
                ));
            }
            let t = field(e, "tolerance")?;
            Ok(Expected {
                output: usize_of(e, "output")?,
                dtype,
                bytes,
                tolerance: Tolerance {
                    abs: f64_of(t, "abs")?,
                    rel: f64_of(t, "rel")?,
                    ulps: field(t, "ulps")?
                        .as_u64()
                        .ok_or("`ulps` is not an integer")?,
                },
            })
        })
        .collect::<Parsed<Vec<_>>>()?;
    let adapter = match doc.get("adapter") {
        None | Some(Value::Null) => None,
        Some(a) => Some(AdapterDescription {
            name: str_of(a, "name")?.to_string(),
            backend: backend_of(str_of(a, "backend")?)?,
            device_type: device_type_of(str_of(a, "device_type")?)?,
            driver: str_of(a, "driver")?.to_string(),
            driver_info: str_of(a, "driver_info")?.to_string(),
        }),
    };
    let observed = match doc.get("observed") {
        None | Some(Value::Null) => None,
        Some(o) => Some(Outputs {
            outputs: o
                .as_array()
                .ok_or("`observed` is not an array")?
                .iter()
                .map(|o| {
                    let dtype = dtype_of(o, "dtype")?;
                    let shape = usizes(o, "shape")?;
                    let bytes = data_of(o, "data", dtype, shape.iter().product())?;
                    Ok(Output {
                        dtype,
                        shape,
                        bytes,
                    })
                })
                .collect::<Parsed<Vec<_>>>()?,
        }),
    };
    Ok(Fixture {
        test: KernelTest {
            passes,
            outputs,
            device: None,
        },
        expected,
        adapter,
        observed,
        note: doc
            .get("note")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_junk() {
        let bytes = vec![0u8, 1, 0x7f, 0xff, 0xde];
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
    }

    #[test]
    fn bad_files_are_typed_errors() {
        for (text, says) in [
            ("not json", "not JSON"),
            ("{}", "not a wgarray-kernel-fixture file"),
            (
                r#"{"format": "wgarray-kernel-fixture", "version": 99}"#,
                "format version 99",
            ),
            (
                r#"{"format": "wgarray-kernel-fixture", "version": 1, "outputs": [], "passes": []}"#,
                "no passes",
            ),
        ] {
            match Fixture::from_json(text) {
                Err(Error::Fixture { message, .. }) => assert!(message.contains(says), "{message}"),
                other => panic!("{text}: expected Error::Fixture, got {other:?}"),
            }
        }
    }
}
