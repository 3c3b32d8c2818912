//! Endpoint configuration with its limits: queue depths, completion queue size and the inline
//! threshold (`rdma-send-wr`, `rdma-recv-wr`, `rdma-cq-size`, `rdma-max-inline`).

use crate::error::BusError;

/// Default inline threshold: sends up to this many bytes are copied into the work request, so
/// the NIC skips a DMA read of the payload (the RC/UC tuning seed measured the gain for small
/// messages; 256 bytes is where typical NICs still accept inline data).
pub const MAX_INLINE_DEFAULT: usize = 256;
/// Above this no NIC we target accepts inline data; larger values are a config mistake.
pub const MAX_INLINE_LIMIT: usize = 1024;
/// Default outstanding send/recv work requests per queue pair: what a Stream uses
/// (`stream::SEND_WR_NEEDED`, `RECV_WR_NEEDED`: 224) with room to spare. Valkey-over-RDMA
/// uses 1024, but a queue's memory is taken at creation whatever is posted, per connection:
/// rxe allocated 1,676 KiB of queues per idle client at 1024 (512-byte send WQEs with 256
/// bytes inline). One under a power of two because rxe rounds depth + 1 up to one (mlx5
/// rounds the depth itself): 255 takes 256 slots where 256 would take 512.
pub const WR_DEFAULT: u32 = 255;
/// Bounds on work-request depths: fewer than 16 starves pipelining; more than 16384 is past what
/// mlx5 and rxe allow per QP and only pins memory.
pub const WR_MIN: u32 = 16;
pub const WR_MAX: u32 = 16384;
/// Bound on completion queue entries (twice the largest send + recv depth).
pub const CQ_MAX: u32 = 2 * 2 * WR_MAX;

/// Per-endpoint settings. Construct with `Default` and adjust, then `validate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// Sends of at most this many bytes go inline (`rdma-max-inline`).
    pub max_inline: usize,
    /// Outstanding send-side work requests (SEND, WRITE, READ) (`rdma-send-wr`).
    pub send_wr: u32,
    /// Posted receives (`rdma-recv-wr`).
    pub recv_wr: u32,
    /// Completion queue entries; must hold every outstanding request of both queues.
    pub cq_size: u32,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            max_inline: MAX_INLINE_DEFAULT,
            send_wr: WR_DEFAULT,
            recv_wr: WR_DEFAULT,
            cq_size: 2 * WR_DEFAULT,
        }
    }
}

impl EndpointConfig {
    /// Checks every field against its limit; the error names the config key.
    pub fn validate(&self) -> Result<(), BusError> {
        let bad = |what: &'static str, reason: String| Err(BusError::Invalid { what, reason });
        if self.max_inline > MAX_INLINE_LIMIT {
            return bad(
                "rdma-max-inline",
                format!("{} > {MAX_INLINE_LIMIT}", self.max_inline),
            );
        }
        for (what, v) in [
            ("rdma-send-wr", self.send_wr),
            ("rdma-recv-wr", self.recv_wr),
        ] {
            if !(WR_MIN..=WR_MAX).contains(&v) {
                return bad(what, format!("{v} is outside {WR_MIN}..={WR_MAX}"));
            }
        }
        let need = self.send_wr + self.recv_wr;
        if self.cq_size < need || self.cq_size > CQ_MAX {
            return bad(
                "rdma-cq-size",
                format!("{} is outside {need}..={CQ_MAX}", self.cq_size),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_limits_hold() {
        EndpointConfig::default().validate().unwrap();
        let mut c = EndpointConfig {
            max_inline: MAX_INLINE_LIMIT + 1,
            ..Default::default()
        };
        assert!(c.validate().is_err());
        c = EndpointConfig {
            send_wr: WR_MIN - 1,
            ..Default::default()
        };
        assert!(c.validate().is_err());
        c = EndpointConfig {
            cq_size: 10,
            ..Default::default()
        };
        assert!(c.validate().is_err());
    }
}
