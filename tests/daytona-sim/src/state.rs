//! The server's truth: sandboxes, their lifecycle timeline and what the
//! (lagged, non-monotonic) list endpoint shows at a given moment.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::faults::Faults;
use crate::isolation::SandboxBox;
use crate::toolbox::ToolboxState;
use crate::{RequestRecord, SimOptions, SimSandbox};

pub(crate) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// What the list endpoint shows of a sandbox from some moment on (`None` = absent).
#[derive(Clone, Debug)]
pub(crate) struct ListView {
    pub state: &'static str,
    pub name: String,
}

pub(crate) struct Record {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub snapshot: String,
    pub user: String,
    pub target: String,
    pub state: &'static str,
    pub desired_state: &'static str,
    pub auto_stop: i64,
    pub auto_archive: i64,
    pub auto_delete: i64,
    /// `networkBlockAll` of the create.
    pub network_block_all: bool,
    /// `networkAllowList` of the create.
    pub network_allow_list: Option<String>,
    /// `domainAllowList` of the create or of `network-settings` (a fork
    /// gets none: `sandbox.service.ts` copies only the other two).
    pub domain_allow_list: Option<String>,
    /// `sandboxClass`: its snapshot's (`container` unless the snapshot
    /// says `linux-vm` or `windows`).
    pub class: &'static str,
    /// Daytona's `pending`: a state change (a fork of it, a snapshot of
    /// it) is in progress; a delete, fork or snapshot meanwhile is 409.
    pub pending: bool,
    /// The sandbox it was forked from (Daytona's `SandboxFork` row).
    pub parent: Option<String>,
    /// Its resources (whole cpus, GiB of memory and disk): the snapshot's,
    /// as Daytona gives a sandbox created from a snapshot.
    pub cpu: i64,
    pub memory: i64,
    pub disk: i64,
    pub created_at: String,
    pub updated_at: String,
    pub last_activity_at: String,
    pub last_activity: Instant,
    pub stopped_at: Option<Instant>,
    /// When DELETE was accepted.
    pub deleted_at: Option<Instant>,
    /// When GET starts answering 404.
    pub gone_at: Option<Instant>,
    pub timeline: Vec<(Instant, Option<ListView>)>,
    pub sandbox: Arc<SandboxBox>,
    pub toolbox: Arc<ToolboxState>,
    pub seq: u64,
}

impl Record {
    /// A new sandbox's record, started, with the server's defaults (those
    /// of a create that names nothing); its maker sets what differs.
    pub(crate) fn fresh(id: String, name: String, sandbox: Arc<SandboxBox>, seq: u64) -> Record {
        let now_s = now_rfc3339();
        Record {
            id,
            name,
            labels: BTreeMap::new(),
            env: BTreeMap::new(),
            snapshot: String::new(),
            user: "daytona".into(),
            target: "us".into(),
            state: "started",
            desired_state: "started",
            auto_stop: 15,
            auto_archive: 10080,
            auto_delete: -1,
            network_block_all: false,
            network_allow_list: None,
            domain_allow_list: None,
            class: "container",
            pending: false,
            parent: None,
            // Every snapshot of the sim is `daytona-small`'s size (as the
            // server's defaults on the image path: cpu 1, memory 1, disk 3).
            cpu: 1,
            memory: 1,
            disk: 3,
            created_at: now_s.clone(),
            updated_at: now_s.clone(),
            last_activity_at: now_s,
            last_activity: Instant::now(),
            stopped_at: None,
            deleted_at: None,
            gone_at: None,
            timeline: Vec::new(),
            toolbox: Arc::new(ToolboxState::new(sandbox.clone())),
            sandbox,
            seq,
        }
    }

    pub fn is_gone(&self, now: Instant) -> bool {
        self.gone_at.is_some_and(|g| now >= g)
    }

