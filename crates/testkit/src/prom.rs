//! Reading a Prometheus exposition in tests, with `prometheus-parse`: shared by the CLI's
//! metrics integration test (as `common::prom`) and the unit tests of the renderer of
//! `corestack stat --prometheus` (`crates/cli/src/observe/prometheus.rs`).

/// Parses an exposition; panics with the text when it does not parse.
pub fn parse(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .unwrap_or_else(|e| panic!("the exposition does not parse ({e}):\n{text}"))
}

/// A counter's, gauge's or untyped sample's value; panics for histograms and summaries.
pub fn value(s: &prometheus_parse::Sample) -> f64 {
    match s.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => panic!("{} is not a counter or gauge", s.metric),
    }
}

/// The samples of `metric` that carry every one of `labels` (name, value).
pub fn samples<'a>(
    scrape: &'a prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> Vec<&'a prometheus_parse::Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .collect()
}
