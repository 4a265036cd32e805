// ggml's block formats (GGUF files' quantized tensors), decoded from the
// bytes of one block. Shared by every kernel that reads block-format
// weights: the dequantize kernel (wgsl/quant_dequant.wgsl) and, later, the
// quantized GEMM families, which call the same two functions per format
// from their own loads.
//
// The including kernel defines `fn q_word(i: u32) -> u32`: word i of the
// buffer the blocks lie in. Blocks start at any byte (a Q4_0 block is 18
// bytes), so every read goes through q_bytes4, which assembles four bytes
// from at most two words.
//
// Per format F, for the block whose first byte is `base` and its element
// j (a multiple of 4, below the block's element count):
//   fn dm_F(base, j) -> vec2<f32>   (d, m) of the sub-block holding j
//   fn quad_F(base, j) -> vec4<f32> the integer quants of elements j..j+3
// and element = q * d + m, exactly as ggml's dequantize_row_F computes it
// (ggml-quants.c), bit for bit: every product there is of integers and an
// f16 value, exact in f32, so the one rounding is the final add (Q4_1,
// Q4_K) and fused or unfused multiply-adds agree. m is -0.0 where ggml
// adds nothing, so that q * d = -0.0 stays -0.0.
//
// Layouts (ggml-common.h):
//   Q4_0  32 elements, 18 bytes: f16 d; qs[16], element j < 16 the low
//         nibble of qs[j], j >= 16 the high nibble of qs[j - 16]; q - 8.
//   Q4_1  32 elements, 20 bytes: f16 d, f16 m; qs[16] as Q4_0; q.
//   Q8_0  32 elements, 34 bytes: f16 d; qs[32] signed bytes.
//   Q4_K  256 elements, 144 bytes: f16 d, f16 dmin, scales[12] (eight
//         6-bit scales and mins, get_scale_min_k4), qs[128]: chunk c of
//         64 elements, its first 32 the low nibbles of qs[32c..], the next
//         32 the high nibbles; sub-block j / 32 has d * sc, -dmin * min.
//   Q6_K  256 elements, 210 bytes: ql[128], qh[64], scales[16] (i8), f16
//         d; half h of 128 elements, quarter w of 32, lane l: low 4 bits
//         from ql[64h + 32(w & 1) + l] (high nibble for w >= 2), high 2
//         bits from qh[32h + l] >> 2w, scale scales[8h + 2w + l / 16]; q -
//         32.

// -0.0, the m of formats without an offset (x + -0.0 is x for every x).
fn neg_zero() -> f32 {
    return bitcast<f32>(0x80000000u);
}

// The 4 bytes from byte `b` on, little-endian.
fn q_bytes4(b: u32) -> u32 {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let lo = q_word(i);
    if s == 0u {
        return lo;
    }
    return (lo >> s) | (q_word(i + 1u) << (32u - s));
}

// The byte at `b`.
fn q_byte(b: u32) -> u32 {
    return (q_word(b >> 2u) >> ((b & 3u) * 8u)) & 0xffu;
}

// The f16 at byte `b`, as f32 (exactly).
fn q_f16(b: u32) -> f32 {
    return f16_bits_to_f32(q_bytes4(b) & 0xffffu);
}

// The low nibbles of the four bytes of x.
fn nibbles(x: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(x & 0xfu, (x >> 8u) & 0xfu, (x >> 16u) & 0xfu, (x >> 24u) & 0xfu));
}

// The four bytes of x, as signed bytes.
fn signed_bytes(x: u32) -> vec4<f32> {
    let v = bitcast<vec4<i32>>(vec4<u32>(x << 24u, x << 16u, x << 8u, x)) >> vec4<u32>(24u);
    return vec4<f32>(v);
}

fn dm_q4_0(base: u32, j: u32) -> vec2<f32> {
    return vec2<f32>(q_f16(base), neg_zero());
}

fn quad_q4_0(base: u32, j: u32) -> vec4<f32> {
    let x = q_bytes4(base + 2u + (j & 15u));
    return nibbles(x >> select(0u, 4u, j >= 16u)) - vec4<f32>(8.0);
}

fn dm_q4_1(base: u32, j: u32) -> vec2<f32> {
    let dm = q_bytes4(base);
    return vec2<f32>(f16_bits_to_f32(dm & 0xffffu), f16_bits_to_f32(dm >> 16u));
}

fn quad_q4_1(base: u32, j: u32) -> vec4<f32> {
    let x = q_bytes4(base + 4u + (j & 15u));
    return nibbles(x >> select(0u, 4u, j >= 16u));
}

fn dm_q8_0(base: u32, j: u32) -> vec2<f32> {
    return vec2<f32>(q_f16(base), neg_zero());
}

fn quad_q8_0(base: u32, j: u32) -> vec4<f32> {
    return signed_bytes(q_bytes4(base + 2u + j));
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block `s`.
fn scale_min_k4(base: u32, s: u32) -> vec2<u32> {
    let q = base + 4u;
    if s < 4u {
        return vec2<u32>(q_byte(q + s) & 63u, q_byte(q + s + 4u) & 63u);
    }
    let a = q_byte(q + s + 4u);
    return vec2<u32>(
        (a & 0xfu) | ((q_byte(q + s - 4u) >> 6u) << 4u),
        (a >> 4u) | ((q_byte(q + s) >> 6u) << 4u),
    );
}

fn dm_q4_k(base: u32, j: u32) -> vec2<f32> {
    let dd = q_bytes4(base);
    let sm = vec2<f32>(scale_min_k4(base, j / 32u));
    // ggml: d1 = d * sc, m1 = min * m (exact), element = d1 * q - m1.
    return vec2<f32>(f16_bits_to_f32(dd & 0xffffu) * sm.x, -(f16_bits_to_f32(dd >> 16u) * sm.y));
}

fn quad_q4_k(base: u32, j: u32) -> vec4<f32> {
    let x = q_bytes4(base + 16u + (j / 64u) * 32u + (j & 31u));
    return nibbles(x >> select(0u, 4u, (j & 32u) != 0u));
}

fn dm_q6_k(base: u32, j: u32) -> vec2<f32> {
    let h = j / 128u;
    let w = (j / 32u) & 3u;
    let l = j & 31u;
    let sc = bitcast<i32>(q_byte(base + 192u + 8u * h + 2u * w + l / 16u) << 24u) >> 24u;
    return vec2<f32>(q_f16(base + 208u) * f32(sc), neg_zero());
}

fn quad_q6_k(base: u32, j: u32) -> vec4<f32> {
    let h = j / 128u;
    let w = (j / 32u) & 3u;
    let l = j & 31u;
    let lo = q_bytes4(base + 64u * h + 32u * (w & 1u) + l) >> select(0u, 4u, w >= 2u);
    let hi = q_bytes4(base + 128u + 32u * h + l) >> (2u * w);
    let q = vec4<u32>(
        (lo & 0xfu) | ((hi & 3u) << 4u),
        ((lo >> 8u) & 0xfu) | (((hi >> 8u) & 3u) << 4u),
        ((lo >> 16u) & 0xfu) | (((hi >> 16u) & 3u) << 4u),
        ((lo >> 24u) & 0xfu) | (((hi >> 24u) & 3u) << 4u),
    );
    return vec4<f32>(q) - vec4<f32>(32.0);
}
