//! Where the bytes go: a RESP byte stream over TCP or over a fabric Stream (bus).
//!
//! [`Target`] says where to connect; [`Transport`] is the open byte stream. It is an enum, not a
//! trait object, so each way of moving bytes is one variant with two methods (`write_all`,
//! `read_some`) and no poll-level adapter is needed: the bus is synchronous and polled (DESIGN
//! §4), so the fabric variant drives its Stream on a thread of its own ([`FabricTransport`])
//! behind the same two async methods, and nothing above this file differs.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::error::ClientError;
use super::fabric::FabricTransport;

/// Where to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Tcp {
        host: String,
        port: u16,
    },
    /// A node's fabric listener through a bus provider (`verbs`, `ofi:tcp`, `ofi:shm`, ...).
    /// A provider this host lacks fails to open with [`ClientError::Fabric`].
    Fabric {
        provider: String,
        host: String,
        port: u16,
    },
}

impl Target {
    pub fn tcp(host: impl Into<String>, port: u16) -> Target {
        Target::Tcp {
            host: host.into(),
            port,
        }
    }

    /// `host:port`, as redis-cli names a server in its prompt and messages.
    pub fn host_port(&self) -> String {
        match self {
            Target::Tcp { host, port } | Target::Fabric { host, port, .. } => {
                format!("{host}:{port}")
            }
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp { host, port } => write!(f, "{host}:{port}"),
            Target::Fabric {
                provider,
                host,
                port,
            } => write!(f, "{host}:{port} over fabric {provider}"),
        }
    }
}

/// An open byte stream to a node.
#[derive(Debug)]
pub enum Transport {
    Tcp(TcpStream),
    Fabric(FabricTransport),
}

impl Transport {
    /// Connects to `target`, giving up after `timeout`.
    pub async fn open(target: &Target, timeout: Duration) -> Result<Transport, ClientError> {
        match target {
            Target::Tcp { host, port } => {
                let connect = TcpStream::connect((host.as_str(), *port));
                let stream = tokio::time::timeout(timeout, connect)
                    .await
                    .map_err(|_| ClientError::ConnectTimeout {
                        target: target.host_port(),
                        after: timeout,
                    })?
                    .map_err(|source| ClientError::Connect {
                        target: target.host_port(),
                        source,
                    })?;
                // Requests are small and latency-bound; Nagle would hold them back.
                stream.set_nodelay(true)?;
                Ok(Transport::Tcp(stream))
            }
            Target::Fabric {
                provider,
                host,
                port,
            } => Ok(Transport::Fabric(
                FabricTransport::open(provider, host, *port, timeout).await?,
            )),
        }
    }

    /// Sends all of `bytes`.
    pub async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Transport::Tcp(stream) => stream.write_all(bytes).await,
            Transport::Fabric(fabric) => fabric.write_all(bytes).await,
        }
    }

    /// Appends what has arrived (at least one byte, waiting if needed) to `buf`, using its
    /// spare capacity. Returns 0 when the peer closed the stream.
    pub async fn read_some(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(stream) => stream.read_buf(buf).await,
            Transport::Fabric(fabric) => fabric.read_some(buf).await,
        }
    }
}
