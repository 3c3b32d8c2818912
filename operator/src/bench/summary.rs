//! A finished test's numbers, and the three ways to print them: redis-benchmark's default
//! report, its `-q` line and its `--csv` row (with p99.9 and errors added as last columns).

use std::time::Duration;

use hdrhistogram::Histogram;

/// Highest latency the histogram tells apart, in microseconds (one hour); slower requests are
/// recorded as this.
pub const LATENCY_US_MAX: u64 = 3_600_000_000;

/// Significant decimal digits the histogram keeps (0.1% resolution).
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// An empty latency histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, LATENCY_SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub avg_ms: f64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl LatencySummary {
    /// Reads a histogram of microseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> LatencySummary {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return LatencySummary {
                count: 0,
                avg_ms: 0.0,
                min_ms: 0.0,
                p50_ms: 0.0,
                p95_ms: 0.0,
                p99_ms: 0.0,
                p999_ms: 0.0,
                max_ms: 0.0,
            };
        }
        LatencySummary {
            count: h.len(),
            avg_ms: h.mean() / 1000.0,
            min_ms: ms(h.min()),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// The run's settings the report repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunShape {
    pub clients: usize,
    pub payload_bytes: usize,
    pub pipeline: usize,
    pub threads: usize,
}

/// One finished test.
#[derive(Clone, Debug, PartialEq)]
pub struct TestReport {
    pub title: String,
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
    pub latency: LatencySummary,
    pub shape: RunShape,
    /// The server's CPU time during the test (`--server-cpu`).
    pub server_cpu: Option<Duration>,
}

/// redis-benchmark's CSV header, then p99.9 and the error count.
pub const CSV_HEADER: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\
\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\",\
\"p999_latency_ms\",\"errors\"";

/// The CSV header, with the server CPU column last when `--server-cpu` asked for it.
pub fn csv_header(server_cpu: bool) -> String {
    if server_cpu {
        format!("{CSV_HEADER},\"server_cpu_us_per_request\"")
    } else {
        CSV_HEADER.to_string()
    }
}

impl TestReport {
    /// The server's CPU microseconds per request, with `--server-cpu`.
    pub fn server_cpu_us_per_request(&self) -> Option<f64> {
        let cpu = self.server_cpu?;
        (self.requests > 0).then(|| cpu.as_secs_f64() * 1e6 / self.requests as f64)
    }

    /// Requests per second over the whole test.
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// The default report, like redis-benchmark's summary.
    pub fn full(&self) -> String {
        let l = &self.latency;
        let multi_thread = if self.shape.threads > 1 {
            format!("yes ({} threads)", self.shape.threads)
        } else {
            "no".to_string()
        };
        format!(
            "====== {title} ======\n\
             \x20 {requests} requests completed in {secs:.2} seconds\n\
             \x20 {clients} parallel clients\n\
             \x20 {payload} bytes payload\n\
             \x20 keep alive: 1\n\
             \x20 pipeline: {pipeline}\n\
             \x20 multi-thread: {multi_thread}\n\
             \n\
             Summary:\n\
             \x20 throughput summary: {rps:.2} requests per second\n\
             \x20 latency summary (msec):\n\
             \x20         avg       min       p50       p99     p99.9       max\n\
             \x20   {avg:>9.3} {min:>9.3} {p50:>9.3} {p99:>9.3} {p999:>9.3} {max:>9.3}\n\
             \x20 errors: {errors}\n{server_cpu}",
            title = self.title,
            requests = self.requests,
            secs = self.elapsed.as_secs_f64(),
            clients = self.shape.clients,
            payload = self.shape.payload_bytes,
            pipeline = self.shape.pipeline,
            rps = self.rps(),
            avg = l.avg_ms,
            min = l.min_ms,
            p50 = l.p50_ms,
            p99 = l.p99_ms,
            p999 = l.p999_ms,
            max = l.max_ms,
            errors = self.errors,
            server_cpu = match self.server_cpu_us_per_request() {
                Some(us) => format!("  server CPU: {us:.2} us per request\n"),
                None => String::new(),
            },
        )
    }

    /// The `-q` line: redis-benchmark's, plus p99 and p99.9 (and errors, if any).
    pub fn quiet(&self) -> String {
        let l = &self.latency;
        let errors = if self.errors > 0 {
            format!(", {} errors", self.errors)
        } else {
            String::new()
        };
        let server_cpu = match self.server_cpu_us_per_request() {
            Some(us) => format!(", server CPU {us:.2} us/request"),
            None => String::new(),
        };
        format!(
            "{}: {:.2} requests per second, p50={:.3} msec, p99={:.3} msec, p99.9={:.3} msec{errors}{server_cpu}",
            self.title,
            self.rps(),
            l.p50_ms,
            l.p99_ms,
            l.p999_ms
        )
    }

