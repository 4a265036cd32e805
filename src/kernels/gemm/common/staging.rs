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
struct StagingCode {
    /// Per-thread constants (which quads of the blocks it loads) and the
    /// staging registers `la_{i}`, `lb_{i}`.
    decls: String,
    /// Global loads of the step starting at `k0` into the registers.
    load: String,
    /// The registers into the buffer whose first k row is `nb`.
    store: String,
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
fn staging(s: Staging, a_mode: Mode, b_mode: Mode) -> StagingCode {
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
    // B's loop is alike in shape to A's, but left apart: B's quads run
    // along n or k where A's run along k or m, with their own indices.
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

/// A tiled family's own code around the shared staging (see
/// [`tiled_subs`]).
pub(crate) struct Tiled {
    /// Its accumulators' declarations.
    pub decls: Vec<String>,
    /// The multiply-adds of one step, in sub-steps (each a block of its
    /// own) reading the staged buffer whose first k row is `cur`.
    pub substeps: Vec<Vec<String>>,
    /// Its stores (`store_quad` calls, through `common::store`).
    pub stores: Vec<String>,
}

/// The `DECLS`, `STEPS` and `EPILOGUE` substitutions of a tiled family
/// (`wgsl/gemm_shared.wgsl`, `wgsl/gemm_coop.wgsl`): its accumulators, the
/// staged K loop around its multiply-adds ([`steps`]), its stores.
pub(crate) fn tiled_subs(
    s: Staging,
    a_mode: Mode,
    b_mode: Mode,
    t: Tiled,
) -> [(&'static str, String); 3] {
    [
        ("DECLS", indent(t.decls, 1)),
        ("STEPS", steps(s, a_mode, b_mode, t.substeps)),
        ("EPILOGUE", indent(t.stores, 1)),
    ]
}

/// The staged K loop both tiled families run (their `STEPS`): this
/// thread's staging constants and registers ([`staging`]), the first
/// step's blocks stored into the buffer at k row 0, then per step of `BK`
/// k: the next step's loads into registers (in flight during the
/// multiply-adds), `substeps` (the step's multiply-adds out of the buffer
/// whose first k row is `cur`, each sub-step a block), those registers
/// stored into the other buffer (first k row `nb`), and one barrier.
/// Besides what [`staging`] expects it reads `BK` (the step's k) in WGSL.
fn steps(s: Staging, a_mode: Mode, b_mode: Mode, substeps: Vec<Vec<String>>) -> String {
    let StagingCode { decls, load, store } = staging(s, a_mode, b_mode);
    let mut compute = Vec::new();
    for sub in substeps {
        compute.push("{".to_string());
        compute.extend(sub.into_iter().map(|l| format!("    {l}")));
        compute.push("}".to_string());
    }
    let compute = indent(compute, 2);
    format!(
        "{decls}    let steps = (p.k + BK - 1u) / BK;
    if steps > 0u {{
        let k0 = 0u;
        let nb = 0u;
        {{
{load}{store}        }}
    }}
    workgroupBarrier();
    for (var t = 0u; t < steps; t++) {{
        // First k row of the buffer read now, and of the one filled now.
        let cur = (t & 1u) * BK;
        let nb = BK - cur;
        let k0 = (t + 1u) * BK;
        let more = t + 1u < steps;
        if more {{
{load}        }}
{compute}        if more {{
{store}        }}
        workgroupBarrier();
    }}
"
    )
}

/// The workgroup arrays of both staging buffers (`len_a` and `len_b`
/// elements) and their accessors `put_a`, `put_a4`, `put_b`, `put_b4` (the
/// stores [`staging`] makes) and `sa4`, `sb4` (a quad read as f32): vec4
/// arrays of f32, or with `scalar` arrays of that element type (converted
/// from and to f32) read as quads. The workgroup-memory family takes f32
/// scalar arrays on the back ends whose store into one component of a
/// shared vec4 is a read-modify-write of the whole vector (see
/// wgsl/gemm_shared.wgsl), the cooperative-matrix family arrays of its
/// fragments' type `CT`.
pub(crate) fn staging_decls(len_a: u32, len_b: u32, scalar: Option<&str>) -> String {
    let mut s = String::new();
    for (x, len) in [("a", len_a), ("b", len_b)] {
        s += &if let Some(t) = scalar {
            // (Conversions only where the type is not f32: the f32 text is
            // what it was before the cooperative family shared it.)
            let to = |e: &str| {
                if t == "f32" {
                    e.to_string()
                } else {
                    format!("{t}({e})")
                }
            };
            let from = |e: &str| {
                if t == "f32" {
                    e.to_string()
                } else {
                    format!("f32({e})")
                }
            };
            format!(
                "var<workgroup> s{x}: array<{t}, {len}>;
                 fn put_{x}(i: u32, v: f32) {{ s{x}[i] = {}; }}
                 fn put_{x}4(i: u32, v: vec4<f32>) {{ s{x}[i] = {}; s{x}[i + 1u] = {}; s{x}[i + 2u] = {}; s{x}[i + 3u] = {}; }}
                 fn s{x}4(q: u32) -> vec4<f32> {{ let i = 4u * q; return vec4<f32>({}, {}, {}, {}); }}
",
                to("v"),
                to("v.x"),
                to("v.y"),
                to("v.z"),
                to("v.w"),
                from(&format!("s{x}[i]")),
                from(&format!("s{x}[i + 1u]")),
                from(&format!("s{x}[i + 2u]")),
                from(&format!("s{x}[i + 3u]")),
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
