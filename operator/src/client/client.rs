//! The client: connect (with AUTH or HELLO), send one command or a pipeline, read replies.

use std::collections::VecDeque;
use std::time::Duration;

use proto::resp::Frame;

use super::connection::{BufferLimits, Connection};
use super::error::ClientError;
use super::transport::{Target, Transport};

/// How long a connection attempt may take by default.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Out-of-band RESP3 pushes (invalidations, pub/sub messages) kept for the caller while it
/// waits for replies; past this the oldest are dropped and counted, so a caller that never
/// looks cannot make the client grow without bound.
pub const PUSHES_MAX: usize = 1024;

/// The reply protocol to ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2, the default of a new connection: no HELLO is sent.
    #[default]
    Resp2,
    /// RESP3: `HELLO 3` is sent on connect.
    Resp3,
}

/// Everything needed to open a ready-to-use connection.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    pub target: Target,
    /// ACL user for AUTH/HELLO; `None` means the default user.
    pub user: Option<String>,
    pub password: Option<String>,
    pub protocol: Protocol,
    pub connect_timeout: Duration,
    pub limits: BufferLimits,
}

impl ConnectOptions {
    pub fn new(target: Target) -> ConnectOptions {
        ConnectOptions {
            target,
            user: None,
            password: None,
            protocol: Protocol::Resp2,
            connect_timeout: CONNECT_TIMEOUT,
            limits: BufferLimits::default(),
        }
    }
}

/// A connection to a node that speaks RESP2 or RESP3.
#[derive(Debug)]
pub struct Client {
    conn: Connection,
    protocol: Protocol,
    pushes: VecDeque<Frame>,
    pushes_dropped: u64,
}

impl Client {
    /// Connects, then authenticates: with RESP3 through `HELLO 3 [AUTH user pass]`, otherwise
    /// with `AUTH [user] pass` when a password is given.
    pub async fn connect(options: &ConnectOptions) -> Result<Client, ClientError> {
        let transport = Transport::open(&options.target, options.connect_timeout).await?;
        tracing::debug!(target = %options.target, protocol = ?options.protocol, "connected");
        let mut client = Client {
            conn: Connection::new(transport, options.limits),
            protocol: options.protocol,
            pushes: VecDeque::new(),
            pushes_dropped: 0,
        };
        let user = options.user.as_deref().unwrap_or("default");
        match (options.protocol, options.password.as_deref()) {
            (Protocol::Resp3, password) => {
                let mut hello = vec!["HELLO", "3"];
                if let Some(password) = password {
                    hello.extend(["AUTH", user, password]);
                }
                let reply = client.request(&hello).await?;
                if let Some(message) = error_text(&reply) {
                    return Err(ClientError::Hello(message));
                }
            }
            (Protocol::Resp2, Some(password)) => {
                let reply = match &options.user {
                    Some(user) => client.request(&["AUTH", user, password]).await?,
                    None => client.request(&["AUTH", password]).await?,
                };
                if let Some(message) = error_text(&reply) {
                    return Err(ClientError::Auth(message));
                }
            }
            (Protocol::Resp2, None) => {}
        }
        Ok(client)
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Sends one command and returns its reply; an error reply is returned as a frame.
    /// Out-of-band pushes that arrive first are set aside (see [`Client::take_pushes`]).
    pub async fn request<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Frame, ClientError> {
        self.conn.queue_command(args)?;
        self.conn.flush().await?;
        self.next_reply().await
    }

    /// Sends one command and returns its reply; an error reply becomes
    /// [`ClientError::Server`].
    pub async fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Frame, ClientError> {
        let reply = self.request(args).await?;
        match error_text(&reply) {
            Some(message) => Err(ClientError::Server(message)),
            None => Ok(reply),
        }
    }

    /// Sends all `commands` in one write, then reads one reply per command, in order.
    pub async fn pipeline<A: AsRef<[u8]>>(
        &mut self,
        commands: &[Vec<A>],
    ) -> Result<Vec<Frame>, ClientError> {
        for command in commands {
            self.conn.queue_command(command)?;
        }
        self.conn.flush().await?;
        let mut replies = Vec::with_capacity(commands.len());
        for _ in commands {
            replies.push(self.next_reply().await?);
        }
        Ok(replies)
    }

    /// Queues a command for a later [`Client::flush`] (manual pipelining).
    pub fn queue<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<(), ClientError> {
        self.conn.queue_command(args)
    }

    /// Queues bytes that already form complete requests (RESP or inline).
    pub fn queue_raw(&mut self, request: &[u8]) -> Result<(), ClientError> {
        self.conn.queue_raw(request)
    }

    /// Sends what is queued.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        self.conn.flush().await
    }

    /// Reads the next frame as it comes, pushes included (one reply per queued request, in
    /// order, when the connection gets no pushes: the benchmark's case).
    pub async fn read_reply(&mut self) -> Result<Frame, ClientError> {
        self.conn.read_frame().await
    }

    /// The out-of-band pushes received while waiting for replies, oldest first.
    pub fn take_pushes(&mut self) -> Vec<Frame> {
        self.pushes.drain(..).collect()
    }

    /// How many pushes were dropped because [`PUSHES_MAX`] were already kept.
    pub fn pushes_dropped(&self) -> u64 {
        self.pushes_dropped
    }

    /// The next reply to a request: RESP3 pushes are set aside, except the ones that *are*
    /// the reply (the confirmations of SUBSCRIBE and friends, which RESP3 sends as pushes).
    async fn next_reply(&mut self) -> Result<Frame, ClientError> {
        loop {
            let frame = self.conn.read_frame().await?;
            match &frame {
                Frame::Push(items) if !is_subscription_reply(items) => {
                    if self.pushes.len() >= PUSHES_MAX {
                        self.pushes.pop_front();
                        self.pushes_dropped += 1;
                    }
                    self.pushes.push_back(frame);
                }
                _ => return Ok(frame),
            }
        }
    }
}

/// Whether a push confirms a (un)subscription, i.e. answers the command that asked for it.
fn is_subscription_reply(items: &[Frame]) -> bool {
    const KINDS: [&[u8]; 6] = [
        b"subscribe",
        b"psubscribe",
        b"ssubscribe",
        b"unsubscribe",
        b"punsubscribe",
        b"sunsubscribe",
    ];
    items
        .first()
        .and_then(Frame::as_bytes)
        .is_some_and(|kind| KINDS.iter().any(|k| kind.eq_ignore_ascii_case(k)))
}

/// The text of an error reply, or `None` for any other reply.
pub fn error_text(frame: &Frame) -> Option<String> {
    match frame {
        Frame::Error(text) | Frame::BlobError(text) => {
            Some(String::from_utf8_lossy(text).into_owned())
        }
        _ => None,
    }
}
