//! Pictures of the benchmarks' figures (`--plot FILE.svg|png` on every `corestack bench`
//! subcommand), drawn with `plotters`: latency CDFs, grouped bars (Linux and corestack side by
//! side per case) and lines (sweeps).
//!
//! The format follows the file's extension: `.svg` (text, always) or `.png` (a bitmap drawn in
//! pure Rust). Text is laid out with DejaVu Sans, which is built into the binary
//! (`assets/DejaVuSans.ttf`, Bitstream Vera license beside it), so neither format needs a font
//! or a font library on the system.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::prelude::*;

/// The embedded font, registered as plotters' "sans-serif".
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Picture size in pixels.
const SIZE: (u32, u32) = (1000, 600);

/// The colours of series 0, 1, ...: Linux first, corestack second.
const PALETTE: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Makes the built-in DejaVu Sans plotters' "sans-serif" (once per process); every picture
/// with text needs it, as no system font is looked up.
pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is ours and valid; a failure would show as a layout error below.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// A named series of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name.
    pub name: String,
    /// Points in drawing order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series named `name`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// The picture formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Scalable vector graphics (text).
    Svg,
    /// Portable network graphics.
    Png,
}

/// The format of `path` by its extension. Errors: another extension.
pub fn format_of(path: &Path) -> Result<Format> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        _ => bail!(
            "--plot {}: the file name must end in .svg or .png",
            path.display()
        ),
    }
}

/// A drawing error of any backend as an error of this crate.
fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("{e}")
}

/// The drawing of one picture, generic over the backend, on an area filled white.
trait Picture {
    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<()>;
}

/// Fills `area` white, draws `picture` on it and writes it out.
fn paint<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    picture: &impl Picture,
) -> Result<()> {
    area.fill(&WHITE).map_err(plot_error)?;
    picture.draw(area)?;
    area.present().map_err(plot_error)
}

fn save(path: &Path, picture: &impl Picture) -> Result<()> {
    register_font();
    let fmt = format_of(path)?;
    let result = match fmt {
        Format::Svg => paint(&SVGBackend::new(path, SIZE).into_drawing_area(), picture),
        Format::Png => paint(&BitMapBackend::new(path, SIZE).into_drawing_area(), picture),
    };
    result.with_context(|| format!("writing the plot {}", path.display()))
}

/// Draws `chart`'s legend (the series' names) at `pos`, framed on a translucent white box.
fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(pos)
        .draw()
        .map_err(plot_error)
}

/// The range of `values` with a margin, never empty; from 0 when `from_zero`.
fn span(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero { lo } else { lo - pad }, hi + pad)
}

/// An axis label: no needless decimals (12, 1.5, 0.25, 65536).
fn number(v: &f64) -> String {
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A line chart: `series` over x (log scale when `log_x`).
pub struct Lines<'a> {
    /// The caption above the chart.
    pub title: &'a str,
    /// The x axis' description (with its unit).
    pub x_label: &'a str,
    /// The y axis' description (with its unit).
    pub y_label: &'a str,
    /// Log scale on x (message sizes, connection counts, latencies).
    pub log_x: bool,
    /// Log scale on y too (latencies that span decades).
    pub log_y: bool,
    /// The lines, one colour each, named in the legend.
    pub series: &'a [Series],
}

impl Picture for Lines<'_> {
    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<()> {
        let xs = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
        };
        let ys = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
        };
        let (y0, y1) = span(ys(), true);
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(self.title, ("sans-serif", 24))
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(100);
        macro_rules! body {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(self.x_label)
                    .y_desc(self.y_label)
                    .x_label_formatter(&number)
                    .y_label_formatter(&number)
                    .label_style(("sans-serif", 15))
                    .draw()
                    .map_err(plot_error)?;
                for (i, s) in self.series.iter().enumerate() {
                    let c = colour(i);
                    chart
                        .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                        .map_err(plot_error)?
                        .label(s.name.as_str())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                        });
                    if s.points.len() <= 64 {
                        chart
                            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                            .map_err(plot_error)?;
                    }
                }
                legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
            }};
        }
        let (x0, x1) = if self.log_x {
            let (_, hi) = span(xs().filter(|x| *x > 0.0), false);
            let lo = xs().filter(|x| *x > 0.0).fold(hi, f64::min).max(1e-9) / 1.2;
            (lo, hi.max(lo * 2.0))
        } else {
            span(xs(), false)
        };
        let (y0, y1) = if self.log_y {
            let pos = || ys().filter(|y| *y > 0.0);
            let lo = pos().fold(f64::INFINITY, f64::min);
            let hi = pos().fold(0.0, f64::max);
            if lo.is_finite() {
                (lo / 1.5, (hi * 1.5).max(lo * 2.0))
            } else {
                (1.0, 10.0)
            }
        } else {
            (y0, y1)
        };
        match (self.log_x, self.log_y) {
            (false, false) => body!(builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(plot_error)?),
            (true, false) => body!(builder
                .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(plot_error)?),
            (false, true) => body!(builder
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(plot_error)?),
            (true, true) => body!(builder
                .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
                .map_err(plot_error)?),
        }
        Ok(())
    }
}

