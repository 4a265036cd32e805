// Reductions over a set of axes, with the value reduced computed in place
// (a fused elementwise prologue: `sum(x * y)`, `layer_norm(x + r)`'s
// moments) or read as it is (a plain reduction is the one-load program).
// Output element `o` folds the R values at kept index `o` and reduced
// index `r < R`. The entry point is generated per mode
// (kernels/reduce.rs):
//
// - strided: every load through element strides; one thread per output
//   folding blocks of 256 in order, or one workgroup per output (256
//   strided shares, then a tree in workgroup memory);
// - wide: the reduced dimension is unit-stride for every load that walks
//   it, so each thread of a lane group loads 16 bytes of each such load at
//   a time (`vec4<u32>` bindings; one lane per output on software
//   adapters, where a load whose address varies per lane costs a loop over
//   the lanes whatever its width), splat loads (stride 0 along the reduced
//   dimension) once per output; a row's unaligned first and last 16 bytes
//   are folded element by element. Long rows are cut into parts whose
//   accumulators go to a scratch buffer (`part`), which the combine entry
//   point folds in order and finishes.
//
// Generated per specialisation (placeholders in double braces):
//   PARAMS   the program's parameter words (`w`), after head and misc
//   BINDINGS the storage bindings and the program's op functions
//   ACC      fields of struct Acc
//   INIT     the identity Acc
//   LIFT     an Acc from one value x (compute type CT) at reduced index r
//   COMBINE  statements of fn combine(a: Acc, b: Acc) -> Acc
//   FOLD     statements of fn fold(acc, x, r): combine(acc, lift(x, r)),
//            or an equivalent with fewer operations
//   FINISH   fn finish(o, acc) writing output o (out0, out1), or nothing
//   PARTIAL  store_partial / load_partial of an Acc in `part`, or nothing
//   VALUE    fn value: the program's value at one element
//   MAIN     the entry point

struct Params {
    // n_out, R, parts per output, workers (n_out * parts)
    head: vec4<u32>,
    // -, ddof, -, -
    misc: vec4<u32>,
{{PARAMS}}
}

@group(0) @binding(0) var<uniform> p: Params;
{{BINDINGS}}

struct Acc {
{{ACC}}
}

fn lift(x: {{CT}}, r: u32) -> Acc {
    return {{LIFT}};
}

fn combine(a: Acc, b: Acc) -> Acc {
{{COMBINE}}
}

fn fold(acc: Acc, x: {{CT}}, r: u32) -> Acc {
{{FOLD}}
}

{{FINISH}}
{{PARTIAL}}
{{VALUE}}
{{MAIN}}
