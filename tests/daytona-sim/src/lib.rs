//! `rfs-daytona-sim`: a local server speaking Daytona's REST API
//! (`/api/...`, openapi.yaml) and toolbox API (`/toolbox/{id}/...`,
//! swagger.json) with real, namespaced sandboxes — for rfs's tests only.
//!
//! See README.md for what it reproduces and what it cannot. The surface
//! below is the contract the README describes.

// Handlers answer early with a ready `Response` as their error value, like axum's own rejections.
#![allow(clippy::result_large_err)]

mod api;
mod errors;
mod faults;
mod fork;
mod isolation;
mod network_rules;
mod network_settings;
mod server;
mod snapshots;
mod state;
mod toolbox;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use faults::Faults;

use state::AppState;

/// The organization every sandbox belongs to (also what the JWT path expects in `X-Daytona-Organization-ID`).
pub const ORGANIZATION_ID: &str = "sim-organization";
/// The toolbox daemon version the sandboxes report.
pub const DAEMON_VERSION: &str = "0.190.0-sim";

/// Shape of `GET /api/sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListShape {
    /// v0.180+: `{items: SandboxListItem[], nextCursor}` with cursor paging
    /// (`/api/sandbox/paginated` serves the `{items,total,page,totalPages}` form).
    Paginated,
    /// Before v0.180: a bare `Sandbox[]`.
    BareArray,
}

/// How a started server behaves.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Bearer token the server requires (401 otherwise).
    pub api_key: String,
    pub list_shape: ListShape,
    /// Used when a create names no snapshot.
    pub default_snapshot: String,
    /// Other snapshots the server knows; any other name is Daytona's 400 "Snapshot X not found...".
    pub snapshots: Vec<String>,
    /// `sandboxClass` of `default_snapshot` (and so of every sandbox made
    /// from it): `container` (Daytona's default snapshots), `linux-vm` or
    /// `windows`. Daytona forks only the last two.
    pub default_snapshot_class: String,
    /// Snapshots (of `snapshots`) whose class is `linux-vm`.
    pub vm_snapshots: Vec<String>,
    /// How long a fork's (or a snapshot's) job runs on the runner at
    /// least: the source is `forking` (`snapshotting`) and pending
    /// meanwhile.
    pub job_lag: Duration,
    /// Soft delete: GET answers 200 `destroying` for this long, then 404.
    pub delete_lag: Duration,
    /// The list shows the state of this long ago (eventual consistency).
    pub list_lag: Duration,
    /// During the delete lag the list goes absent → stale pre-delete state → destroying → absent (issue 5138).
    pub reappear_after_delete: bool,
    /// Length of one "minute" of `autoStopInterval`/`autoDeleteInterval` (real Daytona: 60 s).
    pub auto_stop_tick: Duration,
    /// Added to every HTTP response (a WebSocket upgrade included): the
    /// round trip to a real Daytona region, which loopback hides.
    pub latency: Duration,
    /// Added before every WebSocket frame the server sends (log follow,
    /// PTY output).
    pub frame_latency: Duration,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            api_key: format!("sim-key-{}", uuid::Uuid::new_v4().simple()),
            list_shape: ListShape::Paginated,
            default_snapshot: "daytonaio/sandbox:0.5.0-slim".into(),
            snapshots: vec![
                "daytona-small".into(),
                "daytona-medium".into(),
                "daytona-vm".into(),
            ],
            default_snapshot_class: "container".into(),
            vm_snapshots: vec!["daytona-vm".into()],
            job_lag: Duration::from_millis(150),
            delete_lag: Duration::from_millis(300),
            list_lag: Duration::from_millis(100),
            reappear_after_delete: false,
            auto_stop_tick: Duration::from_secs(60),
            latency: Duration::ZERO,
            frame_latency: Duration::ZERO,
        }
    }
}

/// A sandbox as the server truly knows it (not lagged): includes `destroying` ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimSandbox {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub state: String,
    /// The snapshot it was created from.
    pub snapshot: String,
    /// Its region (`target` of the create, `us` when none was given).
    pub target: String,
    /// `networkBlockAll` of the create.
    pub network_block_all: bool,
    /// `networkAllowList` of the create.
    pub network_allow_list: Option<String>,
    /// `domainAllowList` (of the create or of `network-settings`).
    pub domain_allow_list: Option<String>,
    /// `sandboxClass`.
    pub class: String,
    /// The sandbox it was forked from.
    pub parent: Option<String>,
}

