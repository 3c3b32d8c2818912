//! Server-wide counters for INFO stats. Connections add their counts in batches (once per
//! read), so the shared cache lines are touched per batch, not per command.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub expired_keys: AtomicU64,
    pub evicted_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub error_replies: AtomicU64,
    pub pubsub_messages: AtomicU64,
    /// Ops per second over the last cron sample (INFO instantaneous_ops_per_sec).
    pub instantaneous_ops: AtomicU64,
    /// Fabric clients accepted, connected now, and peers closed for breaking the
    /// Valkey-over-RDMA protocol (INFO fabric).
    pub fabric_connections_received: AtomicU64,
    pub fabric_connected_clients: AtomicU64,
    pub fabric_protocol_errors: AtomicU64,
    pub fabric_rx_readvertised: AtomicU64,
    /// Times a fabric client's receive buffer or reply staging grew with its traffic, and
    /// times one could not (its registration failed; the client kept its size). Counted
    /// when the client leaves, as `fabric_rx_readvertised`.
    pub fabric_window_grows: AtomicU64,
    pub fabric_window_grow_failures: AtomicU64,
    /// Times the fabric watchdog found a polling thread stuck inside one call.
    pub fabric_poller_stalls: AtomicU64,
    /// Idle periods of the fabric pollers: blocked on the clients' completion channels and
    /// the poller's doorbell (verbs, libfabric's tcp), ended by the doorbell (a new client, a
    /// woken blocked command, an arrival routed by another poller), looks that found work
    /// waiting before the poller could block, and slept in short steps instead (providers
    /// without a descriptor to wait on: libfabric's shm).
    pub fabric_poller_blocks: AtomicU64,
    pub fabric_poller_bell_wakes: AtomicU64,
    pub fabric_poller_idle_retries: AtomicU64,
    pub fabric_poller_sleeps: AtomicU64,
    /// Fabric clients held by a polling thread stuck inside one call: nobody serves them
    /// until it returns, so `fabric_connected_clients` leaves them out.
    pub fabric_stranded_clients: AtomicU64,
    /// Fabric clients closed for not authenticating (`rdma-unauthenticated-max` reached, or
    /// the 10 s deadline passed) or for pending too much input before they did.
    pub fabric_unauthenticated_closed: AtomicU64,
    /// Fabric clients that left saying goodbye (our clients do as they close), so their end
    /// was closed at once; the others are noticed by the provider or the silence limit.
    pub fabric_clients_said_goodbye: AtomicU64,
    /// Handshake sockets the fabric listener dropped (idle past 2 s, evicted from its full
    /// table, malformed): a flood of idle connections at the fabric port shows here.
    pub fabric_handshakes_dropped: AtomicU64,
    /// The depth of the receive pool the fabric listener's connections share (verbs with
    /// `rdma-srq-depth` > 0); 0 when each connection has a receive queue of its own.
    pub fabric_shared_receives: AtomicU64,
    /// Receives posted in that pool at the accept thread's last look (every 100 ms): its depth
    /// less those waiting to be polled, and less any the pool lost (see
    /// `bus/src/verbs/receive_pool.rs`).
    pub fabric_shared_receives_posted: AtomicU64,
    /// Replicas' links as this primary decided them (INFO `sync_full`, `sync_partial_ok`,
    /// `sync_partial_err`: a replica that named a history we could not continue).
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// Error replies by code (INFO errorstats).
    pub error_codes: super::error_stats::ErrorStats,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        if n != 0 {
            counter.fetch_add(n, Relaxed);
        }
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands_processed,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.expired_keys,
            &self.evicted_keys,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.error_replies,
            &self.pubsub_messages,
            &self.fabric_connections_received,
            &self.fabric_protocol_errors,
            &self.fabric_rx_readvertised,
            &self.fabric_window_grows,
            &self.fabric_window_grow_failures,
            &self.fabric_unauthenticated_closed,
            &self.fabric_clients_said_goodbye,
        ] {
            c.store(0, Relaxed);
        }
        self.error_codes.reset();
    }
}

/// A connection's counts since its last flush into [`Stats`].
#[derive(Default)]
pub struct LocalStats {
    pub commands: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub expired: u64,
}

impl LocalStats {
    /// One error reply with `text` (INFO `total_error_replies` and errorstats), counted the
    /// same way wherever an error is answered.
    pub fn error_reply(&mut self, to: &Stats, text: &str) {
        self.errors += 1;
        to.error_codes.note(text);
    }

    pub fn flush(&mut self, to: &Stats) {
        Stats::add(&to.commands_processed, self.commands);
        Stats::add(&to.net_input_bytes, self.input_bytes);
        Stats::add(&to.net_output_bytes, self.output_bytes);
        Stats::add(&to.keyspace_hits, self.hits);
        Stats::add(&to.keyspace_misses, self.misses);
        Stats::add(&to.error_replies, self.errors);
        Stats::add(&to.expired_keys, self.expired);
        *self = LocalStats::default();
    }
}