/// The x axis of [`Bars`]: categories 0..n, each one unit wide, labelled at its middle.
struct Categories<'a>(&'a [String]);

impl Ranged for Categories<'_> {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        limit.0 + (v / self.0.len().max(1) as f64 * span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        (0..self.0.len()).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.0.len().max(1) as f64
    }
}

impl ValueFormatter<f64> for Categories<'_> {
    fn format_ext(&self, v: &f64) -> String {
        self.0
            .get(v.floor().max(0.0) as usize)
            .cloned()
            .unwrap_or_default()
    }
}

/// Grouped bars: for each category, one bar per series, side by side.
pub struct Bars<'a> {
    /// The caption above the chart.
    pub title: &'a str,
    /// The y axis' description (with its unit).
    pub y_label: &'a str,
    /// The groups along x (cases, setups, runs).
    pub categories: &'a [String],
    /// (name, one value per category); a NaN value draws no bar.
    pub series: &'a [(String, Vec<f64>)],
}

impl Picture for Bars<'_> {
    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<()> {
        let (_, y1) = span(self.series.iter().flat_map(|s| s.1.iter().copied()), true);
        let x = Categories(self.categories);
        let mut chart = ChartBuilder::on(area)
            .caption(self.title, ("sans-serif", 24))
            .margin(15)
            .x_label_area_size(60)
            .y_label_area_size(80)
            .build_cartesian_2d(x, 0.0..y1)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(self.y_label)
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(plot_error)?;
        let k = self.series.len().max(1) as f64;
        let width = 0.8 / k;
        for (j, (name, values)) in self.series.iter().enumerate() {
            let c = colour(j);
            let bars = values
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(|(i, &v)| {
                    let x0 = i as f64 + 0.1 + j as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.95, v)], c.filled())
                });
            chart
                .draw_series(bars)
                .map_err(plot_error)?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    }
}

/// Writes a line chart to `path` (.svg or .png).
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    (log_x, log_y): (bool, bool),
    series: &[Series],
) -> Result<()> {
    save(
        path,
        &Lines {
            title,
            x_label,
            y_label,
            log_x,
            log_y,
            series,
        },
    )
}

/// Writes latency CDFs to `path` (x on a log scale, so the body and the tail both show): for
/// each series, its (µs, fraction of round trips at or below it) points.
pub fn cdf(path: &Path, title: &str, series: &[Series]) -> Result<()> {
    lines(
        path,
        title,
        "round-trip time (µs)",
        "fraction of round trips",
        (true, false),
        series,
    )
}

/// Writes grouped bars to `path`.
pub fn bars(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    save(
        path,
        &Bars {
            title,
            y_label,
            categories,
            series,
        },
    )
}

/// One bar per run (this one and earlier ones), labelled by the run.
pub fn run_bars(path: &Path, title: &str, y_label: &str, runs: &[(String, f64)]) -> Result<()> {
    let categories: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    let values: Vec<f64> = runs.iter().map(|r| r.1).collect();
    bars(
        path,
        title,
        y_label,
        &categories,
        &[(y_label.to_string(), values)],
    )
}

/// [`run_bars`] of this run (`stack`, `value`) after `earlier` runs (their `--json FILE`, for
/// `--plot-with`). `what` is (title, y label, key): each earlier bar is named by its report's
/// "stack" ("?" without one) and sized by its `key` (no bar without one).
fn run_bars_after(
    path: &Path,
    what: (&str, &str, &str),
    earlier: &[serde_json::Value],
    stack: &str,
    value: f64,
) -> Result<()> {
    let (title, y_label, key) = what;
    let mut runs: Vec<(String, f64)> = earlier
        .iter()
        .map(|v| {
            (
                v.get("stack")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                v.get(key)
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(f64::NAN),
            )
        })
        .collect();
    runs.push((stack.to_string(), value));
    run_bars(path, title, y_label, &runs)
}

/// The CDF points of an HDR histogram of nanoseconds, in µs (one point per percentile step,
/// at most about 200).
pub fn cdf_points(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(f64, f64)> = Vec::new();
    for v in h.iter_quantiles(4) {
        let p = (
            v.value_iterated_to() as f64 / 1000.0,
            v.quantile_iterated_to(),
        );
        match out.last_mut() {
            // One point per value: the highest fraction reached at it.
            Some(last) if last.0 == p.0 => *last = p,
            _ => out.push(p),
        }
    }
    if out.len() > 200 {
        let step = out.len().div_ceil(200);
        let last = *out.last().expect("not empty");
        out = out.into_iter().step_by(step).collect();
        out.push(last);
    }
    out
}

