//! rdma_cm event handling with deadlines: the channel is non-blocking and we sleep on its file
//! descriptor, so no connection step can hang a caller past its timeout.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sideway::rdmacm::communication_manager::{
    Event, EventChannel, EventType, GetEventErrorKind, Identifier,
};

use super::cq::wait_readable;
use super::{error_chain, lib_error, PROVIDER};
use crate::error::{BusError, Result};

/// A non-blocking event channel. Creating one fails with ENODEV on a host without RDMA.
pub(crate) fn channel() -> Result<Arc<EventChannel>> {
    let channel = EventChannel::new().map_err(|e| BusError::Unavailable {
        provider: PROVIDER,
        reason: format!("rdma_cm is unusable: {}", error_chain(&e)),
    })?;
    channel
        .set_nonblocking(true)
        .map_err(|e| lib_error("fcntl(rdma_cm channel)", &e))?;
    Ok(channel)
}

/// The next event, or `None` once `deadline` passes.
pub(crate) fn next_event(channel: &Arc<EventChannel>, deadline: Instant) -> Result<Option<Event>> {
    loop {
        match channel.get_cm_event() {
            Ok(event) => return Ok(Some(event)),
            Err(e) if matches!(e.0, GetEventErrorKind::NoEvent) => {}
            Err(e) => return Err(lib_error("rdma_get_cm_event", &e)),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        wait_readable(channel.as_raw_fd(), left)?;
    }
}

/// Whether the event is for this identifier.
pub(crate) fn is_for(event: &Event, id: &Arc<Identifier>) -> bool {
    event.cm_id().is_some_and(|e| Arc::ptr_eq(&e, id))
}

/// Waits for `want` on `id` (the only identifier on `channel`): errors on a failure event or at
/// the deadline. Unrelated events (address change, timewait exit) are acknowledged and skipped.
pub(crate) fn expect(
    channel: &Arc<EventChannel>,
    id: &Arc<Identifier>,
    want: EventType,
    deadline: Instant,
    timeout: Duration,
) -> Result<()> {
    loop {
        let Some(event) = next_event(channel, deadline)? else {
            return Err(BusError::Timeout(timeout));
        };
        if !is_for(&event, id) {
            continue;
        }
        let kind = event.event_type();
        let status = event.status();
        drop(event); // acknowledges it
        match kind {
            k if k == want => return Ok(()),
            EventType::AddressChange | EventType::TimewaitExit => continue,
            EventType::Rejected
            | EventType::Unreachable
            | EventType::ConnectError
            | EventType::AddressError
            | EventType::RouteError
            | EventType::Disconnected
            | EventType::DeviceRemoval => {
                return Err(BusError::Closed(format!(
                    "rdma_cm {kind:?} (status {status}) while waiting for {want:?}"
                )))
            }
            other => {
                tracing::debug!(?other, ?want, "ignoring rdma_cm event");
            }
        }
    }
}

/// `now + timeout`, saturating (a caller may pass `Duration::MAX` for "no bound").
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// rdma_cm takes millisecond timeouts as i32; clamp ours into 1 ms ..= i32::MAX ms.
pub(crate) fn cm_timeout(d: Duration) -> Duration {
    d.clamp(
        Duration::from_millis(1),
        Duration::from_millis(i32::MAX as u64),
    )
}
