//! Endpoint addresses, tagged by provider, with a text form that round-trips. The text form is
//! what config files, logs and `CLUSTER NODES` carry, so it has no spaces and no `@`.
//!
//! - `verbs:gid=fe80::5054:ff:fe12:3456,qpn=26,qkey=0x11111111,lid=0`: a UD or RC QP as verbs
//!   addresses it (RoCE uses the GID, InfiniBand the LID; both are carried).
//! - `ofi:efa:00112233...`: a libfabric provider name and its raw `fi_getname` bytes in hex
//!   (for EFA those bytes are GID + QPN + QKey).
//! - `sim:42`: an endpoint of the in-process simulated fabric.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use crate::error::BusError;

/// The longest raw libfabric address we accept. EFA's is 32 bytes and a tcp sockaddr_in6 28;
/// 128 leaves room for any provider while bounding what a bad config line or peer can make us
/// store.
pub const OFI_ADDR_MAX: usize = 128;

/// The longest libfabric provider name we accept (`tcp;ofi_rxm` is 11).
pub const OFI_PROVIDER_NAME_MAX: usize = 64;

/// Where a fabric endpoint can be reached.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum EndpointAddr {
    /// A verbs queue pair.
    Verbs {
        /// The port GID (16 bytes, written as an IPv6 address as `ibv_devinfo` does).
        gid: [u8; 16],
        /// Queue pair number (24 bits).
        qpn: u32,
        /// Q_Key for UD traffic (0 for RC).
        qkey: u32,
        /// InfiniBand local id (0 on RoCE).
        lid: u16,
    },
    /// A libfabric endpoint: its provider and the bytes `fi_getname` returned.
    Ofi { provider: String, raw: Vec<u8> },
    /// An endpoint of the simulated fabric.
    Sim { id: u64 },
}

impl EndpointAddr {
    /// The provider family's name, as in `fabric-provider`.
    pub fn provider_family(&self) -> &'static str {
        match self {
            EndpointAddr::Verbs { .. } => "verbs",
            EndpointAddr::Ofi { .. } => "ofi",
            EndpointAddr::Sim { .. } => "sim",
        }
    }

    /// Builds an ofi address, enforcing the limits above.
    pub fn ofi(provider: &str, raw: &[u8]) -> Result<Self, BusError> {
        check_provider_name(provider)?;
        if raw.is_empty() || raw.len() > OFI_ADDR_MAX {
            return Err(invalid(format!(
                "ofi address must be 1..={OFI_ADDR_MAX} bytes, got {}",
                raw.len()
            )));
        }
        Ok(EndpointAddr::Ofi {
            provider: provider.to_owned(),
            raw: raw.to_vec(),
        })
    }
}

fn invalid(reason: String) -> BusError {
    BusError::Invalid {
        what: "endpoint address",
        reason,
    }
}

fn check_provider_name(name: &str) -> Result<(), BusError> {
    let ok = !name.is_empty()
        && name.len() <= OFI_PROVIDER_NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b';' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!("bad ofi provider name {name:?}")))
    }
}

impl fmt::Display for EndpointAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointAddr::Verbs {
                gid,
                qpn,
                qkey,
                lid,
            } => write!(
                f,
                "verbs:gid={},qpn={qpn},qkey={qkey:#x},lid={lid}",
                Ipv6Addr::from(*gid)
            ),
            EndpointAddr::Ofi { provider, raw } => {
                write!(f, "ofi:{provider}:")?;
                for b in raw {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            EndpointAddr::Sim { id } => write!(f, "sim:{id}"),
        }
    }
}

impl fmt::Debug for EndpointAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for EndpointAddr {
    type Err = BusError;

    fn from_str(s: &str) -> Result<Self, BusError> {
        let (family, rest) = s
            .split_once(':')
            .ok_or_else(|| invalid(format!("{s:?} has no provider prefix")))?;
        match family {
            "verbs" => parse_verbs(rest),
            "ofi" => {
                // The provider name has no ':' and the hex part none either, so split at the last.
                let (provider, hex) = rest
                    .rsplit_once(':')
                    .ok_or_else(|| invalid(format!("{s:?} lacks ofi:<provider>:<hex>")))?;
                EndpointAddr::ofi(provider, &parse_hex(hex)?)
            }
            "sim" => rest
                .parse()
                .map(|id| EndpointAddr::Sim { id })
                .map_err(|_| invalid(format!("bad sim id {rest:?}"))),
            other => Err(invalid(format!("unknown provider family {other:?}"))),
        }
    }
}

