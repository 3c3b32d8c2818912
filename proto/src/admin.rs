//! The admin gRPC API (`admin.proto`, package `admin.v1`): messages, the `Admin` client and
//! server traits, generated at build time by tonic-prost-build.

/// Package `admin.v1`.
#[allow(clippy::all, clippy::pedantic, rust_2018_idioms, missing_docs)]
pub mod v1 {
    tonic::include_proto!("admin.v1");

    /// The encoded `FileDescriptorSet` of `admin.proto`, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/admin_descriptor.bin"));
}
