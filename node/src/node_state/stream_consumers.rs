//! Connections that follow the replication stream over the client port (SYNC/PSYNC,
//! `server::tcp_replica`), as INFO replication and ROLE list them among the replicas (Redis
//! shows such consumers as replicas). They never acknowledge: their offset is the stream
//! sent to them, and their lag is the seconds since they were last sent bytes (or attached).
//! They do not count for WAIT or `min-replicas-to-write`, which need acknowledgements.

use crate::replication::report::ReplicaLine;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct Consumer {
    ip: String,
    port: u16,
    /// The stream is flowing (the full sync, if any, has been sent).
    online: bool,
    /// Stream offset sent so far.
    offset: u64,
    /// When it was last sent stream bytes (unix ms).
    last_sent_ms: u64,
}

/// By client id. Bounded by the caller: `server::tcp_replica` admits at most
/// `TCP_REPLICAS_MAX` consumers at once.
#[derive(Debug, Default)]
pub struct StreamConsumers {
    by_client: BTreeMap<u64, Consumer>,
}

impl StreamConsumers {
    /// `client` asked for the stream from `ip` (its `port`: the client's own, as no listening
    /// port is announced); it is not online until [`Self::sent`].
    pub fn attach(&mut self, client: u64, ip: String, port: u16, now_ms: u64) {
        let consumer = Consumer {
            ip,
            port,
            online: false,
            offset: 0,
            last_sent_ms: now_ms,
        };
        self.by_client.insert(client, consumer);
    }

    /// `client` has been sent the stream up to `offset`.
    pub fn sent(&mut self, client: u64, offset: u64, now_ms: u64) {
        if let Some(c) = self.by_client.get_mut(&client) {
            c.online = true;
            c.offset = offset;
            c.last_sent_ms = now_ms;
        }
    }

    pub fn detach(&mut self, client: u64) {
        self.by_client.remove(&client);
    }

    pub fn lines(&self, now_ms: u64) -> impl Iterator<Item = ReplicaLine> + '_ {
        self.by_client.values().map(move |c| ReplicaLine {
            ip: c.ip.clone(),
            port: c.port,
            online: c.online,
            offset: c.offset,
            lag_secs: now_ms.saturating_sub(c.last_sent_ms) / 1000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumers_are_listed_until_they_detach() {
        let mut consumers = StreamConsumers::default();
        consumers.attach(7, "127.0.0.1".into(), 5000, 1_000);
        let line = consumers.lines(1_500).next().unwrap();
        assert_eq!((line.online, line.offset, line.lag_secs), (false, 0, 0));
        consumers.sent(7, 42, 2_000);
        let line = consumers.lines(5_000).next().unwrap();
        assert_eq!((line.online, line.offset, line.lag_secs), (true, 42, 3));
        assert_eq!((line.ip.as_str(), line.port), ("127.0.0.1", 5000));
        consumers.detach(7);
        assert_eq!(consumers.lines(5_000).count(), 0);
    }
}
