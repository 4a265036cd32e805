//! Portability of every kernel wgarray can dispatch (test only).
//!
//! For every specialisation in [`super::all_specs`] (each kernel family lists
//! its own, built from the same tables as its dispatch code), the WGSL goes
//! through the library's portability check, the one users run on their own
//! kernels (`wgarray::testing::check_portability`, in
//! `src/testing/portability.rs`): naga validation under WebGPU's
//! capabilities, translation with the back ends wgpu uses (SPIR-V, MSL,
//! HLSL, GLSL ES 3.1; not GLSL for f16 kernels), WebGPU's default limits,
//! and no signed integer `%` (wrong on llvmpipe).

use std::collections::HashSet;

use super::{Kernel, Spec, all_specs};
use crate::testing::portability::check;

/// What a kernel failed, in words: `kernel{subs}: stage: message`.
fn fail(spec: &Spec, stage: &str, message: impl std::fmt::Display) -> String {
    format!("{}{:?}: {stage}: {message}", spec.kernel, spec.subs)
}

/// Fails listing every failure of `failures` (of `total` specialisations).
fn assert_none_failed(failures: &[String], total: usize) {
    assert!(
        failures.is_empty(),
        "{} of {total} kernel specialisations failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The heart of the issue: every specialisation, every back end, WebGPU's
/// limits. All failures are listed at once, each with the kernel's name,
/// its substitutions, the stage and naga's message.
#[test]
fn every_kernel_specialisation_translates_for_every_backend() {
    let specs = all_specs();
    let mut seen = HashSet::new();
    let mut failures = Vec::new();
    for (spec, kernel) in &specs {
        assert!(seen.insert(spec.clone()), "duplicate spec {spec:?}");
        let source = kernel.source_for(spec);
        if source.contains("{{") {
            failures.push(fail(spec, "substitution", "unsubstituted placeholder"));
            continue;
        }
        for issue in check(&source, None, &Default::default()) {
            // The GEMM's workgroup-memory tiles may declare up to 64 KiB:
            // a device runs only those within its own
            // `max_compute_workgroup_storage_size` (`gemm::tuning::kernel::usable`).
            // The uniform family binds up to 14 windows (the row kernel
            // 13 of B and A's) and the parameters: a device runs it with
            // as many windows as its `max_uniform_buffers_per_shader_stage`
            // allows (`gemm::uniform::windows`).
            let limits = issue.stage == crate::testing::portability::Stage::Limits;
            let gated = limits
                && (matches!(spec.kernel, "gemm_shared" | "gemm_coop" | "gemm_epilogue")
                    && issue.message.contains("bytes of workgroup storage")
                    || matches!(spec.kernel, "gemm_uniform" | "gemm_uniform_rows")
                        && issue.message.contains("uniform buffers"));
            if !gated {
                failures.push(fail(spec, issue.stage.name(), issue.message));
            }
        }
    }
    assert_none_failed(&failures, specs.len());
    // The enumeration is not trivially small: binary alone is
    // ops x dtypes x contiguity x donation.
    assert!(specs.len() > 100, "only {} specs", specs.len());
}

/// Every file in wgsl/ is the source or prelude of a kernel that
/// [`all_specs`] (or the GEMM's `extended_specs`) enumerates, so no shader
/// escapes the tests here.
#[test]
fn every_wgsl_file_belongs_to_an_enumerated_kernel() {
    let mut kernels: Vec<&Kernel> = all_specs().into_iter().map(|(_, k)| k).collect();
    kernels.extend(
        super::gemm::spec::extended_specs()
            .into_iter()
            .map(|(_, k, _)| k),
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("wgsl/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).expect("readable wgsl file");
        assert!(
            kernels
                .iter()
                .any(|k| k.source == text || k.prelude.contains(&text.as_str())),
            "{} is not the source or prelude of any kernel in kernels::all_specs(): \
             add its specialisations to the family's specs()",
            path.display()
        );
    }
    assert!(files > 0, "no .wgsl files in {}", dir.display());
}

/// The GEMM kernels that need more than WebGPU's capabilities (subgroup
/// shuffles; cooperative matrices; 64-bit integers for the pair loads),
/// with those capabilities, on the back ends that can express them: every
/// one for subgroups and 64-bit integers but GLSL ES (wgpu's GL back end
/// offers neither), SPIR-V and MSL for cooperative matrices (naga has no
/// HLSL or GLSL for them).
#[test]
fn subgroup_and_cooperative_matrix_gemms_translate() {
    use crate::testing::portability::{Stage, check_with};
    let specs = super::gemm::spec::extended_specs();
    let mut failures = Vec::new();
    for (spec, kernel, caps) in &specs {
        let source = kernel.source_for(spec);
        assert!(
            !source.contains("{{"),
            "unsubstituted placeholder in {spec:?}"
        );
        let skip: &[Stage] = if caps.contains(naga::valid::Capabilities::COOPERATIVE_MATRIX) {
            &[Stage::Hlsl, Stage::Glsl]
        } else {
            &[Stage::Glsl]
        };
        for issue in check_with(&source, None, &Default::default(), *caps, skip) {
            failures.push(fail(spec, issue.stage.name(), issue.message));
        }
    }
    assert_none_failed(&failures, specs.len());
    assert!(specs.len() > 20, "only {} specs", specs.len());
}
