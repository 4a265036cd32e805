//! The generator of the prelude every GEMM family's WGSL follows
//! (`wgsl/gemm_common.wgsl`: parameters, bindings, the dtype's loads and
//! stores, the flags, `store_quad`), and of the specialisation that joins
//! it to a family's own text: [`spec`] takes the family's kernel and
//! substitutions ([`Family`]) and adds the prelude's ([`Prelude`]); with a
//! fused epilogue the whole text becomes the body of [`GEMM_EPILOGUE`],
//! after the elementwise helpers.

use super::epilogue;
use super::operand::{Mode, PAIR_HELPERS, access, pair_loads};
use super::params::GEMM_WORDS;
use super::store::store;
use crate::DType;
use crate::kernels::program::Program;
use crate::kernels::{Kernel, PARAMS_WORDS, Spec};

/// What every family shares in WGSL (the prelude of each family's kernel).
pub(crate) const GEMM_COMMON: &str = include_str!("../../../../wgsl/gemm_common.wgsl");

/// The prelude of a family's kernel: [`GEMM_COMMON`].
pub(crate) const PRELUDE: &[&str] = &[GEMM_COMMON];

/// A family's kernel `name`: `source` (its WGSL) after `prelude` (usually
/// [`PRELUDE`]), bound to A and B, then the bias and the output or a fused
/// epilogue's buffers ([`spec`] sets the counts of each variant).
pub(crate) const fn family_kernel(
    name: &'static str,
    prelude: &'static [&'static str],
    source: &'static str,
) -> Kernel {
    Kernel {
        name,
        prelude,
        source,
        reads: 2,
        writes: 1,
    }
}

/// A GEMM with a fused elementwise epilogue (`common::epilogue`): the
/// family's whole specialised text as `BODY` after the elementwise helpers,
/// its `enable` directives first.
pub(crate) static GEMM_EPILOGUE: Kernel = Kernel {
    name: "gemm_epilogue",
    prelude: &[],
    source: concat!(
        "{{DIRECTIVES}}",
        include_str!("../../../../wgsl/convert.wgsl"),
        "\n",
        include_str!("../../../../wgsl/math.wgsl"),
        "\n{{BODY}}"
    ),
    reads: 2,
    writes: 1,
};

/// What the prelude's substitutions depend on: the operands' dtype and load
/// modes, the stores, and a fused epilogue.
pub(crate) struct Prelude<'a> {
    /// f32, f16 or bf16: A, B, the bias and the output.
    pub dtype: DType,
    pub a_mode: Mode,
    pub b_mode: Mode,
    /// Vector stores; needs `n % 4 == 0`.
    pub out_vec: bool,
    pub has_bias: bool,
    /// K is not a multiple of the family's K step: the last step is masked.
    pub k_tail: bool,
    /// `enable f16;`: f16 operands, or a family that computes in f16.
    pub f16: bool,
    /// A fused epilogue (its `rank` and dense flags filled in): the kernel
    /// then has no `out` binding; the epilogue's inputs and outputs follow
    /// A, B and the bias.
    pub epilogue: Option<&'a Program>,
}

impl Prelude<'_> {
    /// The binding after A, B and the bias: the output's, or the fused
    /// epilogue's first.
    pub(crate) fn out_binding(&self) -> usize {
        if self.has_bias { 4 } else { 3 }
    }
}

