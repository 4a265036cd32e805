//! Which kernels a shape class times: the default tiles of each family
//! ([`register_tile`], [`shared_tile`]), the matrix-vector tile narrowed to
//! a product's columns ([`fit_gemv_columns`]), and each class's candidates
//! ([`candidates`]) by adapter.

use super::class::ShapeClass;
use super::kernel::GemmKernel;
use crate::DType;

/// The register-blocked tile for a shape class on a software adapter, and
/// the previous kernel's choice on GPUs (kept as a tuning candidate there).
/// Measured on lavapipe (AVX2, 8 lanes), see docs/PERFORMANCE.md: every
/// storage load there is a per-lane loop that costs far more than the
/// multiply-adds it feeds, so the per-thread block (loads per multiply-add
/// fall as `1/tm + 1/(4 nv)`) decides, bounded by the compile time of the
/// generated code (about 25 ms for 4 x 16 accumulators, 45 ms for 8 x 16,
/// 120 ms for 16 x 16, 350 ms for 16 x 32).
pub(crate) fn register_tile(class: ShapeClass, software: bool) -> GemmKernel {
    let tile = |wg_x, wg_y, tm, nv| GemmKernel::Register { wg_x, wg_y, tm, nv };
    match class {
        // Matrix-vector (decode steps): one row, threads across columns. On
        // lavapipe 16 columns per thread share each load of A, and 8-thread
        // workgroups (one 8-lane SIMD group: lavapipe runs a workgroup's
        // lanes 8 at a time, each group to the end of K) read 512
        // contiguous bytes of each row of a row-major B per group and give
        // both cores work at N = 384 (1.4x to 1.7x the 16 x 1 x 1 x 4 tile
        // at 1 x 1024 x 3072, 2026-12-01); GPUs want more threads per
        // workgroup.
        // From GEMV_WIDE_N columns on with a row-major B, 32 columns per
        // thread (one load of A feeds twice the columns; still 8
        // workgroups or more): 1.1x to 1.5x the 16-column tile at
        // 1 x 4096 x 4096 (2026-12-01, docs/PERFORMANCE.md). With B
        // transposed each column is a row of W, a stream of its own, and
        // the 16-column tile led in 6 comparisons of 7 (1 x 1024 x 3072,
        // 1 x 4096 x 4096, four probe runs).
        ShapeClass::GemvWide if software => tile(8, 1, 1, 8),
        ShapeClass::Gemv | ShapeClass::GemvT | ShapeClass::GemvTWide if software => {
            tile(8, 1, 1, 4)
        }
        ShapeClass::Gemv | ShapeClass::GemvT | ShapeClass::GemvWide | ShapeClass::GemvTWide => {
            tile(64, 1, 1, 1)
        }
        // Small or skinny on lavapipe and llvmpipe: 16 x 32 blocks, one
        // row of eight threads (A's loads uniform per SIMD group, as for
        // Medium below): MiniLM's attention products (96 heads of
        // 14 x 32 x 14 and 14 x 14 x 32) 1.5x to 2x the 32 x 32 tile, and
        // 1.3x to 2.6x at 16 x 1024 x 2048 and 2048 x 512 x 32 (2026-12-01).
        ShapeClass::Small if software => tile(8, 1, 16, 1),
        // Small or skinny: 32 x 32 tiles waste little on edges.
        ShapeClass::Small => tile(8, 8, 4, 1),
        // Medium on lavapipe and llvmpipe: 16 x 128 blocks, one row of
        // eight threads (one SIMD group) sharing 16 rows. A's addresses
        // then depend on the workgroup alone, and llvmpipe loads a uniform
        // address once per group instead of once per lane (so we read the
        // measurements); only B's loads are per lane.
        // At M = 77 (MiniLM) against the 32 x 128 tile of four thread rows:
        // 1.4x to 1.5x in CPU time, through both APIs (2026-12-01,
        // docs/PERFORMANCE.md).
        ShapeClass::Medium if software => tile(8, 1, 16, 4),
        // Medium: 64 x 128 tiles.
        ShapeClass::Medium => tile(8, 8, 8, 4),
        // Large: 128 x 128 tiles of 16 x 16 per thread on lavapipe (at
        // 1024^3 16 x 32 is 20% faster but compiles in 350 ms instead of
        // 120); on an H200 (Vulkan) at 4096^3 16 x 16 spills registers and
        // runs at half the speed of 8 x 16.
        ShapeClass::Large if software => tile(8, 8, 16, 4),
        ShapeClass::Large => tile(8, 8, 8, 4),
    }
}

