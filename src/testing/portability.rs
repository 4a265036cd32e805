//! Portability of a WGSL compute kernel, without any adapter: naga's four
//! back ends and WebGPU's default limits.
//!
//! The WGSL is parsed and validated with naga under WebGPU's capabilities
//! (plus `SHADER_FLOAT16` where the source enables f16), its override
//! constants are resolved as wgpu resolves them when it creates a pipeline,
//! and each compute entry point is translated with the back ends wgpu uses:
//! SPIR-V (Vulkan), MSL (Metal), HLSL (DX12) and GLSL ES 3.1 (GL). Each is
//! checked against WebGPU's default limits, so a kernel that only runs on a
//! generous adapter fails here, on a machine without a GPU. Signed integer
//! `%` is flagged: naga writes it as GLSL `%`, undefined for negative
//! operands, and llvmpipe returns wrong values (`-7 % 3` gives 0).
//!
//! GLSL ES has no 16-bit floats, so kernels that enable f16 are not
//! translated to GLSL: wgpu's GL back end never offers `SHADER_F16`.
//! Kernels that use 64-bit types (`f64`, `u64`, `i64`) are validated with
//! naga's `FLOAT64` and `SHADER_INT64` capabilities and translated to
//! SPIR-V only: wgpu 30 offers `SHADER_F64` on Vulkan alone (naga's MSL
//! back end has no f64, and GLSL ES none either).
//!
//! wgarray's own kernels go through the same check as [`check_portability`] (a unit test in
//! `src/kernels/portability.rs` runs it on every specialisation they can
//! dispatch).

use std::fmt;

use naga::back::{glsl, hlsl, msl, spv};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::{AddressSpace, Module, ShaderStage};

/// The stage of [`check_portability`] that found a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// naga could not parse or validate the WGSL.
    Parse,
    /// Override constants could not be resolved (a missing or bad value).
    Overrides,
    /// No compute entry point, or the one asked for is missing.
    EntryPoints,
    /// Over one of WebGPU's default limits.
    Limits,
    /// Valid WGSL that GL (naga's GLSL, llvmpipe) gets wrong: signed `%`.
    GlHazard,
    /// naga's SPIR-V back end (Vulkan).
    Spirv,
    /// naga's MSL back end (Metal).
    Msl,
    /// naga's HLSL back end (DX12).
    Hlsl,
    /// naga's GLSL ES 3.1 back end (GL).
    Glsl,
}

impl Stage {
    /// The stage in words, as reports print it.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Parse => "naga parse/validate",
            Stage::Overrides => "override constants",
            Stage::EntryPoints => "entry points",
            Stage::Limits => "WebGPU default limits",
            Stage::GlHazard => "GL portability",
            Stage::Spirv => "SPIR-V (Vulkan)",
            Stage::Msl => "MSL (Metal)",
            Stage::Hlsl => "HLSL (DX12)",
            Stage::Glsl => "GLSL ES 3.1 (GL)",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One portability problem: where it was found and what naga (or the limit
/// check) said.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Issue {
    /// The stage that found it.
    pub stage: Stage,
    /// The message, naming the entry point where there is one.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.stage, self.message)
    }
}

/// Every portability problem of a kernel; see [`check_portability`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Portability {
    /// The problems, in the order found.
    pub issues: Vec<Issue>,
}

impl fmt::Display for Portability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} portability problem(s):", self.issues.len())?;
        for issue in &self.issues {
            write!(f, "\n  {issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Portability {}

/// Check every compute entry point of the WGSL `source` for portability
/// (see the [module docs](self)): naga validation, override constants at
/// their defaults, WebGPU's default limits, signed `%`, and translation to
/// SPIR-V, MSL, HLSL and GLSL ES 3.1. Needs no adapter.
/// [`KernelTest::check_portability`](super::KernelTest::check_portability)
/// does the same for the entry points and constants of a test.
///
/// # Errors
/// The [`Portability`] report, every problem at once.
pub fn check_portability(source: &str) -> Result<(), Portability> {
    let issues = check(source, None, &naga::back::PipelineConstants::default());
    if issues.is_empty() {
        Ok(())
    } else {
        Err(Portability { issues })
    }
}

/// The WebGPU default limits, as wgpu spells them.
pub(crate) fn webgpu_limits() -> wgpu::Limits {
    wgpu::Limits::default()
}

/// Whether the WGSL has an `enable` directive naming `extension`.
pub(crate) fn enables(source: &str, extension: &str) -> bool {
    source.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix("enable").is_some_and(|rest| {
            rest.trim_end_matches([';', ' ', '\t'])
                .split(',')
                .any(|e| e.trim() == extension)
        })
    })
}

