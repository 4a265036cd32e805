//! A GEMM variant's WGSL: its family's kernel and substitutions
//! (`register.rs`, `workgroup.rs`, `splitk.rs`, `coop.rs`, `uniform.rs`)
//! under the shared prelude (`common::prelude`); and, for the portability
//! test, every specialisation the planner can ask for (`specs`, and
//! `extended_specs` for those that need more than WebGPU offers).

use super::common::block::Tile;
#[cfg(test)]
use super::common::epilogue;
use super::common::operand::Mode;
use super::common::prelude::{self, Prelude};
#[cfg(test)]
use super::naive;
#[cfg(test)]
use super::tuning::candidates::{candidates, register_tile};
#[cfg(test)]
use super::tuning::class::ShapeClass;
use super::tuning::kernel::GemmKernel;
use super::tuning::variant::GemmVariant;
use super::{coop, quant, register, splitk, uniform, workgroup};
use crate::DType;
use crate::kernels::program::Program;
use crate::kernels::quant::Source;
use crate::kernels::{Kernel, Spec};

impl GemmVariant {
    /// The kernel text's substitutions for this variant; `subgroup` is the
    /// adapter's subgroup size (the cooperative family's workgroup is four
    /// subgroups). With an `epilogue` (its `rank` and dense flags filled
    /// in), the kernel has no `out` binding: the epilogue's inputs and
    /// outputs follow A, B and the bias, and the whole text becomes the body
    /// of `prelude::GEMM_EPILOGUE` (which adds the elementwise helpers).
    ///
    /// `windows`: the uniform family's windows per dispatch on the device
    /// (`uniform::windows`; unused by the other families).
    pub(crate) fn spec(
        self,
        subgroup: u32,
        windows: u32,
        epilogue: Option<&Program>,
    ) -> (Spec, &'static Kernel) {
        let GemmVariant {
            dtype,
            kernel,
            a_mode,
            b_mode,
            out_vec,
            has_bias,
            k_tail,
            scalar_staging,
            looped_stores,
            a_quads,
            quant: source,
        } = self;
        let prelude = Prelude {
            dtype,
            a_mode,
            b_mode,
            out_vec,
            has_bias,
            k_tail,
            f16: dtype == DType::F16 || matches!(kernel, GemmKernel::Coop { half: true, .. }),
            epilogue,
            // An affine B's scales and biases.
            extra_reads: if matches!(source, Some(Source::Affine { .. })) {
                2
            } else {
                0
            },
        };
        let family = match kernel {
            GemmKernel::Register { wg_x, wg_y, tm, nv } => register::family(
                Tile { wg_x, wg_y, tm, nv },
                a_mode,
                b_mode,
                epilogue.is_some() || looped_stores,
            ),
            // Alike in shape to the matches in `tuning/kernel.rs`, but left
            // apart: each takes the variant's fields for its own purpose.
            GemmKernel::Shared {
                wg_x,
                wg_y,
                tm,
                nv,
                bk,
            } => workgroup::family(
                workgroup::Tile {
                    wg_x,
                    wg_y,
                    tm,
                    nv,
                    bk,
                },
                a_mode,
                b_mode,
                epilogue.is_some(),
                scalar_staging,
            ),
            GemmKernel::SplitK { ks, cq, subgroups } => {
                splitk::family(ks, cq, subgroups, a_mode, b_mode)
            }
            GemmKernel::Coop { size, half, frags } => {
                coop::family(size, half, frags, subgroup, a_mode, b_mode)
            }
            GemmKernel::Uniform { wg_x, nv } => {
                debug_assert!(
                    epilogue.is_none(),
                    "the uniform family has no fused epilogue"
                );
                uniform::family(wg_x, nv, windows, a_quads, prelude.out_binding() as u32 + 1)
            }
            GemmKernel::Quant {
                wg,
                tm,
                nc,
                g,
                lanes,
            } => quant::family(&quant::Spec {
                source: source.expect("a quantized variant has its format"),
                mode: b_mode,
                wg,
                tm,
                nc,
                g,
                lanes,
                x: match (a_quads, a_mode) {
                    (0, Mode::Inner) => quant::XLoad::Inner,
                    (0, _) => quant::XLoad::Scalar,
                    (quads, _) => quant::XLoad::Uniform(quads),
                },
                epilogue: epilogue.is_some(),
                window_binding: prelude.windows_binding(),
            }),
        };
        prelude::spec(&prelude, family)
    }
}

