//! Matmul kernels: the tiled GEMM (wgsl/gemm.wgsl), specialised per shape
//! class, dtype and operand layout, and the reference one-thread-per-output
//! kernel (wgsl/matmul_naive.wgsl) kept for comparison.

use super::{
    Context, Dispatch, GEMM, GEMM_BIAS, Kernel, MATMUL_NAIVE, Operand, Params, QuickKey, Spec,
};
use crate::DType;
use crate::Result;

/// The strides of a matmul [`Operand`]: six, over `[batch0..batch3, rows,
/// cols]` (the four batch dimensions already broadcast, 0 where repeated).
fn batch_strides<'o>(op: &'o Operand<'_>) -> &'o [isize] {
    &op.strides[..4]
}

fn row_stride(op: &Operand<'_>) -> isize {
    op.strides[4]
}

fn col_stride(op: &Operand<'_>) -> isize {
    op.strides[5]
}

/// The reference kernel (wgsl/matmul_naive.wgsl, one thread per output, f32):
/// `c[batch, m, n] (+)= a[batch, m, k0..k] @ b[batch, k0..k, n]` into dense
/// `c`, adding to `c` when `accumulate`. Only `crate::baseline` uses it, as
/// the plain way to compare the GEMM with.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_naive(
    cx: &Context,
    batch_shape: [usize; 4],
    m: usize,
    n: usize,
    k: std::ops::Range<usize>,
    accumulate: bool,
    a: &Operand<'_>,
    b: &Operand<'_>,
    c: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let total = batch_shape.iter().product::<usize>() * m * n;
    if total == 0 {
        return Ok(None);
    }
    let mut p = Params::new("matmul");
    p.put(0, [m, n, k.end, total].map(|x| x as i64))?;
    p.put(10, [k.start as i64, accumulate as i64])?;
    for (base, op) in [(4, a), (7, b)] {
        p.put(
            base,
            [
                op.offset as i64,
                row_stride(op) as i64,
                col_stride(op) as i64,
            ],
        )?;
    }
    p.put(12, batch_shape.iter().map(|&x| x as i64))?;
    p.put(16, batch_strides(a).iter().map(|&x| x as i64))?;
    p.put(20, batch_strides(b).iter().map(|&x| x as i64))?;
    let (spec, kernel) = naive_spec();
    Ok(Some(Dispatch {
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![a.buffer.clone(), b.buffer.clone(), c.clone()],
        workgroups: cx.grid(total as u64)?,
    }))
}

fn naive_spec() -> (Spec, &'static Kernel) {
    MATMUL_NAIVE.spec(&[])
}

