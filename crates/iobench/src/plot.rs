//! The PNG plot: throughput (ops/s) on top, latency (p50 solid, p99 dashed,
//! µs, log scale) below, one colour per workload, over time.
//!
//! Text is drawn with plotters' `ab_glyph` renderer and DejaVu Sans embedded
//! from the `dejavu` crate, so no system font or fontconfig is needed.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::{Error, Result};
use crate::report::Report;

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        if plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_err()
        {
            result = Err(Error::Output(
                "cannot load the embedded DejaVu Sans font".into(),
            ));
        }
    });
    result
}

/// Formats an axis value compactly: 1.5M, 20k, 350.
fn compact(v: &f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 || *v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The x of a point: the middle of its interval (points carry the interval's end).
fn mid(t: f64) -> f64 {
    (t - 0.5).max(t / 2.0)
}

fn out_err(e: impl std::fmt::Display) -> Error {
    Error::Output(format!("plot: {e}"))
}

/// Draws the throughput panel on `$area` with the y range `$y` (linear or log).
macro_rules! throughput_chart {
    ($area:expr, $report:expr, $t_max:expr, $y_desc:expr, $y:expr) => {{
        let mut chart = ChartBuilder::on($area)
            .caption(
                format!(
                    "ponder-iobench: throughput on {}",
                    $report.target.path.display()
                ),
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..$t_max, $y)
            .map_err(out_err)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc($y_desc)
            .y_label_formatter(&compact)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(out_err)?;
        for (i, w) in $report.workloads.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(
                    LineSeries::new(
                        w.series
                            .iter()
                            .filter(|p| p.ops_per_sec > 0.0)
                            .map(|p| (mid(p.t), p.ops_per_sec)),
                        c.stroke_width(2),
                    )
                    .point_size(3),
                )
                .map_err(out_err)?
                .label(w.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(out_err)?;
    }};
}

/// Draws `report`'s time series into a PNG at `path`.
pub fn draw(report: &Report, path: &Path) -> Result<()> {
    register_font()?;
    let root = BitMapBackend::new(path, (1200, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(out_err)?;
    let (top, bottom) = root.split_vertically(400);

    let t_max = report
        .workloads
        .iter()
        .flat_map(|w| w.series.iter().map(|p| p.t))
        .fold(1.0f64, f64::max);
    let ops_max = report
        .workloads
        .iter()
        .flat_map(|w| w.series.iter().map(|p| p.ops_per_sec))
        .fold(1.0f64, f64::max)
        * 1.1;
    let lat_vals = report
        .workloads
        .iter()
        .flat_map(|w| w.series.iter().flat_map(|p| [p.p50_us, p.p99_us]))
        .filter(|v| *v > 0.0);
    let (lat_min, lat_max) =
        lat_vals.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lat_min, lat_max) = if lat_max > 0.0 {
        (lat_min / 1.5, lat_max * 1.5)
    } else {
        (0.1, 10.0)
    };

    let ops_min = report
        .workloads
        .iter()
        .flat_map(|w| w.series.iter().map(|p| p.ops_per_sec))
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    // Workloads hundreds of times apart (mmap next to fdatasync) need a log axis.
    if ops_min < f64::MAX && ops_max / ops_min > 100.0 {
        throughput_chart!(
            &top,
            report,
            t_max,
            "ops/s (log)",
            (ops_min / 1.5..ops_max * 1.5).log_scale()
        );
    } else {
        throughput_chart!(&top, report, t_max, "ops/s", 0.0..ops_max);
    }

    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "latency per second: p50 (solid), p99 (dashed)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_max, (lat_min..lat_max).log_scale())
        .map_err(out_err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("µs")
        .y_label_formatter(&compact)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(out_err)?;
    for (i, w) in report.workloads.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let p50: Vec<(f64, f64)> = w
            .series
            .iter()
            .filter(|p| p.p50_us > 0.0)
            .map(|p| (mid(p.t), p.p50_us))
            .collect();
        let p99: Vec<(f64, f64)> = w
            .series
            .iter()
            .filter(|p| p.p99_us > 0.0)
            .map(|p| (mid(p.t), p.p99_us))
            .collect();
        chart
            .draw_series(LineSeries::new(p50, c.stroke_width(2)).point_size(3))
            .map_err(out_err)?;
        chart
            .draw_series(DashedLineSeries::new(p99, 6, 4, c.stroke_width(1)))
            .map_err(out_err)?;
    }
    root.present().map_err(out_err)?;
    Ok(())
}
