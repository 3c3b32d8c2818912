//! The cluster secret: every bus message between nodes carries an HMAC under it, so a
//! cluster without one (or whose nodes disagree on it) is one any process that reaches the
//! bus can join. `operator cluster secret` makes one; `create` refuses nodes without a
//! shared one.

use rand::RngCore;

/// Bytes of randomness in a generated secret.
const SECRET_BYTES: usize = 32;

/// A new secret: 256 random bits from the OS, as hex.
pub fn generate() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every node of a new cluster must have the same, non-empty `cluster-secret`.
pub fn check_shared(addrs: &[String], secrets: &[String]) -> Result<(), String> {
    let how = "give every node the same cluster-secret in its config file (`operator cluster secret` prints a new one)";
    if let Some((addr, _)) = addrs.iter().zip(secrets).find(|(_, s)| s.is_empty()) {
        return Err(format!(
            "{addr} has no cluster-secret: any local process could join the cluster; {how}"
        ));
    }
    if secrets.windows(2).any(|w| w[0] != w[1]) {
        return Err(format!(
            "the nodes have different cluster secrets and could not talk; {how}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_are_long_hex_and_differ() {
        let (a, b) = (generate(), generate());
        assert_eq!(a.len(), 2 * SECRET_BYTES);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn only_one_shared_non_empty_secret_passes() {
        let addrs = vec!["a:1".to_string(), "b:2".to_string()];
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(check_shared(&addrs, &s(&["k", "k"])).is_ok());
        let e = check_shared(&addrs, &s(&["k", ""])).unwrap_err();
        assert!(e.starts_with("b:2 has no cluster-secret"), "{e}");
        let e = check_shared(&addrs, &s(&["k", "j"])).unwrap_err();
        assert!(e.contains("different cluster secrets"), "{e}");
    }
}
