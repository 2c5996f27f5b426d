//! rfs's egress proxy: HTTP `CONNECT` and plain (absolute-URI) HTTP
//! proxying with hyper, on a listener rfs was handed (one inside a
//! sandbox's own network namespace). It resolves each name itself,
//! checks every address against the sandbox's [`NetworkPolicy`], connects
//! and relays, and records every attempt in the sandbox's [`EgressLog`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::counted::Counted;
use super::policy::{decide, refuse_before_resolving};
use super::{Connection, EgressLog, NetworkPolicy};

type Body = BoxBody<Bytes, hyper::Error>;

/// The relay's buffer each way (tokio's default, 8 KiB, costs a system
/// call per 8 KiB on a bulk download); at most 512 relays hold one.
const RELAY_BUF: usize = 64 * 1024;

/// A place among the upstream connections: at once when one is free,
/// else after the one idle the longest made room, else when one ends
/// (`None`: the proxy is stopping).
async fn upstream_slot(sh: &Shared) -> Option<tokio::sync::OwnedSemaphorePermit> {
    use tokio::sync::TryAcquireError;
    match sh.upstream.clone().try_acquire_owned() {
        Ok(slot) => return Some(slot),
        Err(TryAcquireError::Closed) => return None,
        Err(TryAcquireError::NoPermits) => {}
    }
    loop {
        sh.idle
            .evict_longest_idle(super::idle::MIN_IDLE_TO_EVICT, MAX_UPSTREAM);
        tokio::select! {
            slot = sh.upstream.clone().acquire_owned() => return slot.ok(),
            _ = tokio::time::sleep(super::idle::MIN_IDLE_TO_EVICT) => {}
        }
    }
}

/// The longest DNS name (RFC 1035's 253 characters).
const MAX_NAME: usize = 253;

/// How long a connection to an allowed destination may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A running proxy; dropping it stops it (open connections end, and are
/// recorded).
#[derive(Debug)]
pub struct EgressProxy {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    policy: NetworkPolicy,
    /// The host's own addresses (refused like loopback).
    own: Vec<IpAddr>,
    log: Arc<EgressLog>,
    /// Upstream connections open at once (each relay holds one).
    upstream: Arc<tokio::sync::Semaphore>,
    /// When each upstream connection last carried a byte.
    idle: Arc<super::idle::Idle>,
}

impl EgressProxy {
    /// Serve `listener` with `policy` on a thread of its own, recording in
    /// `log`.
    pub fn start(
        listener: std::net::TcpListener,
        policy: NetworkPolicy,
        log: Arc<EgressLog>,
    ) -> std::io::Result<EgressProxy> {
        listener.set_nonblocking(true)?;
        log.mark_served();
        let shared = Arc::new(Shared {
            policy,
            own: super::ranges::own_addresses(),
            log,
            upstream: Arc::new(tokio::sync::Semaphore::new(MAX_UPSTREAM)),
            idle: super::idle::Idle::new(),
        });
        raise_open_files_limit();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rfs-egress".into())
            .spawn(move || {
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let idle = shared.idle.clone();
                    tokio::select! {
                        _ = stopped => {}
                        _ = accept_loop(listener, shared) => {}
                        _ = sweep(idle) => {}
                    }
                });
                // Dropping the runtime ends every open relay; each is
                // recorded as it is dropped.
                drop(rt);
            })?;
        Ok(EgressProxy {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Connections from one sandbox accepted at once (each holds a
/// descriptor of rfs's own and, until its request is read, a few KiB);
/// more wait to be accepted. Many: a silent one is closed after
/// [`HEADER_TIMEOUT`], and a later step's request must not queue behind
/// thousands of them (#44).
const MAX_ACCEPTED: usize = 4096;

/// Upstream connections open at once; when all are taken, the one idle
/// the longest makes room for a waiting one ([`super::idle`]).
const MAX_UPSTREAM: usize = 512;

/// Let this process hold the descriptors the proxy may need (two per
/// relay, one per accepted connection): the soft limit up to the hard
/// one, at most 65,536; once per process.
fn raise_open_files_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(raise_now);
}

fn raise_now() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit of this process.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            let want = lim.rlim_max.min(65_536);
            if lim.rlim_cur < want {
                lim.rlim_cur = want;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    }
}

/// Close upstream connections idle past [`super::idle::IDLE_TIMEOUT`].
async fn sweep(idle: Arc<super::idle::Idle>) {
    loop {
        tokio::time::sleep(Duration::from_secs(15)).await;
        idle.sweep(super::idle::IDLE_TIMEOUT);
    }
}

/// How long a connection may take to send its request's headers: one
/// that sends nothing (or a byte a minute) is closed then, so that a
/// background process holding every slot cannot starve later steps.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_ACCEPTED));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| handle(shared.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .preserve_header_case(true)
                .title_case_headers(true)
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades()
                .await;
        });
    }
}

