//! The admin gRPC API (`admin.proto`, package `admin.v1`): messages, the `Admin` client and
//! server traits, generated at build time by tonic-prost-build.

/// Package `admin.v1`.
#[allow(clippy::all, clippy::pedantic, rust_2018_idioms, missing_docs)]
pub mod v1 {
    tonic::include_proto!("admin.v1");

    /// The encoded `FileDescriptorSet` of `admin.proto`, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/admin_descriptor.bin"));

    impl OperationState {
        /// Whether an operation in this state has ended (it changes no more).
        pub fn is_terminal(self) -> bool {
            matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
        }
    }

    impl Operation {
        /// Whether this operation has ended; an unknown state (a newer server's) has not.
        pub fn is_terminal(&self) -> bool {
            OperationState::try_from(self.state).is_ok_and(OperationState::is_terminal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::v1::{Operation, OperationState};

    #[test]
    fn only_succeeded_failed_and_cancelled_are_terminal() {
        let op = |state: OperationState| Operation {
            state: state as i32,
            ..Default::default()
        };
        assert!(op(OperationState::Succeeded).is_terminal());
        assert!(op(OperationState::Failed).is_terminal());
        assert!(op(OperationState::Cancelled).is_terminal());
        assert!(!op(OperationState::Pending).is_terminal());
        assert!(!op(OperationState::Running).is_terminal());
        let unknown = Operation {
            state: 99,
            ..Default::default()
        };
        assert!(!unknown.is_terminal());
    }
}
