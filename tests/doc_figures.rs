//! Every accuracy figure in the docs comes from the one measured table
//! (issue 36, item 8): docs/ACCURACY.md's table, which `wgbench accuracy`
//! generates from `testing::accuracy`'s functions, bounds and sweeps.
//!
//! The table's bounds must be the ones `tests/accuracy.rs` asserts
//! (`testing::accuracy::functions`), and every claim in the README,
//! docs/*.md (docs/PERFORMANCE.md, a log of dated measurements, aside) and
//! the doc comments under src/ that names a function of the table must
//! agree with it:
//!
//! - "within B ulp" (or "bounded by B ulp"): B is the function's bound;
//! - "within A to B ulp": the smallest and largest bound of all;
//! - "measured M" (a list for a list of functions, or "M each"), "M
//!   measured", "M ulp on both": M is the largest error the table
//!   measured over the bound's domain on lavapipe or llvmpipe, to the
//!   digits written.
//!
//! A claim speaks of the functions named (in backticks) before it since the
//! previous claim in its table cell or paragraph, else of the previous
//! claim's, else of the row's first cell; in the doc comment of a function
//! of the table, of that function. No adapter is needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wgarray::DType;
use wgarray::testing::accuracy::functions;

/// One row of the table: bound, lavapipe's and llvmpipe's largest error
/// over the domain.
#[derive(Clone, Copy, Debug)]
struct Row {
    bound: f64,
    measured: [f64; 2],
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The first number of a cell ("2.167 (0.086); all inputs 5.873").
fn first_number(cell: &str) -> f64 {
    let s: String = cell
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '-')
        .collect();
    s.parse()
        .unwrap_or_else(|_| panic!("no number in table cell {cell:?}"))
}

/// docs/ACCURACY.md's generated table, by (function, dtype name).
fn table() -> BTreeMap<(String, String), Row> {
    let text = read(&root().join("docs/ACCURACY.md"));
    let start = text
        .find("<!-- BEGIN wgbench accuracy -->")
        .expect("the table's markers");
    let end = text.find("<!-- END wgbench accuracy -->").unwrap();
    let mut rows = BTreeMap::new();
    for line in text[start..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "", function, dtype, domain, bound, lavapipe, llvmpipe, GPU, "".
        let name = cells[1].trim_matches('`').to_string();
        rows.insert(
            (name, cells[2].to_string()),
            Row {
                bound: cells[4].parse().unwrap(),
                measured: [first_number(cells[5]), first_number(cells[6])],
            },
        );
    }
    assert!(rows.len() > 100, "the table has {} rows", rows.len());
    rows
}

#[test]
fn the_table_has_the_bounds_the_tests_assert() {
    let t = table();
    for f in functions() {
        for (dtype, name) in [
            (DType::F32, "f32"),
            (DType::F16, "f16"),
            (DType::BF16, "bf16"),
        ] {
            let row = t
                .get(&(f.name.to_string(), name.to_string()))
                .unwrap_or_else(|| panic!("{} {name} is not in docs/ACCURACY.md", f.name));
            let want = f.bound_in(dtype);
            assert!(
                (row.bound - want).abs() <= 1e-5 * want.max(1.0),
                "{} {name}: the table's bound {} against {want}: regenerate it (wgbench accuracy)",
                f.name,
                row.bound
            );
            for m in row.measured {
                assert!(
                    m <= row.bound,
                    "{} {name}: measured {m} past its bound",
                    f.name
                );
            }
        }
    }
}

/// A figure claimed in prose.
#[derive(Debug)]
enum Claim {
    Bound(f64),
    Range(f64, f64),
    /// Numbers with their decimals; `each`: one number for every function.
    Measured(Vec<(f64, usize)>, bool),
}

