//! Writes sepp-rs's wire code from the .proto files, with prost-build and the
//! system's protoc:
//!
//! ```text
//! cargo run --locked --manifest-path codegen/Cargo.toml            # into src/gen, to commit
//! cargo run --locked --manifest-path codegen/Cargo.toml -- DIR     # into DIR (ci.sh's staleness check)
//! ```
//!
//! The API is `proto/sepp/v1/*.proto` at the repository's root, every file of
//! it, so a new one is generated without a change here. Two messages from
//! outside the API come from this crate's `proto/`: `google.rpc.ErrorInfo`,
//! the detail a Connect error carries its reason in, and the gRPC health
//! check's. `google.protobuf.Timestamp` is `prost_types::Timestamp`; maps are
//! `BTreeMap`s.

use std::path::{Path, PathBuf};

fn main() {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("codegen/ sits in the client's folder").to_path_buf();
    let repo_proto = client.join("../../proto");
    let own_proto = client.join("proto");
    let out = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => client.join("src/gen"),
    };

    let mut files = proto_files(&repo_proto.join("sepp/v1"));
    files.push(own_proto.join("google/rpc/error_details.proto"));
    files.push(own_proto.join("grpc/health/v1/health.proto"));

    std::fs::create_dir_all(&out).unwrap_or_else(|e| fail(&format!("create {}: {e}", out.display())));
    // A package that is gone from the protos must be gone from the output
    // too, or the staleness check could not see it.
    remove_generated(&out);
    prost_build::Config::new()
        // BTreeMap, as the client's own types have: ordered maps make the
        // encoding of a request the same every time.
        .btree_map(["."])
        .out_dir(&out)
        .compile_protos(&files, &[repo_proto, own_proto])
        .unwrap_or_else(|e| fail(&format!("generating from the .proto files: {e}")));
    eprintln!("codegen: wrote {}", out.display());
}

/// The .proto files of one folder, sorted so that the output does not
/// depend on the order the file system lists them in.
fn proto_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| fail(&format!("read {}: {e}", dir.display())));
    let mut files: Vec<PathBuf> =
        entries.map(|e| e.expect("a directory entry").path()).filter(|p| p.extension().map_or(false, |x| x == "proto")).collect();
    files.sort();
    if files.is_empty() {
        fail(&format!("no .proto files in {}", dir.display()));
    }
    files
}

/// Removes the .rs files an earlier run wrote into `dir`, and nothing else.
fn remove_generated(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| fail(&format!("read {}: {e}", dir.display()))) {
        let path = entry.expect("a directory entry").path();
        if path.extension().map_or(false, |x| x == "rs") {
            std::fs::remove_file(&path).unwrap_or_else(|e| fail(&format!("remove {}: {e}", path.display())));
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("codegen: {message}");
    std::process::exit(1);
}
