//! What a WGSL module declares, read from naga's IR: each binding's address
//! space, type and size, and each override constant's type; and the checks
//! of a kernel test's host bindings and constants against them.

use naga::common::wgsl::TypeContext;
use naga::{AddressSpace, Module, Scalar, ScalarKind, StorageAccess, TypeInner};

use crate::{DType, Error, Result};

/// One resource binding as the module declares it.
#[derive(Clone, Debug)]
pub(super) struct Declared {
    pub group: u32,
    pub binding: u32,
    /// The variable's name in the WGSL.
    pub name: String,
    pub space: AddressSpace,
    /// The declaration as WGSL spells it: `var<storage, read> x: array<f32>`.
    pub wgsl: String,
    /// The scalar types at the leaves of the type (an atomic counts as its
    /// scalar); empty for textures and samplers.
    pub leaves: Vec<Scalar>,
    /// The smallest buffer that can back it, in bytes (a runtime-sized
    /// array counted with one element, as WebGPU does).
    pub min_bytes: u64,
    /// Whether the entry point uses it.
    pub used: bool,
}

/// Every resource binding of `module`, with `used` set for those the entry
/// point `ep` (an index into `module.entry_points`) reaches.
pub(super) fn declared(
    module: &Module,
    info: &naga::valid::ModuleInfo,
    ep: usize,
) -> Vec<Declared> {
    let usage = info.get_entry_point(ep);
    let ctx = module.to_ctx();
    module
        .global_variables
        .iter()
        .filter_map(|(handle, var)| {
            let binding = var.binding?;
            let space = match var.space {
                AddressSpace::Storage { access } if access.contains(StorageAccess::STORE) => {
                    "<storage, read_write>"
                }
                AddressSpace::Storage { .. } => "<storage, read>",
                AddressSpace::Uniform => "<uniform>",
                _ => "",
            };
            let name = var.name.clone().unwrap_or_else(|| "?".into());
            let mut leaves = Vec::new();
            collect_leaves(module, var.ty, &mut leaves);
            Some(Declared {
                group: binding.group,
                binding: binding.binding,
                wgsl: format!("var{space} {name}: {}", ctx.type_to_string(var.ty)),
                name,
                space: var.space,
                leaves,
                min_bytes: module.types[var.ty]
                    .inner
                    .try_size(ctx)
                    .map_or(0, u64::from),
                used: !usage[handle].is_empty(),
            })
        })
        .collect()
}

fn collect_leaves(module: &Module, ty: naga::Handle<naga::Type>, out: &mut Vec<Scalar>) {
    let mut push = |s: Scalar| {
        if !out.contains(&s) {
            out.push(s)
        }
    };
    match module.types[ty].inner {
        TypeInner::Scalar(s) | TypeInner::Atomic(s) => push(s),
        TypeInner::Vector { scalar, .. } | TypeInner::Matrix { scalar, .. } => push(scalar),
        TypeInner::Array { base, .. } => collect_leaves(module, base, out),
        TypeInner::Struct { ref members, .. } => {
            for m in members {
                collect_leaves(module, m.ty, out);
            }
        }
        _ => {}
    }
}

/// The Rust host type of a dtype's elements, as reports print it.
pub(super) fn host_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I32 => "i32",
        DType::U32 => "u32",
        DType::Bool => "bool",
        DType::I8 => "i8",
        DType::U8 => "u8",
        DType::I16 => "i16",
        DType::U16 => "u16",
        DType::F64 => "f64",
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => "u8",
    }
}

