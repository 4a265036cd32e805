//! Plots, each written as SVG and as PNG: after a run, matmul GFLOP/s
//! against size per adapter and dtype, then one bar panel per other family
//! (its unit on the axis); for `compare`, one panel of ratios per family,
//! the axis clamped to the figures that did not move, moved figures marked.
//!
//! Text is drawn with Open Sans (assets/fonts, Apache-2.0) embedded in the
//! binary through plotters' `ab_glyph` backend, so the PNG renders the same
//! on a machine with no fonts installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{Figure, Group, Report, Status};
use crate::table::{Column, Comparison, find, times};

const FONT: &[u8] = include_bytes!("../../../assets/fonts/OpenSans-Regular.ttf");
const FAMILY: &str = "sans-serif";

/// Text anchored at its left end, vertically centred.
fn left_center() -> Pos {
    Pos::new(HPos::Left, VPos::Center)
}

fn register_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font is not a valid TrueType font".to_string())
    })
    .clone()
}

/// The two files a plot is written to: `FILE` with its extension (if it
/// is `.svg` or `.png`) replaced by `.svg` and `.png`, else `FILE.svg` and
/// `FILE.png`.
pub fn outputs(path: &Path) -> [PathBuf; 2] {
    let stem = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") || e.eq_ignore_ascii_case("png") => {
            path.with_extension("")
        }
        _ => path.to_path_buf(),
    };
    let with = |ext: &str| {
        let mut s = stem.clone().into_os_string();
        s.push(ext);
        PathBuf::from(s)
    };
    [with(".svg"), with(".png")]
}

/// Draw with `draw` into both files of `path`.
fn both(
    path: &Path,
    size: (u32, u32),
    svg: impl Fn(DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
    png: impl Fn(DrawingArea<BitMapBackend, Shift>) -> Result<(), String>,
) -> Result<Vec<PathBuf>, String> {
    register_font()?;
    let [s, p] = outputs(path);
    svg(SVGBackend::new(&s, size).into_drawing_area())
        .map_err(|e| format!("writing {}: {e}", s.display()))?;
    png(BitMapBackend::new(&p, size).into_drawing_area())
        .map_err(|e| format!("writing {}: {e}", p.display()))?;
    Ok(vec![s, p])
}

/// 1, 2 and 5 times the powers of ten between `lo` and `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut v = Vec::new();
    let mut p = 10f64.powi(lo.log10().floor() as i32);
    while p <= hi {
        for m in [1.0, 2.0, 5.0] {
            if (lo..=hi).contains(&(m * p)) {
                v.push(m * p);
            }
        }
        p *= 10.0;
    }
    v
}

/// Ratios worth a grid line between `lo` and `hi`: 1, 2 and 5 times
/// powers of ten, and 0.8 and 1.25 around 1.
fn ratio_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut v = log_ticks(lo, hi);
    v.extend([0.8, 1.25].into_iter().filter(|r| (lo..=hi).contains(r)));
    v.sort_by(f64::total_cmp);
    v
}

