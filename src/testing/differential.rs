//! Differential runs: one kernel test on every adapter of the machine
//! ([`KernelTest::run_on_all`]) or several times on one
//! ([`KernelTest::run_repeated`]), and the report of where runs disagree
//! ([`Disagreements`]).

use std::fmt;

use super::{KernelTest, Mismatches, Outputs, Tolerance};
use crate::{AdapterDescription, Device, Element, Error, Result};

/// Every adapter wgpu finds on this machine, of every backend (Vulkan, GL,
/// DX12, Metal), each with a device made for it or the error that refused
/// one (wgpu's GL back end cannot make a device on some EGL set-ups).
/// `WGARRAY_BACKEND` and `WGARRAY_ADAPTER` are not consulted. The devices
/// are new ones, shared with nothing: dropping them releases everything.
pub fn all_devices() -> Vec<(AdapterDescription, Result<Device>)> {
    let backends = wgpu::Backends::all();
    let instance = crate::device::instance(backends);
    pollster::block_on(instance.enumerate_adapters(backends))
        .into_iter()
        .map(|a| {
            (
                AdapterDescription::from(a.get_info()),
                Device::from_adapter(&a),
            )
        })
        .collect()
}

/// An adapter in reports: its name and backend (Mesa's lavapipe and
/// llvmpipe share a name).
pub(super) fn adapter_label(a: &AdapterDescription) -> String {
    format!("{} on {}", a.name, a.backend)
}

/// One adapter's run in a [`Differential`].
#[derive(Clone, Debug)]
pub struct AdapterRun {
    /// The adapter it ran on.
    pub adapter: AdapterDescription,
    /// Its outputs, or why it could not run.
    pub result: Result<Outputs>,
}

/// The result of [`KernelTest::run_on_all`]: the same kernel and inputs on
/// every adapter, ready to be compared.
#[derive(Clone, Debug)]
pub struct Differential {
    /// One entry per adapter a device could be made for, in wgpu's order.
    pub runs: Vec<AdapterRun>,
    /// Adapters that refused to make a device, and their errors.
    pub unavailable: Vec<(AdapterDescription, Error)>,
}

impl Differential {
    /// The runs that produced outputs.
    pub fn outputs(&self) -> impl Iterator<Item = (&AdapterDescription, &Outputs)> {
        self.runs
            .iter()
            .filter_map(|r| r.result.as_ref().ok().map(|o| (&r.adapter, o)))
    }

    /// The outputs of the first run on `backend` that produced any.
    pub fn on(&self, backend: wgpu::Backend) -> Option<&Outputs> {
        self.outputs()
            .find(|(a, _)| a.backend == backend)
            .map(|(_, o)| o)
    }

    fn report(&self, tol: Tolerance) -> Disagreements {
        let mut report = Disagreements {
            context: format!("differential run on {} adapter(s)", self.runs.len()),
            tolerance: tol,
            compared: Vec::new(),
            skipped: Vec::new(),
            items: Vec::new(),
        };
        for (a, e) in &self.unavailable {
            report
                .skipped
                .push(format!("{}: no device ({e})", adapter_label(a)));
        }
        for run in &self.runs {
            let label = adapter_label(&run.adapter);
            match &run.result {
                Ok(_) => report.compared.push(label),
                // A feature the adapter lacks is not a disagreement: the
                // kernel cannot run there by design (f16 on GL).
                Err(e @ Error::MissingFeature { .. }) => {
                    report.skipped.push(format!("{label}: {e}"))
                }
                Err(e) => report.items.push(Disagreement::Failed {
                    label,
                    error: e.clone(),
                }),
            }
        }
        report
    }

    /// Compare every adapter's outputs with the first adapter's, within
    /// `tol`. Adapters that lack a feature the kernel needs
    /// ([`Error::MissingFeature`]) are listed as skipped.
    ///
    /// # Errors
    /// The [`Disagreements`] when two adapters differ beyond `tol` (naming
    /// both adapters and backends, the output, elements and both values),
    /// when the kernel fails on an adapter with any other error, or when
    /// fewer than two adapters ran it (a differential run that compared
    /// nothing proves nothing).
    pub fn check(&self, tol: Tolerance) -> std::result::Result<(), Disagreements> {
        let mut report = self.report(tol);
        let ran: Vec<(&AdapterDescription, &Outputs)> = self.outputs().collect();
        if ran.len() < 2 {
            report.items.push(Disagreement::TooFew { ran: ran.len() });
        }
        if let Some((first, base)) = ran.first() {
            for (adapter, outputs) in &ran[1..] {
                for i in 0..outputs.len() {
                    if let Err(mismatches) = outputs.check_against(base, i, tol) {
                        report.items.push(Disagreement::Values {
                            output: i,
                            got: adapter_label(adapter),
                            want: adapter_label(first),
                            mismatches,
                        });
                    }
                }
            }
        }
        report.into_result()
    }

