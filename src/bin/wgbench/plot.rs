//! Plots, each written as SVG and as PNG: matmul GFLOP/s against size per
//! adapter and dtype after a run, and the ratios of `compare`.
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
use crate::table::{Column, keys, speedup, times};

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

/// The matmul plot of a run: GFLOP/s (log scale) against size, one panel
/// per shape family, one line per adapter and dtype, CPU sgemm dashed.
/// Returns the files written, or `None` when the run has no matmul figure.
///
/// # Errors
/// A message naming the file that could not be written.
pub fn matmul(report: &Report, path: &Path) -> Result<Option<Vec<PathBuf>>, String> {
    let figs: Vec<&Figure> = report
        .runs
        .iter()
        .flat_map(|r| &r.figures)
        .filter(|f| f.group == Group::Matmul && f.status == Status::Ok)
        .collect();
    if figs.is_empty() {
        return Ok(None);
    }
    let panels = panels(&figs);
    let series = series(report);
    let ncols = panels.len().min(2) as u32;
    let nrows = panels.len().div_ceil(2) as u32;
    let size = (720 * ncols, 520 * nrows + 50 + legend_height(series.len()));
    let title = format!(
        "wgarray matmul GFLOP/s (log scale), {} suite, {}",
        report.suite,
        &report.date[..report.date.len().min(10)]
    );
    let files = both(
        path,
        size,
        |a| draw_matmul(a, &title, &panels, &series),
        |a| draw_matmul(a, &title, &panels, &series),
    )?;
    Ok(Some(files))
}

fn draw_matmul<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel],
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FAMILY, 26).into_font()).map_err(err)?;
    let height = root.dim_in_pixel().1 as i32;
    let (plots, legend) = root.split_vertically(height - legend_height(series.len()) as i32);
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
            .caption(&panel.title, (FAMILY, 20).into_font())
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (-5..10 * n as i32 - 5).with_key_points((0..n as i32).map(|x| 10 * x).collect()),
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
            )
            .map_err(err)?;
        let label_of = |x: &i32| labels.get(*x as usize / 10).cloned().unwrap_or_default();
        chart
            .configure_mesh()
            .x_label_formatter(&label_of)
            .y_label_formatter(&|y| crate::table::number(*y))
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
    root.present().map_err(err)
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

/// The plot of `compare`: for every figure both a column and the first one
/// have, a bar of the ratio to the first (log scale; > 1 is better), one
/// colour per compared column.
///
/// # Errors
/// A message naming the file that could not be written, or saying that no
/// figure is in two columns.
pub fn compare(cols: &[Column], path: &Path) -> Result<Vec<PathBuf>, String> {
    let base = cols[0].run;
    let mut rows: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    for key in keys(cols) {
        let Some(b) = base.figures.iter().find(|f| f.key() == key) else {
            continue;
        };
        let r: Vec<Option<f64>> = cols[1..]
            .iter()
            .map(|c| {
                let f = c.run.figures.iter().find(|f| f.key() == key)?;
                speedup(b, f)
            })
            .collect();
        if r.iter().any(Option::is_some) {
            rows.push((key, r));
        }
    }
    if rows.is_empty() {
        return Err(format!(
            "no figure has a value in both {} and another column: nothing to plot",
            cols[0].tag
        ));
    }
    let all: Vec<f64> = rows
        .iter()
        .flat_map(|(_, r)| r.iter().flatten().copied())
        .collect();
    let lo = all.iter().copied().fold(1.0f64, f64::min) / 1.25;
    let hi = all.iter().copied().fold(1.0f64, f64::max) * 1.25;
    let per_row = 8 + 14 * (cols.len() as u32 - 1);
    let size = (1300, 140 + per_row * rows.len() as u32);
    let title = format!("wgbench compare: ratio to {} (> 1 is better)", cols[0].tag);
    let tags: Vec<String> = cols
        .iter()
        .map(|c| format!("{}: {}", c.tag, c.run.adapter.label()))
        .collect();
    both(
        path,
        size,
        |a| draw_compare(a, &title, &tags, &rows, (lo, hi)),
        |a| draw_compare(a, &title, &tags, &rows, (lo, hi)),
    )
}

fn draw_compare<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    tags: &[String],
    rows: &[(String, Vec<Option<f64>>)],
    (lo, hi): (f64, f64),
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let n = rows.len();
    let others = tags.len() - 1;
    // Row i (0 at the top) spans y in [top(i), top(i) + 100).
    let top = |i: i32| 100 * (n as i32 - 1 - i);
    let keys: Vec<String> = rows.iter().map(|(k, _)| k.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FAMILY, 22).into_font())
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(440)
        .build_cartesian_2d(
            (lo..hi).log_scale().with_key_points(ratio_ticks(lo, hi)),
            (0..100 * n as i32).with_key_points((0..n as i32).map(|i| top(i) + 50).collect()),
        )
        .map_err(err)?;
    let key_of = |y: &i32| {
        let i = n as i32 - 1 - y.div_euclid(100);
        keys.get(i as usize).cloned().unwrap_or_default()
    };
    chart
        .configure_mesh()
        .y_label_formatter(&key_of)
        .x_label_formatter(&|x| format!("{x:.2}"))
        .x_desc(format!("ratio to {}", tags[0]))
        .label_style((FAMILY, 13).into_font())
        .axis_desc_style((FAMILY, 14).into_font())
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let h = 80 / others as i32;
    for c in 0..others {
        let color = COLORS[(c + 1) % COLORS.len()];
        let bars: Vec<(i32, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, (_, r))| Some((top(i as i32) + 90 - (c as i32 + 1) * h, r[c]?)))
            .collect();
        chart
            .draw_series(bars.iter().map(|&(y, r)| {
                Rectangle::new([(1.0, y), (r, y + h * 9 / 10)], color.mix(0.8).filled())
            }))
            .map_err(err)?
            .label(&tags[c + 1])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart
            .draw_series(bars.iter().map(|&(y, r)| {
                // Beyond the bar's far end, outside the bar.
                let (text, pos) = if r < 1.0 {
                    (
                        format!("{} ", times(r)),
                        Pos::new(HPos::Right, VPos::Center),
                    )
                } else {
                    (format!(" {}", times(r)), left_center())
                };
                Text::new(
                    text,
                    (r, y + h / 2),
                    (FAMILY, 11).into_font().color(&BLACK).pos(pos),
                )
            }))
            .map_err(err)?;
    }
    chart
        .draw_series(LineSeries::new(
            [(1.0, 0), (1.0, 100 * n as i32)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font((FAMILY, 13).into_font())
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
