//! PNG plots with `plotters` (bitmap backend, text with `ab_glyph`): the
//! font is DejaVu Sans from Debian's `fonts-dejavu-core` (installed by
//! `scripts/install-peers.sh`), loaded once at run time.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::results::Phase;

/// Where the font is looked for, in order.
const FONT_PATHS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
/// Plot size in pixels.
const SIZE: (u32, u32) = (900, 500);

/// Errors drawing a plot.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No usable font.
    #[error("no font for plots: install fonts-dejavu-core (scripts/install-peers.sh)")]
    NoFont,
    /// Drawing failed.
    #[error("drawing {path}: {message}")]
    Draw {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

fn ensure_font() -> Result<(), PlotError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        FONT_PATHS.iter().any(|p| match std::fs::read(p) {
            Ok(bytes) => {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            }
            Err(_) => false,
        })
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::NoFont)
    }
}

/// A colour per system, the same in every plot.
fn colour(system: &str) -> RGBColor {
    match system {
        "ponder" => RGBColor(214, 39, 40),
        "postgres" => RGBColor(31, 119, 180),
        "redis" => RGBColor(44, 160, 44),
        _ => RGBColor(148, 103, 189),
    }
}

fn systems(ps: &[&Phase]) -> Vec<String> {
    let mut s: Vec<String> = ps.iter().map(|p| p.system.clone()).collect();
    s.sort();
    s.dedup();
    s
}

/// One line per series: `(label, points)`.
struct Lines {
    title: String,
    x_label: String,
    y_label: String,
    log_x: bool,
    log_y: bool,
    /// Names for integer x positions (categorical axes).
    x_names: Option<&'static [&'static str]>,
    series: Vec<(String, Vec<(f64, f64)>)>,
}

