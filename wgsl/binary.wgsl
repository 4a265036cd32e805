// Elementwise binary op with NumPy broadcasting (strided operands).
// Specialised by {{T}} (the element type), {{OP}} (an expression in `a` and
// `b`), and {{LHS}}/{{RHS}}: `lhs`/`rhs`, or `out` when that operand's buffer
// was donated to the output (the op runs in place; wgpu forbids binding one
// buffer as both read-only and read-write, so the donated operand is read
// through `out`, and its own binding holds the other operand's buffer).

@group(0) @binding(1) var<storage, read> lhs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> rhs: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = thread_index(gid, nwg);
    if t >= p.n {
        return;
    }
    let a = {{LHS}}[offset0(t)];
    let b = {{RHS}}[offset1(t)];
    out[t] = {{OP}};
}
