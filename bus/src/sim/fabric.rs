//! The driver's handle on a simulated network: create it from a seed, add hosts, move time, and
//! inject partitions and crashes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Result;

use super::faults::Faults;
use super::network::{Clock, Shared, SimStats};
use super::provider::SimProvider;
use super::HostId;

/// One simulated network. Clones share it.
///
/// On a *virtual-time* network (`new`) nothing happens until the driver calls [`step`],
/// [`advance`] or [`run_until_idle`]: one seed then always yields one history. On a
/// *real-time* network (`new_realtime`) virtual time follows the monotonic clock and every
/// call into the fabric delivers what is due, so ordinary threads can use it without a driver.
///
/// [`step`]: SimFabric::step
/// [`advance`]: SimFabric::advance
/// [`run_until_idle`]: SimFabric::run_until_idle
#[derive(Clone, Debug)]
pub struct SimFabric {
    pub(crate) shared: Arc<Shared>,
}

impl SimFabric {
    /// A virtual-time network seeded with `seed`.
    pub fn new(seed: u64, faults: Faults) -> Result<Self> {
        Ok(SimFabric {
            shared: Shared::new(seed, faults, Clock::Virtual)?,
        })
    }

    /// A network whose clock is the real one: for tests that run peers on threads.
    pub fn new_realtime(seed: u64, faults: Faults) -> Result<Self> {
        Ok(SimFabric {
            shared: Shared::new(seed, faults, Clock::Real(Instant::now()))?,
        })
    }

    /// Adds a host; the provider it returns registers memory and opens endpoints on it.
    pub fn add_host(&self) -> Result<SimProvider> {
        let host = self.shared.with(|n| n.add_host())?;
        Ok(SimProvider {
            fabric: self.clone(),
            host,
        })
    }

    /// Delivers the earliest event in flight, moving virtual time to it. False when idle.
    pub fn step(&self) -> bool {
        self.shared.with(|n| n.step())
    }

    /// Delivers events until none is in flight or `max_steps` were delivered (RNR retries can
    /// keep a network busy for a long while); returns how many were delivered.
    pub fn run_until_idle(&self, max_steps: usize) -> usize {
        self.shared
            .with(|n| (0..max_steps).take_while(|_| n.step()).count())
    }

    /// Moves virtual time forward by `dt`, delivering everything due on the way.
    pub fn advance(&self, dt: Duration) -> usize {
        self.shared.with(|n| {
            let until = n.now.saturating_add(dt.as_nanos() as u64);
            n.run_until(until, usize::MAX)
        })
    }

    /// Virtual time since the network was created.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.shared.with(|n| n.now))
    }

    /// Whether nothing is in flight.
    pub fn is_idle(&self) -> bool {
        self.shared.with(|n| n.next_event().is_none())
    }

    /// Replaces the fault settings; operations already in flight keep their drawn fate.
    pub fn set_faults(&self, faults: Faults) -> Result<()> {
        faults.validate()?;
        self.shared.with(|n| n.faults = faults);
        Ok(())
    }

    /// Cuts traffic between two hosts (both ways) until healed.
    pub fn partition(&self, a: HostId, b: HostId) {
        self.shared.with(|n| n.partition(a, b));
    }

    pub fn heal(&self, a: HostId, b: HostId) {
        self.shared.with(|n| n.heal(a, b));
    }

    pub fn heal_all(&self) {
        self.shared.with(|n| n.heal_all());
    }

    /// From now on `host` refuses (`Full`) to register more than `len_max` bytes at once, as
    /// a device does past the process's memlock limit: regions it holds stay.
    pub fn limit_registrations(&self, host: HostId, len_max: usize) {
        self.shared.with(|n| n.limit_registrations(host, len_max));
    }

    /// Crashes a host for good: its memory, connections, listeners and datagram endpoints
    /// vanish. A restarted process is a new host.
    pub fn crash(&self, host: HostId) {
        self.shared.with(|n| n.crash(host));
    }

    pub fn stats(&self) -> SimStats {
        self.shared.with(|n| n.stats.clone())
    }

    /// A digest of every delivery so far (time, kind, endpoints, length): equal digests from two
    /// runs mean equal histories.
    pub fn trace_digest(&self) -> u64 {
        self.shared.with(|n| n.trace_digest())
    }
}
