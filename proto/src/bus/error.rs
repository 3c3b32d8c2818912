//! Why bus bytes were refused. Every rejection is a value: bad input never panics.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("bus message truncated: {len} bytes, need {need}")]
    Truncated { len: usize, need: usize },
    #[error("bus message has a bad magic")]
    BadMagic,
    #[error("bus message version {0} is not supported")]
    BadVersion(u16),
    #[error("bus message of {len} bytes exceeds {max}")]
    Oversized { len: usize, max: usize },
    #[error("bus message declares {declared} body bytes but carries {actual}")]
    LengthMismatch { declared: usize, actual: usize },
    #[error("bus message authentication failed")]
    BadMac,
    #[error("bus message does not decode: {0}")]
    Decode(String),
    #[error("bus message invalid: {0}")]
    Invalid(String),
}

/// Why a datagram fragment was refused or a message could not be cut.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragmentError {
    #[error("mtu {mtu} leaves no room after the {header}-byte fragment header")]
    MtuTooSmall { mtu: usize, header: usize },
    #[error("message of {len} bytes exceeds {max}")]
    Oversized { len: usize, max: usize },
    #[error("message needs {count} fragments, at most {max}")]
    TooManyFragments { count: usize, max: usize },
    #[error("fragment truncated: {0} bytes")]
    Truncated(usize),
    #[error("fragment has a bad magic")]
    BadMagic,
    #[error("fragment header inconsistent: {0}")]
    Inconsistent(&'static str),
}
