//! An S3-compatible server on 127.0.0.1, to try natal on S3 without an account: the one the
//! tests start (`tests/it/s3_server.rs`: s3s over a temporary directory, bucket `natal`),
//! printing what to export for the CLI. Its objects go when it stops (Ctrl-C).
//!
//! ```text
//! cargo run --example s3_server
//! ```

// The tests' server, whole: what only the tests use is unused here.
#[allow(dead_code)]
#[path = "../tests/it/s3_server.rs"]
mod s3_server;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let server = s3_server::S3Server::start(&["natal"], 1000).await?;
    println!(
        "An S3-compatible server at {}, bucket natal. In another shell:\n",
        server.endpoint
    );
    for (key, value) in server.environment() {
        println!("export {key}={value}");
    }
    println!("cargo run --release --bin natal -- --root s3://natal/warehouse\n");
    println!("Ctrl-C stops it (and forgets its objects).");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