#[cfg(test)]
/// Every specialisation the matmul dispatch functions can ask for.
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = vec![naive::spec()];
    out.extend(quant_specs());
    // Every dtype, load mode, store mode and bias choice of every family,
    // in each family's tiles (the tuning candidates and the defaults).
    let modes = [Mode::Scalar, Mode::Inner, Mode::Outer];
    let mut kernels: Vec<GemmKernel> = Vec::new();
    for class in ShapeClass::ALL {
        for software in [false, true] {
            kernels.extend(candidates(class, software, DType::F32, &|_| true));
        }
    }
    kernels.push(GemmKernel::SplitK {
        ks: 8,
        cq: 8,
        subgroups: false,
    });
    let mut seen = std::collections::HashSet::new();
    // Subgroup and cooperative-matrix kernels need capabilities WebGPU
    // lacks: `extended_specs` lists them. The uniform family has one
    // specialisation per bias choice, listed here.
    for &kernel in &kernels {
        if let GemmKernel::Uniform { .. } = kernel
            && seen.insert(kernel)
        {
            for has_bias in [false, true] {
                out.push(GemmVariant::uniform(kernel, has_bias, 0).spec(
                    32,
                    uniform::MAX_WINDOWS,
                    None,
                ));
                // The row kernel at the smallest, a typical and the
                // largest A row (4, 384 and 16384 floats).
                for a_quads in [1, 96, 4096] {
                    out.push(GemmVariant::uniform(kernel, has_bias, a_quads).spec(
                        32,
                        uniform::MAX_WINDOWS,
                        None,
                    ));
                }
            }
        }
    }
    kernels.retain(|k| {
        seen.insert(*k)
            && !matches!(
                k,
                GemmKernel::Coop { .. }
                    | GemmKernel::SplitK {
                        subgroups: true,
                        ..
                    }
            )
    });
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for &kernel in &kernels {
            for a_mode in modes {
                if a_mode == Mode::Outer && !kernel.a_outer_ok() {
                    continue;
                }
                for b_mode in modes {
                    for out_vec in [false, true] {
                        for has_bias in [false, true] {
                            for k_tail in [false, true] {
                                let v = variant(dtype, kernel, (a_mode, b_mode));
                                // Both store forms, without doubling the
                                // list.
                                let v = GemmVariant {
                                    out_vec,
                                    has_bias,
                                    k_tail,
                                    looped_stores: k_tail,
                                    ..v
                                };
                                out.push(v.spec(32, 0, None));
                            }
                        }
                    }
                }
            }
            // With a fused epilogue (no bias: A, B, two loads and four
            // outputs are WebGPU's 8 storage bindings).
            let sample = epilogue::sample(dtype);
            for (a_mode, b_mode, out_vec, k_tail) in [
                (Mode::Inner, Mode::Inner, true, false),
                (Mode::Scalar, Mode::Outer, false, true),
            ] {
                let v = variant(dtype, kernel, (a_mode, b_mode));
                let v = GemmVariant {
                    out_vec,
                    k_tail,
                    ..v
                };
                out.push(v.spec(32, 0, Some(&sample)));
            }
            // The staging Metal and D3D12 get, in every load mode.
            if kernel.family() == "shared" {
                for a_mode in modes {
                    for b_mode in modes {
                        let v = variant(dtype, kernel, (a_mode, b_mode));
                        let v = GemmVariant {
                            out_vec: true,
                            has_bias: true,
                            k_tail: true,
                            scalar_staging: true,
                            ..v
                        };
                        out.push(v.spec(32, 0, None));
                    }
                }
            }
        }
    }
    out
}

/// A variant of the specialisation lists: `kernel` on `dtype` with the
/// load modes, scalar stores, no bias, no K tail, no flags.
#[cfg(test)]
fn variant(dtype: DType, kernel: GemmKernel, (a_mode, b_mode): (Mode, Mode)) -> GemmVariant {
    GemmVariant {
        dtype,
        kernel,
        a_mode,
        b_mode,
        out_vec: false,
        has_bias: false,
        k_tail: false,
        scalar_staging: false,
        looped_stores: false,
        a_quads: 0,
        quant: None,
    }
}

/// The quantized family's specialisations: every block format with the
/// default kernels of both classes on software adapters and GPUs, their
/// other candidates on Q4_0, x read as scalars and through a uniform
/// binding, a fused epilogue; affine at every bit width (f16 scales),
/// every scale dtype, both orientations and group sizes.
#[cfg(test)]
fn quant_specs() -> Vec<(Spec, &'static Kernel)> {
    use crate::kernels::quant::{AFFINE_BITS, FLOATS};
    let mut out = Vec::new();
    let mut push = |source: Source, mode: Mode, kernel: GemmKernel, x: (Mode, u32), epi: bool| {
        let kernel = match kernel {
            GemmKernel::Quant {
                wg, tm, g, lanes, ..
            } if mode == Mode::QuantN => GemmKernel::Quant {
                wg,
                tm: tm.min(8),
                nc: quant::SPAN_COLUMNS,
                g,
                lanes,
            },
            k => k,
        };
        let v = GemmVariant {
            out_vec: true,
            a_quads: x.1,
            quant: Some(source),
            ..variant(DType::F32, kernel, (x.0, mode))
        };
        let sample = epi.then(|| epilogue::sample(DType::F32));
        out.push(v.spec(32, 0, sample.as_ref()));
    };
    let kernels = |dtype: DType, all: bool| {
        let mut v = Vec::new();
        for class in [ShapeClass::GemvT, ShapeClass::Medium] {
            for software in [true, false] {
                let c = candidates(class, software, dtype, &|_| true);
                v.extend(if all { c } else { c[..1].to_vec() });
            }
        }
        v
    };
    let inner = (Mode::Inner, 0);
    for d in DType::BLOCK_FORMATS {
        let source = Source::Blocks(d);
        for k in kernels(d, d == DType::Q4_0) {
            push(source, Mode::QuantK, k, inner, false);
        }
        let gemv = kernels(d, false)[0];
        push(source, Mode::QuantK, gemv, (Mode::Scalar, 0), false);
        push(source, Mode::QuantK, gemv, (Mode::Scalar, 144), false);
        push(source, Mode::QuantK, gemv, inner, true);
    }
    let affine = |bits, group_size, scales| Source::Affine {
        bits,
        group_size,
        scales,
    };
    let [gemv, _, tile, _] = kernels(DType::U32, false)[..] else {
        unreachable!("four defaults")
    };
    for bits in AFFINE_BITS {
        push(
            affine(bits, 64, DType::F16),
            Mode::QuantK,
            gemv,
            inner,
            false,
        );
    }
    for scales in FLOATS {
        push(
            affine(4, 32, scales),
            Mode::QuantK,
            tile,
            (Mode::Scalar, 0),
            false,
        );
    }
    for bits in [3, 4, 8] {
        for k in [gemv, tile] {
            push(
                affine(bits, 128, DType::F32),
                Mode::QuantN,
                k,
                (Mode::Scalar, 64),
                false,
            );
        }
    }
    out
}