    /// Compare output `i` of every adapter with the reference `want` within
    /// `tol` (skipping adapters that lack a feature, as [`Differential::check`]).
    ///
    /// # Errors
    /// The [`Disagreements`] naming each adapter that differs from the
    /// reference or failed, or saying that no adapter ran the kernel.
    pub fn check_output<T: Element>(
        &self,
        i: usize,
        want: &[T],
        tol: Tolerance,
    ) -> std::result::Result<(), Disagreements> {
        let mut report = self.report(tol);
        if report.compared.is_empty() {
            report.items.push(Disagreement::TooFew { ran: 0 });
        }
        for (adapter, outputs) in self.outputs() {
            if let Err(mismatches) = outputs.check(i, want, tol) {
                report.items.push(Disagreement::Values {
                    output: i,
                    got: adapter_label(adapter),
                    want: "reference".into(),
                    mismatches,
                });
            }
        }
        report.into_result()
    }

    /// [`Differential::check`], panicking with the report: for tests.
    ///
    /// # Panics
    /// With the [`Disagreements`] report when the check fails.
    #[track_caller]
    pub fn assert_agree(&self, tol: Tolerance) {
        if let Err(d) = self.check(tol) {
            panic!("{d}");
        }
    }

    /// [`Differential::check_output`], panicking with the report: for tests.
    ///
    /// # Panics
    /// With the [`Disagreements`] report when the check fails.
    #[track_caller]
    pub fn assert_close<T: Element>(&self, i: usize, want: &[T], tol: Tolerance) {
        if let Err(d) = self.check_output(i, want, tol) {
            panic!("{d}");
        }
    }
}

/// The result of [`KernelTest::run_repeated`]: every run's outputs on one
/// adapter.
#[derive(Clone, Debug)]
pub struct Repeated {
    /// The adapter the runs were on.
    pub adapter: AdapterDescription,
    /// Each run's outputs, in order (at least one).
    pub runs: Vec<Outputs>,
}

impl Repeated {
    fn report(&self, tol: Tolerance) -> Disagreements {
        Disagreements {
            context: format!(
                "{} runs on {}",
                self.runs.len(),
                adapter_label(&self.adapter)
            ),
            tolerance: tol,
            compared: Vec::new(),
            skipped: Vec::new(),
            items: Vec::new(),
        }
    }

    /// Check that every run gave the same bits as the first: a kernel
    /// without races is deterministic on one adapter (float atomics aside).
    ///
    /// # Errors
    /// The [`Disagreements`] naming each run that differs from run 1, the
    /// output, elements and both values.
    pub fn check_stable(&self) -> std::result::Result<(), Disagreements> {
        let mut report = self.report(Tolerance::EXACT);
        self.push_unstable(&mut report);
        report.into_result()
    }

    fn push_unstable(&self, report: &mut Disagreements) {
        let base = &self.runs[0];
        for (r, outputs) in self.runs.iter().enumerate().skip(1) {
            for i in 0..outputs.len() {
                if let Err(mismatches) = outputs.check_against(base, i, Tolerance::EXACT) {
                    report.items.push(Disagreement::Values {
                        output: i,
                        got: format!("run {}", r + 1),
                        want: "run 1".into(),
                        mismatches,
                    });
                }
            }
        }
    }