/// The number at the start of `s`: value, decimals and length.
fn number(s: &str) -> Option<(f64, usize, usize)> {
    let len = s
        .char_indices()
        .take_while(|(_, c)| c.is_ascii_digit() || *c == '.')
        .map(|(i, c)| i + c.len_utf8())
        .last()?;
    let t = s[..len].trim_end_matches('.');
    let v: f64 = t.parse().ok()?;
    let decimals = t.split('.').nth(1).map_or(0, str::len);
    Some((v, decimals, t.len()))
}

/// The function names (in backticks) and claims of `text`, in order, each
/// with its byte position.
fn events(text: &str, names: &[String]) -> Vec<(usize, Result<String, Claim>)> {
    let mut out = Vec::new();
    // Names: `name` or `name(...)`.
    let mut rest = text;
    let mut at = 0;
    while let Some(i) = rest.find('`') {
        let after = &rest[i + 1..];
        let Some(j) = after.find('`') else { break };
        let inner = &after[..j];
        let ident: String = inner
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if names.contains(&ident)
            && (ident.len() == inner.len() || inner[ident.len()..].starts_with('('))
        {
            out.push((at + i, Ok(ident)));
        }
        at += i + j + 2;
        rest = &after[j + 1..];
    }
    // Claims, found in the lower-case text (same byte positions: ASCII).
    let lower = text.to_ascii_lowercase();
    for prefix in ["within ", "bounded by "] {
        for (i, _) in lower.match_indices(prefix) {
            let s = &lower[i + prefix.len()..];
            let Some((a, _, n)) = number(s) else { continue };
            let s = &s[n..];
            if let Some(s) = s.strip_prefix(" to ") {
                if let Some((b, _, m)) = number(s)
                    && s[m..].starts_with(" ulp")
                {
                    out.push((i, Err(Claim::Range(a, b))));
                }
            } else if s.starts_with(" ulp") {
                out.push((i, Err(Claim::Bound(a))));
            }
        }
    }
    for (i, _) in lower.match_indices("measured ") {
        let mut s = &lower[i + "measured ".len()..];
        let mut list = Vec::new();
        while let Some((v, d, n)) = number(s) {
            list.push((v, d));
            s = &s[n..];
            match s.strip_prefix(", ") {
                Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => s = r,
                _ => break,
            }
        }
        if !list.is_empty() {
            let each = s.starts_with(" each");
            out.push((i, Err(Claim::Measured(list, each))));
        }
    }
    for suffix in [" measured", " ulp on both"] {
        for (i, _) in lower.match_indices(suffix) {
            let before = &lower[..i];
            let start = before
                .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
                .map_or(0, |k| k + 1);
            if start == i || before[..start].ends_with(|c: char| c.is_ascii_alphanumeric()) {
                continue;
            }
            if let Some((v, d, _)) = number(&lower[start..i]) {
                out.push((start, Err(Claim::Measured(vec![(v, d)], false))));
            }
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out
}

/// A unit of prose: its segments (a table row's cells, else one) and the
/// functions it speaks of when a claim names none.
struct Unit {
    place: String,
    segments: Vec<String>,
    fallback: Vec<String>,
    /// A doc comment of a function of the table: every claim is its.
    owned: bool,
}

/// Markdown: table rows (cells), bullets and paragraphs; code fences and
/// the generated table's rows left out.
fn markdown_units(path: &Path, names: &[String]) -> Vec<Unit> {
    let text = read(path);
    let mut units = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let mut para_line = 0;
    let mut fenced = false;
    let mut generated = false;
    let flush = |para: &mut Vec<&str>, line: usize, units: &mut Vec<Unit>| {
        if !para.is_empty() {
            units.push(Unit {
                place: format!("{}:{}", path.display(), line),
                segments: vec![para.join(" ")],
                fallback: Vec::new(),
                owned: false,
            });
            para.clear();
        }
    };
    for (k, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fenced = !fenced;
            flush(&mut para, para_line, &mut units);
            continue;
        }
        if t.starts_with("<!-- BEGIN wgbench accuracy") {
            generated = true;
        }
        if t.starts_with("<!-- END wgbench accuracy") {
            generated = false;
        }
        if fenced {
            continue;
        }
        if t.starts_with('|') {
            flush(&mut para, para_line, &mut units);
            if generated && (t.starts_with("| `") || t.starts_with("| function")) {
                continue;
            }
            let cells: Vec<String> = t.split('|').map(|c| c.trim().to_string()).collect();
            let first = cells.get(1).cloned().unwrap_or_default();
            let fallback = events(&first, names)
                .into_iter()
                .filter_map(|(_, e)| e.ok())
                .collect();
            units.push(Unit {
                place: format!("{}:{}", path.display(), k + 1),
                segments: cells,
                fallback,
                owned: false,
            });
            continue;
        }
        if t.is_empty() || t.starts_with("- ") || t.starts_with("* ") || t.starts_with('#') {
            flush(&mut para, para_line, &mut units);
        }
        if !t.is_empty() {
            if para.is_empty() {
                para_line = k + 1;
            }
            para.push(t);
        }
    }
    flush(&mut para, para_line, &mut units);
    units
}

/// Doc comments (`///` and `//!` blocks) of every .rs file under `dir`;
/// a `///` block also speaks of the item it documents.
fn doc_units(dir: &Path, names: &[String], units: &mut Vec<Unit>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            doc_units(&p, names, units);
            continue;
        }
        if p.extension().is_some_and(|e| e == "rs") {
            file_doc_units(&p, names, units);
        }
    }
}

