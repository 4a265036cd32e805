//! The per-thread register block, generated straight-line: a thread's
//! accumulators (`tm` rows by `4 nv` columns), one K chunk's loads of A
//! and B in each load mode and their multiply-adds, and the stores of its
//! accumulators. The register family (`wgsl/gemm.wgsl`) runs it for its
//! tile; the split-K family (`wgsl/gemm_splitk.wgsl`) for a 1 x 4 block
//! per lane, so every load mode and dtype works the same way in both.

use super::indent;
use super::operand::Mode;
use super::store::store_quads;

/// A register block's tile: a workgroup of `wg_x * wg_y` threads, each
/// computing `tm` rows by `4 * nv` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tile {
    pub wg_x: u32,
    pub wg_y: u32,
    pub tm: u32,
    pub nv: u32,
}

/// The generated, straight-line parts of the GEMM (see `wgsl/gemm.wgsl`)
/// for a tile and the operand load modes.
pub(crate) struct GemmBody {
    /// `DECLS`: per-thread row offsets, column quads and accumulators.
    pub decls: String,
    /// `CHUNK`: the loads and multiply-adds of one chunk of four k.
    pub chunk: String,
    /// `EPILOGUE`: one `store_quad` per accumulator.
    pub epilogue: String,
}

impl GemmBody {
    /// The `DECLS`, `CHUNK` and `EPILOGUE` substitutions.
    pub(crate) fn subs(self) -> [(&'static str, String); 3] {
        [
            ("DECLS", self.decls),
            ("CHUNK", self.chunk),
            ("EPILOGUE", self.epilogue),
        ]
    }
}

/// Generates [`GemmBody`]. Why straight-line code: on lavapipe a private
/// array indexed by a loop counter that NIR does not unroll lives in memory
/// and each access becomes a per-lane loop, and NIR stops unrolling large
/// bodies; named variables and literal indices keep every accumulator in
/// registers (or plain stack slots) at any tile size, so the tile is limited
/// only by register pressure and compile time.
///
/// `looped`: the stores as one loop (see [`store_quads`]).
pub(crate) fn gemm_body(tile: Tile, a_mode: Mode, b_mode: Mode, looped: bool) -> GemmBody {
    let (tm, nv) = (tile.tm, tile.nv);
    let mut decls = Vec::new();
    for r in 0..tm {
        decls.push(format!(
            "let arow_{r} = a_base + min(row0 + {r}u, p.m - 1u) * p.a_rs;"
        ));
    }
    // Column group v of this thread: quad q0 + v WG_X (lanes side by side),
    // or with pair loads quad q0 + lid.x + 2 (v / 2) WG_X + v % 2 (pairs of
    // quads side by side; q0 + lid.x is even since NV is).
    let pair = b_mode == Mode::Pair;
    let quad_of = |v: u32| {
        if pair {
            format!("q0 + lid.x + {}u", 2 * (v / 2) * tile.wg_x + v % 2)
        } else {
            format!("q0 + {}u", v * tile.wg_x)
        }
    };
    for v in 0..nv {
        decls.push(format!("let quad_{v} = min({}, last_quad);", quad_of(v)));
    }
    for r in 0..tm {
        for v in 0..nv {
            decls.push(format!("var acc_{r}_{v} = vec4<f32>(0.0);"));
        }
    }
    if a_mode == Mode::PairK {
        debug_assert_eq!(b_mode, Mode::PairK);
        let c = pair_k_chunk(tile, &mut decls);
        return GemmBody {
            decls: indent(decls, 1),
            chunk: indent(c, 2),
            epilogue: indent(
                store_quads(&calls(tile, &quad_of), "c_base", "out_base", looped),
                1,
            ),
        };
    }
    let mut c = Vec::new();
    // The 4 x 4NV block of B: b{kk}_{v} = B[k0 + kk, 4 quad_v .. 4 quad_v + 4].
    // In the tail chunk a vec4 along k is masked lane by lane (`kmasked`),
    // a vec4 at one k as a whole.
    for v in 0..nv {
        if pair {
            // One vec4<u64> per k holds quads v and v + 1 (v even; a clamped
            // quad_v past the last quad is never stored).
            if v % 2 == 0 {
                for kk in 0..4 {
                    c.push(format!(
                        "let w{kk}_{v} = b[(b_base + kc[{kk}] * p.b_rs + quad_{v} * 4u) >> 3u];"
                    ));
                    for (h, half) in [(0, "first"), (1, "second")] {
                        c.push(format!(
                            "let b{kk}_{} = select(pair_{half}(w{kk}_{v}), vec4<f32>(0.0), tail && !kmask[{kk}]);",
                            v + h
                        ));
                    }
                }
            }
            continue;
        }
        if b_mode == Mode::Inner {
            for kk in 0..4 {
                c.push(format!(
                    "let b{kk}_{v} = select(b4(b_base + kc[{kk}] * p.b_rs + quad_{v} * 4u), vec4<f32>(0.0), tail && !kmask[{kk}]);"
                ));
            }
            continue;
        }
        // Four columns, each a vec4 along k (Outer) or four scalars,
        // transposed in registers.
        for j in 0..4 {
            c.push(format!(
                "let e{j}_{v} = b_base + min(quad_{v} * 4u + {j}u, p.n - 1u) * p.b_cs;"
            ));
            let load = if b_mode == Mode::Outer {
                format!("b4(e{j}_{v} + k0)")
            } else {
                format!(
                    "vec4<f32>(b1(e{j}_{v} + kc.x * p.b_rs), b1(e{j}_{v} + kc.y * p.b_rs), \
                     b1(e{j}_{v} + kc.z * p.b_rs), b1(e{j}_{v} + kc.w * p.b_rs))"
                )
            };
            c.push(format!("let t{j}_{v} = kmasked({load}, tail, kmask);"));
        }
        for kk in 0..4 {
            c.push(format!(
                "let b{kk}_{v} = vec4<f32>(t0_{v}[{kk}], t1_{v}[{kk}], t2_{v}[{kk}], t3_{v}[{kk}]);"
            ));
        }
    }
    // A, one row at a time (x{r} = A[row r, k0 .. k0 + 4]; four rows at a
    // time for column-major A), each followed by its multiply-adds so that
    // few A values are live at once.
    for r in 0..tm {
        match a_mode {
            Mode::Inner => c.push(format!(
                "let x{r} = kmasked(a4(arow_{r} + k0), tail, kmask);"
            )),
            // (Pair is a mode of B only; PairK has its own chunk.)
            Mode::Scalar | Mode::Pair | Mode::PairK => c.push(format!(
                "let x{r} = kmasked(vec4<f32>(a1(arow_{r} + kc.x * p.a_cs), \
                 a1(arow_{r} + kc.y * p.a_cs), a1(arow_{r} + kc.z * p.a_cs), \
                 a1(arow_{r} + kc.w * p.a_cs)), tail, kmask);"
            )),
            Mode::Outer => {
                // `tm` is a multiple of four in this mode: s{kk}_{g} holds
                // rows g .. g + 4 at k0 + kk.
                let (g, i) = (r - r % 4, r % 4);
                if i == 0 {
                    for kk in 0..4 {
                        c.push(format!(
                            "let s{kk}_{g} = select(a4(arow_{g} + kc[{kk}] * p.a_cs), vec4<f32>(0.0), tail && !kmask[{kk}]);"
                        ));
                    }
                }
                c.push(format!(
                    "let x{r} = vec4<f32>(s0_{g}[{i}], s1_{g}[{i}], s2_{g}[{i}], s3_{g}[{i}]);"
                ));
            }
        }
        for v in 0..nv {
            c.push(format!(
                "acc_{r}_{v} = fma(vec4<f32>(x{r}.w), b3_{v}, fma(vec4<f32>(x{r}.z), b2_{v}, \
                 fma(vec4<f32>(x{r}.y), b1_{v}, fma(vec4<f32>(x{r}.x), b0_{v}, acc_{r}_{v}))));"
            ));
        }
    }
    GemmBody {
        decls: indent(decls, 1),
        chunk: indent(c, 2),
        epilogue: indent(
            store_quads(&calls(tile, &quad_of), "c_base", "out_base", looped),
            1,
        ),
    }
}

/// The `store_quad` arguments of every accumulator of `tile`, its column
/// quads given by `quad_of`.
fn calls(tile: Tile, quad_of: &dyn Fn(u32) -> String) -> Vec<[String; 3]> {
    let mut calls = Vec::new();
    for r in 0..tile.tm {
        for v in 0..tile.nv {
            calls.push([format!("row0 + {r}u"), quad_of(v), format!("acc_{r}_{v}")]);
        }
    }
    calls
}

/// [`Mode::PairK`]'s chunk of eight k (the loop steps by eight, K is a
/// multiple of it), adding the column offsets of B to `decls`. A first:
/// y{r} = A[row r, k0 .. k0 + 8] in one load, x{r}_{h} its quad h; then
/// per column group v the eight k of its four columns in four loads,
/// transposed in registers into b{kk}_{v}_{h} = B[k0 + 4h + kk, quad v],
/// and its multiply-adds in k order (as the four-k chunk does, so results
/// do not depend on the mode).
fn pair_k_chunk(tile: Tile, decls: &mut Vec<String>) -> Vec<String> {
    let (tm, nv) = (tile.tm, tile.nv);
    for v in 0..nv {
        for j in 0..4 {
            decls.push(format!(
                "let e{j}_{v} = b_base + min(quad_{v} * 4u + {j}u, p.n - 1u) * p.b_cs;"
            ));
        }
    }
    let halves = [(0, "first"), (1, "second")];
    let mut c = Vec::new();
    for r in 0..tm {
        c.push(format!("let y{r} = a[(arow_{r} + k0) >> 3u];"));
        for (h, half) in halves {
            c.push(format!("let x{r}_{h} = pair_{half}(y{r});"));
        }
    }
    for v in 0..nv {
        for j in 0..4 {
            c.push(format!("let w{j}_{v} = b[(e{j}_{v} + k0) >> 3u];"));
        }
        for (h, half) in halves {
            for j in 0..4 {
                c.push(format!("let t{j}_{v}_{h} = pair_{half}(w{j}_{v});"));
            }
            for kk in 0..4 {
                c.push(format!(
                    "let b{kk}_{v}_{h} = vec4<f32>(t0_{v}_{h}[{kk}], t1_{v}_{h}[{kk}], t2_{v}_{h}[{kk}], t3_{v}_{h}[{kk}]);"
                ));
            }
        }
        for r in 0..tm {
            let mut e = format!("acc_{r}_{v}");
            for h in 0..2 {
                for (kk, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                    e = format!("fma(vec4<f32>(x{r}_{h}.{lane}), b{kk}_{v}_{h}, {e})");
                }
            }
            c.push(format!("acc_{r}_{v} = {e};"));
        }
    }
    c
}
