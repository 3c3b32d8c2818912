//! The statistics the reports use, as the Python reports computed them (so figures stay
//! comparable): median (mean of the middle two for an even count), nearest-rank percentile,
//! geometric mean.

/// The median; 0 for no values.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Nearest-rank percentile: the value at round(q x (n - 1)) of the sorted values (half to
/// even, as Python's round); 0 for no values.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = (q * (v.len() - 1) as f64).round_ties_even();
    v[(at.max(0.0) as usize).min(v.len() - 1)]
}

/// Geometric mean of the positive values; `None` when there are none.
pub fn geomean(values: &[f64]) -> Option<f64> {
    let positive: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
    if positive.is_empty() {
        return None;
    }
    Some((positive.iter().map(|v| v.ln()).sum::<f64>() / positive.len() as f64).exp())
}

/// `a / b` with two decimals, "n/a" when `b` is not positive.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "n/a".to_string()
    }
}

/// An integer with thousands separators, as Python's `{:,}`.
pub fn thousands(n: f64) -> String {
    let rounded = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in rounded.chars().enumerate() {
        if i > 0 && (rounded.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 && rounded != "0" {
        out.insert(0, '-');
    }
    out
}

/// A number with one decimal and thousands separators, as Python's `{:,.1f}`.
pub fn thousands_1(n: f64) -> String {
    let tenths = (n.abs() * 10.0).round();
    let whole = thousands((tenths / 10.0).trunc());
    let sign = if n < 0.0 && tenths > 0.0 { "-" } else { "" };
    format!("{sign}{whole}.{}", (tenths % 10.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_the_python_reports_computed_them() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        // round(0.9 x 19) = round(17.1) = 17 -> the 18th value.
        assert_eq!(percentile(&v, 0.9), 18.0);
        // round(0.5 x 3) = round(1.5) = 2 (half to even).
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), 3.0);
        assert!((geomean(&[1.0, 4.0]).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(geomean(&[0.0]), None);
        assert_eq!(ratio(1.0, 0.0), "n/a");
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands_1(1234.56), "1,234.6");
        assert_eq!(thousands_1(0.04), "0.0");
    }
}