/// Axis numbers without needless decimals: 25000, 2.5k-free, 0.5.
fn tick(v: f64) -> String {
    if v.abs() >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn draw(path: &Path, l: &Lines) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let pts = l.series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    let mut y0 = f64::MAX;
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut b = ChartBuilder::on(&root);
    b.caption(&l.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            let x_fmt = |v: &f64| match l.x_names {
                Some(names) if (v.fract()).abs() < 1e-9 && *v >= 0.0 => names
                    .get(*v as usize)
                    .map(|s| (*s).to_owned())
                    .unwrap_or_default(),
                Some(_) => String::new(),
                None => tick(*v),
            };
            let y_fmt = |v: &f64| tick(*v);
            chart
                .configure_mesh()
                .x_labels(l.x_names.map_or(10, <[&str]>::len))
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&y_fmt)
                .x_desc(l.x_label.as_str())
                .y_desc(l.y_label.as_str())
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(|e| err(&e))?;
            for (label, points) in &l.series {
                let sys = label.split_whitespace().next().unwrap_or("");
                let c = colour(sys);
                let style = if label.contains("update")
                    || label.contains("insert")
                    || label.contains("delete")
                {
                    c.mix(0.55).stroke_width(2)
                } else {
                    c.stroke_width(2)
                };
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), style))
                    .map_err(|e| err(&e))?
                    .label(label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    let ylo = if l.log_y { y0.max(1.0) * 0.8 } else { 0.0 };
    match (l.log_x, l.log_y) {
        (false, false) => finish!(b.build_cartesian_2d(x0..x1, ylo..y1).map_err(|e| err(&e))?),
        (true, false) => finish!(b
            .build_cartesian_2d((x0.max(1.0)..x1.max(2.0)).log_scale(), ylo..y1)
            .map_err(|e| err(&e))?),
        (false, true) => finish!(b
            .build_cartesian_2d(x0..x1, (ylo..y1).log_scale())
            .map_err(|e| err(&e))?),
        (true, true) => finish!(b
            .build_cartesian_2d(
                (x0.max(1.0)..x1.max(2.0)).log_scale(),
                (ylo..y1).log_scale()
            )
            .map_err(|e| err(&e))?),
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

fn file_name(workload: &str, what: &str) -> String {
    let w: String = workload
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{w}-{what}.png")
}

/// The plots of one workload's run phases; returns the files written.
pub fn workload_plots(workload: &str, ps: &[Phase], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    if ps.is_empty() {
        return Ok(Vec::new());
    }
    ensure_font()?;
    let mut out = Vec::new();
    // The headline configuration: the first distribution and cores setting, most connections.
    let first = &ps[0];
    let same = |p: &&Phase| p.distribution == first.distribution && p.cores == first.cores;
    let max_c = ps
        .iter()
        .filter(same)
        .map(|p| p.connections)
        .max()
        .unwrap_or(1);
    let head: Vec<&Phase> = ps
        .iter()
        .filter(same)
        .filter(|p| p.connections == max_c)
        .collect();
    let dist = first.distribution.clone().unwrap_or_default();

    let path = dir.join(file_name(workload, "throughput"));
    draw(
        &path,
        &Lines {
            title: format!("{workload}: throughput over time ({dist}, {max_c} connections)"),
            x_label: "second".into(),
            y_label: "operations per second".into(),
            log_x: false,
            log_y: false,
            x_names: None,
            series: head
                .iter()
                .map(|p| {
                    let pts = p
                        .per_second
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| (i as f64, n as f64));
                    // The last second is partial: leave it out when there are others.
                    let n = p.per_second.len().saturating_sub(1).max(1);
                    (p.system.clone(), pts.take(n).collect())
                })
                .collect(),
        },
    )?;
    out.push(path);

    let path = dir.join(file_name(workload, "latency"));
    let mut series = Vec::new();
    for p in &head {
        for (op, l) in &p.latency_us {
            let v = [l.p50, l.p95, l.p99, l.p999, l.max];
            series.push((
                format!("{} {op}", p.system),
                v.iter()
                    .enumerate()
                    .map(|(i, &x)| (i as f64, x.max(1) as f64))
                    .collect(),
            ));
        }
    }
    draw(
        &path,
        &Lines {
            title: format!("{workload}: latency (p50, p95, p99, p99.9, max), {max_c} connections"),
            x_label: "percentile".into(),
            y_label: "microseconds (log)".into(),
            log_x: false,
            log_y: true,
            x_names: Some(&["p50", "p95", "p99", "p99.9", "max"]),
            series,
        },
    )?;
    out.push(path);

    let sweep = |key: &dyn Fn(&Phase) -> Option<f64>, filter: &dyn Fn(&&Phase) -> bool| {
        let sel: Vec<&Phase> = ps.iter().filter(filter).collect();
        let mut xs: Vec<f64> = sel.iter().filter_map(|p| key(p)).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        if xs.len() < 2 {
            return None;
        }
        Some(
            systems(&sel)
                .into_iter()
                .map(|s| {
                    let mut pts: Vec<(f64, f64)> = sel
                        .iter()
                        .filter(|p| p.system == s)
                        .filter_map(|p| key(p).map(|x| (x, p.ops_per_sec)))
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    (s, pts)
                })
                .collect::<Vec<_>>(),
        )
    };
    if let Some(series) = sweep(&|p| Some(p.connections as f64), &same) {
        let path = dir.join(file_name(workload, "connections"));
        draw(
            &path,
            &Lines {
                title: format!("{workload}: throughput by concurrent connections ({dist})"),
                x_label: "connections".into(),
                y_label: "operations per second".into(),
                log_x: true,
                log_y: false,
                x_names: None,
                series,
            },
        )?;
        out.push(path);
    }
    let same_c = |p: &&Phase| p.distribution == first.distribution && p.connections == max_c;
    if let Some(series) = sweep(&|p| p.cores.map(|c| c as f64), &same_c) {
        let path = dir.join(file_name(workload, "cores"));
        draw(
            &path,
            &Lines {
                title: format!("{workload}: throughput by server cores ({max_c} connections)"),
                x_label: "cores the server is pinned to".into(),
                y_label: "operations per second".into(),
                log_x: false,
                log_y: false,
                x_names: None,
                series,
            },
        )?;
        out.push(path);
    }
    Ok(out)
}
