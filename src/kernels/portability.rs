//! Portability of every kernel wgarray can dispatch (test only).
//!
//! For every specialisation in [`super::all_specs`] (each kernel family lists
//! its own, built from the same tables as its dispatch code), the WGSL is
//! parsed and validated with naga under WebGPU's capabilities (plus
//! `SHADER_FLOAT16` where the kernel enables f16), then translated with the
//! back ends wgpu uses: SPIR-V (Vulkan), MSL (Metal), HLSL (DX12) and GLSL ES
//! 3.1 (GL). Each is checked against WebGPU's default limits, so a kernel that
//! only runs on a generous adapter fails here, on a machine without a GPU.
//!
//! It also rejects signed integer `%`, which naga translates to GLSL `%`,
//! undefined for negative operands (wrong results on llvmpipe).
//!
//! GLSL ES has no 16-bit floats, so specialisations that need `SHADER_F16`
//! are not translated to GLSL: on GL wgpu never offers that feature, and the
//! ops return `Error::MissingFeature` before asking for such a kernel.

use std::collections::HashSet;

use naga::back::{glsl, hlsl, msl, spv};
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::{AddressSpace, Module, ShaderStage};

use super::{Kernel, Spec, all_specs};

/// What a kernel failed, in words: `kernel{subs}: stage: message`.
fn fail(spec: &Spec, stage: &str, message: impl std::fmt::Display) -> String {
    format!("{}{:?}: {stage}: {message}", spec.kernel, spec.subs)
}

/// The WebGPU default limits, as wgpu spells them.
fn webgpu_limits() -> wgpu::Limits {
    wgpu::Limits::default()
}

/// Whether the WGSL enables f16 (the kernels then need `SHADER_F16`).
fn needs_f16(source: &str) -> bool {
    source
        .lines()
        .any(|l| l.trim_start().starts_with("enable") && l.contains("f16"))
}

/// Parse and validate `source` as WebGPU would: default capabilities, plus
/// 16-bit floats where the source enables them.
fn parse_and_validate(source: &str) -> Result<(Module, ModuleInfo), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let mut caps = Capabilities::default();
    if needs_f16(source) {
        caps |= Capabilities::SHADER_FLOAT16;
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
/// returns wrong values (`-7 % 3` gives 0; see tests/testing.rs). Kernels
/// write `a - b * (a / b)` instead.
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

/// Resource bindings (group, binding) of the module, split into buffers
/// that are storage and uniform, in declaration order.
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

/// Everything wrong with one WGSL compute module, one line per problem.
fn check_source(source: &str, limits: &wgpu::Limits) -> Vec<(&'static str, String)> {
    let (module, info) = match parse_and_validate(source) {
        Ok(m) => m,
        Err(e) => return vec![("naga parse/validate", e)],
    };
    // Override constants are resolved (to their defaults) before any back
    // end, as wgpu does when it creates a pipeline.
    let (module, info) = match naga::back::pipeline_constants::process_overrides(
        &module,
        &info,
        None,
        &naga::back::PipelineConstants::default(),
    ) {
        Ok((m, i)) => (m.into_owned(), i.into_owned()),
        Err(e) => return vec![("override constants", e.to_string())],
    };
    let mut errors: Vec<(&'static str, String)> = check_limits(&module, &info, limits)
        .into_iter()
        .map(|e| ("WebGPU default limits", e))
        .collect();
    errors.extend(
        check_gl_hazards(&module, &info)
            .into_iter()
            .map(|e| ("GL portability", e)),
    );
    let f16 = needs_f16(source);
    let eps: Vec<String> = module
        .entry_points
        .iter()
        .filter(|e| e.stage == ShaderStage::Compute)
        .map(|e| e.name.clone())
        .collect();
    if eps.is_empty() {
        errors.push(("entry points", "no compute entry point".into()));
    }
    for ep in &eps {
        if let Err(e) = to_spirv(&module, &info, ep) {
            errors.push(("SPIR-V (Vulkan)", e));
        }
        if let Err(e) = to_msl(&module, &info, ep) {
            errors.push(("MSL (Metal)", e));
        }
        if let Err(e) = to_hlsl(&module, &info, ep, f16) {
            errors.push(("HLSL (DX12)", e));
        }
        // GLSL ES has no f16 (see the module docs).
        if !f16 && let Err(e) = to_glsl(&module, &info, ep) {
            errors.push(("GLSL ES 3.1 (GL)", e));
        }
    }
    errors
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

/// The heart of the issue: every specialisation, every back end, WebGPU's
/// limits. All failures are listed at once, each with the kernel's name,
/// its substitutions, the stage and naga's message.
#[test]
fn every_kernel_specialisation_translates_for_every_backend() {
    let specs = all_specs();
    let limits = webgpu_limits();
    let mut seen = HashSet::new();
    let mut failures = Vec::new();
    for (spec, kernel) in &specs {
        assert!(seen.insert(spec.clone()), "duplicate spec {spec:?}");
        let source = kernel.source_for(spec);
        if source.contains("{{") {
            failures.push(fail(spec, "substitution", "unsubstituted placeholder"));
            continue;
        }
        for (stage, message) in check_source(&source, &limits) {
            failures.push(fail(spec, stage, message));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} kernel specialisations failed:\n\n{}",
        failures.len(),
        specs.len(),
        failures.join("\n\n")
    );
    // The enumeration is not trivially small: binary alone is
    // ops x dtypes x contiguity x donation.
    assert!(specs.len() > 100, "only {} specs", specs.len());
}

/// Every file in wgsl/ is the source or prelude of a kernel that
/// [`all_specs`] enumerates, so no shader escapes the test above.
#[test]
fn every_wgsl_file_belongs_to_an_enumerated_kernel() {
    let kernels: Vec<&Kernel> = all_specs().into_iter().map(|(_, k)| k).collect();
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

/// The checker itself catches what it claims to: a kernel within the
/// adapter's limits on lavapipe but over WebGPU's defaults.
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
    let errors = check_source(src, &webgpu_limits());
    let text = format!("{errors:?}");
    assert!(text.contains("workgroup size x = 512"), "{text}");
    assert!(text.contains("512 invocations"), "{text}");
    assert!(text.contains("32768 bytes of workgroup storage"), "{text}");

    let mut nine = String::new();
    for i in 0..9 {
        nine += &format!("@group(0) @binding({i}) var<storage, read_write> b{i}: array<u32>;\n");
    }
    nine +=
        "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) g: vec3<u32>) {\n";
    for i in 0..9 {
        nine += &format!("    b{i}[g.x] = {i}u;\n");
    }
    nine += "}\n";
    let text = format!("{:?}", check_source(&nine, &webgpu_limits()));
    assert!(text.contains("9 storage buffers"), "{text}");
}

/// A broken kernel fails with naga's message, not a panic.
#[test]
fn a_bad_kernel_reports_nagas_message() {
    let errors = check_source(
        "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }",
        &webgpu_limits(),
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "naga parse/validate");
    assert!(errors[0].1.contains("f32"), "{}", errors[0].1);
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
    let errors = check_source(&kernel("a % b", "i32"), &webgpu_limits());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "GL portability");
    assert!(errors[0].1.contains("function `rem`"), "{}", errors[0].1);
    for (expr, ty) in [
        ("a % b", "u32"),
        ("a - b * (a / b)", "i32"),
        ("a % b", "f32"),
    ] {
        let errors = check_source(&kernel(expr, ty), &webgpu_limits());
        assert!(errors.is_empty(), "{expr} on {ty}: {errors:?}");
    }
}