/// A snapshot made of a sandbox, as the server truly knows it (`removing`
/// ones included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimSnapshot {
    pub id: String,
    pub name: String,
    /// `active` or `removing`.
    pub state: String,
    pub class: String,
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    /// Request path without the query and without a leading `/api` (toolbox paths: `/toolbox/{id}/...`).
    pub path: String,
    /// The path with every id replaced by `{}` (`/toolbox/{}/process/session/{}/exec`): what
    /// per-route request counts group by.
    pub route: String,
    /// The raw query string (empty when none).
    pub query: String,
    /// Status sent; 0 when the connection was dropped by a fault.
    pub status: u16,
    /// When it arrived, since the server started.
    pub at: Duration,
}

/// A running server. Dropping it (or [`Sim::shutdown`]) kills every sandbox process and removes every sandbox directory.
pub struct Sim {
    state: Arc<AppState>,
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sim {
    /// Start on 127.0.0.1 (a free port), with its own thread and tokio runtime.
    pub fn start(opts: SimOptions) -> std::io::Result<Sim> {
        isolation::preflight()?;
        let base_dir: PathBuf =
            std::env::temp_dir().join(format!("rfs-daytona-sim-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&base_dir)?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let state = Arc::new(AppState {
            base_url: format!("http://{addr}"),
            base_dir,
            faults: Arc::new(Faults::default()),
            requests: Mutex::new(Vec::new()),
            sandboxes: Mutex::new(Vec::new()),
            snapshots: Mutex::new(Vec::new()),
            started: Instant::now(),
            seq: Mutex::new(0),
            jwt: format!(
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJyZnMtZGF5dG9uYS1zaW0ifQ.{}",
                uuid::Uuid::new_v4().simple()
            ),
            opts,
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name("rfs-daytona-sim".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(_) => return,
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else {
                        return;
                    };
                    let router = api::router()
                        .merge(toolbox::router())
                        .layer(axum::middleware::from_fn_with_state(
                            st.clone(),
                            server::auth,
                        ))
                        .with_state(st.clone());
                    let ticker = st.clone();
                    let period = api::policy_period(st.opts.auto_stop_tick);
                    let mut ticker_stop = stop_rx.clone();
                    tokio::spawn(async move {
                        loop {
                            tokio::select! {
                                _ = tokio::time::sleep(period) => {}
                                _ = ticker_stop.changed() => return,
                            }
                            let t = ticker.clone();
                            let _ = tokio::task::spawn_blocking(move || t.enforce_policies()).await;
                        }
                    });
                    server::serve(listener, st, router, stop_rx).await;
                });
                rt.shutdown_timeout(Duration::from_secs(2));
            })?;
        Ok(Sim {
            state,
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Value for `DAYTONA_API_URL`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// Value for `DAYTONA_API_KEY`.
    pub fn api_key(&self) -> String {
        self.state.opts.api_key.clone()
    }

    /// A JWT the server accepts together with `X-Daytona-Organization-ID: ORGANIZATION_ID`.
    pub fn jwt(&self) -> String {
        self.state.jwt.clone()
    }

    /// The toolbox base (`toolboxProxyUrl`).
    pub fn toolbox_url(&self) -> String {
        self.state.toolbox_url()
    }

    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Server truth (not lagged), including `destroying` sandboxes.
    pub fn inventory(&self) -> Vec<SimSandbox> {
        self.state.inventory()
    }

    /// Snapshots made of sandboxes (server truth, `removing` ones included).
    pub fn snapshots(&self) -> Vec<SimSnapshot> {
        crate::snapshots::inventory(&self.state)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The host directory holding every sandbox's root (removed at shutdown).
    pub fn sandboxes_dir(&self) -> PathBuf {
        self.state.base_dir.clone()
    }

    /// Stop serving, kill every sandbox process, remove every sandbox directory.
    pub fn shutdown(mut self) {
        self.teardown();
    }

    fn teardown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        let records: Vec<_> = std::mem::take(&mut *self.state.sandboxes.lock().unwrap());
        for r in &records {
            r.toolbox.shutdown();
            r.sandbox.destroy();
        }
        drop(records);
        for s in std::mem::take(&mut *self.state.snapshots.lock().unwrap()) {
            s.files.destroy();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.state.base_dir);
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.teardown();
    }
}
