//! `cluster-migration-link` (ours): what carries an atomic slot migration's data from its
//! source to its target.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationLink {
    /// The fabric when the target serves clients on it (`rdma-port`) and this node can open
    /// the provider the target names; TCP otherwise, or when the fabric connect fails.
    Auto,
    /// The fabric only: a target without a fabric listener fails the batch's link.
    Fabric,
    /// A RESP connection to the target's client port over TCP.
    Tcp,
}

impl MigrationLink {
    const NAMES: [(MigrationLink, &'static str); 3] = [
        (MigrationLink::Auto, "auto"),
        (MigrationLink::Fabric, "fabric"),
        (MigrationLink::Tcp, "tcp"),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .unwrap_or("auto")
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(s))
            .map(|(p, _)| *p)
    }
}
