#![allow(dead_code)]

//! A loopback forwarder in front of the real server, like a load balancer:
//! plain TCP (recording what the client sent) or TLS-terminating.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[cfg(feature = "rustls")]
type Acceptor = tokio_rustls::TlsAcceptor;
#[cfg(not(feature = "rustls"))]
#[derive(Clone)]
enum Acceptor {}

/// Forwards every connection to 127.0.0.1:`backend`; keeps a copy of the
/// bytes clients sent.
pub struct Forwarder {
    pub addr: SocketAddr,
    pub sent: Arc<Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Forwarder {
    /// A plain TCP forwarder.
    pub async fn plain(backend: u16) -> Forwarder {
        Forwarder::start(backend, None).await
    }

    /// A TLS terminator with this rustls server config.
    #[cfg(feature = "rustls")]
    #[allow(dead_code)]
    pub async fn tls(backend: u16, config: Arc<tokio_rustls::rustls::ServerConfig>) -> Forwarder {
        Forwarder::start(backend, Some(tokio_rustls::TlsAcceptor::from(config))).await
    }

    async fn start(backend: u16, tls: Option<Acceptor>) -> Forwarder {
        let ln = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = ln.local_addr().unwrap();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let rec = sent.clone();
        let task = tokio::spawn(async move {
            loop {
                let (conn, _) = match ln.accept().await {
                    Ok(c) => c,
                    Err(_) => return,
                };
                let (tls, rec) = (tls.clone(), rec.clone());
                tokio::spawn(async move {
                    let up = match TcpStream::connect(("127.0.0.1", backend)).await {
                        Ok(u) => u,
                        Err(_) => return,
                    };
                    match tls {
                        None => pipe(conn, up, rec).await,
                        #[cfg(feature = "rustls")]
                        Some(acceptor) => {
                            // A failed handshake (an unknown CA, no client
                            // certificate) just closes the connection.
                            if let Ok(conn) = acceptor.accept(conn).await {
                                pipe(conn, up, rec).await;
                            }
                        }
                        #[cfg(not(feature = "rustls"))]
                        Some(never) => match never {},
                    }
                });
            }
        });
        Forwarder { addr, sent, task }
    }

    /// What clients sent, lowercased.
    pub fn sent_lowercase(&self) -> String {
        String::from_utf8_lossy(&self.sent.lock().unwrap()).to_lowercase()
    }
}

async fn pipe<C: AsyncRead + AsyncWrite + Unpin>(client: C, up: TcpStream, rec: Arc<Mutex<Vec<u8>>>) {
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = up.into_split();
    let to_server = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            rec.lock().unwrap().extend_from_slice(&buf[..n]);
            if uw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = uw.shutdown().await;
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut ur, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(to_server, to_client);
}
