//! The QPS–p99 curves of `bench memcached` as SVG (plotters' SVG backend, no system fonts
//! needed): achieved QPS on x, p99 latency (µs, log scale) on y, one line per row, and the
//! objective as a dashed horizontal line.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::RowResult;

const COLORS: [RGBColor; 4] = [
    RGBColor(0, 0, 0),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
];

/// Draws every row that ran into `path` (SVG).
pub fn draw(path: &Path, rows: &[RowResult], sla_us: f64) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let ran: Vec<&RowResult> = rows.iter().filter(|r| !r.steps.is_empty()).collect();
    let max_x = ran
        .iter()
        .flat_map(|r| r.steps.iter().map(|s| s.achieved_qps))
        .fold(1.0, f64::max)
        * 1.05;
    let max_y = ran
        .iter()
        .flat_map(|r| r.steps.iter().map(|s| s.p99_us))
        .fold(sla_us * 2.0, f64::max)
        * 1.5;
    let min_y = ran
        .iter()
        .flat_map(|r| r.steps.iter().map(|s| s.p99_us))
        .fold(sla_us, f64::min)
        .max(1.0)
        / 1.5;
    crate::plot::register_font();
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "memcached, ETC workload: p99 latency vs achieved QPS",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_x, (min_y..max_y).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("achieved QPS")
        .y_desc("p99 latency (µs)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, sla_us), (max_x, sla_us)],
            6,
            4,
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(|e| err(&e))?
        .label(format!("SLA p99 < {sla_us:.0} µs"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.5)));
    for (i, r) in ran.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = r
            .steps
            .iter()
            .map(|s| (s.achieved_qps, s.p99_us.max(min_y)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(r.label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
