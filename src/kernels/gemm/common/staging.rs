//! The workgroup-memory staging both tiled families share (the
//! workgroup-memory family, `wgsl/gemm_shared.wgsl`, and the
//! cooperative-matrix family, `wgsl/gemm_coop.wgsl`): each step a workgroup
//! copies a block of A and a block of B into one of two k-major buffers
//! (vec4 loads where the layout allows them) while it multiplies out of
//! the other, one barrier per step.

use super::indent;
use super::operand::Mode;

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

/// The workgroup arrays of both staging buffers (`len` elements each of A
/// and B) and their accessors: vec4 arrays, or with `scalar` f32 arrays read
/// as quads (see wgsl/gemm_shared.wgsl for which back ends need which).
pub(crate) fn staging_decls(len_a: u32, len_b: u32, scalar: bool) -> String {
    let mut s = String::new();
    for (x, len) in [("a", len_a), ("b", len_b)] {
        s += &if scalar {
            format!(
                "var<workgroup> s{x}: array<f32, {len}>;
                 fn put_{x}(i: u32, v: f32) {{ s{x}[i] = v; }}
                 fn put_{x}4(i: u32, v: vec4<f32>) {{ s{x}[i] = v.x; s{x}[i + 1u] = v.y; s{x}[i + 2u] = v.z; s{x}[i + 3u] = v.w; }}
                 fn s{x}4(q: u32) -> vec4<f32> {{ let i = 4u * q; return vec4<f32>(s{x}[i], s{x}[i + 1u], s{x}[i + 2u], s{x}[i + 3u]); }}
"
            )
        } else {
            format!(
                "var<workgroup> s{x}: array<vec4<f32>, {}>;
                 fn put_{x}(i: u32, v: f32) {{ s{x}[i >> 2u][i & 3u] = v; }}
                 fn put_{x}4(i: u32, v: vec4<f32>) {{ s{x}[i >> 2u] = v; }}
                 fn s{x}4(q: u32) -> vec4<f32> {{ return s{x}[q]; }}
",
                len / 4
            )
        };
    }
    s
}
