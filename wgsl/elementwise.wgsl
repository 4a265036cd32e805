// Every elementwise op: casts, copies, unary and binary ops, comparisons,
// where. Buffers are read and written as u32 words, so 2-byte dtypes need no
// SHADER_F16: each input element is decoded to the op's compute type, the op
// runs there (f32 for every float dtype), and the result is encoded to the
// output dtype's bits (round to nearest even for f16 and bf16, see
// convert.wgsl).
//
// Generated per specialisation (placeholders in double braces):
//   BINDINGS  the storage bindings: inputs, then `out`
//   LOADS     fn load0(i: u32) -> CT ... one per input
//   ARGS      let x0 = load0(offset_of(e, 0u)); ... one per input
//   OP        the result, an expression in x0, x1, x2
//   ENCODE    the output bits of `r` (low 16 bits for 2-byte dtypes)
//   OP1, ENCODE1, STORE1_WORD  the same for a second output `out1`
//             (divmod); `0u`, `0u` and nothing for one output
// OUT_BYTES is 4 (one element per word) or 2 (each thread writes one whole
// word of two elements, so no two threads share a word).

const OUT_BYTES: u32 = {{OUT_BYTES}}u;

{{BINDINGS}}

fn half_word(w: u32, i: u32) -> u32 {
    return (w >> ((i & 1u) * 16u)) & 0xffffu;
}

{{LOADS}}

// The output bits of element e: x for `out`, y for `out1` (divmod).
fn compute(e: u32) -> vec2<u32> {
{{ARGS}}
    let r = {{OP}};
    let r1 = {{OP1}};
    return vec2<u32>({{ENCODE}}, {{ENCODE1}});
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = thread_index(gid, nwg);
    let n = p.head.x;
    if OUT_BYTES == 4u {
        if t >= n {
            return;
        }
        let v = compute(t);
        out[t] = v.x;
{{STORE1_WORD}}
    } else {
        let e = 2u * t;
        if e >= n {
            return;
        }
        var hi = vec2<u32>(0u, 0u);
        if e + 1u < n {
            hi = compute(e + 1u);
        }
        let lo = compute(e);
        let v = (lo & vec2<u32>(0xffffu)) | (hi << vec2<u32>(16u));
        out[t] = v.x;
{{STORE1_WORD}}
    }
}