/// The specialisations that need more than WebGPU's capabilities, with the
/// capabilities: the split-K kernel with subgroup shuffles (SUBGROUP), and
/// the cooperative-matrix family (with 32-lane subgroups; naga's HLSL and
/// GLSL back ends have no cooperative matrices, so SPIR-V and MSL only).
#[cfg(test)]
pub(crate) fn extended_specs() -> Vec<(Spec, &'static Kernel, naga::valid::Capabilities)> {
    use naga::valid::Capabilities as C;
    // The store and bias choices each family is checked with: a vec4
    // store; a bias with a k tail; a fused epilogue (no bias: WebGPU's 8
    // bindings) with a k tail. As (out_vec, has_bias, k_tail, epilogue).
    const STORES: [(bool, bool, bool, bool); 3] = [
        (true, false, false, false),
        (false, true, true, false),
        (false, false, true, true),
    ];
    let mut out = Vec::new();
    let mut push = |dtype: DType,
                    kernel: GemmKernel,
                    (a_mode, b_mode): (Mode, Mode),
                    (out_vec, has_bias, k_tail, epi): (bool, bool, bool, bool),
                    caps: C| {
        let sample = epi.then(|| epilogue::sample(dtype));
        let v = GemmVariant {
            out_vec,
            has_bias,
            k_tail,
            ..variant(dtype, kernel, (a_mode, b_mode))
        };
        let (spec, kernel) = v.spec(32, 0, sample.as_ref());
        out.push((spec, kernel, caps));
    };
    let split_k = GemmKernel::SplitK {
        ks: 32,
        cq: 8,
        subgroups: true,
    };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for modes in [
            (Mode::Inner, Mode::Inner),
            (Mode::Inner, Mode::Outer),
            (Mode::Scalar, Mode::Scalar),
        ] {
            for store in STORES {
                push(dtype, split_k, modes, store, C::SUBGROUP);
            }
        }
    }
    // Pair loads of B (f32, SHADER_INT64): the matrix-vector tile and a
    // large one, every store and bias choice.
    for kernel in [
        register_tile(ShapeClass::Gemv, true),
        register_tile(ShapeClass::Large, true),
    ] {
        for a_mode in [Mode::Inner, Mode::Scalar] {
            for store in STORES {
                push(
                    DType::F32,
                    kernel,
                    (a_mode, Mode::Pair),
                    store,
                    C::SHADER_INT64,
                );
            }
        }
    }
    // Eight-k pair loads of A and B (`x @ W^T`, f32, SHADER_INT64): the
    // medium and small tiles, with and without a bias, and with an
    // epilogue; K is a multiple of 8 (no k tail).
    for kernel in [
        register_tile(ShapeClass::Medium, true),
        register_tile(ShapeClass::Small, true),
    ] {
        for (out_vec, has_bias, epi) in [
            (true, false, false),
            (false, true, false),
            (true, false, true),
        ] {
            let store = (out_vec, has_bias, false, epi);
            let modes = (Mode::PairK, Mode::PairK);
            push(DType::F32, kernel, modes, store, C::SHADER_INT64);
        }
    }
    for (dtype, half, size) in [
        (DType::F32, false, 8),
        (DType::F32, false, 16),
        (DType::F16, true, 8),
        (DType::F16, true, 16),
        (DType::BF16, false, 8),
    ] {
        let coop = GemmKernel::Coop {
            size,
            half,
            frags: if size == 16 && !half { 1 } else { 2 },
        };
        for modes in [
            (Mode::Inner, Mode::Inner),
            (Mode::Outer, Mode::Outer),
            (Mode::Scalar, Mode::Scalar),
        ] {
            for store in STORES {
                push(
                    dtype,
                    coop,
                    modes,
                    store,
                    C::SUBGROUP | C::COOPERATIVE_MATRIX,
                );
            }
        }
    }
    out
}