/// A matrix-vector register tile (`wg_y == tm == 1`) narrowed to fewer
/// columns per thread (`nv` halved, down to 2, kept even for pair loads)
/// while its last workgroup would compute more than `n / 16` columns past
/// `n` and the narrower tile wastes fewer. Columns past `n` are clamped
/// to the last one, so they cost the same loads as real ones: at
/// 1 x 1536 x 384 the 32-column tile `register 8 1 1 8` computes 512
/// columns (two workgroups for two cores) and took 1.25x to 1.3x the time
/// of the 16-column one, which computes 384 (lavapipe, 2026-12-01,
/// docs/PERFORMANCE.md). Any other kernel is returned as is.
pub(crate) fn fit_gemv_columns(kernel: GemmKernel, n: usize) -> GemmKernel {
    let GemmKernel::Register {
        wg_x,
        wg_y: 1,
        tm: 1,
        mut nv,
    } = kernel
    else {
        return kernel;
    };
    let waste = |nv: u32| n.next_multiple_of(4 * wg_x as usize * nv as usize) - n;
    while nv > 2 && nv.is_multiple_of(4) && waste(nv) * 16 > n && waste(nv / 2) < waste(nv) {
        nv /= 2;
    }
    GemmKernel::Register {
        wg_x,
        wg_y: 1,
        tm: 1,
        nv,
    }
}

/// The workgroup-memory tile for a shape class (GPUs): 128 x 128 blocks of
/// 8 x 8 per thread for large outputs, 64 x 64 blocks of 4 x 4 otherwise.
pub(crate) fn shared_tile(class: ShapeClass) -> GemmKernel {
    match class {
        ShapeClass::Large => GemmKernel::Shared {
            wg_x: 16,
            wg_y: 16,
            tm: 8,
            nv: 2,
            bk: 8,
        },
        _ => GemmKernel::Shared {
            wg_x: 16,
            wg_y: 16,
            tm: 4,
            nv: 1,
            bk: 16,
        },
    }
}

/// K steps of the quantized family's default kernels for weights of
/// `dtype` (a block format, or `u32` for affine): whole blocks of about 100
/// to 150 bytes per row of W (the planner narrows a step to divide a row).
/// On lavapipe (2026-12-03, raw probes of the kernel's loads at 1 x 576 x
/// 49152, CPU time, docs/PERFORMANCE.md) steps of 54 to 108 bytes ran
/// within 5% of each other and 144 bytes 30% slower (the realigned words
/// no longer fit in registers).
fn quant_step(dtype: DType) -> u32 {
    match dtype {
        DType::Q4_0 | DType::Q4_1 => 6,
        DType::Q8_0 => 3,
        DType::Q4K | DType::Q6K => 1,
        // Affine: spans of 32 quants, 4 words at 4 bits.
        _ => 6,
    }
}

/// The quantized family's candidates (`GemmKernel::Quant`) for a class of
/// quantized products (`ShapeClass::of_quantized`), default first.
///
/// Software adapters: one SIMD group of 8 threads per workgroup, each
/// thread a run of rows of W (its loads are per lane there: more rows per
/// thread share each load of x; on lavapipe 8 rows ran 1.3x 4 and 1.5x one
/// in the probes above); prefill 16 rows of x by 16 columns, as the
/// register family's medium tile. GPUs: 32 lanes splitting K for each 4
/// columns (coalesced reads of a row of W), or a thread per 4 columns.
fn quant_candidates(class: ShapeClass, software: bool, dtype: DType) -> Vec<GemmKernel> {
    let g = quant_step(dtype);
    let q = |wg, tm, nc, g, lanes| GemmKernel::Quant {
        wg,
        tm,
        nc,
        g,
        lanes,
    };
    match (class.is_gemv(), software) {
        (true, true) => vec![q(8, 1, 8, g, 1), q(8, 1, 4, g, 1), q(8, 1, 16, g, 1)],
        (false, true) => vec![q(8, 16, 16, 1, 1), q(8, 8, 16, 1, 1), q(8, 16, 8, 2, 1)],
        (true, false) => vec![q(2, 1, 4, g, 32), q(64, 1, 4, g, 1), q(8, 1, 4, g, 8)],
        (false, false) => vec![q(64, 4, 4, 1, 1), q(32, 8, 8, 1, 1), q(16, 8, 8, 1, 4)],
    }
}