    /// The state GET reports now.
    pub fn current_state(&self, now: Instant) -> Option<&'static str> {
        if self.is_gone(now) {
            None
        } else if self.deleted_at.is_some() {
            Some("destroying")
        } else {
            Some(self.state)
        }
    }

    pub fn list_view_at(&self, t: Instant) -> Option<ListView> {
        self.timeline
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .and_then(|(_, v)| v.clone())
    }

    pub fn push_view(&mut self, at: Instant, state: Option<&'static str>) {
        let view = state.map(|s| ListView {
            state: s,
            name: self.name.clone(),
        });
        self.timeline.push((at, view));
    }

    pub fn touch(&mut self) {
        self.last_activity = Instant::now();
        self.last_activity_at = now_rfc3339();
    }

    fn common_fields(
        &self,
        state: &str,
        name: &str,
        toolbox_url: &str,
    ) -> serde_json::Map<String, Value> {
        let v = json!({
            "id": self.id,
            "organizationId": crate::ORGANIZATION_ID,
            "name": name,
            "snapshot": self.snapshot,
            "user": self.user,
            "labels": self.labels,
            "public": false,
            "target": self.target,
            "cpu": self.cpu, "gpu": 0, "memory": self.memory, "disk": self.disk,
            "state": state,
            "desiredState": self.desired_state,
            "backupState": "None",
            "autoStopInterval": self.auto_stop,
            "autoArchiveInterval": self.auto_archive,
            "autoDeleteInterval": self.auto_delete,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "lastActivityAt": self.last_activity_at,
            "sandboxClass": self.class,
            "daemonVersion": crate::DAEMON_VERSION,
            "runnerId": "sim-runner",
            "toolboxProxyUrl": toolbox_url,
            "recoverable": false,
        });
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    /// The full `Sandbox` DTO.
    pub fn dto(&self, state: &str, toolbox_url: &str) -> Value {
        let mut m = self.common_fields(state, &self.name, toolbox_url);
        m.insert("env".into(), json!(self.env));
        m.insert("networkBlockAll".into(), json!(self.network_block_all));
        if let Some(l) = &self.network_allow_list {
            m.insert("networkAllowList".into(), json!(l));
        }
        if let Some(l) = &self.domain_allow_list {
            m.insert("domainAllowList".into(), json!(l));
        }
        m.insert("volumes".into(), json!([]));
        if matches!(state, "error" | "build_failed") {
            m.insert(
                "errorReason".into(),
                json!(format!("{state} injected by the test server")),
            );
        }
        Value::Object(m)
    }

    /// A `SandboxListItem` as the list showed it at some moment.
    pub fn list_item(&self, view: &ListView, toolbox_url: &str) -> Value {
        let mut m = self.common_fields(view.state, &view.name, toolbox_url);
        if view.state == "destroying" {
            m.insert("desiredState".into(), json!("destroyed"));
        }
        Value::Object(m)
    }
}

pub(crate) struct AppState {
    pub opts: SimOptions,
    pub base_url: String,
    pub base_dir: PathBuf,
    pub faults: Arc<Faults>,
    pub requests: Mutex<Vec<RequestRecord>>,
    pub sandboxes: Mutex<Vec<Record>>,
    /// Snapshots made of sandboxes (`POST /sandbox/{id}/snapshot`).
    pub snapshots: Mutex<Vec<crate::snapshots::SnapRecord>>,
    pub started: Instant,
    pub seq: Mutex<u64>,
    pub jwt: String,
}

impl AppState {
    pub fn toolbox_url(&self) -> String {
        format!("{}/toolbox", self.base_url)
    }

