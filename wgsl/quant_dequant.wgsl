// Dequantize: rows of quantized weights into f32, f16 or bf16 elements,
// one thread per span of 32 elements of a row (rows are a whole number of
// spans: every block format's block and every affine group is a multiple
// of 32 elements). A span lies in one block (ggml's formats) or one group
// (MLX's affine: `bits` consecutive words of the row's bit stream), so its
// thread finds its weights once and decodes them four at a time:
// element = q * d + m, with (d, m) and the quants q from the functions
// the format gives (wgsl/quant_blocks.wgsl for ggml's formats; generated
// for affine), rounded once to the output's dtype.
//
// Parameters (words): threads, spans per row, row length (elements), -;
// the weights' offset and row stride (bytes for block formats, words for
// affine); the scales' and the biases' offsets and row strides (elements,
// affine only). The output is dense.
//
// Generated per specialisation (placeholders in double braces):
//   BINDINGS  `w` (array<u32>), for affine `scales` and `biases`, then `out`
//   BASE      statements of fn span_base(row, j): where the span at
//             element j of row `row` starts in `w`
//   DM        statements of fn span_dm(base, row, j) -> vec2<f32>
//   QUAD      statements of fn span_quad(base, j) -> vec4<f32>
//   HELPERS   the format's own functions (affine: its bit stream and
//             scale loads), or nothing
//   STORE     statements of fn store4(o, v): elements o..o+3 of `out`

const WG: u32 = 256u;

struct Params {
    head: vec4<u32>,
    w: vec4<u32>,
    sb: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
{{BINDINGS}}

fn q_word(i: u32) -> u32 {
    return w[i];
}

{{HELPERS}}

fn span_base(row: u32, j: u32) -> u32 {
{{BASE}}
}

fn span_dm(base: u32, row: u32, j: u32) -> vec2<f32> {
{{DM}}
}

fn span_quad(base: u32, j: u32) -> vec4<f32> {
{{QUAD}}
}

fn store4(o: u32, v: vec4<f32>) {
{{STORE}}
}

@compute @workgroup_size(256)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let t = gid.x + gid.y * nwg.x * WG;
    if t >= p.head.x {
        return;
    }
    let row = t / p.head.y;
    let j0 = (t % p.head.y) * 32u;
    let base = span_base(row, j0);
    let o = row * p.head.z + j0;
    for (var i = 0u; i < 8u; i++) {
        let j = j0 + 4u * i;
        let dm = span_dm(base, row, j);
        store4(o + 4u * i, span_quad(base, j) * dm.x + dm.y);
    }
}
