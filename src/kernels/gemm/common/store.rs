//! How every GEMM family stores its results: through `store_quad`
//! (`wgsl/gemm_common.wgsl`: `alpha`, the bias, then the output or a fused
//! epilogue), called for each accumulator quad by [`store_quads`]; and the
//! output binding's element stores for the dtype ([`store`]).

use crate::DType;

/// The output binding's element type and the statements storing one element
/// (`x` at `e`) and four (`v` at `e`, a multiple of four).
pub(crate) fn store(dtype: DType, vec: bool) -> (&'static str, String, String) {
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

/// A family's stores: `store_quad(row, quad, acc, c_base, out_base)` for
/// each `[row, quad, acc]` of `calls`, straight-line; or, when `looped` (a
/// fused epilogue, whose code drivers inline at every call), one loop over
/// arrays of the calls' arguments. Its bound is not a compile-time constant
/// (`p.m` is at least 1 whenever the kernel runs), so drivers do not unroll
/// it: unrolled, an `exp` epilogue of the 16 x 16 tile took lavapipe 11 s
/// to compile, against 3.7 s looped (about what the elementwise `exp`
/// kernel alone takes there).
pub(crate) fn store_quads(
    calls: &[[String; 3]],
    c_base: &str,
    out_base: &str,
    looped: bool,
) -> Vec<String> {
    if !looped || calls.len() == 1 {
        return calls
            .iter()
            .map(|[r, q, acc]| format!("store_quad({r}, {q}, {acc}, {c_base}, {out_base});"))
            .collect();
    }
    let n = calls.len();
    let list = |i: usize| {
        calls
            .iter()
            .map(|c| c[i].clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        format!("var quad_rows = array<u32, {n}>({});", list(0)),
        format!("var quad_cols = array<u32, {n}>({});", list(1)),
        format!("var quad_accs = array<vec4<f32>, {n}>({});", list(2)),
        format!(
            "for (var i = 0u; i < min({n}u, p.m * {n}u); i++) {{ store_quad(quad_rows[i], quad_cols[i], quad_accs[i], {c_base}, {out_base}); }}"
        ),
    ]
}