    /// Check that every run gave the same bits and that output `i` matches
    /// the reference `want` within `tol` in each: a race shows either way,
    /// as runs that differ or as runs that are all wrong alike (Mesa's
    /// software adapters run a workgroup's invocations in a fixed order, so
    /// a missing barrier there gives the same wrong answer every time).
    ///
    /// # Errors
    /// The [`Disagreements`]: unstable runs first, then runs that differ
    /// from the reference.
    pub fn check<T: Element>(
        &self,
        i: usize,
        want: &[T],
        tol: Tolerance,
    ) -> std::result::Result<(), Disagreements> {
        let mut report = self.report(tol);
        self.push_unstable(&mut report);
        for (r, outputs) in self.runs.iter().enumerate() {
            if let Err(mismatches) = outputs.check(i, want, tol) {
                report.items.push(Disagreement::Values {
                    output: i,
                    got: format!("run {}", r + 1),
                    want: "reference".into(),
                    mismatches,
                });
            }
        }
        report.into_result()
    }

    /// [`Repeated::check`], panicking with the report: for tests.
    ///
    /// # Panics
    /// With the [`Disagreements`] report when the check fails.
    #[track_caller]
    pub fn assert_close<T: Element>(&self, i: usize, want: &[T], tol: Tolerance) {
        if let Err(d) = self.check(i, want, tol) {
            panic!("{d}");
        }
    }
}

/// One way runs disagreed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Disagreement {
    /// Output `output` of run `got` differs from that of `want` (another
    /// adapter, run 1, or the reference) beyond the tolerance.
    Values {
        /// The output's number.
        output: usize,
        /// The run that differs: `<adapter> on <backend>`, `run 3`.
        got: String,
        /// What it is compared with: another run, or `reference`.
        want: String,
        /// The elements that differ, with `got`'s and `want`'s values.
        mismatches: Mismatches,
    },
    /// The kernel failed on this adapter with an error (other than a
    /// missing feature) while it ran on others.
    Failed {
        /// The adapter.
        label: String,
        /// Its error.
        error: Error,
    },
    /// Fewer adapters ran the kernel than a comparison needs.
    TooFew {
        /// How many ran it.
        ran: usize,
    },
}

/// Where runs disagree, for [`Differential`] and [`Repeated`]; its
/// `Display` is the readable report the `assert_*` methods panic with.
#[derive(Clone, Debug, PartialEq)]
pub struct Disagreements {
    /// What was run: `differential run on 2 adapter(s)`, `8 runs on ...`.
    pub context: String,
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// The adapters compared.
    pub compared: Vec<String>,
    /// Adapters that did not run the kernel, and why (a missing feature,
    /// no device).
    pub skipped: Vec<String>,
    /// The disagreements, in the order found.
    pub items: Vec<Disagreement>,
}