/// The doc comment units of one .rs file (see [`doc_units`]).
fn file_doc_units(p: &Path, names: &[String], units: &mut Vec<Unit>) {
    {
        let text = read(p);
        let lines: Vec<&str> = text.lines().collect();
        let mut k = 0;
        while k < lines.len() {
            let t = lines[k].trim_start();
            let doc = |t: &str| t.starts_with("///") || t.starts_with("//!");
            if !doc(t) {
                k += 1;
                continue;
            }
            let start = k;
            let mut block = Vec::new();
            let mut fenced = false;
            while k < lines.len() && doc(lines[k].trim_start()) {
                let body = lines[k].trim_start()[3..].trim();
                if body.starts_with("```") {
                    fenced = !fenced;
                } else if !fenced {
                    block.push(body);
                }
                k += 1;
            }
            // The documented item: `name => Op;` in the ops' macro tables,
            // or `fn name`.
            let mut fallback = Vec::new();
            if let Some(item) = lines[k.min(lines.len() - 1)..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("#["))
            {
                let ident = match item.find("fn ") {
                    Some(i) => &item[i + 3..],
                    None => item,
                };
                let ident: String = ident
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if names.contains(&ident) {
                    fallback.push(ident);
                }
            }
            units.push(Unit {
                place: format!("{}:{}", p.display(), start + 1),
                segments: vec![block.join(" ")],
                owned: !fallback.is_empty(),
                fallback,
            });
        }
    }
}

/// Whether `claimed`, written with `decimals` digits, is `value` rounded.
fn agrees(claimed: f64, decimals: usize, value: f64) -> bool {
    (claimed - value).abs() <= 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9
}

