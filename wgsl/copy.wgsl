// Strided copy into a dense output: the kernel behind split and contiguous().
// Works on raw bits, so one kernel serves every dtype of a given width:
// {{ELEM_BYTES}} is 4 (one element per u32 word) or 2 (two elements per word;
// each thread writes one whole output word, so no two threads share a word).

const ELEM_BYTES: u32 = {{ELEM_BYTES}}u;

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn load_half(e: u32) -> u32 {
    let word = src[e >> 1u];
    return (word >> ((e & 1u) * 16u)) & 0xffffu;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = thread_index(gid, nwg);
    if ELEM_BYTES == 4u {
        if t >= p.n {
            return;
        }
        dst[t] = src[offset0(t)];
    } else {
        let e = 2u * t;
        if e >= p.n {
            return;
        }
        let lo = load_half(offset0(e));
        var hi = 0u;
        if e + 1u < p.n {
            hi = load_half(offset0(e + 1u));
        }
        dst[t] = lo | (hi << 16u);
    }
}