/// Whether `module` uses a 64-bit scalar type (f64, u64, i64).
pub(crate) fn uses_64_bit(module: &Module) -> bool {
    module.types.iter().any(|(_, t)| match t.inner {
        naga::TypeInner::Scalar(s)
        | naga::TypeInner::Vector { scalar: s, .. }
        | naga::TypeInner::Atomic(s) => s.width == 8,
        _ => false,
    })
}

/// Parse and validate `source` as WebGPU would: default capabilities, plus
/// 16-bit floats where the source enables them, 64-bit types where it
/// uses them, and `extra`.
fn parse_and_validate(source: &str, extra: Capabilities) -> Result<(Module, ModuleInfo), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let mut caps = Capabilities::default() | extra;
    if enables(source, "f16") {
        caps |= Capabilities::SHADER_FLOAT16;
    }
    if uses_64_bit(&module) {
        caps |= Capabilities::FLOAT64 | Capabilities::SHADER_INT64;
    }
    let info = Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| e.emit_to_string(source))?;
    Ok((module, info))
}

/// Check the module's compute entry points against `limits`: workgroup size
/// per dimension and in total, workgroup storage (each variable rounded up
/// to 16 bytes, as WebGPU counts it), storage and uniform buffers per stage.
fn check_limits(module: &Module, info: &ModuleInfo, limits: &wgpu::Limits) -> Vec<String> {
    let mut errors = Vec::new();
    for (i, ep) in module.entry_points.iter().enumerate() {
        if ep.stage != ShaderStage::Compute {
            continue;
        }
        let [x, y, z] = ep.workgroup_size;
        let max = [
            limits.max_compute_workgroup_size_x,
            limits.max_compute_workgroup_size_y,
            limits.max_compute_workgroup_size_z,
        ];
        for (axis, (got, max)) in ["x", "y", "z"].iter().zip([x, y, z].into_iter().zip(max)) {
            if got > max {
                errors.push(format!(
                    "entry point `{}`: workgroup size {axis} = {got} exceeds the WebGPU default {max}",
                    ep.name
                ));
            }
        }
        let total = x as u64 * y as u64 * z as u64;
        if total > limits.max_compute_invocations_per_workgroup as u64 {
            errors.push(format!(
                "entry point `{}`: {total} invocations per workgroup exceed the WebGPU default {}",
                ep.name, limits.max_compute_invocations_per_workgroup
            ));
        }
        let used = info.get_entry_point(i);
        let (mut workgroup_bytes, mut storage, mut uniform) = (0u64, 0u32, 0u32);
        for (handle, var) in module.global_variables.iter() {
            if used[handle].is_empty() {
                continue;
            }
            match var.space {
                AddressSpace::WorkGroup => {
                    let size = module.types[var.ty].inner.size(module.to_ctx()) as u64;
                    workgroup_bytes += size.next_multiple_of(16);
                }
                AddressSpace::Storage { .. } => storage += 1,
                AddressSpace::Uniform => uniform += 1,
                _ => {}
            }
        }
        if workgroup_bytes > limits.max_compute_workgroup_storage_size as u64 {
            errors.push(format!(
                "entry point `{}`: {workgroup_bytes} bytes of workgroup storage exceed the WebGPU default {}",
                ep.name, limits.max_compute_workgroup_storage_size
            ));
        }
        if storage > limits.max_storage_buffers_per_shader_stage {
            errors.push(format!(
                "entry point `{}`: {storage} storage buffers exceed the WebGPU default {}",
                ep.name, limits.max_storage_buffers_per_shader_stage
            ));
        }
        if uniform > limits.max_uniform_buffers_per_shader_stage {
            errors.push(format!(
                "entry point `{}`: {uniform} uniform buffers exceed the WebGPU default {}",
                ep.name, limits.max_uniform_buffers_per_shader_stage
            ));
        }
    }
    errors
}

/// Signed integer `%` in any function: WGSL defines it for negative
/// operands (truncated remainder), but naga's GLSL back end emits GLSL `%`,
/// whose result is undefined when an operand is negative, and llvmpipe
/// returns wrong values (`-7 % 3` gives 0). Kernels write
/// `a - b * (a / b)` instead.
fn check_gl_hazards(module: &Module, info: &ModuleInfo) -> Vec<String> {
    let mut errors = Vec::new();
    let functions = module.functions.iter().map(|(h, f)| (f, &info[h])).chain(
        module
            .entry_points
            .iter()
            .enumerate()
            .map(|(i, ep)| (&ep.function, info.get_entry_point(i))),
    );
    for (function, finfo) in functions {
        for (handle, expr) in function.expressions.iter() {
            if let naga::Expression::Binary {
                op: naga::BinaryOperator::Modulo,
                left,
                ..
            } = *expr
            {
                let ty = finfo[left].ty.inner_with(&module.types);
                if ty.scalar_kind() == Some(naga::ScalarKind::Sint) {
                    let name = function.name.as_deref().unwrap_or("?");
                    errors.push(format!(
                        "function `{name}`: signed integer `%` ({handle:?}) is undefined for \
                         negative operands in GLSL and wrong on llvmpipe; write `a - b * (a / b)`"
                    ));
                }
            }
        }
    }
    errors
}