fn parse_verbs(rest: &str) -> Result<EndpointAddr, BusError> {
    let (mut gid, mut qpn, mut qkey, mut lid) = (None, None, None, None);
    for field in rest.split(',') {
        let (key, value) = field
            .split_once('=')
            .ok_or_else(|| invalid(format!("verbs field {field:?} is not key=value")))?;
        let slot_taken = match key {
            "gid" => gid
                .replace(
                    value
                        .parse::<Ipv6Addr>()
                        .map_err(|_| invalid(format!("bad gid {value:?}")))?
                        .octets(),
                )
                .is_some(),
            "qpn" => {
                let n = parse_u32(value)?;
                if n > 0x00ff_ffff {
                    return Err(invalid(format!("qpn {n} exceeds 24 bits")));
                }
                qpn.replace(n).is_some()
            }
            "qkey" => qkey.replace(parse_u32(value)?).is_some(),
            "lid" => {
                let n = parse_u32(value)?;
                let n =
                    u16::try_from(n).map_err(|_| invalid(format!("lid {n} exceeds 16 bits")))?;
                lid.replace(n).is_some()
            }
            _ => return Err(invalid(format!("unknown verbs field {key:?}"))),
        };
        if slot_taken {
            return Err(invalid(format!("verbs field {key:?} given twice")));
        }
    }
    match (gid, qpn, qkey, lid) {
        (Some(gid), Some(qpn), Some(qkey), Some(lid)) => Ok(EndpointAddr::Verbs {
            gid,
            qpn,
            qkey,
            lid,
        }),
        _ => Err(invalid(format!(
            "verbs address {rest:?} needs gid, qpn, qkey and lid"
        ))),
    }
}

fn parse_u32(s: &str) -> Result<u32, BusError> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| invalid(format!("bad number {s:?}")))
}

fn parse_hex(s: &str) -> Result<Vec<u8>, BusError> {
    if !s.len().is_multiple_of(2) || s.len() > OFI_ADDR_MAX * 2 {
        return Err(invalid(format!(
            "ofi address hex must have an even length <= {}",
            OFI_ADDR_MAX * 2
        )));
    }
    s.as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| invalid(format!("bad hex in ofi address {s:?}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn text_forms() {
        let v = EndpointAddr::Verbs {
            gid: "fe80::5054:ff:fe12:3456"
                .parse::<Ipv6Addr>()
                .unwrap()
                .octets(),
            qpn: 26,
            qkey: 0x1111_1111,
            lid: 0,
        };
        assert_eq!(
            v.to_string(),
            "verbs:gid=fe80::5054:ff:fe12:3456,qpn=26,qkey=0x11111111,lid=0"
        );
        let o = EndpointAddr::ofi("tcp;ofi_rxm", &[0, 1, 0xab]).unwrap();
        assert_eq!(o.to_string(), "ofi:tcp;ofi_rxm:0001ab");
        assert_eq!(EndpointAddr::Sim { id: 42 }.to_string(), "sim:42");
        for a in [v, o, EndpointAddr::Sim { id: 42 }] {
            assert_eq!(a.to_string().parse::<EndpointAddr>().unwrap(), a);
        }
    }

    #[test]
    fn rejects_bad_text() {
        for bad in [
            "",
            "sim",
            "sim:x",
            "ib:1",
            "ofi:tcp:0",
            "ofi:tcp:zz",
            "ofi::00",
            "ofi:a b:00",
            "verbs:gid=::1,qpn=1,qkey=0",
            "verbs:gid=::1,qpn=16777216,qkey=0,lid=0",
            "verbs:gid=::1,qpn=1,qkey=0,lid=70000",
            "verbs:gid=::1,qpn=1,qpn=2,qkey=0,lid=0",
            "verbs:gid=nope,qpn=1,qkey=0,lid=0",
            "verbs:gid=::1,qpn=1,qkey=0,lid=0,x=1",
        ] {
            assert!(bad.parse::<EndpointAddr>().is_err(), "{bad:?} parsed");
        }
        let long = format!("ofi:tcp:{}", "00".repeat(OFI_ADDR_MAX + 1));
        assert!(long.parse::<EndpointAddr>().is_err());
    }

    fn any_addr() -> impl Strategy<Value = EndpointAddr> {
        prop_oneof![
            (
                any::<[u8; 16]>(),
                0u32..=0xff_ffff,
                any::<u32>(),
                any::<u16>()
            )
                .prop_map(|(gid, qpn, qkey, lid)| EndpointAddr::Verbs {
                    gid,
                    qpn,
                    qkey,
                    lid
                }),
            (
                "[a-z0-9_;-]{1,20}",
                proptest::collection::vec(any::<u8>(), 1..=OFI_ADDR_MAX)
            )
                .prop_map(|(provider, raw)| EndpointAddr::Ofi { provider, raw }),
            any::<u64>().prop_map(|id| EndpointAddr::Sim { id }),
        ]
    }

    proptest! {
        #[test]
        fn text_round_trips(a in any_addr()) {
            let text = a.to_string();
            prop_assert!(!text.contains(' ') && !text.contains('@'));
            prop_assert_eq!(text.parse::<EndpointAddr>().unwrap(), a);
        }

        #[test]
        fn never_panics_on_garbage(s in ".{0,80}") {
            let _ = s.parse::<EndpointAddr>();
        }
    }
}
