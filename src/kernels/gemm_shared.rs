//! The workgroup-memory GEMM family (`wgsl/gemm_shared.wgsl`), the one
//! GPUs take: each step a workgroup stages a block of A and a block of B
//! through workgroup memory (vec4 loads where the layout allows them,
//! double buffered, one barrier per step), then every thread multiplies
//! its register block out of it. The staging code is shared with the
//! cooperative-matrix family (`gemm_coop.rs`).
//!
//! Like the register family, the per-thread code is generated straight-line
//! (named variables, literal indices) for the tile and the operand load
//! modes; see `matmul::gemm_body` for why.

use super::matmul::{GemmKernel, Mode, indent, store_quads};

/// The blocks one workgroup stages per step: `bm x bk` of A and `bk x bn`
/// of B, by `threads` threads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Staging {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub threads: u32,
}

/// Generated staging code (see [`staging`]).
pub(crate) struct StagingCode {
    /// Per-thread constants (which quads of the blocks it loads) and the
    /// staging registers `la_{i}`, `lb_{i}`.
    pub decls: String,
    /// Global loads of the step starting at `k0` into the registers.
    pub load: String,
    /// The registers into the buffer whose first k row is `nb`.
    pub store: String,
}

/// The code that stages one step. It expects, in WGSL: `tid` (the flat
/// thread index), `tile_row0` (first row of the block), `tile_q0` (first
/// column quad), `last_quad`, `a_base`, `b_base`, `k0` (first k of the
/// step loaded), `nb` (first k row of the buffer stored), and `put_a(i,
/// x)`, `put_a4(i, v)`, `put_b(i, x)`, `put_b4(i, v)`, which store element
/// `i` (and the next three) of the k-major blocks: A's element `(r, k)` is
/// `k * bm + r`, B's element `(k, c)` is `k * bn + c`. Rows and columns past
/// M and N are clamped on load; k >= K is zeroed (`kmask4`, `kclamp` in
/// gemm_common.wgsl).
pub(crate) fn staging(s: Staging, a_mode: Mode, b_mode: Mode) -> StagingCode {
    let Staging {
        bm,
        bn,
        bk,
        threads,
    } = s;
    let (mut decls, mut load, mut store) = (Vec::new(), Vec::new(), Vec::new());
    // Quads of each block: the same count whichever way they run.
    let (qa, qb) = (bm * bk / 4, bn * bk / 4);
    // Thread `tid` takes quads tid, tid + threads, ...; the last round is
    // guarded when the count is not a multiple of the threads.
    let rounds = |q: u32| q.div_ceil(threads);
    let guard = |q: u32, i: u32, name: &str, decls: &mut Vec<String>| -> Option<String> {
        if q.is_multiple_of(threads) || i + 1 < rounds(q) {
            None
        } else {
            decls.push(format!("let {name}_ok = tid + {}u < {q}u;", i * threads));
            Some(format!("{name}_ok"))
        }
    };
    let wrap = |g: &Option<String>, lines: Vec<String>, out: &mut Vec<String>| match g {
        None => out.extend(lines),
        Some(g) => {
            out.push(format!("if {g} {{"));
            out.extend(lines.into_iter().map(|l| format!("    {l}")));
            out.push("}".into());
        }
    };
    for i in 0..rounds(qa) {
        let vi = format!("(tid + {}u)", i * threads);
        let g = guard(qa, i, &format!("av{i}"), &mut decls);
        decls.push(format!("var la_{i} = vec4<f32>(0.0);"));
        let (l, st) = if a_mode == Mode::Outer {
            // Quads along m: (k row akk, row quad arq).
            decls.push(format!("let akk_{i} = {vi} / {}u;", bm / 4));
            decls.push(format!("let arq_{i} = {vi} % {}u;", bm / 4));
            decls.push(format!(
                "let acol_{i} = a_base + min(tile_row0 + 4u * arq_{i}, p.m - 1u);"
            ));
            (
                format!(
                    "{{ let k = k0 + akk_{i}; la_{i} = select(a4(acol_{i} + kclamp(k) * p.a_cs), vec4<f32>(0.0), K_TAIL && k >= p.k); }}"
                ),
                vec![format!(
                    "put_a4((nb + akk_{i}) * {bm}u + 4u * arq_{i}, la_{i});"
                )],
            )
        } else {
            // Quads along k: (row ar, k quad akq).
            decls.push(format!("let ar_{i} = {vi} / {}u;", bk / 4));
            decls.push(format!("let akq_{i} = {vi} % {}u;", bk / 4));
            decls.push(format!(
                "let arow_{i} = a_base + min(tile_row0 + ar_{i}, p.m - 1u) * p.a_rs;"
            ));
            let value = if a_mode == Mode::Inner {
                format!("a4(arow_{i} + kclamp(k))")
            } else {
                format!(
                    "vec4<f32>(a1(arow_{i} + kclamp(k) * p.a_cs), a1(arow_{i} + kclamp(k + 1u) * p.a_cs), \
                     a1(arow_{i} + kclamp(k + 2u) * p.a_cs), a1(arow_{i} + kclamp(k + 3u) * p.a_cs))"
                )
            };
            (
                format!("{{ let k = k0 + 4u * akq_{i}; la_{i} = kmask4({value}, k); }}"),
                (0..4)
                    .map(|j| {
                        format!("put_a((nb + 4u * akq_{i} + {j}u) * {bm}u + ar_{i}, la_{i}[{j}]);")
                    })
                    .collect(),
            )
        };
        wrap(&g, vec![l], &mut load);
        wrap(&g, st, &mut store);
    }
    for i in 0..rounds(qb) {
        let vi = format!("(tid + {}u)", i * threads);
        let g = guard(qb, i, &format!("bv{i}"), &mut decls);
        decls.push(format!("var lb_{i} = vec4<f32>(0.0);"));
        let (l, st) = if b_mode == Mode::Outer {
            // Quads along k: (column bc, k quad bkq).
            decls.push(format!("let bc_{i} = {vi} / {}u;", bk / 4));
            decls.push(format!("let bkq_{i} = {vi} % {}u;", bk / 4));
            decls.push(format!(
                "let bcol_{i} = b_base + min(tile_q0 * 4u + bc_{i}, p.n - 1u) * p.b_cs;"
            ));
            (
                format!(
                    "{{ let k = k0 + 4u * bkq_{i}; lb_{i} = kmask4(b4(bcol_{i} + kclamp(k)), k); }}"
                ),
                (0..4)
                    .map(|j| {
                        format!("put_b((nb + 4u * bkq_{i} + {j}u) * {bn}u + bc_{i}, lb_{i}[{j}]);")
                    })
                    .collect(),
            )
        } else {
            // Quads along n: (k row bkk, column quad bnq).
            decls.push(format!("let bkk_{i} = {vi} / {}u;", bn / 4));
            decls.push(format!("let bnq_{i} = {vi} % {}u;", bn / 4));
            let value = if b_mode == Mode::Inner {
                decls.push(format!(
                    "let bquad_{i} = min(tile_q0 + bnq_{i}, last_quad);"
                ));
                format!("b4(b_base + kclamp(k) * p.b_rs + bquad_{i} * 4u)")
            } else {
                decls.push(format!("let bc0_{i} = (tile_q0 + bnq_{i}) * 4u;"));
                let one = |j: u32| {
                    format!(
                        "b1(b_base + kclamp(k) * p.b_rs + min(bc0_{i} + {j}u, p.n - 1u) * p.b_cs)"
                    )
                };
                format!("vec4<f32>({}, {}, {}, {})", one(0), one(1), one(2), one(3))
            };
            (
                format!(
                    "{{ let k = k0 + bkk_{i}; lb_{i} = select({value}, vec4<f32>(0.0), K_TAIL && k >= p.k); }}"
                ),
                vec![format!(
                    "put_b4((nb + bkk_{i}) * {bn}u + 4u * bnq_{i}, lb_{i});"
                )],
            )
        };
        wrap(&g, vec![l], &mut load);
        wrap(&g, st, &mut store);
    }
    StagingCode {
        decls: indent(decls, 1),
        load: indent(load, 3),
        store: indent(store, 3),
    }
}

