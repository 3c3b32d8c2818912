//! Saving the cluster secret CLUSTER SET-SECRET gave the node, so a restart keeps it (the
//! text and its errors are `cluster::secret`'s).

use crate::cluster::secret::SecretFileError;
use std::path::Path;

pub trait ClusterSecretFile {
    /// Saves `secret` in the node's `dir`, readable by the node's user only, durably before
    /// it returns.
    fn save(&self, dir: &Path, secret: &str) -> Result<(), SecretFileError>;
}