/// A tick's label with the digits it needs: `0.05`, `0.8`, `1.25`, `20`
/// (never `0.00`).
pub fn tick_label(x: f64) -> String {
    if x >= 1.0 || x <= 0.0 {
        return crate::table::number(x);
    }
    let decimals = (-x.log10()).floor().max(0.0) as usize + 2;
    let s = format!("{x:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

#[derive(Clone, Copy, PartialEq)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
}

/// One line of the matmul plot.
struct Series {
    label: String,
    color: RGBColor,
    marker: Marker,
    dashed: bool,
    /// Row (`MxKxN`) to GFLOP/s.
    values: BTreeMap<String, f64>,
}

/// The panels of the matmul plot: square shapes, then one per M.
struct Panel {
    title: String,
    /// Rows (`MxKxN`) in order, with their x-axis labels.
    rows: Vec<(String, String)>,
}

fn parse_shape(row: &str) -> Option<(usize, usize, usize)> {
    let mut it = row.split('x').map(|s| s.parse::<usize>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

fn panels(figs: &[&Figure]) -> Vec<Panel> {
    let mut square = Panel {
        title: "square: N x N x N".into(),
        rows: Vec::new(),
    };
    let mut by_m: BTreeMap<usize, Panel> = BTreeMap::new();
    for f in figs {
        let Some((m, k, n)) = parse_shape(&f.row) else {
            continue;
        };
        let (panel, label) = if m == k && k == n {
            (&mut square, m.to_string())
        } else {
            let p = by_m.entry(m).or_insert_with(|| Panel {
                title: format!("M = {m} (x: K x N)"),
                rows: Vec::new(),
            });
            (p, format!("{k}x{n}"))
        };
        if !panel.rows.iter().any(|(r, _)| *r == f.row) {
            panel.rows.push((f.row.clone(), label));
        }
    }
    std::iter::once(square)
        .chain(by_m.into_values())
        .filter(|p| !p.rows.is_empty())
        .collect()
}

fn series(report: &Report) -> Vec<Series> {
    let mut out = Vec::new();
    for (i, run) in report.runs.iter().enumerate() {
        for (dtype, marker) in [
            ("f32", Marker::Circle),
            ("f16", Marker::Triangle),
            ("bf16", Marker::Square),
        ] {
            let values: BTreeMap<String, f64> = run
                .figures
                .iter()
                .filter(|f| f.group == Group::Matmul && f.column == dtype)
                .filter_map(|f| Some((f.row.clone(), f.value?)))
                .collect();
            if !values.is_empty() {
                out.push(Series {
                    label: format!("{} {dtype}", run.adapter.label()),
                    color: COLORS[i % COLORS.len()],
                    marker,
                    dashed: false,
                    values,
                });
            }
        }
    }
    // The CPU is the same machine for every adapter: its first run's line.
    if let Some(values) = report.runs.iter().find_map(|run| {
        let v: BTreeMap<String, f64> = run
            .figures
            .iter()
            .filter(|f| f.group == Group::Matmul && f.column == crate::cases::matmul::CPU)
            .filter_map(|f| Some((f.row.clone(), f.value?)))
            .collect();
        (!v.is_empty()).then_some(v)
    }) {
        out.push(Series {
            label: format!("CPU sgemm f32 ({} threads)", report.host.cpu_sgemm_threads),
            color: RGBColor(60, 60, 60),
            marker: Marker::Cross,
            dashed: true,
            values,
        });
    }
    out
}

/// The plot of a run: matmul GFLOP/s (log scale) against size, one panel
/// per shape family, one line per adapter and dtype, CPU sgemm dashed;
/// below it one bar panel per other family ([`run_panels`]). Returns the
/// files written, or `None` when the run has no figure with a value.
///
/// # Errors
/// A message naming the file that could not be written.
pub fn run(report: &Report, path: &Path) -> Result<Option<Vec<PathBuf>>, String> {
    let figs: Vec<&Figure> = report
        .runs
        .iter()
        .flat_map(|r| &r.figures)
        .filter(|f| f.group == Group::Matmul && f.status == Status::Ok)
        .collect();
    let panels = panels(&figs);
    let series = series(report);
    let bars = run_panels(report);
    if panels.is_empty() && bars.is_empty() {
        return Ok(None);
    }
    let ncols = panels.len().min(2) as u32;
    let nrows = panels.len().div_ceil(2) as u32;
    let matmul_height = if panels.is_empty() {
        0
    } else {
        520 * nrows + legend_height(series.len())
    };
    let size = (
        (720 * ncols).max(1300),
        50 + matmul_height + bars.iter().map(bars_height).sum::<u32>(),
    );
    let title = format!(
        "wgarray {} suite, {}",
        report.suite,
        &report.date[..report.date.len().min(10)]
    );
    let files = both(
        path,
        size,
        |a| draw_run(a, &title, matmul_height, &panels, &series, &bars),
        |a| draw_run(a, &title, matmul_height, &panels, &series, &bars),
    )?;
    Ok(Some(files))
}

fn draw_run<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    matmul_height: u32,
    panels: &[Panel],
    series: &[Series],
    bars: &[Bars],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let area = root.titled(title, (FAMILY, 26).into_font()).map_err(err)?;
    let (top, rest) = area.split_vertically(matmul_height as i32);
    if !panels.is_empty() {
        draw_matmul(&top, panels, series)?;
    }
    draw_stack(rest, bars)?;
    root.present().map_err(err)
}

fn draw_matmul<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panels: &[Panel],
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let height = area.dim_in_pixel().1 as i32;
    let (plots, legend) = area.split_vertically(height - legend_height(series.len()) as i32);
    draw_legend(&legend, series)?;
    let cols = panels.len().min(2);
    let areas = plots.split_evenly((panels.len().div_ceil(2), cols));
    let all: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.values().copied())
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min) / 1.5;
    let hi = all.iter().copied().fold(0.0, f64::max) * 1.5;
    for (panel, area) in panels.iter().zip(&areas) {
        let n = panel.rows.len();
        let labels: Vec<String> = panel.rows.iter().map(|(_, l)| l.clone()).collect();
        let mut chart = ChartBuilder::on(area)
            .caption(format!("matmul, {}", panel.title), (FAMILY, 20).into_font())
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(76)
            .build_cartesian_2d(
                (-5..10 * n as i32 - 5).with_key_points((0..n as i32).map(|x| 10 * x).collect()),
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
            )
            .map_err(err)?;
        let label_of = |x: &i32| labels.get(*x as usize / 10).cloned().unwrap_or_default();
        chart
            .configure_mesh()
            .x_label_formatter(&label_of)
            .y_label_formatter(&|y| tick_label(*y))
            .y_desc("GFLOP/s (log scale)")
            .label_style((FAMILY, 14).into_font())
            .axis_desc_style((FAMILY, 15).into_font())
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for s in series {
            let pts: Vec<(i32, f64)> = panel
                .rows
                .iter()
                .enumerate()
                .filter_map(|(x, (row, _))| Some((10 * x as i32, *s.values.get(row)?)))
                .collect();
            let style = s.color.stroke_width(2);
            if s.dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(err)?;
            }
            for &p in &pts {
                draw_marker(chart.plotting_area(), s.marker, p, s.color)?;
            }
        }
    }
    Ok(())
}

