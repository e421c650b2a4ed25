//! The build script: compiles the CRI proto (`src/cri/runtime.proto`) into Rust with
//! protox, a protobuf compiler in Rust, so that building needs no `protoc` on the
//! machine; and records the git commit the binary is built from, for `--version`
//! (`KRESIDUE_COMMIT` in the environment wins; `unknown` outside a git checkout).

use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "src/cri/runtime.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["src/cri"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .compile_fds(descriptors)?;
    println!("cargo:rustc-env=KRESIDUE_COMMIT={}", commit());
    Ok(())
}

/// The commit of the checkout (12 hex digits), or `unknown`.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=KRESIDUE_COMMIT");
    if let Ok(c) = std::env::var("KRESIDUE_COMMIT") {
        return c;
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        out.status.success().then(|| text.trim().to_owned())
    };
    // Built again when HEAD moves: HEAD itself, the branch it names, the packed refs
    // (paths as git gives them, right in a worktree too). Only files that exist are
    // named: cargo runs a build script on every build while a file it names is missing.
    let mut watch = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watch {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned())
}
