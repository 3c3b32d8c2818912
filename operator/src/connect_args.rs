//! The connection flags `operator cli` and `operator bench` share, as redis-cli and
//! redis-benchmark spell them.

use crate::client::{ConnectOptions, Protocol, Target};

/// The provider `--rdma` stands for.
pub const RDMA_PROVIDER: &str = "verbs";

#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct ConnectArgs {
    /// Server hostname.
    #[arg(short = 'h', long = "host", default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 6379)]
    pub port: u16,
    /// Password for AUTH (or HELLO's AUTH with -3).
    #[arg(short = 'a', long = "pass", value_name = "PASSWORD")]
    pub password: Option<String>,
    /// ACL user name to authenticate as (with -a).
    #[arg(long = "user", value_name = "USER")]
    pub user: Option<String>,
    /// Speak RESP3 (sends HELLO 3 on connect).
    #[arg(short = '3', long = "resp3")]
    pub resp3: bool,
    /// Connect over RDMA: the fabric with the `verbs` provider.
    #[arg(long = "rdma", conflicts_with = "fabric")]
    pub rdma: bool,
    /// Connect over the fabric with this provider (verbs, ofi:tcp, ofi:shm, ofi:efa).
    #[arg(long = "fabric", value_name = "PROVIDER")]
    pub fabric: Option<String>,
}

impl ConnectArgs {
    /// Where these flags point.
    pub fn target(&self) -> Target {
        let provider = match (&self.fabric, self.rdma) {
            (Some(provider), _) => Some(provider.clone()),
            (None, true) => Some(RDMA_PROVIDER.to_string()),
            (None, false) => None,
        };
        match provider {
            Some(provider) => Target::Fabric {
                provider,
                host: self.host.clone(),
                port: self.port,
            },
            None => Target::tcp(self.host.clone(), self.port),
        }
    }

    /// The client options these flags ask for.
    pub fn options(&self) -> ConnectOptions {
        let mut options = ConnectOptions::new(self.target());
        options.user = self.user.clone();
        options.password = self.password.clone();
        options.protocol = if self.resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        options
    }
}