/// Draw a marker centred on `at`.
fn draw_marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    m: Marker,
    at: CT::From,
    color: RGBColor,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let fill = color.filled();
    let e = EmptyElement::at(at);
    match m {
        Marker::Circle => area.draw(&(e + Circle::new((0, 0), 4, fill))),
        Marker::Triangle => area.draw(&(e + TriangleMarker::new((0, 0), 5, fill))),
        Marker::Square => area.draw(&(e + Rectangle::new([(-4, -4), (4, 4)], fill))),
        Marker::Cross => area.draw(&(e + Cross::new((0, 0), 4, color.stroke_width(2)))),
    }
    .map_err(err)
}

/// Pixels of the legend strip under the panels: two entries per line.
fn legend_height(entries: usize) -> u32 {
    16 + 24 * entries.div_ceil(2) as u32
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let half = area.dim_in_pixel().0 as i32 / 2;
    let font = (FAMILY, 15).into_font().color(&BLACK).pos(left_center());
    for (i, s) in series.iter().enumerate() {
        let x = 70 + (i as i32 % 2) * half;
        let y = 16 + 24 * (i as i32 / 2);
        let style = s.color.stroke_width(2);
        area.draw(&PathElement::new(vec![(x, y), (x + 36, y)], style))
            .map_err(err)?;
        draw_marker(area, s.marker, (x + 18, y), s.color)?;
        area.draw(&Text::new(s.label.clone(), (x + 46, y), font.clone()))
            .map_err(err)?;
    }
    Ok(())
}

