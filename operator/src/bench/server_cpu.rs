//! `--server-cpu`: the CPU time the server under test spent during a test, read from its own
//! `INFO cpu` (used_cpu_sys + used_cpu_user, whole process) over a separate probe connection,
//! just before the first request and just after the last reply.
//!
//! Why from inside the run rather than around the process: connecting the test's clients is
//! not what a test measures, and over a fabric it is not cheap (the provider's handshake and
//! per-connection memory), so CPU read around the whole `operator bench` would charge setup to
//! every request. Works against any server with Redis's INFO fields (redis-server too).

use std::time::Duration;

use proto::resp::Frame;

use crate::client::{Client, ClientError};

/// Reads the server's CPU time so far.
pub async fn read(probe: &mut Client) -> Result<Duration, ClientError> {
    let reply = probe.request(&["INFO", "cpu"]).await?;
    let text = match &reply {
        Frame::Error(e) | Frame::BlobError(e) => {
            return Err(ClientError::Io(std::io::Error::other(format!(
                "INFO cpu: {}",
                String::from_utf8_lossy(e)
            ))))
        }
        other => other.as_bytes().unwrap_or_default(),
    };
    parse(&String::from_utf8_lossy(text)).ok_or_else(|| {
        ClientError::Io(std::io::Error::other(
            "INFO cpu has no used_cpu_sys/used_cpu_user fields",
        ))
    })
}

/// used_cpu_sys + used_cpu_user of an INFO text; `None` unless both are there.
pub fn parse(info: &str) -> Option<Duration> {
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let secs = field("used_cpu_sys")? + field("used_cpu_user")?;
    Duration::try_from_secs_f64(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_sys_and_user_and_needs_both() {
        let info = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\n\
                    used_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.000000\r\n";
        assert_eq!(parse(info), Some(Duration::from_millis(1750)));
        assert_eq!(parse("used_cpu_sys:1.0\r\n"), None);
        assert_eq!(parse("used_cpu_sys:x\r\nused_cpu_user:1\r\n"), None);
        assert_eq!(parse("used_cpu_sys:-1\r\nused_cpu_user:1\r\n"), None);
        // Finite but past what a Duration holds: refused, not a panic.
        assert_eq!(parse("used_cpu_sys:1e300\r\nused_cpu_user:1\r\n"), None);
    }
}
