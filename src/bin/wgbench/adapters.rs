//! Finding adapters, choosing them by backend and name, and describing them
//! (`wgbench list`).

use std::fmt::Write as _;

use crate::report::{AdapterIdentity, Limits};

/// Every adapter wgpu can reach, in wgpu's order.
pub fn all() -> Vec<wgpu::Adapter> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::all();
    let instance = wgpu::Instance::new(desc);
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

/// The adapters of `backend` (if given) whose name contains `name`
/// (case-insensitive, if given).
///
/// # Errors
/// The adapters of this machine that the `--backend` and `--adapter`
/// options select (an empty or absent value selects any, as for
/// `Device::new_default`).
pub fn chosen(
    backend: &Option<String>,
    adapter: &Option<String>,
) -> Result<Vec<wgpu::Adapter>, crate::Stop> {
    let given = |s: &Option<String>| s.clone().filter(|s| !s.trim().is_empty());
    let backend = given(backend)
        .map(|b| wgarray::parse_backend(&b))
        .transpose()
        .map_err(|e| crate::Stop::Input(e.to_string()))?;
    select(all(), backend, given(adapter).as_deref()).map_err(crate::Stop::Input)
}

/// A message listing every adapter there is when none matches.
pub fn select(
    adapters: Vec<wgpu::Adapter>,
    backend: Option<wgpu::Backend>,
    name: Option<&str>,
) -> Result<Vec<wgpu::Adapter>, String> {
    let needle = name.map(str::to_lowercase);
    let listing: Vec<String> = adapters
        .iter()
        .map(|a| format!("  {}", identity(a).label()))
        .collect();
    let chosen: Vec<wgpu::Adapter> = adapters
        .into_iter()
        .filter(|a| {
            let info = a.get_info();
            backend.is_none_or(|b| info.backend == b)
                && needle
                    .as_ref()
                    .is_none_or(|n| info.name.to_lowercase().contains(n))
        })
        .collect();
    if chosen.is_empty() {
        let mut wanted = Vec::new();
        if let Some(b) = backend {
            wanted.push(format!("backend {b}"));
        }
        if let Some(n) = name {
            wanted.push(format!("a name containing {n:?}"));
        }
        let wanted = if wanted.is_empty() {
            "any adapter".to_string()
        } else {
            wanted.join(" and ")
        };
        let there = if listing.is_empty() {
            "  (none: install a GPU driver, or Mesa's software drivers: \
             bash scripts/install-drivers.sh)"
                .to_string()
        } else {
            listing.join("\n")
        };
        return Err(format!(
            "no adapter matches {wanted}; the adapters here are:\n{there}"
        ));
    }
    Ok(chosen)
}

pub fn identity(a: &wgpu::Adapter) -> AdapterIdentity {
    let i = a.get_info();
    AdapterIdentity {
        name: i.name,
        backend: format!("{:?}", i.backend),
        device_type: format!("{:?}", i.device_type),
        vendor: i.vendor,
        device: i.device,
        driver: i.driver,
        driver_info: i.driver_info,
    }
}

pub fn limits(l: &wgpu::Limits) -> Limits {
    Limits {
        max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
        max_buffer_size: l.max_buffer_size,
        max_compute_workgroup_size: [
            l.max_compute_workgroup_size_x,
            l.max_compute_workgroup_size_y,
            l.max_compute_workgroup_size_z,
        ],
        max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
        max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
        max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
        max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
    }
}

/// The optional features wgarray uses that `f` has, by name.
pub fn feature_names(f: wgpu::Features) -> Vec<String> {
    [
        (wgpu::Features::SHADER_F16, "SHADER_F16"),
        (wgpu::Features::SUBGROUP, "SUBGROUP"),
        (wgpu::Features::TIMESTAMP_QUERY, "TIMESTAMP_QUERY"),
    ]
    .into_iter()
    .filter(|(x, _)| f.contains(*x))
    .map(|(_, n)| n.to_string())
    .collect()
}

/// Bytes as KiB, MiB or GiB.
pub fn bytes(b: u64) -> String {
    const K: u64 = 1024;
    match b {
        b if b >= K * K * K => {
            format!("{} GiB", trim(b as f64 / (K * K * K) as f64))
        }
        b if b >= K * K => format!("{} MiB", trim(b as f64 / (K * K) as f64)),
        b if b >= K => format!("{} KiB", trim(b as f64 / K as f64)),
        b => format!("{b} B"),
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `wgbench list`: every adapter, its driver, limits and features.
pub fn listing(adapters: &[wgpu::Adapter]) -> String {
    let mut out = String::new();
    if adapters.is_empty() {
        let _ = writeln!(
            out,
            "no adapters found: install a GPU driver, or Mesa's software drivers \
             (bash scripts/install-drivers.sh)"
        );
        return out;
    }
    for (i, a) in adapters.iter().enumerate() {
        let id = identity(a);
        let l = limits(&a.limits());
        let have = a.features();
        let feature = |f: wgpu::Features| if have.contains(f) { "yes" } else { "no" };
        // The backend in the heading: Mesa's llvmpipe is one name on
        // Vulkan (lavapipe) and on GL.
        let _ = writeln!(out, "[{i}] {}", id.label());
        let _ = writeln!(out, "    backend      {}", id.backend);
        let _ = writeln!(out, "    device type  {}", id.device_type);
        // wgpu's GL backend reports no driver name, only the GL version.
        let driver = match (id.driver.trim(), id.driver_info.trim()) {
            ("", "") => "not reported".to_string(),
            ("", info) => format!("not reported; {info}"),
            (name, "") => name.to_string(),
            (name, info) => format!("{name} {info}"),
        };
        let _ = writeln!(
            out,
            "    driver       {driver} (vendor {:#06x}, device {:#06x})",
            id.vendor, id.device
        );
        let _ = writeln!(
            out,
            "    limits       largest storage binding {}, largest buffer {}",
            bytes(l.max_storage_buffer_binding_size),
            bytes(l.max_buffer_size)
        );
        let _ = writeln!(
            out,
            "                 workgroup size {} x {} x {}, {} invocations, {} of workgroup storage",
            l.max_compute_workgroup_size[0],
            l.max_compute_workgroup_size[1],
            l.max_compute_workgroup_size[2],
            l.max_compute_invocations_per_workgroup,
            bytes(l.max_compute_workgroup_storage_size as u64)
        );
        let _ = writeln!(
            out,
            "                 {} storage buffers per stage, {} workgroups per dimension",
            l.max_storage_buffers_per_shader_stage, l.max_compute_workgroups_per_dimension
        );
        let _ = writeln!(
            out,
            "    features     SHADER_F16 {}, SUBGROUP {}, TIMESTAMP_QUERY {}",
            feature(wgpu::Features::SHADER_F16),
            feature(wgpu::Features::SUBGROUP),
            feature(wgpu::Features::TIMESTAMP_QUERY)
        );
    }
    let gl = adapters
        .iter()
        .any(|a| a.get_info().backend == wgpu::Backend::Gl);
    if let Some(note) = wgarray::Device::egl_runtime_dir_note().filter(|_| gl) {
        let _ = writeln!(out, "note: {note}");
    }
    out
}