/// One panel of horizontal bars: a row per figure (top to bottom), a bar
/// per series in each row, on a log axis.
pub struct Bars {
    pub title: String,
    /// The axis's description (the unit, or what a ratio is to).
    pub axis: String,
    pub rows: Vec<String>,
    /// Legend entries, with their colours.
    pub series: Vec<(String, RGBColor)>,
    /// `values[s][r]`: series s in row r.
    pub values: Vec<Vec<Option<f64>>>,
    /// `marked[s][r]`: drawn with a red outline and a `!` (moved against
    /// the rest).
    pub marked: Vec<Vec<bool>>,
    /// Where bars start: 1 for ratios; `None`: the axis's left end.
    pub base: Option<f64>,
    /// The axis: values outside it are drawn to its end with a marker
    /// and their value written beside it.
    pub range: (f64, f64),
}

/// Pixels a bar panel needs.
fn bars_height(b: &Bars) -> u32 {
    110 + (6 + 12 * b.series.len() as u32) * b.rows.len() as u32
}

/// The axis of a ratio panel: 1 and every unmarked ratio, padded by a
/// quarter; marked ratios outside it are clipped and marked. At most a
/// factor of 1000 either way.
pub fn ratio_range(values: &[Vec<Option<f64>>], marked: &[Vec<bool>]) -> (f64, f64) {
    let mut lo = 1.0f64;
    let mut hi = 1.0f64;
    for (vs, ms) in values.iter().zip(marked) {
        for (v, m) in vs.iter().zip(ms) {
            if let (Some(v), false) = (v, m) {
                lo = lo.min(*v);
                hi = hi.max(*v);
            }
        }
    }
    ((lo / 1.25).max(1e-3), (hi * 1.25).min(1e3))
}

/// The axis of a value panel: the values, padded by half.
fn value_range(values: &[Vec<Option<f64>>]) -> (f64, f64) {
    let all: Vec<f64> = values
        .iter()
        .flatten()
        .flatten()
        .copied()
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    if all.is_empty() {
        (0.1, 10.0)
    } else {
        (lo / 2.0, hi * 2.0)
    }
}