/// The substitutions of `wgsl/gemm_shared.wgsl` for a `Shared` kernel.
/// `looped`: the stores as one loop (`matmul::store_quads`).
pub(crate) fn subs(
    kernel: GemmKernel,
    a_mode: Mode,
    b_mode: Mode,
    looped: bool,
) -> Vec<(&'static str, String)> {
    let GemmKernel::Shared {
        wg_x,
        wg_y,
        tm,
        nv,
        bk,
    } = kernel
    else {
        unreachable!("gemm_shared::subs takes Shared kernels")
    };
    let (bm, bn) = (wg_y * tm, wg_x * 4 * nv);
    let code = staging(
        Staging {
            bm,
            bn,
            bk,
            threads: wg_x * wg_y,
        },
        a_mode,
        b_mode,
    );
    // Thread (tx, ty) owns rows (g WG_Y + ty) 4 + i and column quads
    // v WG_X + tx of the block: vec4 reads of both staged blocks, and
    // neighbouring threads store neighbouring quads.
    let mut decls = Vec::new();
    for r in 0..tm {
        for v in 0..nv {
            decls.push(format!("var acc_{r}_{v} = vec4<f32>(0.0);"));
        }
    }
    let mut compute = Vec::new();
    for kk in 0..bk {
        compute.push("{".to_string());
        compute.push(format!("    let ka = (cur + {kk}u) * {}u + ty;", bm / 4));
        for g in 0..tm / 4 {
            compute.push(format!("    let a{g} = sa4(ka + {}u);", g * wg_y));
        }
        compute.push(format!("    let kb = (cur + {kk}u) * {}u + tx;", bn / 4));
        for v in 0..nv {
            compute.push(format!("    let b{v} = sb4(kb + {}u);", v * wg_x));
        }
        for r in 0..tm {
            let (g, i) = (r / 4, r % 4);
            for v in 0..nv {
                compute.push(format!(
                    "    acc_{r}_{v} = fma(vec4<f32>(a{g}[{i}]), b{v}, acc_{r}_{v});"
                ));
            }
        }
        compute.push("}".to_string());
    }
    let mut calls = Vec::new();
    for r in 0..tm {
        let (g, i) = (r / 4, r % 4);
        for v in 0..nv {
            calls.push([
                format!("tile_row0 + ({}u + ty) * 4u + {i}u", g * wg_y),
                format!("tile_q0 + {}u + tx", v * wg_x),
                format!("acc_{r}_{v}"),
            ]);
        }
    }
    let epilogue = store_quads(&calls, "bases.c", "bases.out", looped);
    vec![
        ("WG_X", wg_x.to_string()),
        ("WG_Y", wg_y.to_string()),
        ("BM", bm.to_string()),
        ("BN", bn.to_string()),
        ("BK", bk.to_string()),
        ("STAGE_DECLS", code.decls),
        ("LOAD", code.load),
        ("STORE", code.store),
        ("DECLS", indent(decls, 1)),
        ("COMPUTE", indent(compute, 2)),
        ("EPILOGUE", indent(epilogue, 1)),
    ]
}
