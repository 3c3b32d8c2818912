//! TLS for TCP clients (`tls-port`), with rustls on the ring provider: the server context
//! built once at start from the `tls-*` settings, and the handshake each accepted socket goes
//! through before it is served like a plain one.

pub mod context;
pub mod error;
pub mod files;
pub mod handshake;
pub mod settings;

pub use context::acceptor;
pub use error::TlsSetupError;
pub use handshake::{handshake, HandshakeError, TLS_HANDSHAKE_TIMEOUT};

#[cfg(test)]
mod tests;