#[test]
fn every_accuracy_figure_in_the_docs_agrees_with_the_table() {
    let t = table();
    let f32s: BTreeMap<String, Row> = t
        .iter()
        .filter(|((_, d), _)| d == "f32")
        .map(|((n, _), r)| (n.clone(), *r))
        .collect();
    let names: Vec<String> = f32s.keys().cloned().collect();
    let lowest = f32s.values().map(|r| r.bound).fold(f64::INFINITY, f64::min);
    let highest = f32s.values().map(|r| r.bound).fold(0.0, f64::max);
    let mut units = Vec::new();
    let mut docs = vec![root().join("README.md")];
    let mut md: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md") && !p.ends_with("PERFORMANCE.md"))
        .collect();
    md.sort();
    docs.extend(md);
    for p in &docs {
        units.extend(markdown_units(p, &names));
    }
    doc_units(&root().join("src"), &names, &mut units);
    let mut wrong = Vec::new();
    let mut checked = 0;
    for u in &units {
        let mut previous: Vec<String> = Vec::new();
        for seg in &u.segments {
            let mut since: Vec<String> = Vec::new();
            for (_, e) in events(seg, &names) {
                let claim = match e {
                    Ok(name) => {
                        since.push(name);
                        continue;
                    }
                    Err(c) => c,
                };
                let of = if u.owned {
                    // A doc comment speaks of the function it documents.
                    u.fallback.clone()
                } else if !since.is_empty() {
                    let mut of = std::mem::take(&mut since);
                    let mut seen = Vec::new();
                    of.retain(|f| {
                        let new = !seen.contains(f);
                        seen.push(f.clone());
                        new
                    });
                    of
                } else if !previous.is_empty() {
                    previous.clone()
                } else {
                    u.fallback.clone()
                };
                previous = of.clone();
                let mut fail = |what: String| wrong.push(format!("{}: {what}", u.place));
                match claim {
                    Claim::Range(a, b) => {
                        checked += 1;
                        if a != lowest || b != highest {
                            fail(format!(
                                "\"within {a} to {b} ulp\": the bounds run from {lowest} to {highest}"
                            ));
                        }
                    }
                    _ if of.is_empty() => {}
                    Claim::Bound(b) => {
                        for f in &of {
                            checked += 1;
                            if f32s[f].bound != b {
                                fail(format!(
                                    "`{f}` within {b} ulp: its bound is {}",
                                    f32s[f].bound
                                ));
                            }
                        }
                    }
                    Claim::Measured(list, each) => {
                        let pairs: Vec<(&String, (f64, usize))> = if each {
                            of.iter().map(|f| (f, list[0])).collect()
                        } else if list.len() == of.len() {
                            of.iter().zip(list.iter().copied()).collect()
                        } else {
                            fail(format!(
                                "{} figures measured for {} functions ({of:?})",
                                list.len(),
                                of.len()
                            ));
                            continue;
                        };
                        for (f, (v, d)) in pairs {
                            checked += 1;
                            let m = f32s[f].measured;
                            if !m.iter().any(|&x| agrees(v, d, x)) {
                                fail(format!(
                                    "`{f}` measured {v}: the table has {} (lavapipe) and {} (llvmpipe)",
                                    m[0], m[1]
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "figures that disagree with docs/ACCURACY.md:\n{}",
        wrong.join("\n")
    );
    // The docs make figures of most functions; a parser that finds none
    // checks nothing.
    assert!(checked > 100, "only {checked} figures found");
}

#[test]
fn the_property_test_values_list_the_dtypes_they_take() {
    // `testing::Values` generates f32, f16, bf16, i32, u32 and bool (the
    // types that implement `testing::Generate`), not every dtype.
    for p in ["README.md", "src/testing/mod.rs", "src/testing/property.rs"] {
        let path = root().join(p);
        let mut units = Vec::new();
        if p.ends_with(".rs") {
            file_doc_units(&path, &[], &mut units);
        } else {
            units = markdown_units(&path, &[]);
        }
        let mut found = false;
        for u in units
            .iter()
            .filter(|u| u.segments.iter().any(|s| s.contains("Values")))
        {
            let s = u.segments.join(" ");
            assert!(
                !s.contains("any dtype") && !s.contains("every host element type"),
                "{}: `Values` does not take every dtype",
                u.place
            );
            if ["f32", "f16", "bf16", "i32", "u32", "bool"]
                .iter()
                .all(|d| s.contains(d))
            {
                found = true;
            }
        }
        assert!(found, "{p} does not list the dtypes `Values` takes");
    }
}
