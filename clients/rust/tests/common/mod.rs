//! A real `sepp serve` for the integration tests: started on a free port with
//! a temporary data directory, killed (SIGKILL) and restarted on demand.
//!
//! The binary is `$SEPP_BIN`, or built once with `go build ./cmd/sepp` in the
//! repository root (two levels above this crate).

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

static BIN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The sepp binary: `$SEPP_BIN`, or one built from this repository.
pub fn sepp_bin() -> PathBuf {
    let mut bin = BIN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = &*bin {
        return b.clone();
    }
    let path = match std::env::var_os("SEPP_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => build_sepp(),
    };
    assert!(path.exists(), "sepp binary {} does not exist", path.display());
    *bin = Some(path.clone());
    path
}

fn build_sepp() -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let repo = crate_dir.join("../..");
    let out_dir = crate_dir.join("target").join("sepp-test-bin");
    std::fs::create_dir_all(&out_dir).unwrap();
    let tmp = out_dir.join(format!("sepp.{}", std::process::id()));
    eprintln!("SEPP_BIN is not set: building sepp with `go build ./cmd/sepp` in {}", repo.display());
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&tmp)
        .arg("./cmd/sepp")
        .current_dir(&repo)
        .status()
        .expect("run `go build` (set SEPP_BIN to a built sepp binary instead)");
    assert!(status.success(), "go build ./cmd/sepp failed");
    let path = out_dir.join("sepp");
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// A temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let p = std::env::temp_dir().join(format!("{prefix}-{}-{}-{}", std::process::id(), nanos, N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `sepp serve`.
pub struct Server {
    pub port: u16,
    dir: TempDir,
    config: Option<PathBuf>,
    child: Option<Child>,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Server {
    /// A server with no config file on a free port.
    pub fn start() -> Server {
        Server::start_with_config("")
    }

    /// A server with this TOML config on a free port.
    pub fn start_with_config(toml: &str) -> Server {
        for _ in 0..5 {
            let port = free_port();
            if let Some(s) = Server::try_start(port, toml) {
                return s;
            }
        }
        panic!("could not start sepp on a free port");
    }

    /// A server on this port; `None` when the port is taken.
    pub fn try_start(port: u16, toml: &str) -> Option<Server> {
        let dir = TempDir::new("sepp-rs-test");
        let config = if toml.is_empty() {
            None
        } else {
            let p = dir.path().join("sepp.toml");
            std::fs::write(&p, toml).unwrap();
            Some(p)
        };
        let mut s = Server { port, dir, config, child: None, log: Arc::new(Mutex::new(VecDeque::new())) };
        match s.spawn() {
            Ok(()) => Some(s),
            Err(e) if e.contains("address already in use") => None,
            Err(e) => panic!("sepp serve did not start: {e}"),
        }
    }

    /// The address to give the client: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(sepp_bin());
        cmd.arg("serve");
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        cmd.env("SEPP_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("SEPP_STORAGE_PATH", self.dir.path().join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| format!("spawn {}: {e}", sepp_bin().display()))?;
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = self.log.clone();
        // Reads the server's log for as long as it runs, so its pipe never
        // fills up; keeps the last lines for failure messages.
        std::thread::spawn(move || {
            let mut ready = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let line = match line {
                    Ok(l) => l,
                    Err(_) => break,
                };
                if line.contains("sepp serving") {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(Ok(()));
                    }
                }
                let mut l = log.lock().unwrap();
                l.push_back(line);
                if l.len() > 200 {
                    l.pop_front();
                }
            }
            if let Some(tx) = ready.take() {
                let _ = tx.send(Err(()));
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(())) => {
                self.child = Some(child);
                Ok(())
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(self.log_tail())
            }
        }
    }

    /// The server's last log lines.
    pub fn log_tail(&self) -> String {
        self.log.lock().unwrap().iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Kills the server with SIGKILL (no shutdown of any kind) and waits for
    /// it to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap(); // SIGKILL on Unix
            c.wait().unwrap();
        }
    }

    /// Starts the server again on the same port and data directory.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "kill the server first");
        for _ in 0..50 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if e.contains("address already in use") => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => panic!("sepp serve did not restart: {e}"),
            }
        }
        panic!("port {} stayed taken after the kill", self.port);
    }

    /// Runs a `sepp` CLI command against this server and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(sepp_bin()).args(args).env("SEPP_ADDR", self.url()).output().unwrap();
        assert!(out.status.success(), "sepp {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A process-wide lock on a TCP port shared with other test programs (the
/// seed examples all use localhost:50051): a lock file created exclusively,
/// holding the owner's pid, taken over when that process is gone.
pub struct PortLock(PathBuf);

impl PortLock {
    pub fn acquire(port: u16) -> PortLock {
        let path = std::env::temp_dir().join(format!("sepp-port-{port}.lock"));
        for _ in 0..3000 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    use std::io::Write;
                    let _ = write!(f, "{}", std::process::id());
                    return PortLock(path);
                }
                Err(_) => {
                    let owner = std::fs::read_to_string(&path).unwrap_or_default();
                    let alive = owner.trim().parse::<u32>().map(|pid| Path::new(&format!("/proc/{pid}")).exists()).unwrap_or(false);
                    if !alive && !owner.is_empty() {
                        let _ = std::fs::remove_file(&path);
                        continue;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        panic!("{} stayed locked for 5 minutes", path.display());
    }
}

impl Drop for PortLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A name unique to this test run, for queues and keys.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{nanos}-{}", N.fetch_add(1, Ordering::Relaxed))
}