/// Resource bindings (group, binding) of the module and their address
/// spaces, in declaration order.
fn bindings(module: &Module) -> Vec<(naga::ResourceBinding, AddressSpace)> {
    module
        .global_variables
        .iter()
        .filter_map(|(_, v)| v.binding.map(|b| (b, v.space)))
        .collect()
}

fn to_spirv(module: &Module, info: &ModuleInfo, ep: &str) -> Result<(), String> {
    let options = spv::Options {
        lang_version: (1, 0),
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: ShaderStage::Compute,
        entry_point: ep.to_string(),
    };
    let words =
        spv::write_vec(module, info, &options, Some(&pipeline)).map_err(|e| e.to_string())?;
    if words.first() != Some(&0x0723_0203) {
        return Err("the output does not start with the SPIR-V magic number".into());
    }
    Ok(())
}

/// MSL with real buffer slots (no fake bindings), as wgpu's Metal back end
/// assigns them: one slot per buffer, then the runtime-array sizes buffer.
fn to_msl(module: &Module, info: &ModuleInfo, ep: &str) -> Result<(), String> {
    let mut resources = msl::EntryPointResources::default();
    let mut slot = 0u8;
    for (binding, space) in bindings(module) {
        let mutable = matches!(space, AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE));
        resources.resources.insert(
            binding,
            msl::BindTarget {
                buffer: Some(slot),
                mutable,
                ..Default::default()
            },
        );
        slot += 1;
    }
    resources.sizes_buffer = Some(slot);
    let mut options = msl::Options {
        lang_version: (2, 4),
        fake_missing_bindings: false,
        ..msl::Options::default()
    };
    options
        .per_entry_point_map
        .insert(ep.to_string(), resources);
    let pipeline = msl::PipelineOptions {
        entry_point: Some((ShaderStage::Compute, ep.to_string())),
        ..Default::default()
    };
    let (text, tr) =
        msl::write_string(module, info, &options, &pipeline).map_err(|e| e.to_string())?;
    for name in tr.entry_point_names {
        name.map_err(|e| e.to_string())?;
    }
    if !text.contains("kernel void") {
        return Err("no `kernel void` entry point in the output".into());
    }
    Ok(())
}

/// HLSL with real registers: shader model 5.1 (FXC), or 6.2 (DXC, the
/// first with native 16-bit types) for f16 kernels.
fn to_hlsl(module: &Module, info: &ModuleInfo, ep: &str, f16: bool) -> Result<(), String> {
    let mut options = hlsl::Options {
        shader_model: if f16 {
            hlsl::ShaderModel::V6_2
        } else {
            hlsl::ShaderModel::V5_1
        },
        fake_missing_bindings: false,
        ..hlsl::Options::default()
    };
    for (binding, _) in bindings(module) {
        options.binding_map.insert(
            binding,
            hlsl::BindTarget {
                space: binding.group as u8,
                register: binding.binding,
                binding_array_size: None,
                dynamic_storage_buffer_offsets_index: None,
                restrict_indexing: false,
            },
        );
    }
    let pipeline = hlsl::PipelineOptions {
        entry_point: Some((ShaderStage::Compute, ep.to_string())),
    };
    let mut text = String::new();
    let reflection = hlsl::Writer::new(&mut text, &options, &pipeline)
        .write(module, info, None)
        .map_err(|e| e.to_string())?;
    for name in reflection.entry_point_names {
        name.map_err(|e| e.to_string())?;
    }
    if !text.contains("[numthreads(") {
        return Err("no `[numthreads(..)]` entry point in the output".into());
    }
    Ok(())
}