async fn handle(sh: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, hyper::Error> {
    let by = opener(&sh, &req);
    if req.method() == Method::CONNECT {
        Ok(connect(sh, req, by).await)
    } else {
        Ok(forward(sh, req, by).await)
    }
}

/// Who started the process sending `req`, as the proxy user name rfs
/// gave its command says (`Proxy-Authorization: Basic`); `None` when it
/// sent none or one rfs did not give.
fn opener(sh: &Shared, req: &Request<Incoming>) -> Option<super::record::Opener> {
    use base64::Engine as _;
    let v = req
        .headers()
        .get(hyper::header::PROXY_AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, b64) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") || b64.len() > 512 {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let user = std::str::from_utf8(&raw).ok()?.split(':').next()?;
    sh.log.opener_of(user)
}

fn text(code: StatusCode, msg: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(msg + "\n"))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = code;
    r
}

/// `CONNECT host:port`: open, answer 200, then relay the upgraded
/// connection both ways.
async fn connect(
    sh: Arc<Shared>,
    req: Request<Incoming>,
    by: Option<super::record::Opener>,
) -> Response<Body> {
    let Some(auth) = req.uri().authority().cloned() else {
        return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port".into());
    };
    let Some(port) = auth.port_u16() else {
        return text(StatusCode::BAD_REQUEST, "CONNECT needs a port".into());
    };
    let mut upstream = match open(&sh, auth.host(), port, "connect", by).await {
        Ok(s) => s,
        Err((code, msg)) => return text(code, msg),
    };
    tokio::spawn(async move {
        if let Ok(up) = hyper::upgrade::on(req).await {
            relay(TokioIo::new(up), &mut upstream).await;
        }
    });
    Response::new(Full::new(Bytes::new()).map_err(|n| match n {}).boxed())
}

/// Relay a tunnel both ways. The relay's buffers are taken only once a
/// byte flows, whichever side sends first: an idle tunnel holds none, so
/// a flood of them costs rfs little memory (#44).
async fn relay(mut up: TokioIo<hyper::upgrade::Upgraded>, upstream: &mut Counted) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (mut a, mut b) = ([0u8; 512], [0u8; 512]);
    let first = tokio::select! {
        r = up.read(&mut a) => r.map(|n| (n, true)),
        r = upstream.read(&mut b) => r.map(|n| (n, false)),
    };
    let sent = match first {
        Ok((0, _)) | Err(_) => return,
        Ok((n, true)) => upstream.write_all(&a[..n]).await,
        Ok((n, false)) => up.write_all(&b[..n]).await,
    };
    if sent.is_ok() {
        let _ =
            tokio::io::copy_bidirectional_with_sizes(&mut up, upstream, RELAY_BUF, RELAY_BUF).await;
    }
}

/// A plain HTTP request with an absolute `http://` URI: open, send it in
/// origin form, stream the answer back.
async fn forward(
    sh: Arc<Shared>,
    mut req: Request<Incoming>,
    by: Option<super::record::Opener>,
) -> Response<Body> {
    let uri = req.uri().clone();
    let (Some("http"), Some(host)) = (uri.scheme_str(), uri.host()) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!(
                "rfs egress proxy: `{uri}`: only absolute http:// URIs and CONNECT are proxied"
            ),
        );
    };
    let port = uri.port_u16().unwrap_or(80);
    // The journal names the request's authority: a `Host` header naming
    // anything else (`Host: 169.254.169.254` on a request for an allowed
    // name) would reach what the record does not say.
    if let Some(h) = req.headers().get(hyper::header::HOST) {
        if !same_authority(h.as_bytes(), host, port) {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "rfs egress proxy: the Host header `{}` differs from the request's authority `{host}:{port}`; refused",
                    String::from_utf8_lossy(&h.as_bytes()[..h.len().min(MAX_NAME)])
                ),
            );
        }
    }
    let upstream = match open(&sh, host, port, "http", by).await {
        Ok(s) => s,
        Err((code, msg)) => return text(code, msg),
    };
    let bad_gateway =
        |e: hyper::Error| text(StatusCode::BAD_GATEWAY, format!("rfs egress proxy: {e}"));
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(x) => x,
            Err(e) => return bad_gateway(e),
        };
    tokio::spawn(conn);
    let origin = uri.path_and_query().map_or("/", |p| p.as_str());
    *req.uri_mut() = origin
        .parse()
        .unwrap_or_else(|_| hyper::Uri::from_static("/"));
    for h in ["proxy-connection", "proxy-authorization"] {
        req.headers_mut().remove(h);
    }
    if !req.headers().contains_key(hyper::header::HOST) {
        if let Some(a) = uri.authority().and_then(|a| a.as_str().parse().ok()) {
            req.headers_mut().insert(hyper::header::HOST, a);
        }
    }
    match sender.send_request(req).await {
        Ok(resp) => resp.map(|b| b.boxed()),
        Err(e) => bad_gateway(e),
    }
}

/// Whether a `Host` header names `host` on `port` (its port may be left
/// out for 80), names compared without case.
fn same_authority(header: &[u8], host: &str, port: u16) -> bool {
    let Ok(h) = std::str::from_utf8(header) else {
        return false;
    };
    let Ok(a) = h.trim().parse::<hyper::http::uri::Authority>() else {
        return false;
    };
    a.host().eq_ignore_ascii_case(host) && a.port_u16().unwrap_or(80) == port
}

