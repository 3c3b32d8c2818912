//! Generates the admin API's messages, client and server from `admin.proto`, with the
//! vendored protoc (no system protoc is installed on the build hosts), plus the file
//! descriptor set that the node's gRPC reflection serves.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // Only this build script's process reads it (tonic-prost-build runs protoc from here).
    std::env::set_var("PROTOC", protoc);
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("admin_descriptor.bin"))
        .compile_protos(&["admin.proto"], &["."])?;
    println!("cargo:rerun-if-changed=admin.proto");
    Ok(())
}