fn draw_bars<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, b: &Bars) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = b.rows.len() as i32;
    let (lo, hi) = b.range;
    let ratio = b.base.is_some();
    let ticks = if ratio {
        ratio_ticks(lo, hi)
    } else {
        log_ticks(lo, hi)
    };
    // Row i (0 at the top) spans y in [top(i), top(i) + 100).
    let top = |i: i32| 100 * (n - 1 - i);
    let rows = b.rows.clone();
    // One series: named in the caption, no legend over the bars.
    let caption = match &b.series[..] {
        [(label, _)] => format!("{}: {label}", b.title),
        _ => b.title.clone(),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 20).into_font())
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(360)
        .build_cartesian_2d(
            (lo..hi).log_scale().with_key_points(ticks),
            (0..100 * n).with_key_points((0..n).map(|i| top(i) + 50).collect()),
        )
        .map_err(err)?;
    let key_of = |y: &i32| {
        let i = n - 1 - y.div_euclid(100);
        rows.get(i as usize).cloned().unwrap_or_default()
    };
    chart
        .configure_mesh()
        .y_label_formatter(&key_of)
        .x_label_formatter(&|x| tick_label(*x))
        .x_desc(b.axis.clone())
        .label_style((FAMILY, 13).into_font())
        .axis_desc_style((FAMILY, 14).into_font())
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let start = b.base.unwrap_or(lo);
    let count = b.series.len().max(1) as i32;
    let h = 80 / count;
    let red = RGBColor(200, 0, 0);
    for (s, (label, color)) in b.series.iter().enumerate() {
        let color = *color;
        // (y of the bar's top, value, clipped value, marked)
        let bars: Vec<(i32, f64, f64, bool)> = (0..b.rows.len())
            .filter_map(|r| {
                let v = b.values[s][r]?;
                let y = top(r as i32) + 90 - (s as i32 + 1) * h;
                Some((y, v, v.clamp(lo, hi), b.marked[s][r]))
            })
            .collect();
        chart
            .draw_series(bars.iter().map(|&(y, _, c, _)| {
                Rectangle::new([(start, y), (c, y + h * 9 / 10)], color.mix(0.8).filled())
            }))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart
            .draw_series(bars.iter().filter(|b| b.3).map(|&(y, _, c, _)| {
                Rectangle::new([(start, y), (c, y + h * 9 / 10)], red.stroke_width(2))
            }))
            .map_err(err)?;
        // Beyond the bar's far end: the value, `!` when marked, and an
        // arrow where the axis clipped it.
        chart
            .draw_series(bars.iter().map(|&(y, v, c, m)| {
                let shown = if ratio {
                    format!("x{}", times(v))
                } else {
                    crate::table::number(v)
                };
                let core = format!(
                    "{}{shown}{}",
                    if v < lo { "« " } else { "" },
                    if v > hi { " »" } else { "" }
                );
                // Left of a bar that ends left of the base, else right of
                // it; inside the bar where the axis clipped it.
                let left = (ratio && c < 1.0) != (v < lo || v > hi);
                let (text, pos) = if left {
                    (
                        format!("{}{core} ", if m { "! " } else { "" }),
                        Pos::new(HPos::Right, VPos::Center),
                    )
                } else {
                    (
                        format!(" {core}{}", if m { " !" } else { "" }),
                        left_center(),
                    )
                };
                let font = (FAMILY, 11).into_font();
                let font = if m {
                    font.color(&red)
                } else {
                    font.color(&BLACK)
                };
                Text::new(text, (c, y + h / 2), font.pos(pos))
            }))
            .map_err(err)?;
    }
    if let Some(base) = b.base {
        chart
            .draw_series(LineSeries::new(
                [(base, 0), (base, 100 * n)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?;
    }
    if b.series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font((FAMILY, 13).into_font())
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// Stack `panels` top to bottom in `area`.
fn draw_stack<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    panels: &[Bars],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let mut rest = area;
    for p in panels {
        let (this, below) = rest.split_vertically(bars_height(p) as i32);
        draw_bars(&this, p)?;
        rest = below;
    }
    Ok(())
}

/// The families a plot shows, in order, with their panels' names.
fn families() -> impl Iterator<Item = (Group, &'static str)> {
    Group::ALL.into_iter().map(|g| {
        let name = match g {
            Group::Matmul => "matmul",
            Group::Bandwidth => "elementwise and memory bandwidth",
            Group::Reduction => "reductions",
            Group::Dispatch => "dispatch: a chain of small ops",
            Group::Pool => "buffer pool: allocate and release",
            Group::Minilm => "MiniLM sentence embeddings",
            Group::Llm => "LLM decode",
        };
        (g, name)
    })
}

/// The run plot's panels beyond matmul: per family, a bar per adapter
/// for each figure with a value, on a log axis in the family's unit.
pub fn run_panels(report: &Report) -> Vec<Bars> {
    let mut out = Vec::new();
    for (g, name) in families().filter(|(g, _)| *g != Group::Matmul) {
        let mut rows: Vec<(String, String)> = Vec::new();
        for f in report.runs.iter().flat_map(|r| &r.figures) {
            if f.group == g
                && f.value.is_some()
                && !rows.iter().any(|(r, c)| *r == f.row && *c == f.column)
            {
                rows.push((f.row.clone(), f.column.clone()));
            }
        }
        if rows.is_empty() {
            continue;
        }
        let first = report
            .runs
            .iter()
            .flat_map(|r| &r.figures)
            .find(|f| f.group == g && f.value.is_some());
        let Some(first) = first else { continue };
        let values: Vec<Vec<Option<f64>>> = report
            .runs
            .iter()
            .map(|run| {
                rows.iter()
                    .map(|(r, c)| {
                        run.figures
                            .iter()
                            .find(|f| f.group == g && f.row == *r && f.column == *c)?
                            .value
                    })
                    .collect()
            })
            .collect();
        let marked = values.iter().map(|v| vec![false; v.len()]).collect();
        out.push(Bars {
            title: name.to_string(),
            axis: format!(
                "{} (log scale; {} is better)",
                first.unit,
                if first.higher_is_better {
                    "higher"
                } else {
                    "lower"
                }
            ),
            rows: rows.iter().map(|(r, c)| format!("{r} / {c}")).collect(),
            series: report
                .runs
                .iter()
                .enumerate()
                .map(|(i, r)| (r.adapter.label(), COLORS[i % COLORS.len()]))
                .collect(),
            range: value_range(&values),
            values,
            marked,
            base: None,
        });
    }
    out
}

/// The panels of `compare`'s plot: per family, for every figure with a
/// ratio, a bar per compared column (ratio to its reference column; > 1
/// better), the axis clamped to the unflagged ratios, flagged ones marked.
pub fn compare_panels(cols: &[Column], cmp: &Comparison) -> Vec<Bars> {
    let compared: Vec<usize> = (0..cols.len())
        .filter(|&c| cols[c].reference.is_some())
        .collect();
    let mut out = Vec::new();
    for (g, name) in families() {
        let ks: Vec<usize> = (0..cmp.keys.len())
            .filter(|&k| {
                let group = cols
                    .iter()
                    .find_map(|c| find(c, &cmp.keys[k]))
                    .map(|f| f.group);
                group == Some(g) && compared.iter().any(|&c| cmp.ratios[c][k].is_some())
            })
            .collect();
        if ks.is_empty() {
            continue;
        }
        let values: Vec<Vec<Option<f64>>> = compared
            .iter()
            .map(|&c| ks.iter().map(|&k| cmp.ratios[c][k]).collect())
            .collect();
        let marked: Vec<Vec<bool>> = compared
            .iter()
            .map(|&c| ks.iter().map(|&k| cmp.flagged(c, k)).collect())
            .collect();
        let prefix = format!("{} / ", crate::report::group_name(g));
        out.push(Bars {
            title: name.to_string(),
            axis: "ratio to the reference column (log scale; > 1 is better)".into(),
            rows: ks
                .iter()
                .map(|&k| {
                    let key = &cmp.keys[k];
                    key.strip_prefix(&prefix).unwrap_or(key).to_string()
                })
                .collect(),
            series: compared
                .iter()
                .map(|&c| {
                    let r = cols[c].reference.map_or("?", |r| cols[r].tag.as_str());
                    (
                        format!("{} / {}: {}", cols[c].tag, r, cols[c].run.adapter.label()),
                        COLORS[c % COLORS.len()],
                    )
                })
                .collect(),
            range: ratio_range(&values, &marked),
            values,
            marked,
            base: Some(1.0),
        });
    }
    out
}

/// The plot of `compare`: [`compare_panels`] one above the other.
///
/// # Errors
/// A message naming the file that could not be written, or saying that no
/// figure has a ratio.
pub fn compare(cols: &[Column], cmp: &Comparison, path: &Path) -> Result<Vec<PathBuf>, String> {
    let panels = compare_panels(cols, cmp);
    if panels.is_empty() {
        return Err(
            "no figure has a value in both a column and its reference: nothing to plot".into(),
        );
    }
    let height = 50 + panels.iter().map(bars_height).sum::<u32>();
    let title = "wgbench compare: each column's ratio to its reference (> 1 is better; ! moved \
                 against the rest of its column)";
    both(
        path,
        (1300, height),
        |a| draw_compare(a, title, &panels),
        |a| draw_compare(a, title, &panels),
    )
}

fn draw_compare<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Bars],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let area = root.titled(title, (FAMILY, 22).into_font()).map_err(err)?;
    draw_stack(area, panels)?;
    root.present().map_err(err)
}