/// Writes `value` as pretty JSON to `path`. Errors: those of writing the file.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// `--json [FILE]`, `--plot FILE` and `--plot-with FILE.json` of the single-run benchmarks
/// (pingpong, transfer, stream).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Outputs {
    /// Print the figures as one JSON object on stdout instead of text (`--json`), or write
    /// them to FILE as well (`--json FILE`).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<std::path::PathBuf>,
    /// Draw the figures to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    /// With --plot: draw these earlier runs (their `--json FILE`) beside this one, e.g. the
    /// Linux run beside the corestack one. Repeatable.
    #[arg(long, value_name = "FILE.json", requires = "plot")]
    pub plot_with: Vec<std::path::PathBuf>,
}

impl Outputs {
    /// `--json` alone: the figures go to stdout as JSON instead of text.
    pub fn json_on_stdout(&self) -> bool {
        self.json.as_deref() == Some(Path::new("-"))
    }

    /// Checks the options before the run: the plot's extension, the earlier runs' files.
    pub fn check(&self) -> Result<Vec<serde_json::Value>> {
        if let Some(p) = &self.plot {
            format_of(p)?;
        }
        self.plot_with
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("--plot-with {}: reading it", p.display()))?;
                serde_json::from_str(&text).with_context(|| {
                    format!("--plot-with {}: not the JSON of a --json FILE", p.display())
                })
            })
            .collect()
    }

    /// Prints `report` as one JSON line (`--json`) or writes it to the file (`--json FILE`).
    pub fn emit(&self, report: &impl serde::Serialize) -> Result<()> {
        match &self.json {
            Some(p) if p.as_path() == Path::new("-") => {
                println!("{}", serde_json::to_string(report)?);
                Ok(())
            }
            Some(p) => write_json(p, report),
            None => Ok(()),
        }
    }

    /// [`Outputs::emit`]s `report`, then with `--plot` draws this run's figure as a bar after
    /// the `earlier` runs' (from [`Outputs::check`]): `what` is (title, y label, the figure's
    /// JSON key), `bar` (this run's stack, its value). Errors: those of writing either file.
    pub fn emit_bar(
        &self,
        report: &impl serde::Serialize,
        earlier: &[serde_json::Value],
        what: (&str, &str, &str),
        bar: (&str, f64),
    ) -> Result<()> {
        self.emit(report)?;
        match &self.plot {
            Some(path) => run_bars_after(path, what, earlier, bar.0, bar.1),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("corestack-plot-{}-{name}", std::process::id()))
    }

    fn well_formed(path: &Path) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
        text
    }

    #[test]
    fn lines_svg_is_well_formed_with_series_names() {
        let p = tmp("lines.svg");
        let series = [
            Series::new("Linux", vec![(64.0, 10.5), (1024.0, 12.0), (65536.0, 80.0)]),
            Series::new(
                "corestack",
                vec![(64.0, 8.5), (1024.0, 9.0), (65536.0, 60.0)],
            ),
        ];
        lines(
            &p,
            "size sweep",
            "message size (B)",
            "p50 (µs)",
            (true, true),
            &series,
        )
        .unwrap();
        let text = well_formed(&p);
        assert!(text.starts_with("<svg"), "{}", &text[..40.min(text.len())]);
        for needle in ["Linux", "corestack", "size sweep", "message size (B)"] {
            assert!(text.contains(needle), "no {needle:?} in the SVG");
        }
        // One polyline per series at least.
        assert!(text.matches("<polyline").count() >= 2);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn bars_svg_has_a_bar_per_value_and_the_categories() {
        let p = tmp("bars.svg");
        let cats = vec!["clean".to_string(), "loss 1%".to_string()];
        let series = vec![
            ("Linux".to_string(), vec![100.0, 50.0]),
            ("corestack".to_string(), vec![95.0, f64::NAN]),
        ];
        bars(&p, "goodput", "MB/s", &cats, &series).unwrap();
        let text = well_formed(&p);
        for needle in ["Linux", "corestack", "clean", "loss 1%", "goodput"] {
            assert!(text.contains(needle), "no {needle:?} in the SVG");
        }
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn png_is_written_without_system_fonts() {
        let p = tmp("cdf.png");
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for ns in [9_000u64, 10_000, 10_500, 11_000, 30_000] {
            h.record(ns).unwrap();
        }
        let pts = cdf_points(&h);
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!((pts.last().unwrap().1 - 1.0).abs() < 1e-9);
        cdf(&p, "TCP 64 B", &[Series::new("Linux", pts)]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn axis_numbers_have_no_needless_decimals() {
        assert_eq!(number(&65536.0), "65536");
        assert_eq!(number(&1.5), "1.5");
        assert_eq!(number(&10.0), "10");
        assert_eq!(number(&0.25), "0.25");
        assert_eq!(number(&0.0), "0");
    }

    #[test]
    fn other_extensions_are_refused() {
        let err = format_of(Path::new("x.jpg")).unwrap_err().to_string();
        assert!(err.contains(".svg or .png"), "{err}");
    }
}
