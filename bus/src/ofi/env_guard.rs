//! libfabric environment variables that would weaken memory protection, refused at open:
//! no guarantee of the fabric may depend on the environment. It holds, or the provider does
//! not open (`Unavailable`, naming the variable).
//!
//! `ofi_rxm` (under `ofi:tcp`) sends messages longer than its eager and SAR limits by
//! rendezvous: it registers the send buffer with FI_REMOTE_READ under a *sequential* key for
//! the peer to read, and registers every receive buffer's region with FI_REMOTE_WRITE when
//! FI_OFI_RXM_USE_RNDV_WRITE is set. Our SENDs are small control messages (at most
//! [`LARGEST_SEND`]), so with the limits at their defaults (16 KiB eager, 128 KiB SAR) no
//! rendezvous happens; these variables could change that.

use crate::error::BusError;

use super::datagram::DATAGRAM_MTU;
use super::handshake::HANDSHAKE_MAX;
use super::kind::OfiKind;
use super::open::OFI_SEND_MAX;

/// The longest SEND this crate posts: a stream control message or caller SEND (at most
/// `OFI_SEND_MAX`), a handshake, a datagram frame (address header + MTU).
pub const LARGEST_SEND: usize = max3(
    OFI_SEND_MAX,
    HANDSHAKE_MAX,
    2 + crate::addr::OFI_ADDR_MAX + DATAGRAM_MTU,
);
/// Room for rxm's own header inside a bounce buffer, beyond the payload.
const RXM_HEADER_MARGIN: usize = 256;
/// The smallest rxm buffer size, eager limit and SAR limit under which a SEND of ours could
/// go by rendezvous.
pub const RXM_LIMIT_MIN: usize = LARGEST_SEND + RXM_HEADER_MARGIN;
// rxm's defaults (16 KiB buffers and eager limit, 128 KiB SAR limit) must pass.
const _: () = assert!(RXM_LIMIT_MIN <= 16384);

/// Variables whose value must be at least [`RXM_LIMIT_MIN`] when set.
const SIZE_VARS: [&str; 3] = [
    "FI_OFI_RXM_BUFFER_SIZE",
    "FI_OFI_RXM_EAGER_LIMIT",
    "FI_OFI_RXM_SAR_LIMIT",
];
/// Makes rxm register receive buffers remotely writable; must be unset or false.
const RNDV_WRITE_VAR: &str = "FI_OFI_RXM_USE_RNDV_WRITE";

const fn max3(a: usize, b: usize, c: usize) -> usize {
    let ab = if a > b { a } else { b };
    if ab > c {
        ab
    } else {
        c
    }
}

/// Refuses `kind` if the process environment weakens it.
pub fn check(kind: OfiKind) -> Result<(), BusError> {
    check_with(kind, |name| std::env::var(name).ok())
}

/// As [`check`], reading variables through `get` (tests).
pub fn check_with(kind: OfiKind, get: impl Fn(&str) -> Option<String>) -> Result<(), BusError> {
    if kind != OfiKind::Tcp {
        return Ok(());
    }
    let refuse = |reason: String| {
        Err(BusError::Unavailable {
            provider: kind.name(),
            reason,
        })
    };
    if let Some(value) = get(RNDV_WRITE_VAR) {
        let off = ["", "0", "false", "no", "off"]
            .iter()
            .any(|f| value.trim().eq_ignore_ascii_case(f));
        if !off {
            return refuse(format!(
                "{RNDV_WRITE_VAR}={value} makes ofi_rxm register receive buffers remotely \
                 writable; unset it"
            ));
        }
    }
    for name in SIZE_VARS {
        let Some(value) = get(name) else { continue };
        match value.trim().parse::<usize>() {
            Ok(n) if n >= RXM_LIMIT_MIN => {}
            _ => {
                return refuse(format!(
                    "{name}={value}: below {RXM_LIMIT_MIN} bytes, ofi_rxm would send our \
                     messages by rendezvous (remotely readable under a sequential key); unset \
                     it or raise it"
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn check_env(kind: OfiKind, vars: &[(&str, &str)]) -> Result<(), BusError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        check_with(kind, |name| map.get(name).cloned())
    }

    /// Goal: the variables that would make our memory reachable refuse ofi:tcp and name
    /// themselves; harmless values and other providers pass.
    #[test]
    fn weakening_variables_refuse_tcp() {
        assert!(check_env(OfiKind::Tcp, &[]).is_ok());
        for on in ["1", "true", "YES", "on", "garbage"] {
            let err = check_env(OfiKind::Tcp, &[(RNDV_WRITE_VAR, on)]).unwrap_err();
            assert!(err.to_string().contains(RNDV_WRITE_VAR), "{err}");
        }
        assert!(check_env(OfiKind::Tcp, &[(RNDV_WRITE_VAR, "0")]).is_ok());
        assert!(check_env(OfiKind::Tcp, &[(RNDV_WRITE_VAR, "false")]).is_ok());
        for name in SIZE_VARS {
            let err = check_env(OfiKind::Tcp, &[(name, "100")]).unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
            assert!(check_env(OfiKind::Tcp, &[(name, "4k")]).is_err());
            assert!(check_env(OfiKind::Tcp, &[(name, "16384")]).is_ok());
        }
        assert!(check_env(OfiKind::Shm, &[(RNDV_WRITE_VAR, "1")]).is_ok());
    }
}
