//! Latency tracking settings: `latency-tracking` (per-command latency histograms for INFO
//! latencystats), `latency-tracking-info-percentiles` (which percentiles INFO reports) and
//! `latency-monitor-threshold` (the LATENCY monitor's event threshold, in ms).

/// Most percentiles `latency-tracking-info-percentiles` may list; each is one INFO field per
/// command.
pub const LATENCY_PERCENTILES_MAX: usize = 16;

#[derive(Clone, Debug, PartialEq)]
pub struct LatencyConfig {
    pub tracking: bool,
    pub info_percentiles: Vec<f64>,
    pub monitor_threshold_ms: u64,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        LatencyConfig {
            tracking: true,
            info_percentiles: vec![50.0, 99.0, 99.9],
            monitor_threshold_ms: 0,
        }
    }
}

/// Parses a space-separated list of percentiles, each in 0..=100 (Redis's rule; an empty
/// list reports none).
pub fn parse_percentiles(v: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for word in v.split_whitespace() {
        let p: f64 = word
            .parse()
            .map_err(|_| "Invalid latency-tracking-info-percentiles parameters".to_string())?;
        if !(0.0..=100.0).contains(&p) || out.len() >= LATENCY_PERCENTILES_MAX {
            return Err("Invalid latency-tracking-info-percentiles parameters".into());
        }
        out.push(p);
    }
    Ok(out)
}

/// The list as CONFIG GET shows it (`50 99 99.9`).
pub fn format_percentiles(ps: &[f64]) -> String {
    ps.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_parse_within_bounds() {
        assert_eq!(parse_percentiles("50 99 99.9"), Ok(vec![50.0, 99.0, 99.9]));
        assert_eq!(parse_percentiles(""), Ok(vec![]));
        assert!(parse_percentiles("101").is_err());
        assert!(parse_percentiles("-1").is_err());
        assert!(parse_percentiles("abc").is_err());
        assert_eq!(format_percentiles(&[50.0, 99.0, 99.9]), "50 99 99.9");
    }
}
