//! Compiles the CRI proto (`src/cri/runtime.proto`) into Rust with protox, a protobuf
//! compiler in Rust, so that building needs no `protoc` on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "src/cri/runtime.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["src/cri"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}
