//! Unit tests of the `local` provider.

use super::*;
use crate::provider::isolation::IsolationMode;
use crate::provider::Collect;

fn host_sandbox(state: &State) -> (LocalProvider, tokio::runtime::Runtime, String) {
    host_sandbox_with(state, CreateSpec::default())
}

/// A sandbox of `spec` without isolation, in a provider of its own.
fn host_sandbox_with(
    state: &State,
    mut spec: CreateSpec,
) -> (LocalProvider, tokio::runtime::Runtime, String) {
    let p = LocalProvider::new(state.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    spec.isolation.mode = IsolationMode::None;
    let id = rt.block_on(p.create(&spec)).unwrap().id;
    state
        .made
        .borrow_mut()
        .push((p.cgroups.clone(), id.clone()));
    (p, rt, id)
}

/// A state dir whose sandboxes' disks (tmpfs, when rfs runs as root)
/// are unmounted and whose cgroups are removed when the test ends,
/// however it ends: a test here destroys no sandbox, and `tempdir`
/// cannot remove a mount point.
struct State {
    dir: tempfile::TempDir,
    made: std::cell::RefCell<Vec<(CgroupMap, String)>>,
}

type CgroupMap = Arc<Mutex<HashMap<String, Arc<cgroup::Cgroup>>>>;

impl State {
    fn new() -> State {
        State {
            dir: tempfile::tempdir().unwrap(),
            made: Default::default(),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for (cgroups, id) in self.made.borrow_mut().drain(..) {
            if let Some(cg) = cgroups.lock().expect("cgroups lock").remove(&id) {
                let _ = cg.remove();
            }
        }
        let root = self.dir.path().join("local").join("sandboxes");
        for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            if disk::is_mounted(&e.path()) {
                let _ = disk::unmount(&e.path());
            }
        }
    }
}

#[test]
fn a_unit_test_sandbox_leaves_no_disk_mounted_and_no_cgroup() {
    let state = State::new();
    let (p, _rt, id) = host_sandbox(&state);
    let dir = p.dir(&id).unwrap();
    let cgroup_dirs: Vec<_> = p
        .cgroups
        .lock()
        .unwrap()
        .get(&id)
        .map(|cg| cg.parts().into_iter().map(|part| part.dir).collect())
        .unwrap_or_default();
    drop(state);
    assert!(!disk::is_mounted(&dir), "{} still mounted", dir.display());
    for d in cgroup_dirs {
        assert!(!d.exists(), "cgroup {} left behind", d.display());
    }
}

fn echo(p: &LocalProvider, rt: &tokio::runtime::Runtime, id: &str) -> ProviderResult<Vec<u8>> {
    let req = ExecRequest {
        argv: vec!["/bin/sh".into(), "-c".into(), "echo ok".into()],
        cwd: "/".into(),
        env: vec![],
        timeout: None,
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let mut sink = Collect::default();
    rt.block_on(p.exec(id, &req, &mut sink))?;
    Ok(sink.stdout)
}

/// What a command learns of its sandbox is kept in memory, but a
/// sandbox whose `meta.json` went away after a command ran (its
/// directory emptied by a step of an unisolated sandbox) is gone, as
/// when it was read from disk each time.
#[test]
fn a_sandbox_whose_metadata_vanished_after_a_command_is_not_found() {
    let state = State::new();
    let (p, rt, id) = host_sandbox(&state);
    assert_eq!(echo(&p, &rt, &id).unwrap(), b"ok\n");
    std::fs::remove_file(p.dir(&id).unwrap().join("meta.json")).unwrap();
    match echo(&p, &rt, &id) {
        Err(ProviderError::NotFound { id: gone }) => assert_eq!(gone, id),
        other => panic!("{other:?}"),
    }
}

/// Polled on a current-thread loop (as a step's command is, see
/// `runtime::exec_loop`), a command is still ended by its timeout and
/// by a cancellation from another thread, its whole group with it.
#[test]
fn timeout_and_cancel_from_another_thread_end_the_group_on_a_current_thread_loop() {
    let state = State::new();
    let (p, rt, id) = host_sandbox(&state);
    let run = |timeout, cancel: tokio_util::sync::CancellationToken| {
        let req = ExecRequest {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                "sleep 30 & echo $! ; wait".into(),
            ],
            cwd: "/".into(),
            env: vec![],
            timeout,
            cancel,
        };
        let mut sink = Collect::default();
        let o = rt.block_on(p.exec(&id, &req, &mut sink)).unwrap();
        let pid: i32 = String::from_utf8(sink.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (o, pid)
    };
    let gone = |pid: i32| {
        // The background `sleep` was in the command's group: killed
        // (and reaped by init, so it no longer exists or is a zombie).
        // SIGKILL is delivered asynchronously: on a loaded machine the
        // process can still be running for a moment after `kill`
        // returned, so wait a bounded time for it to die.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let dead = stat.is_empty()
                || stat
                    .rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            if dead || std::time::Instant::now() >= deadline {
                return dead;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let (o, pid) = run(
        Some(Duration::from_millis(300)),
        tokio_util::sync::CancellationToken::new(),
    );
    assert!(o.timed_out && !o.cancelled, "{o:?}");
    assert!(gone(pid), "sleep {pid} survived the timeout");
    let cancel = tokio_util::sync::CancellationToken::new();
    let c = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c.cancel();
    });
    let (o, pid) = run(None, cancel);
    t.join().unwrap();
    assert!(o.cancelled && !o.timed_out, "{o:?}");
    assert!(gone(pid), "sleep {pid} survived the cancellation");
}

/// A sandbox this process did not create is read from disk, and an
/// isolated one of another process is refused (not run on the host).
#[test]
fn an_isolated_sandbox_of_another_process_is_refused_not_run_on_the_host() {
    let state = State::new();
    let (p, rt, id) = host_sandbox(&state);
    let meta = p.dir(&id).unwrap().join("meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(&meta, text.replace("\"none\"", "\"namespaces\"")).unwrap();
    let other = LocalProvider::new(state.path());
    let e = echo(&other, &rt, &id).unwrap_err();
    assert!(
        e.to_string().contains("owned by another rfs process"),
        "{e}"
    );
}

/// Regression: a sandbox whose rfs was killed while creating it, after
/// its cgroups were made but before its `meta.json` named them, left an
/// empty cgroup behind (no sandbox recorded it). Its metadata is now
/// written first, so it is listed and destroyed, and its cgroups are
/// found by name.
#[test]
fn a_sandbox_killed_before_its_metadata_named_its_cgroups_leaves_none() {
    if !sys::host_root() {
        eprintln!("note: cgroups need root here; this test checks nothing without it");
        return;
    }
    let state = State::new();
    let mut spec = CreateSpec::default();
    spec.isolation
        .limits
        .limits
        .push(crate::provider::limits::Limit {
            kind: crate::provider::limits::LimitKind::Pids,
            value: 64,
            by: "test".into(),
        });
    let (p, rt, id) = host_sandbox_with(&state, spec);
    let dirs: Vec<_> = p.cgroups.lock().unwrap()[&id]
        .parts()
        .into_iter()
        .map(|part| part.dir)
        .collect();
    assert!(
        !dirs.is_empty() && dirs.iter().all(|d| d.is_dir()),
        "{dirs:?}"
    );
    // What such a sandbox's directory holds: metadata naming no cgroup.
    let meta_path = p.dir(&id).unwrap().join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["cgroups"] = serde_json::json!([]);
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    // Another rfs process (gc) finds it and destroys it.
    let other = LocalProvider::new(state.path());
    let listed = rt
        .block_on(other.list(&Default::default()))
        .unwrap()
        .into_iter()
        .any(|s| s.id == id);
    assert!(listed, "a sandbox with its metadata is listed");
    rt.block_on(other.destroy(&id)).unwrap();
    for d in dirs {
        assert!(!d.exists(), "cgroup {} left behind", d.display());
    }
}

/// The metadata a sandbox gets before its cgroups exist already names
/// them, so one whose rfs was killed right after is not entered without
/// its limits: with a cgroup missing, a command is refused.
#[test]
fn a_half_made_sandbox_names_its_cgroups_and_is_not_entered_without_them() {
    if !sys::host_root() {
        eprintln!("note: cgroups need root here; this test checks nothing without it");
        return;
    }
    let state = State::new();
    let mut spec = CreateSpec::default();
    spec.isolation
        .limits
        .limits
        .push(crate::provider::limits::Limit {
            kind: crate::provider::limits::LimitKind::Pids,
            value: 64,
            by: "test".into(),
        });
    let (p, rt, id) = host_sandbox_with(&state, spec);
    let made: Vec<_> = p.cgroups.lock().unwrap()[&id].parts();
    let planned = cgroup::Cgroup::planned(
        &id,
        &crate::provider::limits::Limits {
            pids: Some(64),
            ..Default::default()
        },
    );
    assert_eq!(planned, made, "the first metadata names what is made");
    // As if its rfs died before making them: another rfs refuses it.
    for part in &made {
        std::fs::remove_dir(&part.dir).unwrap();
    }
    let other = LocalProvider::new(state.path());
    let err = echo(&other, &rt, &id).unwrap_err().to_string();
    assert!(err.contains("cannot be enforced"), "{err}");
}