/// A family's part of a specialisation: its kernel (source, with
/// [`GEMM_COMMON`] as prelude) and the substitutions of its own
/// placeholders.
pub(crate) struct Family {
    pub kernel: &'static Kernel,
    pub subs: Vec<(&'static str, String)>,
    /// Parameter fields after the GEMM's own that the family declares
    /// (`EPILOGUE_PARAMS`, in place of an epilogue's) and their words; the
    /// parameter block grows to hold them.
    pub params: Option<(String, usize)>,
    /// Uniform-buffer windows the family binds after the storage bindings
    /// (`Spec::windows`).
    pub windows: Vec<u64>,
}

/// Substitutions of numbers (tile sizes, counts), as WGSL reads them.
pub(crate) fn numbers<const N: usize>(
    subs: [(&'static str, u32); N],
) -> Vec<(&'static str, String)> {
    subs.iter().map(|&(k, v)| (k, v.to_string())).collect()
}

impl Family {
    /// A family's kernel and the substitutions of its own placeholders,
    /// with no parameters or windows of its own.
    pub(crate) fn new(kernel: &'static Kernel, subs: Vec<(&'static str, String)>) -> Family {
        Family {
            kernel,
            subs,
            params: None,
            windows: Vec::new(),
        }
    }
}

/// The specialisation of `family` under the prelude `prelude`.
pub(crate) fn spec(prelude: &Prelude<'_>, family: Family) -> (Spec, &'static Kernel) {
    let (dtype, has_bias, epilogue) = (prelude.dtype, prelude.has_bias, prelude.epilogue);
    let mut pair_text = String::new();
    let mut pairs = |name: &str| {
        let (text, access) = pair_loads(name);
        if pair_text.is_empty() {
            pair_text.push_str(PAIR_HELPERS);
        }
        pair_text.push_str(&text);
        access
    };
    let aa = if prelude.a_mode == Mode::PairK {
        pairs("a")
    } else {
        access(dtype, prelude.a_mode.vec(), "a")
    };
    let ba = if matches!(prelude.b_mode, Mode::Pair | Mode::PairK) {
        pairs("b")
    } else {
        access(dtype, prelude.b_mode.vec(), "b")
    };
    let ca = access(dtype, false, "bias");
    let (out_arr, out_one, out_four) = store(dtype, prelude.out_vec);
    let mut bindings = format!(
        "@group(0) @binding(1) var<storage, read> a: array<{}>;\n\
         @group(0) @binding(2) var<storage, read> b: array<{}>;\n",
        aa.arr, ba.arr
    );
    bindings.push_str(&pair_text);
    let out_binding = prelude.out_binding();
    if has_bias {
        bindings.push_str(&format!(
            "@group(0) @binding(3) var<storage, read> bias: array<{}>;\n",
            ca.arr
        ));
    }
    let (out_one, out_four, epilogue_fn, epilogue_params) = match epilogue {
        None => {
            bindings.push_str(&format!(
                "@group(0) @binding({out_binding}) var<storage, read_write> out: array<{out_arr}>;"
            ));
            (
                out_one,
                out_four,
                epilogue::NO_EPILOGUE.into(),
                String::new(),
            )
        }
        Some(e) => (
            String::new(),
            String::new(),
            epilogue::wgsl(e, out_binding),
            epilogue::params_field(e),
        ),
    };
    let epilogue_params = match &family.params {
        Some((field, _)) => {
            debug_assert!(
                epilogue.is_none(),
                "a family's own parameters and an epilogue"
            );
            field.clone()
        }
        None => epilogue_params,
    };
    let bias_one = if has_bias { ca.one } else { "0.0".into() };
    let flag = |b: bool| if b { "true" } else { "false" }.to_string();
    let mut subs = family.subs;
    subs.extend([
        ("OUT_VEC", flag(prelude.out_vec)),
        ("HAS_BIAS", flag(has_bias)),
        ("HAS_EPILOGUE", flag(epilogue.is_some())),
        ("EPILOGUE_FN", epilogue_fn),
        ("EPILOGUE_PARAMS", epilogue_params),
        ("K_TAIL", flag(prelude.k_tail)),
        ("ENABLE_F16", flag(prelude.f16)),
        ("BINDINGS", bindings),
        ("A_ONE", aa.one),
        ("A_FOUR", aa.four),
        ("B_ONE", ba.one),
        ("B_FOUR", ba.four),
        ("BIAS_ONE", bias_one),
        ("OUT_ONE", out_one),
        ("OUT_FOUR", out_four),
    ]);
    let subs: Vec<(&'static str, &str)> = subs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reads = 2 + has_bias as u32;
    let kernel = family.kernel;
    let Some(e) = epilogue else {
        let (mut spec, kernel) = kernel.spec_with_bindings(&subs, reads, 1);
        spec.windows = family.windows;
        if let Some((_, words)) = family.params {
            spec.params = (GEMM_WORDS + words).next_multiple_of(PARAMS_WORDS) as u32;
        }
        return (spec, kernel);
    };
    // The family's text, its directives (`enable ...;`) moved before the
    // elementwise helpers.
    let (spec, _) = kernel.spec_with_bindings(&subs, reads, 1);
    let text = kernel.source_for(&spec);
    let (mut directives, mut body) = (String::new(), String::new());
    for line in text.lines() {
        let to = if line.starts_with("enable ") && body.is_empty() {
            &mut directives
        } else {
            &mut body
        };
        to.push_str(line);
        to.push('\n');
    }
    let (mut spec, kernel) = GEMM_EPILOGUE.spec_with_bindings(
        &[("DIRECTIVES", &directives), ("BODY", &body)],
        reads + e.inputs as u32,
        e.outputs.len() as u32,
    );
    let rank = e.rank as usize;
    spec.params =
        (GEMM_WORDS + e.layout(4 + rank, &[rank]).words).next_multiple_of(PARAMS_WORDS) as u32;
    (spec, kernel)
}