/// GLSL ES 3.1 compute, with storage and uniform buffers numbered apart as
/// wgpu's GL back end does.
fn to_glsl(module: &Module, info: &ModuleInfo, ep: &str) -> Result<(), String> {
    let mut options = glsl::Options {
        version: glsl::Version::new_gles(310),
        ..glsl::Options::default()
    };
    let (mut storage, mut uniform) = (0u8, 0u8);
    for (binding, space) in bindings(module) {
        let slot = match space {
            AddressSpace::Uniform => &mut uniform,
            _ => &mut storage,
        };
        options.binding_map.insert(binding, *slot);
        *slot += 1;
    }
    let pipeline = glsl::PipelineOptions {
        shader_stage: ShaderStage::Compute,
        entry_point: ep.to_string(),
        multiview: None,
    };
    let mut text = String::new();
    glsl::Writer::new(
        &mut text,
        module,
        info,
        &options,
        &pipeline,
        naga::proc::BoundsCheckPolicies::default(),
    )
    .map_err(|e| e.to_string())?
    .write()
    .map_err(|e| e.to_string())?;
    if !text.starts_with("#version 310 es") {
        return Err("the output is not GLSL ES 3.10".into());
    }
    Ok(())
}

/// Everything wrong with one WGSL module, one [`Issue`] per problem: the
/// compute entry point `entry_point` (every one when `None`), with the
/// override constants `constants` (defaults for the rest), under WebGPU's
/// default limits.
pub(crate) fn check(
    source: &str,
    entry_point: Option<&str>,
    constants: &naga::back::PipelineConstants,
) -> Vec<Issue> {
    check_with(source, entry_point, constants, Capabilities::empty(), &[])
}