    pub fn inventory(&self) -> Vec<SimSandbox> {
        let now = Instant::now();
        self.sandboxes
            .lock()
            .unwrap()
            .iter()
            .filter_map(|r| {
                r.current_state(now).map(|s| SimSandbox {
                    id: r.id.clone(),
                    name: r.name.clone(),
                    labels: r.labels.clone(),
                    state: s.to_string(),
                    snapshot: r.snapshot.clone(),
                    target: r.target.clone(),
                    network_block_all: r.network_block_all,
                    network_allow_list: r.network_allow_list.clone(),
                    domain_allow_list: r.domain_allow_list.clone(),
                    class: r.class.to_owned(),
                    parent: r.parent.clone(),
                })
            })
            .collect()
    }

    /// Soft delete: processes die now, GET says `destroying` until `delete_lag` passed.
    pub fn soft_delete(&self, rec: &mut Record) {
        let now = Instant::now();
        let lag = self.opts.delete_lag;
        rec.deleted_at = Some(now);
        rec.gone_at = Some(now + lag);
        rec.desired_state = "destroyed";
        let prev = rec.state;
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let old_name = rec.name.clone();
        rec.name = format!("DESTROYED_{old_name}_{ms}");
        rec.updated_at = now_rfc3339();
        if self.opts.reappear_after_delete {
            // upstream issue 5138: absent → stale pre-delete state → destroying → absent
            let q = lag / 4;
            rec.timeline.push((now, None));
            rec.timeline.push((
                now + q,
                Some(ListView {
                    state: prev,
                    name: old_name,
                }),
            ));
            rec.push_view(now + 2 * q, Some("destroying"));
        } else {
            rec.push_view(now, Some("destroying"));
        }
        rec.push_view(now + lag, None);
        // The runner tears the sandbox down in the background.
        let (tb, sandbox) = (rec.toolbox.clone(), rec.sandbox.clone());
        std::thread::spawn(move || {
            tb.shutdown();
            sandbox.destroy();
        });
    }

    pub fn stop(&self, rec: &mut Record) {
        rec.toolbox.shutdown();
        rec.sandbox.stop();
        rec.state = "stopped";
        rec.desired_state = "stopped";
        rec.stopped_at = Some(Instant::now());
        rec.updated_at = now_rfc3339();
        rec.push_view(Instant::now(), Some("stopped"));
    }

    /// Enforce auto-stop / auto-delete (one interval minute = `auto_stop_tick`) and forget old tombstones.
    pub fn enforce_policies(&self) {
        let now = Instant::now();
        let minute = self.opts.auto_stop_tick;
        let mut list = self.sandboxes.lock().unwrap();
        for i in 0..list.len() {
            if list[i].deleted_at.is_some() {
                continue;
            }
            if list[i].state == "started" && list[i].auto_stop > 0 {
                let idle = now.duration_since(list[i].last_activity);
                if idle >= minute * list[i].auto_stop as u32 {
                    let rec = &mut list[i];
                    self.stop(rec);
                }
            }
            if list[i].state == "stopped" && list[i].auto_delete >= 0 {
                let since = list[i]
                    .stopped_at
                    .map(|s| now.duration_since(s))
                    .unwrap_or_default();
                if since >= minute * list[i].auto_delete as u32 {
                    let rec = &mut list[i];
                    self.soft_delete(rec);
                }
            }
        }
        let keep = self.opts.list_lag + self.opts.delete_lag + Duration::from_secs(5);
        list.retain(|r| r.gone_at.is_none_or(|g| now < g + keep));
    }

    /// `sandboxClass` of a sandbox made from server snapshot `snapshot`.
    pub fn class_of(&self, snapshot: &str) -> &'static str {
        let class = if snapshot == self.opts.default_snapshot {
            self.opts.default_snapshot_class.as_str()
        } else if self.opts.vm_snapshots.iter().any(|s| s == snapshot) {
            "linux-vm"
        } else {
            "container"
        };
        match class {
            "linux-vm" => "linux-vm",
            "windows" => "windows",
            _ => "container",
        }
    }

    pub fn next_seq(&self) -> u64 {
        let mut s = self.seq.lock().unwrap();
        *s += 1;
        *s
    }
}
