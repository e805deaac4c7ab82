//! Compiles `protos/` with protox (a pure-Rust protobuf compiler), so building natal needs no
//! system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=protos");
    let descriptors = protox::compile(["protos/natal.proto"], ["protos"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
