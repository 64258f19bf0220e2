//! The wire messages: the code prost-build generates from the .proto files,
//! committed in `src/gen` and never edited by hand. `codegen/` writes it, and
//! `ci.sh` fails when writing it again would change it.
//!
//! `sepp_v1` is the API, `proto/sepp/v1/*.proto` at the repository's root.
//! `google_rpc` holds `ErrorInfo`, which a Connect error's details carry the
//! reason in, and `health` the gRPC health check's messages (both from
//! `proto/` in this crate).
//!
//! The generated items are the crate's own business: the public types in
//! `request` and `types` are what callers see, converted in `convert`.

// The generated code covers every message of the API, the calls this client
// does not wrap too, and documents only what the .proto files comment.
#![allow(dead_code, missing_docs, clippy::all)]

pub(crate) mod sepp_v1 {
    include!("gen/sepp.v1.rs");
}

pub(crate) mod google_rpc {
    include!("gen/google.rpc.rs");
}

pub(crate) mod health {
    include!("gen/grpc.health.v1.rs");
}