/// Whether host elements of `dtype` can back a binding whose leaf scalars
/// are `leaves`: the same type, or the documented packings (f16 and bf16
/// as bits in `u32` words, bool as one `u32` or `i32` each, the 8- and
/// 16-bit integers packed in `u32` or `i32` words, f64 as `f64` or as word
/// pairs in `u32`).
pub(super) fn accepts(dtype: DType, leaves: &[Scalar]) -> bool {
    let all = |s: Scalar| !leaves.is_empty() && leaves.iter().all(|l| *l == s);
    match dtype {
        DType::F32 => all(Scalar::F32),
        DType::F16 => all(Scalar::F16) || all(Scalar::U32),
        DType::BF16 => all(Scalar::U32),
        DType::I32 => all(Scalar::I32),
        DType::U32 => all(Scalar::U32),
        DType::Bool => all(Scalar::U32) || all(Scalar::I32),
        DType::I8 | DType::U8 | DType::I16 | DType::U16 => all(Scalar::U32) || all(Scalar::I32),
        DType::F64 => all(Scalar::F64) || all(Scalar::U32),
        // Block formats have no host elements.
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => false,
    }
}

/// How a host binding is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
    /// `var<uniform>`.
    Uniform,
}

/// One binding a kernel test provides, as the checks see it.
pub(super) struct Host {
    pub access: Access,
    /// The element type of typed host data (`None` for raw bytes).
    pub dtype: Option<DType>,
    pub bytes: u64,
    /// The binding in words: `an input of 7 f32`.
    pub describe: String,
}

/// The declaration at `@group(0) @binding(binding)`: the one the entry
/// point uses when several entry points declare that binding.
pub(super) fn find(declared: &[Declared], binding: u32) -> Option<&Declared> {
    declared
        .iter()
        .filter(|d| d.group == 0 && d.binding == binding)
        .max_by_key(|d| d.used)
}

fn mismatch(kernel: &str, binding: u32, name: &str, wgsl: &str, host: &str) -> Error {
    Error::BindingMismatch {
        kernel: kernel.to_string(),
        binding,
        name: name.to_string(),
        wgsl: wgsl.to_string(),
        host: host.to_string(),
    }
}

/// Check the host bindings (group 0, numbered from 0 in order) against the
/// module's declarations: every host binding is declared, with a matching
/// address space, access and element type, and is large enough; every
/// binding the entry point uses is provided.
///
/// # Errors
/// [`Error::BindingMismatch`] naming the first binding that does not match.
pub(super) fn check_bindings(kernel: &str, declared: &[Declared], host: &[Host]) -> Result<()> {
    for (i, h) in host.iter().enumerate() {
        let i = i as u32;
        let Some(d) = find(declared, i) else {
            return Err(mismatch(kernel, i, "", "nothing", &h.describe));
        };
        let wrong = |why: &str| {
            Err(mismatch(
                kernel,
                i,
                &d.name,
                &d.wgsl,
                &format!("{}{why}", h.describe),
            ))
        };
        match (h.access, d.space) {
            (Access::Uniform, AddressSpace::Uniform) => {
                // WebGPU allows a larger buffer; more than the declared size
                // rounded up to 16 bytes is a layout mistake.
                let max = d.min_bytes.next_multiple_of(16);
                if h.bytes < d.min_bytes || h.bytes > max {
                    let want = if d.min_bytes == max {
                        format!("{max} bytes")
                    } else {
                        format!("{} to {max} bytes", d.min_bytes)
                    };
                    return wrong(&format!(
                        " (the WGSL type, laid out by WGSL's rules, takes {want}: \
                         check padding and vec3 alignment)"
                    ));
                }
                continue;
            }
            (Access::Read, AddressSpace::Storage { access })
                if !access.contains(StorageAccess::STORE) => {}
            (Access::ReadWrite, AddressSpace::Storage { access })
                if access.contains(StorageAccess::STORE) => {}
            _ => return wrong(""),
        }
        if let Some(dtype) = h.dtype
            && !accepts(dtype, &d.leaves)
        {
            return wrong(&format!(
                " (a {} element cannot back {})",
                host_type(dtype),
                leaves_in_words(&d.leaves)
            ));
        }
    }
    if let Some(d) = declared
        .iter()
        .find(|d| d.used && (d.group != 0 || d.binding as usize >= host.len()))
    {
        let host = if d.group != 0 {
            "nothing (the harness binds group 0 only)"
        } else {
            "nothing"
        };
        return Err(mismatch(kernel, d.binding, &d.name, &d.wgsl, host));
    }
    Ok(())
}

