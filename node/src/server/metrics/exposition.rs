//! Prometheus's text exposition format (version 0.0.4): metric families with `# HELP` and
//! `# TYPE`, samples with escaped label values. Names are checked in debug builds only:
//! they are constants of this crate, not input.

use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// The text of one scrape.
#[derive(Default)]
pub struct Exposition {
    out: String,
    family: &'static str,
}

impl Exposition {
    /// Starts a family; its samples follow.
    pub fn family(&mut self, name: &'static str, kind: Kind, help: &str) -> &mut Self {
        debug_assert!(valid_name(name), "metric name {name:?}");
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
        self.family = name;
        self
    }

    /// One sample of the current family (`suffix` for a histogram's `_bucket`, `_sum`,
    /// `_count`; empty otherwise).
    pub fn sample(&mut self, suffix: &str, labels: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(self.family);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (name, value)) in labels.iter().enumerate() {
                debug_assert!(valid_name(name), "label name {name:?}");
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{name}=\"{}\"", escape_label(value));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        push_value(&mut self.out, value);
        self.out.push('\n');
        self
    }

    /// A family with one unlabelled sample.
    pub fn single(&mut self, name: &'static str, kind: Kind, help: &str, value: f64) {
        self.family(name, kind, help).sample("", &[], value);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn push_value(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        let _ = write!(out, "{}", value as i64);
    } else {
        let _ = write!(out, "{value}");
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Label values: backslash, double quote and newline escaped.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: backslash and newline escaped.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escaping_follow_the_text_format() {
        let mut e = Exposition::default();
        e.single("x_up", Kind::Gauge, "Whether\nit is up", 1.0);
        e.family("x_calls_total", Kind::Counter, "Calls")
            .sample("", &[("cmd", "get")], 12.0)
            .sample("", &[("cmd", "a\"b\\c\nd")], 0.5);
        e.family("x_latency_seconds", Kind::Histogram, "Latency")
            .sample("_bucket", &[("le", "+Inf")], f64::INFINITY)
            .sample("_count", &[], 3.0);
        assert_eq!(
            e.finish(),
            "# HELP x_up Whether\\nit is up\n# TYPE x_up gauge\nx_up 1\n\
             # HELP x_calls_total Calls\n# TYPE x_calls_total counter\n\
             x_calls_total{cmd=\"get\"} 12\nx_calls_total{cmd=\"a\\\"b\\\\c\\nd\"} 0.5\n\
             # HELP x_latency_seconds Latency\n# TYPE x_latency_seconds histogram\n\
             x_latency_seconds_bucket{le=\"+Inf\"} +Inf\nx_latency_seconds_count 3\n"
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("redis_up") && valid_name("_x1"));
        assert!(!valid_name("1x") && !valid_name("a-b") && !valid_name(""));
    }
}