#[cfg(test)]
/// Every specialisation the matmul dispatch functions can ask for.
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = vec![naive_spec()];
    // Every dtype, load mode, store mode and bias choice of the GEMM, in
    // each shape class's tile.
    let modes = [Mode::Scalar, Mode::Inner, Mode::Outer];
    let tiles = [
        tile_for(1, 100, true),
        tile_for(1, 100, false),
        tile_for(8, 8, true),
        tile_for(64, 64, true),
        tile_for(512, 512, true),
    ];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for tile in tiles {
            for a_mode in modes {
                if a_mode == Mode::Outer && !tile.tm.is_multiple_of(4) {
                    continue;
                }
                for b_mode in modes {
                    for out_vec in [false, true] {
                        for has_bias in [false, true] {
                            for k_tail in [false, true] {
                                out.push(
                                    GemmVariant {
                                        dtype,
                                        tile,
                                        a_mode,
                                        b_mode,
                                        out_vec,
                                        has_bias,
                                        k_tail,
                                    }
                                    .spec(),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// A tile shape of the GEMM kernel: a workgroup of `wg_x * wg_y` threads,
/// each computing `tm` rows by `4 * nv` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tile {
    pub wg_x: u32,
    pub wg_y: u32,
    pub tm: u32,
    pub nv: u32,
}

impl Tile {
    /// Output rows per workgroup.
    fn rows(self) -> usize {
        (self.wg_y * self.tm) as usize
    }
    /// Output columns per workgroup.
    fn cols(self) -> usize {
        (self.wg_x * 4 * self.nv) as usize
    }
}

/// The tile for a shape class. Measured on lavapipe (AVX2, 8 lanes), see
/// docs/PERFORMANCE.md: every storage load there is a per-lane loop that
/// costs far more than the multiply-adds it feeds, so the per-thread block
/// (loads per multiply-add fall as `1/tm + 1/(4 nv)`) decides, bounded by the
/// compile time of the generated code (about 25 ms for 4 x 16 accumulators,
/// 45 ms for 8 x 16, 120 ms for 16 x 16, 350 ms for 16 x 32).
///
/// `software`: the adapter is a CPU one (device type `Cpu`), which takes
/// a bigger large-class tile than a GPU (see [`large_tile`]).
pub(crate) fn tile_for(m: usize, n: usize, software: bool) -> Tile {
    let tile = |wg_x, wg_y, tm, nv| Tile { wg_x, wg_y, tm, nv };
    if m == 1 {
        // Matrix-vector (decode steps): one row, threads across columns. On
        // lavapipe 16 columns per thread share each load of A, and 16-thread
        // workgroups give both cores work at N = 1152 (2x the 64 x 4 tile at
        // 1 x 4096 x 4096); GPUs want more threads per workgroup.
        if software {
            tile(16, 1, 1, 4)
        } else {
            tile(64, 1, 1, 1)
        }
    } else if m < 32 || n < 64 {
        // Small or skinny: 32 x 32 tiles waste little on edges.
        tile(8, 8, 4, 1)
    } else if m < 128 || n < 128 {
        // Medium: 64 x 128 tiles.
        tile(8, 8, 8, 4)
    } else {
        large_tile(software)
    }
}

/// The tile of the large class: 128 x 128 tiles of 16 x 16 outputs per
/// thread on a software adapter, the medium tile (8 x 16 per thread) on a
/// GPU. `WGARRAY_GEMM_TILE=wg_x,wg_y,tm,nv` overrides it (for tuning on a
/// new adapter; read once; at most 256 threads and 512 accumulators per
/// thread).
///
/// Measured (docs/PERFORMANCE.md): on lavapipe at 1024^3, 16 x 32 per thread
/// is about 20% faster than 16 x 16 but compiles in 350 ms instead of 120;
/// on an H200 (Vulkan) at 4096^3, 16 x 16 spills registers and runs at half
/// the speed of 8 x 16.
fn large_tile(software: bool) -> Tile {
    static OVERRIDE: std::sync::OnceLock<Option<Tile>> = std::sync::OnceLock::new();
    let chosen = OVERRIDE.get_or_init(|| {
        let v = std::env::var("WGARRAY_GEMM_TILE").ok()?;
        let x: Vec<u32> = v.split(',').filter_map(|s| s.trim().parse().ok()).collect();
        match x[..] {
            [wg_x, wg_y, tm, nv]
                if (1..=256).contains(&(wg_x as u64 * wg_y as u64))
                    && (1..=128).contains(&(tm as u64 * nv as u64)) =>
            {
                Some(Tile { wg_x, wg_y, tm, nv })
            }
            _ => None,
        }
    });
    let (tm, nv) = if software { (16, 4) } else { (8, 4) };
    chosen.unwrap_or(Tile {
        wg_x: 8,
        wg_y: 8,
        tm,
        nv,
    })
}

/// How the kernel loads an operand (see `gemm_body`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mode {
    /// Scalar loads through both strides.
    Scalar,
    /// vec4 loads along the contiguous inner dimension (k for A, n for B).
    Inner,
    /// vec4 loads along the outer dimension (m for A, k for B): the operand
    /// is a transposed view.
    Outer,
}

impl Mode {
    fn vec(self) -> bool {
        self != Mode::Scalar
    }
}

/// Whether an operand of `rows x cols` can be read as vec4s along the
/// dimension with stride `unit` (which must be 1), the other stride and every
/// offset being multiples of four elements. Strides of length-1 dimensions
/// do not matter.
fn vec_ok(op: &Operand<'_>, rows: usize, cols: usize, along_cols: bool) -> bool {
    let (unit, other, unit_len, other_len) = if along_cols {
        (col_stride(op), row_stride(op), cols, rows)
    } else {
        (row_stride(op), col_stride(op), rows, cols)
    };
    unit_len > 1
        && unit == 1
        && (other_len == 1 || other.rem_euclid(4) == 0)
        && op.offset.is_multiple_of(4)
        && batch_strides(op).iter().all(|s| s.rem_euclid(4) == 0)
}

/// The WGSL for one operand: its binding's element type, and expressions
/// for one element and for four consecutive ones (index `e`, a multiple of
/// four for the latter) as f32.
struct Access {
    arr: &'static str,
    one: String,
    four: String,
}

fn access(dtype: DType, vec: bool, name: &str) -> Access {
    let scalar_four = |one: &dyn Fn(&str) -> String| {
        format!(
            "vec4<f32>({}, {}, {}, {})",
            one("e"),
            one("(e + 1u)"),
            one("(e + 2u)"),
            one("(e + 3u)")
        )
    };
    match (dtype, vec) {
        (DType::F16, false) => {
            let one = |i: &str| format!("f32({name}[{i}])");
            Access {
                arr: "f16",
                one: one("e"),
                four: scalar_four(&one),
            }
        }
        (DType::F16, true) => Access {
            arr: "vec4<f16>",
            one: format!("f32({name}[e >> 2u][e & 3u])"),
            four: format!("vec4<f32>({name}[e >> 2u])"),
        },
        (DType::BF16, false) => {
            let one = |i: &str| {
                format!(
                    "select(bfloat_lo({name}[{i} >> 1u]), bfloat_hi({name}[{i} >> 1u]), ({i} & 1u) == 1u)"
                )
            };
            Access {
                arr: "u32",
                one: one("e"),
                four: scalar_four(&one),
            }
        }
        (DType::BF16, true) => Access {
            arr: "vec2<u32>",
            one: format!(
                "select(bfloat_lo({name}[e >> 2u][(e >> 1u) & 1u]), bfloat_hi({name}[e >> 2u][(e >> 1u) & 1u]), (e & 1u) == 1u)"
            ),
            four: format!("bfloat4({name}[e >> 2u])"),
        },
        (_, false) => {
            let one = |i: &str| format!("{name}[{i}]");
            Access {
                arr: "f32",
                one: one("e"),
                four: scalar_four(&one),
            }
        }
        (_, true) => Access {
            arr: "vec4<f32>",
            one: format!("{name}[e >> 2u][e & 3u]"),
            four: format!("{name}[e >> 2u]"),
        },
    }
}

/// The output binding's element type and the statements storing one element
/// (`x` at `e`) and four (`v` at `e`, a multiple of four).
fn store(dtype: DType, vec: bool) -> (&'static str, String, String) {
    match (dtype, vec) {
        (DType::F16, false) => (
            "f16",
            "out[e] = f16(x)".into(),
            "out[e] = f16(v.x); out[e + 1u] = f16(v.y); out[e + 2u] = f16(v.z); out[e + 3u] = f16(v.w)"
                .into(),
        ),
        (DType::F16, true) => (
            "vec4<f16>",
            "out[e >> 2u][e & 3u] = f16(x)".into(),
            "out[e >> 2u] = vec4<f16>(v)".into(),
        ),
        // Two bf16 share a word: a lone element is merged into its half with
        // atomics, which leave the other half (another thread's) intact.
        (DType::BF16, _) => (
            "atomic<u32>",
            "let s = (e & 1u) * 16u; atomicAnd(&out[e >> 1u], ~(0xffffu << s)); \
             atomicOr(&out[e >> 1u], bfloat_bits(x) << s)"
                .into(),
            "atomicStore(&out[e >> 1u], bfloat_bits(v.x) | (bfloat_bits(v.y) << 16u)); \
             atomicStore(&out[(e >> 1u) + 1u], bfloat_bits(v.z) | (bfloat_bits(v.w) << 16u))"
                .into(),
        ),
        (_, false) => (
            "f32",
            "out[e] = x".into(),
            "out[e] = v.x; out[e + 1u] = v.y; out[e + 2u] = v.z; out[e + 3u] = v.w".into(),
        ),
        (_, true) => (
            "vec4<f32>",
            "out[e >> 2u][e & 3u] = x".into(),
            "out[e >> 2u] = v".into(),
        ),
    }
}

/// The generated, straight-line parts of the GEMM (see `wgsl/gemm.wgsl`)
/// for a tile and the operand load modes.
struct GemmBody {
    /// `DECLS`: per-thread row offsets, column quads and accumulators.
    decls: String,
    /// `CHUNK`: the loads and multiply-adds of one chunk of four k.
    chunk: String,
    /// `EPILOGUE`: one `store_quad` per accumulator.
    epilogue: String,
}

/// Generates [`GemmBody`]. Why straight-line code: on lavapipe a private
/// array indexed by a loop counter that NIR does not unroll lives in memory
/// and each access becomes a per-lane loop, and NIR stops unrolling large
/// bodies; named variables and literal indices keep every accumulator in
/// registers (or plain stack slots) at any tile size, so the tile is limited
/// only by register pressure and compile time.
fn gemm_body(tile: Tile, a_mode: Mode, b_mode: Mode) -> GemmBody {
    let (tm, nv) = (tile.tm, tile.nv);
    let mut decls = Vec::new();
    for r in 0..tm {
        decls.push(format!(
            "let arow_{r} = a_base + min(row0 + {r}u, p.m - 1u) * p.a_rs;"
        ));
    }
    for v in 0..nv {
        decls.push(format!(
            "let quad_{v} = min(q0 + {}u, last_quad);",
            v * tile.wg_x
        ));
    }
    for r in 0..tm {
        for v in 0..nv {
            decls.push(format!("var acc_{r}_{v} = vec4<f32>(0.0);"));
        }
    }
    let mut c = Vec::new();
    // The 4 x 4NV block of B: b{kk}_{v} = B[k0 + kk, 4 quad_v .. 4 quad_v + 4].
    // In the tail chunk a vec4 along k is masked lane by lane (`kmasked`),
    // a vec4 at one k as a whole.
    for v in 0..nv {
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
            Mode::Scalar => c.push(format!(
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
    let mut epilogue = Vec::new();
    for r in 0..tm {
        for v in 0..nv {
            epilogue.push(format!(
                "store_quad(row0 + {r}u, q0 + {}u, acc_{r}_{v}, c_base, out_base);",
                v * tile.wg_x
            ));
        }
    }
    let indent = |lines: Vec<String>, depth: usize| {
        let pad = " ".repeat(depth * 4);
        lines
            .iter()
            .map(|l| format!("{pad}{l}\n"))
            .collect::<String>()
    };
    GemmBody {
        decls: indent(decls, 1),
        chunk: indent(c, 2),
        epilogue: indent(epilogue, 1),
    }
}

/// One specialisation of the GEMM: everything its WGSL depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GemmVariant {
    /// f32, f16 or bf16: A, B, the bias and the output.
    dtype: DType,
    tile: Tile,
    a_mode: Mode,
    b_mode: Mode,
    /// Vector stores; needs `n % 4 == 0`.
    out_vec: bool,
    has_bias: bool,
    /// `k % 4 != 0`: the last chunk of K is masked.
    k_tail: bool,
}

impl GemmVariant {
    /// The kernel text's substitutions for this variant.
    fn spec(self) -> (super::Spec, &'static super::Kernel) {
        let GemmVariant {
            dtype,
            tile,
            a_mode,
            b_mode,
            out_vec,
            has_bias,
            k_tail,
        } = self;
        let aa = access(dtype, a_mode.vec(), "a");
        let ba = access(dtype, b_mode.vec(), "b");
        let ca = access(dtype, false, "bias");
        let (out_arr, out_one, out_four) = store(dtype, out_vec);
        let mut bindings = format!(
            "@group(0) @binding(1) var<storage, read> a: array<{}>;\n\
             @group(0) @binding(2) var<storage, read> b: array<{}>;\n",
            aa.arr, ba.arr
        );
        let out_binding = if has_bias {
            bindings.push_str(&format!(
                "@group(0) @binding(3) var<storage, read> bias: array<{}>;\n",
                ca.arr
            ));
            4
        } else {
            3
        };
        bindings.push_str(&format!(
            "@group(0) @binding({out_binding}) var<storage, read_write> out: array<{out_arr}>;"
        ));
        let bias_one = if has_bias { ca.one } else { "0.0".into() };
        let (wg_x, wg_y, tm, nv) = (
            tile.wg_x.to_string(),
            tile.wg_y.to_string(),
            tile.tm.to_string(),
            tile.nv.to_string(),
        );
        let kernel = if has_bias { &GEMM_BIAS } else { &GEMM };
        let body = gemm_body(tile, a_mode, b_mode);
        let (spec, kernel) = kernel.spec(&[
            ("WG_X", &wg_x),
            ("WG_Y", &wg_y),
            ("TM", &tm),
            ("NV", &nv),
            ("DECLS", &body.decls),
            ("CHUNK", &body.chunk),
            ("EPILOGUE", &body.epilogue),
            ("OUT_VEC", if out_vec { "true" } else { "false" }),
            ("HAS_BIAS", if has_bias { "true" } else { "false" }),
            ("K_TAIL", if k_tail { "true" } else { "false" }),
            (
                "ENABLE_F16",
                if dtype == DType::F16 { "true" } else { "false" },
            ),
            ("BINDINGS", &bindings),
            ("A_ONE", &aa.one),
            ("A_FOUR", &aa.four),
            ("B_ONE", &ba.one),
            ("B_FOUR", &ba.four),
            ("BIAS_ONE", &bias_one),
            ("OUT_ONE", &out_one),
            ("OUT_FOUR", &out_four),
        ]);
        (spec, kernel)
    }
}

/// Everything the GEMM needs besides the device.
pub(crate) struct Gemm<'a> {
    /// f32, f16 or bf16: the dtype of A, B, the bias and the output.
    pub dtype: DType,
    pub batch_shape: [usize; 4],
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// `[batch.., m, k]` and `[batch.., k, n]` (six strides each).
    pub a: Operand<'a>,
    pub b: Operand<'a>,
    /// `beta * bias` is added to every output; its six strides broadcast it
    /// to `[batch.., m, n]`.
    pub bias: Option<Operand<'a>>,
    pub alpha: f32,
    pub beta: f32,
    /// Dense `[batch.., m, n]` output.
    pub out: &'a wgpu::Buffer,
    /// Force a tile (benchmarks and tuning); `None` picks by shape.
    pub tile: Option<Tile>,
}

/// The dispatches of the tiled GEMM: one, several when the grid passes the
/// per-dimension workgroup limit, none for an empty output.
///
/// # Errors
/// [`crate::Error::TooLarge`] for sizes, strides or offsets past `u32`,
/// [`crate::Error::Kernel`] if the specialisation fails to compile.
pub(crate) fn gemm(cx: &Context, g: &Gemm<'_>) -> Result<Vec<Dispatch>> {
    let (m, n, k) = (g.m, g.n, g.k);
    let batch: usize = g.batch_shape.iter().product();
    if batch * m * n == 0 {
        return Ok(Vec::new());
    }
    let tile = g.tile.unwrap_or_else(|| tile_for(m, n, cx.software));
    let a_mode = if vec_ok(&g.a, m, k, true) {
        Mode::Inner
    } else if tile.tm.is_multiple_of(4) && vec_ok(&g.a, m, k, false) {
        Mode::Outer
    } else {
        Mode::Scalar
    };
    let b_mode = if vec_ok(&g.b, k, n, true) {
        Mode::Inner
    } else if vec_ok(&g.b, k, n, false) {
        Mode::Outer
    } else {
        Mode::Scalar
    };
    let variant = GemmVariant {
        dtype: g.dtype,
        tile,
        a_mode,
        b_mode,
        out_vec: n.is_multiple_of(4),
        has_bias: g.bias.is_some(),
        k_tail: !k.is_multiple_of(4),
    };
    let zero = Operand {
        buffer: g.out,
        dtype: g.dtype,
        offset: 0,
        strides: vec![0; 6],
    };
    let c = g.bias.as_ref().unwrap_or(&zero);
    let mut p = Params::new("matmul");
    p.put(0, [m as i64, n as i64, k as i64, 0])?;
    for (base, op) in [(4, &g.a), (7, &g.b), (10, c)] {
        p.put(
            base,
            [
                op.offset as i64,
                row_stride(op) as i64,
                col_stride(op) as i64,
            ],
        )?;
    }
    p.put_bits(13, [g.alpha.to_bits(), g.beta.to_bits()]);
    p.put(16, g.batch_shape.iter().map(|&x| x as i64))?;
    let strides = batch_strides(&g.a)
        .iter()
        .chain(batch_strides(&g.b))
        .chain(batch_strides(c));
    p.put(20, strides.map(|&x| x as i64))?;
    if batch * m * n > u32::MAX as usize {
        // The kernel's flat output index is a u32.
        return Err(crate::Error::TooLarge {
            op: "matmul",
            limit: crate::Limit::KernelIndex,
            value: (batch * m * n) as u64,
            max: u32::MAX as u64,
        });
    }
    let pipeline = cx
        .cache
        .get_quick(QuickKey::Gemm(variant), || variant.spec())?;
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(c) = &g.bias {
        buffers.push(c.buffer.clone());
    }
    buffers.push(g.out.clone());
    // A grid past the per-dimension limit runs as several dispatches, each
    // told its workgroup offset (`group0`).
    let max = cx.limits.max_compute_workgroups_per_dimension as usize;
    let groups = [n.div_ceil(tile.cols()), m.div_ceil(tile.rows()), batch];
    let mut out = Vec::new();
    for z0 in (0..groups[2]).step_by(max) {
        for y0 in (0..groups[1]).step_by(max) {
            for x0 in (0..groups[0]).step_by(max) {
                let origin = [x0, y0, z0];
                let mut params = p.clone();
                params.put(32, origin.map(|o| o as i64))?;
                out.push(Dispatch {
                    pipeline: pipeline.clone(),
                    params: params.words(),
                    buffers: buffers.clone(),
                    workgroups: [0, 1, 2].map(|d| (groups[d] - origin[d]).min(max) as u32),
                });
            }
        }
    }
    Ok(out)
}
