//! The replica's control connection to its primary: plain RESP over TCP to the primary's
//! client port, as Redis replicas speak REPLCONF/PSYNC. Carries only the link's setup.

use crate::server::Server;
use proto::resp::{decode, Frame};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Longest reply accepted: setup replies are a few hundred bytes at most.
pub const CONTROL_REPLY_MAX: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("control reply is not RESP: {0}")]
    Decode(String),
    #[error("control reply longer than {CONTROL_REPLY_MAX} bytes")]
    TooLong,
    #[error("control reply timed out")]
    Timeout,
    #[error("primary answered {0}")]
    Refused(String),
    #[error("the primary refused masterauth/masteruser: {0}")]
    AuthRefused(String),
}

/// One command and its reply on a connection being set up, whatever carries it; an error
/// reply is `Refused`.
pub trait Caller {
    fn call(&mut self, args: &[&[u8]]) -> Result<Frame, ControlError>;
}

impl Caller for Control {
    fn call(&mut self, args: &[&[u8]]) -> Result<Frame, ControlError> {
        Control::call(self, args)
    }
}

/// A command as a RESP array of bulk strings.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Authenticates the connection behind `caller` as this node's replication user: when
/// `masterauth` is set, AUTH (with `masteruser`, if set), as a Redis replica sends it before
/// REPLCONF; a primary with `requirepass` refuses everything else with NOAUTH.
pub fn authenticate_as_replica(
    server: &Server,
    caller: &mut dyn Caller,
) -> Result<(), ControlError> {
    let (user, pass) = {
        let config = server.config.read();
        (config.masteruser.clone(), config.masterauth.clone())
    };
    let Some(pass) = pass else {
        return Ok(());
    };
    let mut auth: Vec<&[u8]> = vec![b"AUTH"];
    if let Some(user) = &user {
        auth.push(user.as_bytes());
    }
    auth.push(pass.as_bytes());
    caller.call(&auth).map_err(|e| match e {
        ControlError::Refused(why) => ControlError::AuthRefused(why),
        other => other,
    })?;
    Ok(())
}

pub struct Control {
    stream: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl Control {
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self, ControlError> {
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|_| ControlError::Resolve(format!("{host}:{port}")))?
            .next()
            .ok_or_else(|| ControlError::Resolve(format!("{host}:{port}")))?;
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        Ok(Control {
            stream,
            buf: Vec::new(),
            timeout,
        })
    }

    /// Connects to the primary at `host:port` as this node's replica: when `masterauth` is
    /// set, AUTH (with `masteruser`, if set) goes first, as a Redis replica sends it before
    /// REPLCONF; a primary with `requirepass` refuses everything else with NOAUTH.
    pub fn connect_to_primary(
        server: &Server,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Self, ControlError> {
        let mut control = Self::connect(host, port, timeout)?;
        authenticate_as_replica(server, &mut control)?;
        Ok(control)
    }

    /// The connection itself, for a caller that goes on streaming over it (a slot
    /// migration's link); nothing is buffered after a completed `call`.
    pub fn into_stream(self) -> TcpStream {
        debug_assert!(self.buf.is_empty());
        self.stream
    }

    pub fn local_addr(&self) -> Result<SocketAddr, ControlError> {
        Ok(self.stream.local_addr()?)
    }

    pub fn peer(&self) -> Result<SocketAddr, ControlError> {
        Ok(self.stream.peer_addr()?)
    }

    /// Sends one command and reads its reply; an error reply is `Refused`.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Frame, ControlError> {
        self.stream.write_all(&encode_command(args))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            match decode(&self.buf).map_err(|e| ControlError::Decode(e.to_string()))? {
                Some((frame, used)) => {
                    self.buf.drain(..used);
                    if let Frame::Error(e) = &frame {
                        return Err(ControlError::Refused(
                            String::from_utf8_lossy(e).into_owned(),
                        ));
                    }
                    return Ok(frame);
                }
                None if self.buf.len() > CONTROL_REPLY_MAX => return Err(ControlError::TooLong),
                None => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout);
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 4096];
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(ControlError::Io(std::io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ControlError::Timeout)
                }
                Err(e) => return Err(e.into()),
            };
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}
