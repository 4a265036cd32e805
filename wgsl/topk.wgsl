// The k largest elements of each row (all elements along one axis), sorted
// descending, with their indices; ties go to the lower index, NaN ranks
// above +inf (all NaNs equal), -0 and +0 are equal.
//
// Each element maps to a u32 key whose unsigned order is that order (floats:
// sign-magnitude flipped, wgsl/order.wgsl; i32: sign bit flipped), and candidates compare as
// (key descending, index ascending). A list slot holding key 0 and index
// 0xffffffff ranks below every real element.
//
// ROW: one workgroup per row. Thread t keeps the best KMAX of elements
// t, t + 256, ... in private arrays (sorted; an insertion is KMAX
// straight-line compare-and-swap steps, no loop), then k rounds pick the
// best of the 256 list heads with a shared-memory tree and pop it. Otherwise
// one thread per row (short rows). No invocation loops more than about
// L / 1024 + 9 k times: llvmpipe (Mesa's software driver) stops a shader
// after 65535 loop iterations in one invocation (LP_MAX_TGSI_LOOP_ITERATIONS).
//
// Outputs are dense [rows, k] (row-major over the kept axes): `vals` holds
// the input's bits at the chosen index (so -0 and NaN payloads survive),
// `idx` the index (u32).
//
// Generated per specialisation (placeholders in double braces):
//   ROW, KMAX
//   KEY        statements of fn key(i): the sort key of input element i
//   BITS       statements of fn bits(i): its raw bits (low 16 for 2-byte)
//   VALS_TYPE  u32, or atomic<u32> for 2-byte dtypes (two rows may share a word)
//   STORE      statements of fn store(q, v): output value q gets bits v
//   INSERT     the KMAX compare-and-swap steps of fn insert

const WG: u32 = 256u;
const ROW: bool = {{ROW}};
const KMAX: u32 = {{KMAX}}u;

struct Params {
    // rows, L (row length), k, outer ndim
    head: vec4<u32>,
    // input offset, stride along the axis, -, -
    misc: vec4<u32>,
    outer_shape: array<vec4<u32>, 2>,
    outer_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> vals: array<{{VALS_TYPE}}>;
@group(0) @binding(3) var<storage, read_write> idx: array<u32>;

var<private> tk: array<u32, KMAX>;
var<private> ti: array<u32, KMAX>;
var<workgroup> sk: array<u32, 256>;
var<workgroup> si: array<u32, 256>;

fn key(i: u32) -> u32 {
{{KEY}}
}

fn bits(i: u32) -> u32 {
{{BITS}}
}

fn store(q: u32, v: u32) {
{{STORE}}
}

// Whether candidate (ka, ia) ranks before (kb, ib).
fn better(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia < ib);
}

fn insert(k0: u32, i0: u32) {
    var k = k0;
    var i = i0;
{{INSERT}}
}

// Consider element r of the row that starts at `base`.
fn consider(base: u32, r: u32) {
    let k = key(base + r * p.misc.y);
    let last = p.head.z - 1u;
    if better(k, r, tk[last], ti[last]) {
        insert(k, r);
    }
}

@compute @workgroup_size(256)
fn main(id: Ids) {
    let rows = p.head.x;
    let len = p.head.y;
    let k = p.head.z;
    for (var j = 0u; j < KMAX; j++) {
        tk[j] = 0u;
        ti[j] = 0xffffffffu;
    }
    if ROW {
        let o = group_index(id);
        let base = p.misc.x + unravel(min(o, rows - 1u), p.head.w, p.outer_shape, p.outer_strides);
        var r = id.lid.x;
        for (; r + 3u * WG < len; r += 4u * WG) {
            consider(base, r);
            consider(base, r + WG);
            consider(base, r + 2u * WG);
            consider(base, r + 3u * WG);
        }
        for (; r < len; r += WG) {
            consider(base, r);
        }
        var h = 0u;
        for (var q = 0u; q < k; q++) {
            let hh = min(h, KMAX - 1u);
            sk[id.lid.x] = tk[hh];
            si[id.lid.x] = ti[hh];
            workgroupBarrier();
            for (var s = WG / 2u; s > 0u; s >>= 1u) {
                if id.lid.x < s && better(sk[id.lid.x + s], si[id.lid.x + s], sk[id.lid.x], si[id.lid.x]) {
                    sk[id.lid.x] = sk[id.lid.x + s];
                    si[id.lid.x] = si[id.lid.x + s];
                }
                workgroupBarrier();
            }
            let win = si[0];
            if id.lid.x == 0u && o < rows {
                store(o * k + q, bits(base + win * p.misc.y));
                idx[o * k + q] = win;
            }
            if (win & (WG - 1u)) == id.lid.x {
                h += 1u;
            }
            workgroupBarrier();
        }
    } else {
        let o = invocation_index(id, WG);
        if o >= rows {
            return;
        }
        let base = p.misc.x + unravel(o, p.head.w, p.outer_shape, p.outer_strides);
        for (var r = 0u; r < len; r++) {
            consider(base, r);
        }
        for (var q = 0u; q < k; q++) {
            store(o * k + q, bits(base + ti[q] * p.misc.y));
            idx[o * k + q] = ti[q];
        }
    }
}
