//! Test networks for the network-policy tests (#34): a network namespace
//! per test with a veth pair to the host and a busybox HTTP server inside,
//! a server on the host's loopback, and the helpers both test files share.
//! These namespaces and the host's loopback are the only targets ever.
#![allow(dead_code)]

use crate::common::RunOut;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// One network namespace with a veth pair to the host and an HTTP server
/// (busybox httpd) inside; removed (with its server) when dropped.
pub struct TestNet {
    ns: String,
    host_if: String,
    /// The server's address.
    pub addr: String,
    server: Option<Child>,
    _www: tempfile::TempDir,
}

pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl TestNet {
    /// A namespace whose server answers at `<prefix>.<4k+2>:8080` (`prefix`:
    /// `203.0.113` or `10.199.0`), serving `body` as /index.html.
    pub fn new(prefix: &str, body: &str) -> TestNet {
        let k = NEXT.fetch_add(1, Ordering::SeqCst);
        assert!(k < 10, "too many test networks in one test binary");
        let tag = format!("{}{k}", std::process::id() % 100_000);
        let ns = format!("rfsnet{tag}");
        let (host_if, peer) = (format!("rh{tag}"), format!("rp{tag}"));
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        let _ = Command::new("ip").args(["link", "del", &host_if]).output();
        // Ten /30s per test binary, placed by its pid, so that binaries
        // run at the same time (by another runner) do not share a subnet.
        let base = 4 * ((std::process::id() % 6) * 10 + k);
        let (h, n) = (
            format!("{prefix}.{}", base + 1),
            format!("{prefix}.{}", base + 2),
        );
        ip(&["netns", "add", &ns]);
        let net = TestNet {
            ns: ns.clone(),
            host_if: host_if.clone(),
            addr: n.clone(),
            server: None,
            _www: tempfile::tempdir().unwrap(),
        };
        ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &peer,
        ]);
        ip(&["link", "set", &peer, "netns", &ns]);
        ip(&["addr", "add", &format!("{h}/30"), "dev", &host_if]);
        ip(&["link", "set", &host_if, "up"]);
        ip(&["-n", &ns, "addr", "add", &format!("{n}/30"), "dev", &peer]);
        ip(&["-n", &ns, "link", "set", &peer, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        std::fs::write(net._www.path().join("index.html"), body).unwrap();
        let mut net = net;
        let log = std::fs::File::create(net._www.path().join("access.log")).unwrap();
        let server = Command::new("ip")
            .args(["netns", "exec", &ns, "busybox", "httpd", "-f", "-v", "-p"])
            .arg(format!("{n}:8080"))
            .arg("-h")
            .arg(net._www.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("busybox httpd starts");
        net.server = Some(server);
        net.wait_listening();
        net
    }

    fn wait_listening(&self) {
        for _ in 0..100 {
            let ok = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.ns,
                    "curl",
                    "-sf",
                    "-m",
                    "1",
                    "-o",
                    "/dev/null",
                ])
                .arg(self.url())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the test server in {} did not start", self.ns);
    }

    /// The server's access log: one `client:port: response:CODE` line a
    /// request (the readiness probes included).
    pub fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self._www.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The host side of the veth pair (where rfs's proxy connects from).
    pub fn host_addr(&self) -> String {
        let mut p: Vec<&str> = self.addr.split('.').collect();
        let last: u32 = p.pop().unwrap().parse().unwrap();
        format!("{}.{}", p.join("."), last - 1)
    }

    pub fn url(&self) -> String {
        format!("http://{}:8080/index.html", self.addr)
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// A tiny HTTP server on the host's loopback (a developer's service):
/// answers every request with `body`. Returns its port.
pub fn host_loopback_server(body: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            use std::io::{Read, Write};
            let mut s = s;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

pub fn require_namespaces() {
    assert!(
        rfs::provider::local::availability().is_ok(),
        "user namespaces are not available here: the network policy tests cannot run"
    );
}

/// The stdout lines a step printed (`[name] line`).
pub fn lines<'a>(out: &'a RunOut, step: &str) -> Vec<&'a str> {
    let tag = format!("[{step}] ");
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix(tag.as_str()))
        .collect()
}