/// Decide and connect, recording the attempt; the error is the answer to
/// give the program.
async fn open(
    sh: &Shared,
    host: &str,
    port: u16,
    via: &str,
    by: Option<super::record::Opener>,
) -> Result<Counted, (StatusCode, String)> {
    let started = Instant::now();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let literal = bare.parse::<IpAddr>().ok();
    // No DNS name is longer than 253 bytes: one that is is kept cut
    // there (the record is bounded) and refused without resolving.
    let too_long = literal.is_none() && bare.len() > MAX_NAME;
    let name = literal.is_none().then(|| {
        let mut n = bare.to_ascii_lowercase();
        let mut cut = n.len().min(MAX_NAME);
        while !n.is_char_boundary(cut) {
            cut -= 1;
        }
        n.truncate(cut);
        n
    });
    let mut rec = Connection {
        name: name.clone(),
        address: None,
        port,
        allowed: false,
        rule: String::new(),
        via: via.to_owned(),
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        // The step of the command that started the opener (none for a
        // background one), else the step running now.
        step: match &by {
            Some(o) => o.step.clone(),
            None => sh.log.step(),
        },
        opened_by: by.map(|o| o.label),
        error: None,
        repeated: 0,
    };
    let refuse = |mut rec: Connection, code: StatusCode, rule: String| {
        let mut msg = format!("rfs egress policy refuses {}: {rule}", rec.destination());
        if rule.contains("loopback") {
            // The proxy is outside the sandbox: a server the proof started
            // in it is reached directly, by programs that honour no_proxy.
            msg.push_str(
                " (rfs's proxy runs outside the sandbox; to reach a server in the sandbox, \
                 bypass the proxy: this program ignored no_proxy — busybox wget: -Y off)",
            );
        }
        rec.rule = rule;
        rec.duration_ms = started.elapsed().as_millis() as u64;
        sh.log.push(rec);
        Err((code, msg))
    };
    if too_long {
        return refuse(
            rec,
            StatusCode::BAD_REQUEST,
            format!("a name longer than DNS's {MAX_NAME} bytes (recorded cut there)"),
        );
    }
    let addrs: Vec<IpAddr> = match (literal, &name) {
        (Some(a), _) => vec![a],
        (None, Some(n)) => {
            if let Some(d) = refuse_before_resolving(&sh.policy, n, port) {
                return refuse(rec, StatusCode::FORBIDDEN, d.rule);
            }
            match tokio::net::lookup_host((n.as_str(), port)).await {
                Ok(it) => it.map(|sa| sa.ip()).collect(),
                Err(e) => {
                    return refuse(
                        rec,
                        StatusCode::BAD_GATEWAY,
                        format!("the name did not resolve ({e})"),
                    )
                }
            }
        }
        (None, None) => vec![],
    };
    let mut refusal = None;
    for a in addrs {
        let d = decide(&sh.policy, name.as_deref(), a, port, &sh.own);
        if !d.allowed {
            refusal.get_or_insert((a, d));
            continue;
        }
        rec.address = Some(a.to_string());
        rec.allowed = true;
        rec.rule = d.rule;
        let Some(slot) = upstream_slot(sh).await else {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "rfs egress proxy is stopping".into(),
            ));
        };
        let failed =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((a, port))).await {
                Ok(Ok(s)) => {
                    let watch = sh.idle.register();
                    return Ok(Counted::new(s, rec, started, sh.log.clone(), slot, watch));
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
            };
        let msg = format!(
            "rfs egress proxy: connecting to {} failed: {failed}",
            rec.destination()
        );
        rec.error = Some(failed);
        rec.duration_ms = started.elapsed().as_millis() as u64;
        sh.log.push(rec);
        return Err((StatusCode::BAD_GATEWAY, msg));
    }
    let (a, d) = refusal.unwrap_or((
        IpAddr::from([0, 0, 0, 0]),
        super::Decision {
            allowed: false,
            rule: "the name has no address".into(),
        },
    ));
    rec.address = Some(a.to_string());
    refuse(rec, StatusCode::FORBIDDEN, d.rule)
}

#[cfg(test)]
mod host_header_tests {
    use super::same_authority;

    /// An absolute-URI request for an allowed name was forwarded with any
    /// `Host` header (`Host: 169.254.169.254`) while the journal showed
    /// only the allowed name.
    #[test]
    fn a_host_header_naming_another_authority_is_refused() {
        assert!(same_authority(b"pypi.org", "pypi.org", 80));
        assert!(same_authority(b"PyPI.org:80", "pypi.org", 80));
        assert!(same_authority(b"pypi.org:8080", "pypi.org", 8080));
        for other in [
            &b"169.254.169.254"[..],
            b"pypi.org:81",
            b"evil.example",
            b"",
            b"\xff",
        ] {
            assert!(!same_authority(other, "pypi.org", 80), "{other:?}");
        }
    }
}
