//! Differential runs: one kernel test on every adapter of the machine
//! ([`KernelTest::run_on_all`]) or several times on one
//! ([`KernelTest::run_repeated`]), and the report of where runs disagree
//! ([`Disagreements`]).

// `Disagreements`, the error of the checks here, is a test's failure report
// (128 bytes: its headline, verdict, adapters and items), made once when a
// check fails; boxing it would buy nothing but a dereference for every
// caller.
#![allow(clippy::result_large_err)]

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
            verdict: None,
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
        if report
            .items
            .iter()
            .any(|d| matches!(d, Disagreement::Values { .. }))
        {
            report.verdict = Some(Verdict::AdaptersDisagree);
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
        let ran: Vec<(&AdapterDescription, &Outputs)> = self.outputs().collect();
        let mut wrong = false;
        for (adapter, outputs) in &ran {
            if let Err(mismatches) = outputs.check(i, want, tol) {
                wrong = true;
                report.items.push(Disagreement::Values {
                    output: i,
                    got: adapter_label(adapter),
                    want: "reference".into(),
                    mismatches,
                });
            }
        }
        // Whether the adapters agree with each other on output i decides
        // what the differences from the reference mean.
        let agree = ran.len() > 1
            && ran[1..].iter().all(|(_, o)| {
                i < o.len() && i < ran[0].1.len() && o.check_against(ran[0].1, i, tol).is_ok()
            });
        if wrong && ran.len() > 1 {
            report.verdict = Some(if agree {
                Verdict::AdaptersAgreeAllDiffer
            } else {
                Verdict::AdaptersDisagree
            });
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
            verdict: None,
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
    /// Runs whose output `i` is the same bit for bit are compared with the
    /// reference once, as one group (`every run`, `runs 1+3 (alike)`), and when
    /// every run agrees and every run is wrong the headline says so.
    ///
    /// # Errors
    /// The [`Disagreements`]: unstable runs first, then each group of
    /// identical runs that differs from the reference.
    // Alike in shape to `check_output`'s signature, but left apart: the
    // runs of one adapter against each other, not adapters.
    pub fn check<T: Element>(
        &self,
        i: usize,
        want: &[T],
        tol: Tolerance,
    ) -> std::result::Result<(), Disagreements> {
        let mut report = self.report(tol);
        self.push_unstable(&mut report);
        let stable = report.items.is_empty();
        let groups = self.identical_groups(i);
        let mut wrong = 0;
        for group in &groups {
            if let Err(mismatches) = self.runs[group[0]].check(i, want, tol) {
                wrong += group.len();
                report.items.push(Disagreement::Values {
                    output: i,
                    got: runs_label(group, self.runs.len()),
                    want: "reference".into(),
                    mismatches,
                });
            }
        }
        if stable && wrong == self.runs.len() && self.runs.len() > 1 {
            report.verdict = Some(Verdict::RunsAlikeAllDiffer);
        }
        report.into_result()
    }

    /// The runs (0-based) grouped by output `i`'s bits, in order of their
    /// first run; a run without output `i` is a group of its own.
    fn identical_groups(&self, i: usize) -> Vec<Vec<usize>> {
        let bytes = |r: usize| {
            let o = &self.runs[r];
            (i < o.len()).then(|| o.bytes(i))
        };
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for r in 0..self.runs.len() {
            let same = bytes(r).and_then(|b| groups.iter_mut().find(|g| bytes(g[0]) == Some(b)));
            match same {
                Some(g) => g.push(r),
                None => groups.push(vec![r]),
            }
        }
        groups
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

/// Runs (0-based indices) of bit-identical outputs as reports name them:
/// `run 3`, `every run` (all of them), `runs 2+5 (alike)`.
fn runs_label(group: &[usize], total: usize) -> String {
    match group {
        [r] => format!("run {}", r + 1),
        _ if group.len() == total => "every run".to_string(),
        _ => {
            let names: Vec<String> = group.iter().map(|r| (r + 1).to_string()).collect();
            format!("runs {} (alike)", names.join("+"))
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
    /// What the disagreements mean together, printed under the headline
    /// (`None` when they say nothing more than each does).
    pub verdict: Option<Verdict>,
}

/// What a set of [`Disagreements`] means together: the second line of its
/// report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Adapters gave different results: a backend difference (the report
    /// names those that match the reference, if one was given).
    AdaptersDisagree,
    /// Every adapter gave the same result (within the tolerance) and every
    /// one differs from the reference: not a backend difference, the
    /// kernel (or the reference) is wrong.
    AdaptersAgreeAllDiffer,
    /// Every repeated run gave the same bits and every one differs from the
    /// reference: the error does not depend on timing (a wrong kernel, or a
    /// missing barrier on an adapter that runs a workgroup's invocations in
    /// a fixed order, as Mesa's do).
    RunsAlikeAllDiffer,
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

impl Disagreements {
    fn write_verdict(&self, f: &mut fmt::Formatter<'_>, v: Verdict) -> fmt::Result {
        // The runs compared with a reference that differ from it.
        let wrong: Vec<&str> = self
            .items
            .iter()
            .filter_map(|d| match d {
                Disagreement::Values { got, want, .. } if want == "reference" => Some(got.as_str()),
                _ => None,
            })
            .collect();
        match v {
            Verdict::AdaptersDisagree if wrong.is_empty() => write!(
                f,
                "\nthe adapters disagree with each other: a backend difference \
                 (check_output says which match a reference)"
            ),
            Verdict::AdaptersDisagree => {
                let right: Vec<&str> = self
                    .compared
                    .iter()
                    .map(String::as_str)
                    .filter(|c| !wrong.contains(c))
                    .collect();
                if right.is_empty() {
                    write!(
                        f,
                        "\nthe adapters disagree with each other, and none matches the reference"
                    )
                } else {
                    write!(
                        f,
                        "\nthe adapters disagree with each other: {} match the reference, {} do \
                         not (a backend difference)",
                        right.join(" and "),
                        wrong.join(" and ")
                    )
                }
            }
            Verdict::AdaptersAgreeAllDiffer => write!(
                f,
                "\nthe adapters agree with each other and all differ from the reference, so it \
                 is not a backend difference: the kernel (or the reference) is wrong"
            ),
            Verdict::RunsAlikeAllDiffer => write!(
                f,
                "\nevery run agrees bit for bit and every run differs from the reference, so \
                 the error does not depend on timing: a wrong kernel or reference, or a race \
                 (a missing barrier) on an adapter that runs a workgroup's invocations in a \
                 fixed order, as Mesa's lavapipe and llvmpipe do (on a GPU it shows as runs \
                 that differ)"
            ),
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
        if let Some(v) = self.verdict {
            self.write_verdict(f, v)?;
        }
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
        // Stable but wrong: the runs are reported once, together.
        let r = Repeated {
            adapter: adapter("soft", wgpu::Backend::Vulkan),
            runs: vec![outputs(&[1, 2, 3]); 2],
        };
        assert!(r.check_stable().is_ok());
        let d = r.check(0, &[1, 2, 4], Tolerance::EXACT).unwrap_err();
        assert_eq!(d.items.len(), 1);
        assert!(
            d.to_string().contains("[2]: every run 3, reference 4"),
            "{d}"
        );
    }

    #[test]
    fn identical_wrong_runs_are_reported_once_as_one_group() {
        let r = Repeated {
            adapter: adapter("soft", wgpu::Backend::Gl),
            runs: vec![outputs(&[1, 2, 9]); 5],
        };
        let d = r.check(0, &[1, 2, 3], Tolerance::EXACT).unwrap_err();
        assert_eq!(d.items.len(), 1, "{d}");
        let text = d.to_string();
        assert!(
            text.starts_with("5 runs on soft on gl: 1 disagreement(s)")
                && text.contains(
                    "\nevery run agrees bit for bit and every run differs from the reference"
                ),
            "{text}"
        );
        assert!(text.contains("missing barrier"), "{text}");
        assert!(
            text.contains("output 0: every run vs reference")
                && text.contains("[2]: every run 9, reference 3"),
            "{text}"
        );
        assert_eq!(text.matches("[2]:").count(), 1, "{text}");
        // Unstable runs: the instability, then each group once.
        let r = Repeated {
            adapter: adapter("soft", wgpu::Backend::Gl),
            runs: vec![
                outputs(&[1, 2, 9]),
                outputs(&[1, 2, 3]),
                outputs(&[1, 2, 9]),
            ],
        };
        let d = r.check(0, &[1, 2, 3], Tolerance::EXACT).unwrap_err();
        let text = d.to_string();
        assert!(!text.contains("every run agrees"), "{text}");
        assert!(text.contains("output 0: run 2 vs run 1"), "{text}");
        assert!(
            text.contains("output 0: runs 1+3 (alike) vs reference"),
            "{text}"
        );
        assert_eq!(d.items.len(), 2, "{text}");
    }

    #[test]
    fn the_differential_headline_says_whether_adapters_agree() {
        let diff = |a: &[i32], b: &[i32]| Differential {
            runs: vec![
                AdapterRun {
                    adapter: adapter("soft", wgpu::Backend::Vulkan),
                    result: Ok(outputs(a)),
                },
                AdapterRun {
                    adapter: adapter("soft", wgpu::Backend::Gl),
                    result: Ok(outputs(b)),
                },
            ],
            unavailable: Vec::new(),
        };
        // The two adapters' outputs, and what a check against [1, 2] says.
        let cases: [(&[i32], &[i32], &str); 3] = [
            (
                &[1, 5],
                &[1, 5],
                "the adapters agree with each other and all differ from the reference",
            ),
            (
                &[1, 2],
                &[1, 5],
                "the adapters disagree with each other: soft on vulkan match the reference, soft on gl do not",
            ),
            (&[1, 3], &[1, 5], "none matches the reference"),
        ];
        for (a, b, says) in cases {
            let text = diff(a, b)
                .check_output(0, &[1, 2], Tolerance::EXACT)
                .unwrap_err()
                .to_string();
            assert!(text.contains(says), "{text}");
        }
        // Checked against each other only: alike passes, unlike fails.
        assert!(diff(&[1, 5], &[1, 5]).check(Tolerance::EXACT).is_ok());
        let text = diff(&[1, 2], &[1, 5])
            .check(Tolerance::EXACT)
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("the adapters disagree with each other"),
            "{text}"
        );
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
