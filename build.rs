//! Compiles `protos/` with protox (a pure-Rust protobuf compiler), so building natal needs no
//! system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=protos");
    let descriptors = protox::compile(["protos/natal.proto"], ["protos"])?;
    prost_build::Config::new()
        // Packed row ids decode as slices of the file's buffer, not a copy per segment (a
        // cold open after 10M updates of 100M rows reads 22 MB of them).
        .bytes([".natal.format.EncodedU64Array.packed"])
        .compile_fds(descriptors)?;
    Ok(())
}
