//! The cluster secret: every bus message between nodes carries an HMAC under it, so a
//! cluster without one (or whose nodes disagree on it) is one any process that reaches the
//! bus can join. `operator cluster secret` makes one; `create` gives nodes started without
//! one the secret the others share, or a new one when none has any.

use rand::RngCore;

/// Bytes of randomness in a generated secret.
const SECRET_BYTES: usize = 32;

/// A new secret: 256 random bits from the OS, as hex.
pub fn generate() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What `create` does about the nodes' secrets.
#[derive(Debug, PartialEq, Eq)]
pub enum SecretPlan {
    /// Every node has the same one already.
    Shared,
    /// Give this secret (the one some nodes share, or a new one) to the nodes at these
    /// indices, which have none (CLUSTER SET-SECRET; each saves it in its dir).
    Give {
        secret: String,
        to: Vec<usize>,
        generated: bool,
    },
}

/// Every node of a new cluster must end with the same, non-empty `cluster-secret`: nodes
/// without one get the others' (or a new one); nodes with different ones cannot be joined.
pub fn plan(secrets: &[String]) -> Result<SecretPlan, String> {
    let mut set = secrets.iter().filter(|s| !s.is_empty());
    let first = set.next();
    if let Some(first) = first {
        if set.any(|s| s != first) {
            return Err("the nodes have different cluster secrets and could not talk; give every node the same cluster-secret in its config file (`operator cluster secret` prints a new one)".into());
        }
    }
    let to: Vec<usize> = (0..secrets.len())
        .filter(|&i| secrets[i].is_empty())
        .collect();
    Ok(match (first, to.is_empty()) {
        (Some(_), true) => SecretPlan::Shared,
        (Some(s), false) => SecretPlan::Give {
            secret: s.clone(),
            to,
            generated: false,
        },
        (None, _) => SecretPlan::Give {
            secret: generate(),
            to,
            generated: true,
        },
    })
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
    fn nodes_without_a_secret_get_the_shared_or_a_new_one() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(plan(&s(&["k", "k"])).unwrap(), SecretPlan::Shared);
        assert_eq!(
            plan(&s(&["k", "", "k", ""])).unwrap(),
            SecretPlan::Give {
                secret: "k".into(),
                to: vec![1, 3],
                generated: false
            }
        );
        match plan(&s(&["", ""])).unwrap() {
            SecretPlan::Give {
                secret,
                to,
                generated: true,
            } => {
                assert_eq!(secret.len(), 2 * SECRET_BYTES);
                assert_eq!(to, vec![0, 1]);
            }
            other => panic!("{other:?}"),
        }
        let e = plan(&s(&["k", "", "j"])).unwrap_err();
        assert!(e.contains("different cluster secrets"), "{e}");
    }
}
