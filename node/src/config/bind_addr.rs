//! Reading `bind` / `rdma-bind` entries the way redis.conf writes them: an address, `*`
//! (every IPv4 address), `::*` (every IPv6 address), `localhost`, and a leading `-` for an
//! address that may be missing on this host. One reading for every listener, so that the
//! client port, the fabric listener, the replication listener and the bus endpoint all
//! honour the same setting.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One `bind` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddr {
    pub ip: IpAddr,
    /// `-addr`: skipped, not fatal, when the host has no such address.
    pub optional: bool,
}

impl BindAddr {
    /// Whether peers other than local processes can reach it (a wildcard counts).
    pub fn beyond_loopback(&self) -> bool {
        !self.ip.is_loopback()
    }
}

/// Parses one entry; None when it is not an address.
pub fn parse(spec: &str) -> Option<BindAddr> {
    let (optional, spec) = match spec.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let ip = match spec {
        "*" => Ipv4Addr::UNSPECIFIED.into(),
        "::*" => Ipv6Addr::UNSPECIFIED.into(),
        "localhost" => Ipv4Addr::LOCALHOST.into(),
        other => other.parse().ok()?,
    };
    Some(BindAddr { ip, optional })
}

/// Parses every entry, naming the first that is not an address.
pub fn parse_all(specs: &[String]) -> Result<Vec<BindAddr>, String> {
    specs
        .iter()
        .map(|s| parse(s).ok_or_else(|| s.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_conf_forms_are_read() {
        let v4 = |s: &str| parse(s).map(|b| (b.ip.to_string(), b.optional));
        assert_eq!(v4("127.0.0.1"), Some(("127.0.0.1".into(), false)));
        assert_eq!(v4("-::1"), Some(("::1".into(), true)));
        assert_eq!(v4("*"), Some(("0.0.0.0".into(), false)));
        assert_eq!(v4("-::*"), Some(("::".into(), true)));
        assert_eq!(v4("localhost"), Some(("127.0.0.1".into(), false)));
        assert_eq!(v4("eth0"), None);
        assert_eq!(v4("--1.2.3.4"), None);
        assert!(!parse("::1").unwrap().beyond_loopback());
        assert!(parse("*").unwrap().beyond_loopback());
        assert!(parse("10.1.2.3").unwrap().beyond_loopback());
        assert_eq!(parse_all(&["1.2.3.4".into(), "x".into()]), Err("x".into()));
    }
}