fn leaves_in_words(leaves: &[Scalar]) -> String {
    if leaves.is_empty() {
        return "a texture or sampler".into();
    }
    let names: Vec<String> = leaves.iter().map(|s| scalar_name(*s)).collect();
    names.join(" and ")
}

fn scalar_name(s: Scalar) -> String {
    let kind = match s.kind {
        ScalarKind::Sint => "i",
        ScalarKind::Uint => "u",
        ScalarKind::Float => "f",
        ScalarKind::Bool => return "bool".into(),
        ScalarKind::AbstractInt | ScalarKind::AbstractFloat => "abstract ",
    };
    format!("{kind}{}", s.width * 8)
}

/// Check that every override constant given names one the module declares
/// (by its `@id` when it has one, else by identifier, as WebGPU keys them) and that its value converts to the constant's
/// type as WebGPU converts it (integers: finite, truncated, in range;
/// floats: finite in the type's range; bool: anything).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the constant, its type and the
/// constants the module declares.
pub(super) fn check_constants(
    kernel: &str,
    module: &Module,
    constants: &[(String, f64)],
) -> Result<()> {
    let declared: Vec<(String, &naga::Override)> = module
        .overrides
        .iter()
        .map(|(_, o)| {
            // The key WebGPU takes: the `@id` when there is one, else the name.
            let name = match (&o.name, o.id) {
                (Some(n), Some(id)) => format!("{id} (`{n}`)"),
                (Some(n), None) => n.clone(),
                (None, Some(id)) => id.to_string(),
                (None, None) => "?".into(),
            };
            (name, o)
        })
        .collect();
    for (name, value) in constants {
        let found = declared.iter().find(|(_, o)| match o.id {
            Some(id) => id.to_string() == *name,
            None => o.name.as_deref() == Some(name.as_str()),
        });
        let Some((_, o)) = found else {
            let list: Vec<&str> = declared.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::InvalidArgument(format!(
                "{kernel}: override constant `{name}` is not declared by the shader; it declares [{}]",
                list.join(", ")
            )));
        };
        let TypeInner::Scalar(scalar) = module.types[o.ty].inner else {
            continue;
        };
        let v = *value;
        let ok = match scalar {
            Scalar::BOOL => true,
            Scalar::I32 => {
                v.is_finite() && (i32::MIN as f64..=i32::MAX as f64).contains(&v.trunc())
            }
            Scalar::U32 => v.is_finite() && (0.0..=u32::MAX as f64).contains(&v.trunc()),
            Scalar::F32 => (v as f32).is_finite(),
            Scalar::F16 => half::f16::from_f64(v).is_finite(),
            _ => v.is_finite(),
        };
        if !ok {
            let shown = if v.abs() < 1e16 {
                format!("{v}")
            } else {
                format!("{v:e}")
            };
            return Err(Error::InvalidArgument(format!(
                "{kernel}: override constant `{name}: {}` cannot take the value {shown}",
                scalar_name(scalar)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_types_and_packings() {
        assert!(accepts(DType::F32, &[Scalar::F32]));
        assert!(!accepts(DType::F32, &[Scalar::U32]));
        assert!(!accepts(DType::F32, &[Scalar::F32, Scalar::U32]));
        assert!(!accepts(DType::F32, &[]));
        assert!(accepts(DType::F16, &[Scalar::U32]));
        assert!(accepts(DType::BF16, &[Scalar::U32]));
        assert!(!accepts(DType::BF16, &[Scalar::F16]));
        assert!(accepts(DType::Bool, &[Scalar::I32]));
        assert_eq!(scalar_name(Scalar::F16), "f16");
        assert_eq!(leaves_in_words(&[Scalar::F32, Scalar::U32]), "f32 and u32");
    }
}