/// [`check`] for a kernel that needs `extra` capabilities beyond WebGPU's
/// (subgroups, cooperative matrices), skipping the back ends in `skip`
/// (those that cannot express it).
pub(crate) fn check_with(
    source: &str,
    entry_point: Option<&str>,
    constants: &naga::back::PipelineConstants,
    extra: Capabilities,
    skip: &[Stage],
) -> Vec<Issue> {
    let issue = |stage, message: String| Issue { stage, message };
    let (module, info) = match parse_and_validate(source, extra) {
        Ok(m) => m,
        Err(e) => return vec![issue(Stage::Parse, e)],
    };
    let eps: Vec<String> = module
        .entry_points
        .iter()
        .filter(|e| e.stage == ShaderStage::Compute)
        .map(|e| e.name.clone())
        .filter(|name| entry_point.is_none_or(|ep| ep == name))
        .collect();
    if eps.is_empty() {
        let message = match entry_point {
            Some(ep) => format!("no compute entry point `{ep}`"),
            None => "no compute entry point".to_string(),
        };
        return vec![issue(Stage::EntryPoints, message)];
    }
    let mut issues = Vec::new();
    for ep in &eps {
        // Override constants are resolved before any back end, as wgpu does
        // when it creates a pipeline (which keeps only its entry point).
        let (module, info) = match naga::back::pipeline_constants::process_overrides(
            &module,
            &info,
            Some((ShaderStage::Compute, ep)),
            constants,
        ) {
            Ok((m, i)) => (m.into_owned(), i.into_owned()),
            Err(e) => {
                issues.push(issue(Stage::Overrides, format!("entry point `{ep}`: {e}")));
                continue;
            }
        };
        issues.extend(
            check_limits(&module, &info, &webgpu_limits())
                .into_iter()
                .map(|e| issue(Stage::Limits, e)),
        );
        issues.extend(
            check_gl_hazards(&module, &info)
                .into_iter()
                .map(|e| issue(Stage::GlHazard, e)),
        );
        let f16 = enables(source, "f16");
        let at = |e: String| format!("entry point `{ep}`: {e}");
        let run = |s: Stage| !skip.contains(&s);
        if run(Stage::Spirv)
            && let Err(e) = to_spirv(&module, &info, ep)
        {
            issues.push(issue(Stage::Spirv, at(e)));
        }
        // 64-bit kernels: Vulkan only (see the module docs).
        if uses_64_bit(&module) {
            continue;
        }
        if run(Stage::Msl)
            && let Err(e) = to_msl(&module, &info, ep)
        {
            issues.push(issue(Stage::Msl, at(e)));
        }
        if run(Stage::Hlsl)
            && let Err(e) = to_hlsl(&module, &info, ep, f16)
        {
            issues.push(issue(Stage::Hlsl, at(e)));
        }
        // GLSL ES has no f16 (see the module docs).
        if !f16
            && run(Stage::Glsl)
            && let Err(e) = to_glsl(&module, &info, ep)
        {
            issues.push(issue(Stage::Glsl, at(e)));
        }
    }
    // A hazard in a helper function shows once per entry point: keep one.
    let mut seen = std::collections::HashSet::new();
    issues.retain(|i| seen.insert(i.clone()));
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_directives() {
        assert!(enables("enable f16;\nfn f() {}", "f16"));
        assert!(enables("  enable subgroups, f16 ;", "f16"));
        assert!(!enables("// enable f16;", "f16"));
        assert!(!enables("enable subgroups;", "f16"));
    }

    #[test]
    fn webgpu_default_limits_are_the_spec_values() {
        let l = webgpu_limits();
        assert_eq!(
            [
                l.max_compute_workgroup_size_x,
                l.max_compute_workgroup_size_y,
                l.max_compute_workgroup_size_z,
                l.max_compute_invocations_per_workgroup,
                l.max_compute_workgroup_storage_size,
                l.max_storage_buffers_per_shader_stage,
                l.max_uniform_buffers_per_shader_stage,
            ],
            [256, 256, 64, 256, 16384, 8, 12]
        );
    }

    fn issues(source: &str) -> Vec<Issue> {
        check(source, None, &naga::back::PipelineConstants::default())
    }

    /// The checker catches what it claims to: a kernel within the limits of
    /// lavapipe but over WebGPU's defaults.
    #[test]
    fn the_limit_check_catches_a_generous_adapter_kernel() {
        let src = r#"
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
var<workgroup> tile: array<f32, 8192>;
@compute @workgroup_size(512, 1, 1)
fn main(@builtin(local_invocation_index) i: u32) {
    tile[i] = f32(i);
    workgroupBarrier();
    out[i] = tile[511u - i];
}
"#;
        let text = format!("{:?}", issues(src));
        assert!(text.contains("workgroup size x = 512"), "{text}");
        assert!(text.contains("512 invocations"), "{text}");
        assert!(text.contains("32768 bytes of workgroup storage"), "{text}");

        let mut nine = String::new();
        for i in 0..9 {
            nine +=
                &format!("@group(0) @binding({i}) var<storage, read_write> b{i}: array<u32>;\n");
        }
        nine += "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {\n";
        for i in 0..9 {
            nine += &format!("    b{i}[g.x] = {i}u;\n");
        }
        nine += "}\n";
        let text = format!("{:?}", issues(&nine));
        assert!(text.contains("9 storage buffers"), "{text}");
    }

    /// A broken kernel fails with naga's message, not a panic.
    #[test]
    fn a_bad_kernel_reports_nagas_message() {
        let errors = issues("@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].stage, Stage::Parse);
        assert!(errors[0].message.contains("f32"), "{}", errors[0].message);
    }

    /// Signed `%` is flagged (it is wrong on GL); unsigned `%` and the
    /// portable spelling of a signed remainder are not.
    #[test]
    fn signed_remainder_is_flagged_as_a_gl_hazard() {
        let kernel = |expr: &str, ty: &str| {
            format!(
                "@group(0) @binding(0) var<storage, read_write> o: array<{ty}>;\n\
                 fn rem(a: {ty}, b: {ty}) -> {ty} {{ return {expr}; }}\n\
                 @compute @workgroup_size(1) fn main() {{ o[0] = rem(o[1], o[2]); }}"
            )
        };
        let errors = issues(&kernel("a % b", "i32"));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].stage, Stage::GlHazard);
        assert!(
            errors[0].message.contains("function `rem`"),
            "{}",
            errors[0].message
        );
        for (expr, ty) in [
            ("a % b", "u32"),
            ("a - b * (a / b)", "i32"),
            ("a % b", "f32"),
        ] {
            let errors = issues(&kernel(expr, ty));
            assert!(errors.is_empty(), "{expr} on {ty}: {errors:?}");
        }
    }

    /// Overrides: a missing value and an unknown entry point are reported,
    /// and one entry point of several can be checked alone.
    #[test]
    fn overrides_and_entry_points() {
        let src = "override n: u32;\n\
                   @group(0) @binding(0) var<storage, read_write> o: array<u32>;\n\
                   @compute @workgroup_size(1) fn a() { o[0] = n; }\n\
                   @compute @workgroup_size(1) fn b() { o[1] = 2u; }";
        let errors = issues(src);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].stage, Stage::Overrides);
        assert!(errors[0].message.contains("entry point `a`"), "{errors:?}");
        assert!(check(src, Some("b"), &Default::default()).is_empty());
        let mut constants = naga::back::PipelineConstants::default();
        constants.insert("n".into(), 3.0);
        assert!(check(src, None, &constants).is_empty());
        let errors = check(src, Some("c"), &constants);
        assert_eq!(errors[0].stage, Stage::EntryPoints, "{errors:?}");
        let report = check_portability(src).unwrap_err().to_string();
        assert!(report.starts_with("1 portability problem(s):"), "{report}");
    }
}
