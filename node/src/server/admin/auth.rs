//! Who may call the admin API: callers that send `authorization: Bearer <admin-token>`.
//! A node whose `admin-bind` reaches beyond loopback refuses to start without a token
//! (anyone on the network could otherwise fail it over or add nodes to it).

use crate::config::Config;
use tonic::{Request, Status};

#[derive(Debug, thiserror::Error)]
#[error("admin-bind {bind:?} reaches beyond loopback and admin-token is empty: set admin-token (e.g. `admin-token $(openssl rand -hex 32)`) or bind the admin port to 127.0.0.1; refusing to start")]
pub struct NoTokenBeyondLoopback {
    pub bind: Vec<String>,
}

/// The start rule: no token, only loopback.
pub fn check_start(config: &Config) -> Result<(), NoTokenBeyondLoopback> {
    if config.admin.token.is_empty() && config.admin_beyond_loopback() {
        return Err(NoTokenBeyondLoopback {
            bind: config.admin.bind.clone(),
        });
    }
    if config.admin.token.is_empty() {
        tracing::warn!("admin-token is empty: any local process can call the admin API");
    }
    Ok(())
}

/// The interceptor in front of the `Admin` service and reflection.
#[derive(Clone)]
pub struct BearerCheck {
    /// `Bearer <token>`, the whole header value expected; None accepts every caller.
    expected: Option<std::sync::Arc<[u8]>>,
}

impl BearerCheck {
    pub fn new(token: &str) -> Self {
        BearerCheck {
            expected: (!token.is_empty()).then(|| format!("Bearer {token}").into_bytes().into()),
        }
    }

    pub fn admits(&self, header: Option<&[u8]>) -> bool {
        match &self.expected {
            None => true,
            Some(expected) => header.is_some_and(|h| constant_time_eq(h, expected)),
        }
    }
}

impl tonic::service::Interceptor for BearerCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        if self.admits(header) {
            Ok(request)
        } else {
            Err(Status::unauthenticated(
                "missing or wrong admin token (send `authorization: Bearer <admin-token>`)",
            ))
        }
    }
}

/// Compares without stopping at the first difference, so that timing tells nothing of
/// how much of a guess was right (the length may show).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_admitted() {
        let check = BearerCheck::new("s3cret");
        assert!(check.admits(Some(b"Bearer s3cret")));
        assert!(!check.admits(Some(b"Bearer s3cre")));
        assert!(!check.admits(Some(b"Bearer s3cres")));
        assert!(!check.admits(Some(b"bearer s3cret")));
        assert!(!check.admits(Some(b"s3cret")));
        assert!(!check.admits(None));
        assert!(BearerCheck::new("").admits(None));
    }

    #[test]
    fn a_token_is_needed_beyond_loopback_only() {
        let mut c = Config::default();
        c.admin.port = 9000;
        assert!(check_start(&c).is_ok(), "127.0.0.1 by default");
        c.set("admin-bind", "0.0.0.0").unwrap();
        assert!(check_start(&c).is_err());
        c.set("admin-bind", "127.0.0.1 10.1.2.3").unwrap();
        assert!(check_start(&c).is_err());
        c.set("admin-token", "t").unwrap();
        assert!(check_start(&c).is_ok());
        assert!(c.set("admin-bind", "eth0").is_err());
    }
}