impl Disagreements {
    fn into_result(self) -> std::result::Result<(), Disagreements> {
        if self.items.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Disagreements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} disagreement(s) (tolerance {})",
            self.context,
            self.items.len(),
            self.tolerance
        )?;
        if !self.compared.is_empty() {
            write!(f, "\ncompared: {}", self.compared.join("; "))?;
        }
        for s in &self.skipped {
            write!(f, "\nskipped: {s}")?;
        }
        for item in &self.items {
            match item {
                Disagreement::Values {
                    output,
                    got,
                    want,
                    mismatches,
                } => {
                    write!(f, "\noutput {output}: {got} vs {want}: ")?;
                    // Mesa's two adapters share a name: per element, the
                    // backends alone tell them apart.
                    let (g, w) = match (got.split_once(" on "), want.split_once(" on ")) {
                        (Some((a, gb)), Some((b, wb))) if a == b => (gb, wb),
                        _ => (got.as_str(), want.as_str()),
                    };
                    let mut text = String::new();
                    mismatches.write_labeled(&mut text, g, w)?;
                    f.write_str(&text.replace('\n', "\n  "))?;
                }
                Disagreement::Failed { label, error } => {
                    write!(f, "\n{label} failed: {error}")?;
                }
                Disagreement::TooFew { ran } => write!(
                    f,
                    "\nonly {ran} adapter(s) ran the kernel: a comparison needs two (install \
                     Mesa's lavapipe and llvmpipe, or compare with a reference)"
                )?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for Disagreements {}

impl KernelTest {
    /// Run this test on every adapter of the machine ([`all_devices`]: every
    /// backend, `WGARRAY_BACKEND` and [`KernelTest::device`] aside), each on
    /// a device of its own that is dropped afterwards, and collect every
    /// adapter's outputs or error for comparison
    /// ([`Differential::check`], [`Differential::check_output`]). This is
    /// how backend differences are found: the same WGSL through naga's
    /// SPIR-V on lavapipe and GLSL on llvmpipe here, and through a GPU's
    /// Vulkan, Metal, DX12 and GL drivers where present.
    ///
    /// # Errors
    /// [`Error::NoAdapter`] when wgpu finds no adapter at all. Errors of the
    /// kernel on an adapter are kept in its [`AdapterRun`].
    pub fn run_on_all(&self) -> Result<Differential> {
        let all = all_devices();
        if all.is_empty() {
            return Err(Error::NoAdapter {
                requested: "every adapter (testing::KernelTest::run_on_all)".into(),
                available: Vec::new(),
            });
        }
        let mut devices = Vec::new();
        let mut unavailable = Vec::new();
        for (adapter, device) in all {
            match device {
                Ok(d) => devices.push(d),
                Err(e) => unavailable.push((adapter, e)),
            }
        }
        let mut report = self.run_on_devices(&devices);
        report.unavailable = unavailable;
        Ok(report)
    }

    /// [`KernelTest::run_on_all`] on the given devices.
    pub fn run_on_devices(&self, devices: &[Device]) -> Differential {
        Differential {
            runs: devices
                .iter()
                .map(|d| AdapterRun {
                    adapter: d.info().clone(),
                    result: self.run_with(d),
                })
                .collect(),
            unavailable: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use crate::testing::kernel_test::Output;

    fn outputs(values: &[i32]) -> Outputs {
        Outputs {
            outputs: vec![Output {
                dtype: DType::I32,
                shape: vec![values.len()],
                bytes: bytemuck::cast_slice(values).to_vec(),
            }],
        }
    }

    fn adapter(name: &str, backend: wgpu::Backend) -> AdapterDescription {
        AdapterDescription {
            name: name.into(),
            backend,
            device_type: wgpu::DeviceType::Cpu,
            driver: String::new(),
            driver_info: String::new(),
        }
    }

    #[test]
    fn unstable_runs_are_reported_with_both_values() {
        let r = Repeated {
            adapter: adapter("soft", wgpu::Backend::Vulkan),
            runs: vec![
                outputs(&[1, 2, 3]),
                outputs(&[1, 2, 3]),
                outputs(&[1, 5, 3]),
            ],
        };
        let d = r.check_stable().unwrap_err();
        assert_eq!(d.items.len(), 1);
        let text = d.to_string();
        assert!(
            text.starts_with("3 runs on soft on vulkan: 1 disagreement(s)"),
            "{text}"
        );
        assert!(
            text.contains("output 0: run 3 vs run 1: 1 of 3 int32"),
            "{text}"
        );
        assert!(text.contains("[1]: run 3 5, run 1 2"), "{text}");
        // Stable but wrong: every run is named.
        let r = Repeated {
            adapter: adapter("soft", wgpu::Backend::Vulkan),
            runs: vec![outputs(&[1, 2, 3]); 2],
        };
        assert!(r.check_stable().is_ok());
        let d = r.check(0, &[1, 2, 4], Tolerance::EXACT).unwrap_err();
        assert_eq!(d.items.len(), 2);
        assert!(d.to_string().contains("[2]: run 2 3, reference 4"), "{d}");
    }

    #[test]
    fn a_differential_run_needs_two_adapters_and_skips_missing_features() {
        let one = Differential {
            runs: vec![
                AdapterRun {
                    adapter: adapter("a", wgpu::Backend::Vulkan),
                    result: Ok(outputs(&[1])),
                },
                AdapterRun {
                    adapter: adapter("b", wgpu::Backend::Gl),
                    result: Err(Error::MissingFeature {
                        op: "x",
                        feature: "SHADER_F16",
                    }),
                },
            ],
            unavailable: Vec::new(),
        };
        let d = one.check(Tolerance::EXACT).unwrap_err();
        assert_eq!(d.items, vec![Disagreement::TooFew { ran: 1 }]);
        assert!(d.to_string().contains("skipped: b on gl"), "{d}");
        assert!(one.check_output(0, &[1], Tolerance::EXACT).is_ok());
        assert!(one.on(wgpu::Backend::Vulkan).is_some());
        assert!(one.on(wgpu::Backend::Gl).is_none());
    }
}
