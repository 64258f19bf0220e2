//! TLS with the `rustls` feature, through a TLS terminator on loopback (like a
//! load balancer in front of Sepp) that forwards to the real server; the
//! server's own TLS is tested in the Go suite (cmd/sepp/tls_test.go). Certificates come from the openssl CLI.
//!
//! Run with `cargo test --features rustls` (ci.sh does).

#![cfg(feature = "rustls")]

mod common;

#[path = "common/forward.rs"]
mod forward;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::{unique, Server, TempDir};
use sepp_rs::client::SeppClient;
use sepp_rs::{EnqueueRequest, Error};
use tokio_rustls::rustls;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("the openssl CLI");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for `localhost` and a client certificate,
/// all signed by the CA.
fn make_certs(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=sepp test CA",
        ],
    );
    std::fs::write(dir.join("server.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for name in ["server", "client"] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
                "-out",
                &format!("{name}.pem"),
            ],
        );
    }
}

fn certs(pem: &[u8]) -> Vec<rustls::Certificate> {
    rustls_pemfile::certs(&mut &pem[..]).unwrap().into_iter().map(rustls::Certificate).collect()
}

fn key(pem: &[u8]) -> rustls::PrivateKey {
    rustls::PrivateKey(rustls_pemfile::pkcs8_private_keys(&mut &pem[..]).unwrap().remove(0))
}

fn server_config(dir: &Path, require_client_cert: bool) -> Arc<rustls::ServerConfig> {
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let builder = rustls::ServerConfig::builder().with_safe_defaults();
    let cfg = if require_client_cert {
        let mut roots = rustls::RootCertStore::empty();
        for c in certs(&read("ca.pem")) {
            roots.add(&c).unwrap();
        }
        builder
            .with_client_cert_verifier(rustls::server::AllowAnyAuthenticatedClient::new(roots))
            .with_single_cert(certs(&read("server.pem")), key(&read("server.key")))
    } else {
        builder.with_no_client_auth().with_single_cert(certs(&read("server.pem")), key(&read("server.key")))
    };
    Arc::new(cfg.unwrap())
}

#[tokio::test]
async fn https_with_a_private_ca_and_mutual_tls() {
    let dir = TempDir::new("sepp-rs-tls");
    make_certs(dir.path());
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    let server = Server::start();
    let q = unique("tls");

    // TLS, the CA given to the client.
    let tls = forward::Forwarder::tls(server.port, server_config(dir.path(), false)).await;
    let url = format!("https://localhost:{}", tls.addr.port());
    let client = SeppClient::builder(&url).tls_root_certificate_pem(read("ca.pem")).connect().await.unwrap();
    let ack = client.enqueue(EnqueueRequest::new(&q, "t").unwrap().with_idempotency_key("tls-1")).await.unwrap();
    assert_eq!(client.get_job(&ack.job_id).await.unwrap().idempotency_key.as_deref(), Some("tls-1"));

    // The system's roots do not know our CA: the handshake fails, as a
    // transport error naming the address.
    let e = SeppClient::connect(&url).await.unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
    assert!(e.to_string().contains(&url), "{e}");

    // Mutual TLS: with the client certificate, and refused without it.
    let mtls = forward::Forwarder::tls(server.port, server_config(dir.path(), true)).await;
    let url = format!("https://localhost:{}", mtls.addr.port());
    let identity = [read("client.pem"), read("client.key")].concat();
    let client = SeppClient::builder(&url).tls_root_certificate_pem(read("ca.pem")).tls_identity_pem(identity).connect().await.unwrap();
    let ack = client.enqueue(EnqueueRequest::new(&q, "t").unwrap().with_idempotency_key("tls-1")).await.unwrap();
    assert!(ack.deduplicated, "the same server behind both terminators");
    let e = SeppClient::builder(&url).tls_root_certificate_pem(read("ca.pem")).connect().await.unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
}