    /// The `--csv` row matching [`csv_header`].
    pub fn csv_row(&self) -> String {
        let l = &self.latency;
        let server_cpu = match self.server_cpu_us_per_request() {
            Some(us) => format!(",\"{us:.3}\""),
            None if self.server_cpu.is_some() => ",\"\"".to_string(),
            None => String::new(),
        };
        format!(
            "\"{}\",\"{:.2}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{}\"{}",
            self.title.replace('"', "\"\""),
            self.rps(),
            l.avg_ms,
            l.min_ms,
            l.p50_ms,
            l.p95_ms,
            l.p99_ms,
            l.max_ms,
            l.p999_ms,
            self.errors,
            server_cpu
        )
    }
}

#[cfg(test)]
mod tests {
    //! Goal: percentiles read from the histogram are the recorded distribution's, and the
    //! three output forms carry them in redis-benchmark's layout.
    use super::*;

    fn report() -> TestReport {
        let mut h = new_histogram();
        // 1..=1000 microseconds, once each: p50 = 500 us, p99 = 990 us, p99.9 = 999 us.
        for us in 1..=1000 {
            h.record(us).unwrap();
        }
        TestReport {
            title: "SET".into(),
            requests: 1000,
            errors: 0,
            elapsed: Duration::from_millis(500),
            latency: LatencySummary::from_histogram(&h),
            shape: RunShape {
                clients: 50,
                payload_bytes: 3,
                pipeline: 1,
                threads: 1,
            },
            server_cpu: None,
        }
    }

    #[test]
    fn summary_reads_percentiles_from_the_histogram() {
        let l = report().latency;
        assert_eq!(l.count, 1000);
        assert_eq!(l.min_ms, 0.001);
        assert_eq!(l.p50_ms, 0.5);
        assert_eq!(l.p99_ms, 0.99);
        assert_eq!(l.p999_ms, 0.999);
        assert_eq!(l.max_ms, 1.0);
        assert!((l.avg_ms - 0.5005).abs() < 0.001, "{}", l.avg_ms);
        assert_eq!(LatencySummary::from_histogram(&new_histogram()).count, 0);
    }

    #[test]
    fn latencies_past_the_limit_saturate_instead_of_failing() {
        let mut h = new_histogram();
        h.saturating_record(LATENCY_US_MAX * 10);
        assert!(LatencySummary::from_histogram(&h).max_ms >= LATENCY_US_MAX as f64 / 1000.0);
    }

    #[test]
    fn output_forms() {
        let r = report();
        assert_eq!(r.rps(), 2000.0);
        assert_eq!(
            r.quiet(),
            "SET: 2000.00 requests per second, p50=0.500 msec, p99=0.990 msec, p99.9=0.999 msec"
        );
        assert_eq!(
            r.csv_row(),
            "\"SET\",\"2000.00\",\"0.500\",\"0.001\",\"0.500\",\"0.950\",\"0.990\",\"1.000\",\"0.999\",\"0\""
        );
        assert_eq!(
            CSV_HEADER.split(',').count(),
            r.csv_row().split(',').count()
        );
        let full = r.full();
        assert!(full.starts_with("====== SET ======\n  1000 requests completed in 0.50 seconds\n"));
        assert!(full.contains("throughput summary: 2000.00 requests per second"));
        assert!(
            full.contains("      0.500     0.001     0.500     0.990     0.999     1.000\n"),
            "{full}"
        );
        let mut measured = report();
        measured.server_cpu = Some(Duration::from_millis(5));
        assert_eq!(measured.server_cpu_us_per_request(), Some(5.0));
        assert!(
            measured.csv_row().ends_with(",\"0\",\"5.000\""),
            "{}",
            measured.csv_row()
        );
        assert_eq!(
            csv_header(true).split(',').count(),
            measured.csv_row().split(',').count()
        );
        assert!(measured.quiet().ends_with(", server CPU 5.00 us/request"));
        assert!(measured
            .full()
            .ends_with("  server CPU: 5.00 us per request\n"));
        let mut with_errors = report();
        with_errors.errors = 3;
        assert!(with_errors.quiet().ends_with(", 3 errors"));
    }
}