/// The kernels worth timing for `class` and `dtype` on a software adapter
/// or a GPU, those `usable` by the device, first the default (the choice
/// when timing is off). Never empty: the register family runs everywhere,
/// and for quantized weights (`kernel::quantized`) the quantized family.
pub(crate) fn candidates(
    class: ShapeClass,
    software: bool,
    dtype: DType,
    usable: &dyn Fn(&GemmKernel) -> bool,
) -> Vec<GemmKernel> {
    if super::kernel::quantized(dtype) {
        let all = quant_candidates(class, software, dtype);
        let first = all[0];
        let mut v: Vec<GemmKernel> = all.into_iter().filter(|k| usable(k)).collect();
        if v.is_empty() {
            v.push(first);
        }
        return v;
    }
    let register = register_tile(class, software);
    let shared = shared_tile(class);
    let splitk = |ks, cq, subgroups| GemmKernel::SplitK { ks, cq, subgroups };
    // The matrix-vector tile with twice the columns per thread.
    let tile_wide = || GemmKernel::Register {
        wg_x: 8,
        wg_y: 1,
        tm: 1,
        nv: 8,
    };
    let shared_wide = GemmKernel::Shared {
        wg_x: 16,
        wg_y: 8,
        tm: 8,
        nv: 2,
        bk: 8,
    };
    let uniform = |nv| GemmKernel::Uniform { wg_x: 8, nv };
    let mut v = match (class, software) {
        // lavapipe (2026-12-01, docs/PERFORMANCE.md): with B row-major the
        // uniform-window kernels lead (2x to 3x the register tiles: their
        // loads are gathers, not per-lane loops), 32 columns per thread
        // below GEMV_WIDE_N columns, 64 from there on (chosen over 16 at
        // 1 x 1024 x 3072 and 1 x 4096 x 4096); then the 8 x 1 x 1 x
        // 4 and 8 x 1 x 1 x 8 register tiles, and the split-K kernel trails
        // those by up to 2x; with B transposed the split-K kernel leads
        // from K = 4096 on and the narrow tile below. (Where the uniform
        // family cannot run a product, it takes `register`.) With B
        // transposed the uniform family's row kernel leads too (1.2x to
        // 3x those, 2026-12-02; one candidate, as its geometry is fixed).
        (ShapeClass::Gemv, true) => vec![
            uniform(8),
            uniform(16),
            uniform(4),
            register,
            tile_wide(),
            splitk(8, 8, true),
            splitk(8, 8, false),
        ],
        (ShapeClass::GemvT | ShapeClass::GemvTWide, true) => vec![
            uniform(8),
            register,
            splitk(8, 8, true),
            tile_wide(),
            splitk(8, 8, false),
        ],
        // From GEMV_WIDE_N columns on with B row-major: the uniform kernel
        // first, then a register tile of 128 columns per thread (1024 per
        // workgroup, a 4 KiB span of each row of B). Which wins depends on
        // the host: on 2026-12-02's (an AVX-512 EPYC, where the register
        // tiles ran 2.4x to 11x faster than on 2026-12-01's, the uniform
        // kernels 1.4x to 1.9x) the wide tile ran 1.4x to 1.7x `uniform 8
        // 16` and 1.9x the 32-column tile at 1 x 2048 x 2048 (the proxy)
        // and 1 x 4096 x 4096, and the tuning chose it
        // (docs/PERFORMANCE.md). The span per row is what counts, not the
        // threads: 32 x 1 x 1 x 8 (a workgroup of four SIMD groups of 32
        // columns each, the same 1024 columns) ran 3.5x slower, as
        // lavapipe runs a workgroup on one thread, its SIMD groups one
        // after another. Narrower products get the tile narrowed by
        // [`fit_gemv_columns`].
        (ShapeClass::GemvWide, true) => vec![
            uniform(16),
            GemmKernel::Register {
                wg_x: 8,
                wg_y: 1,
                tm: 1,
                nv: 32,
            },
            uniform(4),
            uniform(8),
            register,
            register_tile(ShapeClass::Gemv, true),
            splitk(8, 8, true),
        ],
        // lavapipe, M = 77 (MiniLM's packed demo batch) against 384 to
        // 1536 (2026-12-01, docs/PERFORMANCE.md): the default's one row of
        // threads (A loaded once per SIMD group, see `register_tile`), the
        // same with 32 rows per thread, and 32 x 128 blocks of four thread
        // rows (the previous choice; 1.15x to 1.35x the 64 x 128 tile).
        (ShapeClass::Medium, true) => vec![
            register,
            GemmKernel::Register {
                wg_x: 8,
                wg_y: 1,
                tm: 32,
                nv: 4,
            },
            GemmKernel::Register {
                wg_x: 8,
                wg_y: 4,
                tm: 8,
                nv: 4,
            },
        ],
        (
            ShapeClass::Gemv | ShapeClass::GemvT | ShapeClass::GemvWide | ShapeClass::GemvTWide,
            false,
        ) => vec![
            splitk(32, 8, true),
            splitk(16, 16, false),
            register,
            register_tile(class, true),
        ],
        // Software adapters: the register family only. The workgroup-memory
        // family's straight-line staging code compiles for about a minute
        // per variant on llvmpipe through GL (cold Mesa shader cache,
        // measured 2026-11-30), which a first call must not pay; it stays
        // reachable with `WGARRAY_GEMM_KERNEL` (tests/gemm_families.rs).
        (_, true) => vec![register],
        // K steps of 16 halve the barriers per k; 32 KiB of staging, so
        // only where the device allows that (NVIDIA 48 KiB, Mesa 32).
        (ShapeClass::Large, false) => vec![
            shared,
            shared_wide,
            GemmKernel::Shared {
                wg_x: 16,
                wg_y: 16,
                tm: 8,
                nv: 2,
                bk: 16,
            },
            register,
        ],
        (_, false) => vec![shared, shared_wide, register],
    };
    if !software && !class.is_gemv() {
        // 128 x 128 blocks (frags 4) too: 20 KiB of staging in f16.
        for (size, frags) in [(16, 2), (16, 4), (16, 1), (8, 2)] {
            v.push(GemmKernel::Coop {
                size,
                half: dtype == DType::F16,
                frags,
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    v.retain(|k| k.is_valid() && usable(k) && seen.insert(*k));
    if v.is_empty() {
        v.push(register_tile(class, true));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_tiles_narrow_to_the_columns() {
        let tile = |nv| GemmKernel::Register {
            wg_x: 8,
            wg_y: 1,
            tm: 1,
            nv,
        };
        // (n, tuned nv, nv used): 32-column threads compute 512 columns
        // for 384 and 1280 for 1152, 16-column ones exactly n.
        for (n, nv, fitted) in [
            (384, 8, 4),
            (1152, 8, 4),
            (1536, 8, 8),
            (1000, 8, 8),
            (4096, 8, 8),
            (384, 4, 4),
            (7, 8, 2),
            (7, 2, 2),
            // The wide class's 1024-column tile.
            (4096, 32, 32),
            (3072, 32, 32),
            (2560, 32, 16),
            (2304, 32, 8),
            (2052, 32, 4),
        ] {
            let k = fit_gemv_columns(tile(nv), n);
            assert_eq!(k, tile(fitted), "n = {n}, nv = {nv}");
            assert!(k.is_valid());
        }
        // Other kernels as they are.
        for k in [
            GemmKernel::Register {
                wg_x: 8,
                wg_y: 8,
                tm: 16,
                nv: 4,
            },
            GemmKernel::SplitK {
                ks: 8,
                cq: 8,
                subgroups: true,
            },
        ] {
            assert_eq!(fit_gemv_columns(k, 384), k);
        }
    }

    #[test]
    fn every_class_has_valid_candidates_and_a_register_fallback() {
        for class in ShapeClass::ALL {
            for software in [false, true] {
                for dtype in [DType::F32, DType::F16, DType::BF16] {
                    let all = candidates(class, software, dtype, &|_| true);
                    assert!(all.iter().all(|k| k.is_valid()), "{all:?}");
                    // Software adapters time matrix-vector and medium
                    // kernels only.
                    let timed = !software || class.is_gemv() || class == ShapeClass::Medium;
                    assert_eq!(all.len() >= 2, timed, "{class:?} {software}: {all:?}");
                    let none = candidates(class, software, dtype, &|_| false);
                    assert_eq!(none.len(), 1);
                    assert_eq!(none[0].family(), "register");
                    for k in all {
                        assert_eq!(k.to_string().parse::<GemmKernel>().unwrap(), k);
                    }
                }
            }
        }
    }
}
