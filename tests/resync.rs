//! Re-sync: a later `sync_source()` that resolves to another commit pins
//! it in the same sandbox, shipping only what changed, verified inside the
//! sandbox; steps see and journal the pin they ran under; tracked files
//! become exactly the new commit while untracked outputs are kept; every
//! refusal of a first sync applies, and a failure after the sandbox was
//! touched destroys it.

mod common;
use common::*;

use std::io::Write as _;
use std::process::Stdio;

/// Commit everything with a committer time well in the past, as in a real
/// history: the synced files' modification time is the commit's time, and
/// one within the last second of a sync would (harmlessly, but visibly in
/// the counts) look written since.
fn commit_old(repo: &Repo, msg: &str) -> String {
    repo.git(&["add", "-A"]);
    let ok = std::process::Command::new("git")
        .args(["commit", "-q", "-m", msg])
        .current_dir(repo.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    repo.head()
}

/// Two commits that differ in every way a tree can: content, deletion,
/// addition, executable bit, symlink target, file -> directory, a removed
/// directory; plus an unchanged file.
fn two_commits() -> (Repo, String, String) {
    let repo = Repo::new();
    repo.write("a.txt", "one\n");
    repo.write("keep.txt", "keep\n");
    repo.write("gone.txt", "gone\n");
    repo.write("d/x.sh", "#!/bin/sh\n");
    repo.chmod_x("d/x.sh");
    repo.symlink("link", "a.txt");
    repo.write("t", "a file\n");
    repo.write("old/f", "f\n");
    let c1 = commit_old(&repo, "c1");
    repo.write("a.txt", "two\n");
    std::fs::remove_file(repo.path().join("gone.txt")).unwrap();
    repo.write("new/n.txt", "n\n");
    std::fs::set_permissions(
        repo.path().join("d/x.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    std::fs::remove_file(repo.path().join("link")).unwrap();
    repo.symlink("link", "keep.txt");
    std::fs::remove_file(repo.path().join("t")).unwrap();
    repo.write("t/inner", "i\n");
    std::fs::remove_dir_all(repo.path().join("old")).unwrap();
    let c2 = commit_old(&repo, "c2");
    (repo, c1, c2)
}

provider_tests! {
    // The rule a user walking commits needs: tracked paths are exactly the
    // new commit (a tracked file a step rewrote is restored, deleted ones
    // go), untracked outputs stay, shipped files are newer than outputs
    // built before, and each step sees and journals its pin.
    fn resync_makes_tracked_files_the_new_commit_and_keeps_untracked_outputs(rfs: &Rfs) {
        let (repo, c1, c2) = two_commits();
        let script = format!(
            r#"
            let a = sync_source(#{{ rev: "{c1}" }});
            step("build", "echo out > build.log && mkdir -p old && echo log > old/log && echo tampered > keep.txt && test \"$RELAYFLOWS_SOURCE_COMMIT\" = {c1} && sleep 1");
            let b = sync_source(#{{ rev: "{c2}" }});
            assert(b.commit == "{c2}");
            assert(b.workdir == a.workdir);
            assert(a.files == 8 && b.files == 7);
            step("check", `set -e
                test "$RELAYFLOWS_SOURCE_COMMIT" = {c2}
                test "$(cat a.txt)" = two
                test "$(cat keep.txt)" = keep
                test ! -e gone.txt
                test ! -x d/x.sh
                test "$(readlink link)" = keep.txt
                test "$(cat new/n.txt)" = n
                test "$(cat t/inner)" = i
                test ! -e old/f
                test "$(cat old/log)" = log
                test "$(cat build.log)" = out
                test a.txt -nt build.log`);
            "#
        );
        let out = rfs.run(repo.path(), &script);
        out.assert_code(0);
        let rs = out.entries("source.resync");
        assert_eq!(rs.len(), 1, "{:?}", out.kinds());
        let r = &rs[0];
        assert_eq!(r["from_commit"], c1.as_str());
        assert_eq!(r["commit"], c2.as_str());
        assert_eq!(r["added"], 2, "{r}"); // new/n.txt, t/inner
        assert_eq!(r["deleted"], 3, "{r}"); // gone.txt, t, old/f
        assert_eq!(r["modified"], 3, "{r}"); // a.txt, d/x.sh, link
        assert_eq!(r["rewritten"], 1, "{r}"); // keep.txt
        assert_eq!(r["kept_untracked"], 2, "{r}"); // build.log, old/log
        assert_eq!(r["archive_sha256_local"], r["archive_sha256_sandbox"]);
        let pins: Vec<_> = out.entries("source.pin").iter().map(|p| p["commit"].clone()).collect();
        assert_eq!(pins, [c1.as_str(), c2.as_str()]);
        let starts: Vec<_> = out
            .entries("step.start")
            .iter()
            .map(|s| (s["commit"].clone(), s["tree_digest"].is_string()))
            .collect();
        assert_eq!(starts, [(c1.as_str().into(), true), (c2.as_str().into(), true)]);
        assert_eq!(out.entries("placement").len(), 1, "one sandbox for both commits");
        let ev = out.evidence();
        assert!(ev.contains("re-synced") && ev.contains(&c2), "{ev}");
        rfs.assert_no_leftovers();
    }

    // Only what changed travels: one changed file out of many ships one
    // entry.
    fn resync_after_a_one_file_change_ships_one_file(rfs: &Rfs) {
        let repo = Repo::new();
        for i in 0..200 {
            repo.write(&format!("src/m{}/f{i}.txt", i % 10), &format!("{i}\n"));
        }
        let c1 = commit_old(&repo, "many");
        repo.write("src/m3/f13.txt", "changed\n");
        let c2 = commit_old(&repo, "one");
        let out = rfs.run(repo.path(), &format!(r#"
            sync_source(#{{ rev: "{c1}" }});
            sync_source(#{{ rev: "{c2}" }});
            let r = step("cat", "cat src/m3/f13.txt");
            assert(r.stdout == "changed\n");
        "#));
        out.assert_code(0);
        let r = &out.entries("source.resync")[0];
        assert_eq!(r["shipped"], 1, "{r}");
        assert_eq!(r["removed"], 0, "{r}"); // nothing deleted: the changed file is shipped (issue #32)
        assert_eq!(r["contents_compared"], 1, "{r}");
        assert_eq!(r["entries_compared"], out.entries("source.verify")[0]["entries_compared"]);
        rfs.assert_no_leftovers();
    }

    // The same commit again is the same pin and ships nothing.
    fn sync_source_at_the_same_commit_returns_the_same_pin(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            let a = sync_source();
            let b = sync_source(#{ rev: "HEAD", allow_dirty: true });
            assert(a == b);
        "#);
        out.assert_code(0);
        assert!(out.entries("source.resync").is_empty());
        assert_eq!(out.entries("source.pin").len(), 1);
        rfs.assert_no_leftovers();
    }

    // A re-sync is refused like a first sync (dirty tree, unknown
    // revision, malformed rev), before the sandbox is touched: the old pin
    // stays in force and the run can go on.
    fn a_refused_resync_keeps_the_old_pin(rfs: &Rfs) {
        let (repo, c1, _c2) = two_commits();
        repo.write("a.txt", "dirty\n");
        let out = rfs.run(repo.path(), &format!(r#"
            let a = sync_source(#{{ rev: "HEAD", allow_dirty: true }});
            let dirty = "";
            try {{ sync_source(#{{ rev: "{c1}" }}); }} catch (e) {{ dirty = e; }}
            let missing = "";
            try {{ sync_source(#{{ rev: "no-such-branch" }}); }} catch (e) {{ missing = e; }}
            let bad = "";
            try {{ sync_source(#{{ rev: "--output=x" }}); }} catch (e) {{ bad = e; }}
            print(`DIRTY ${{dirty}}`);
            print(`MISSING ${{missing}}`);
            print(`BAD ${{bad}}`);
            let r = step("pin", "echo $RELAYFLOWS_SOURCE_COMMIT; cat a.txt");
            assert(r.stdout == a.commit + "\ntwo\n");
        "#));
        out.assert_code(0);
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(text.contains("DIRTY") && text.contains("a.txt") && text.contains("allow_dirty"), "{text}");
        assert!(text.contains("does not resolve to a commit"), "{text}");
        assert!(text.contains("is not a revision"), "{text}");
        assert!(out.entries("source.resync").is_empty());
        assert_eq!(out.entries("source.pin").len(), 1);
        rfs.assert_no_leftovers();
    }

    // A synced root a step removed cannot be re-synced: the run is
    // refused, the failure journaled and the sandbox destroyed.
    fn resync_of_a_vanished_root_fails_closed(rfs: &Rfs) {
        let (repo, c1, c2) = two_commits();
        let out = rfs.run(repo.path(), &format!(r#"
            sync_source(#{{ rev: "{c1}" }});
            step("wipe", "cd / && rm -rf \"$RELAYFLOWS_SOURCE_WORKDIR\"");
            sync_source(#{{ rev: "{c2}" }});
            step("never", "true");
        "#));
        out.assert_code(3);
        assert!(out.stderr.contains("re-sync of sandbox"), "{}", out.stderr);
        assert!(out.stderr.contains("is gone from the sandbox"), "{}", out.stderr);
        assert_eq!(out.entries("source.sync_failed").len(), 1);
        assert_eq!(out.entries("step.start").len(), 1, "nothing ran after the failure");
        rfs.assert_no_leftovers();
    }

    // The REPL flow: sync, the user commits a change in another terminal,
    // `sync_source()` again pins the new HEAD in the same sandbox.
    fn repl_sync_source_after_a_commit_pins_the_new_head(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("src.txt", "before\n");
        let c1 = commit_old(&repo, "c1");
        let out_dir = rfs.state.path().join("repl-out");
        let mut child = rfs
            .cmd(repo.path())
            .args(["repl", "--out"])
            .arg(&out_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"let a = sync_source();\n").unwrap();
        wait_for_journal(&out_dir, "source.pin");
        repo.write("src.txt", "after\n");
        let c2 = commit_old(&repo, "c2");
        assert_ne!(c1, c2);
        stdin
            .write_all(b"let b = sync_source();\nprint(`moved=${a.commit != b.commit}`);\nstep(\"cat\", \"cat src.txt; echo $RELAYFLOWS_SOURCE_COMMIT\").stdout\n")
            .unwrap();
        drop(stdin);
        let out = finish(child.wait_with_output().unwrap(), out_dir);
        out.assert_code(0);
        assert!(out.stdout.contains("moved=true"), "{}", out.stdout);
        assert!(out.stdout.contains("after") && out.stdout.contains(&c2), "{}", out.stdout);
        assert_eq!(out.entries("source.resync")[0]["commit"], c2.as_str());
        assert_eq!(out.entries("placement").len(), 1);
        rfs.assert_no_leftovers();
    }

    // Providers that cannot stream get the delta as an uploaded file; the
    // result is the same tree.
    fn resync_through_an_uploaded_file_arrives_verified(rfs: &Rfs) {
        let (repo, c1, c2) = two_commits();
        let out = run_file_only(rfs, &repo, &format!(r#"
            sync_source(#{{ rev: "{c1}" }});
            sync_source(#{{ rev: "{c2}" }});
            step("check", "test \"$(cat a.txt)\" = two && test \"$(readlink link)\" = keep.txt && test ! -e gone.txt && ! ls -a .. | grep -q rfs-resync");
        "#), false);
        out.assert_code(0);
        assert_eq!(out.entries("source.resync")[0]["commit"], c2.as_str());
        assert!(out.entries("source.resync")[0]["upload_ms"].is_u64());
        rfs.assert_no_leftovers();
    }

    // A delta archive corrupted in transit is a verification mismatch: the
    // re-sync is refused and the sandbox destroyed before anything else runs.
    fn a_corrupted_delta_archive_is_refused_and_the_sandbox_destroyed(rfs: &Rfs) {
        let (repo, c1, c2) = two_commits();
        let out = run_file_only(rfs, &repo, &format!(r#"
            sync_source(#{{ rev: "{c1}" }});
            sync_source(#{{ rev: "{c2}" }});
            step("never", "true");
        "#), true);
        out.assert_code(3);
        assert!(out.stderr.contains("the delta archive arrived corrupted"), "{}", out.stderr);
        assert_eq!(out.entries("source.sync_failed").len(), 1);
        assert!(out.entries("step.start").is_empty());
        assert_eq!(out.entries("cleanup.verified").len(), 1, "{:?}", out.kinds());
        rfs.assert_no_leftovers();
    }
}

/// A replay of a run that walked commits by full id walks the same
/// commits (a full id names one commit whatever HEAD is now); the
/// replayed steps match.
#[test]
fn replay_of_a_commit_walk_resyncs_the_same_commits() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, c1, c2) = two_commits();
    let original = rfs.run(
        repo.path(),
        &format!(
            r#"
            for c in ["{c1}", "{c2}"] {{
                sync_source(#{{ rev: c }});
                step("show", "cat a.txt; echo $RELAYFLOWS_SOURCE_COMMIT");
            }}
            "#
        ),
    );
    original.assert_code(0);
    repo.write("a.txt", "moved on\n");
    commit_old(&repo, "c3");
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let o = rfs
        .cmd(repo.path())
        .arg("replay")
        .arg(&original.out_dir)
        .arg("--out")
        .arg(&out_dir)
        .arg("--strict")
        .output()
        .expect("rfs runs");
    let r = finish(o, out_dir);
    r.assert_code(0);
    let pins: Vec<_> = r
        .entries("source.pin")
        .iter()
        .map(|p| p["commit"].clone())
        .collect();
    assert_eq!(pins, [c1.as_str(), c2.as_str()]);
    assert_eq!(r.entries("source.resync").len(), 1);
    assert!(r.stdout.contains("all 2 steps match"), "{}", r.stdout);
    rfs.assert_no_leftovers();
}

/// A provider that cannot stream (like a remote one): the delta archive is
/// uploaded as a file; with `corrupt`, one byte of every upload is changed
/// in the sandbox.
struct FileOnly {
    inner: std::sync::Arc<dyn rfs::provider::Provider>,
    corrupt: bool,
}

#[async_trait::async_trait]
impl rfs::provider::Provider for FileOnly {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn isolation(
        &self,
        req: &rfs::provider::isolation::IsolationRequest,
    ) -> Result<rfs::provider::isolation::IsolationInForce, rfs::provider::isolation::IsolationError>
    {
        self.inner.isolation(req)
    }
    async fn preflight(&self) -> rfs::provider::ProviderResult<()> {
        self.inner.preflight().await
    }
    async fn create(
        &self,
        spec: &rfs::provider::CreateSpec,
    ) -> rfs::provider::ProviderResult<rfs::provider::SandboxInfo> {
        self.inner.create(spec).await
    }
    async fn get(
        &self,
        id: &str,
    ) -> rfs::provider::ProviderResult<Option<rfs::provider::SandboxInfo>> {
        self.inner.get(id).await
    }
    async fn list(
        &self,
        labels: &rfs::provider::Labels,
    ) -> rfs::provider::ProviderResult<Vec<rfs::provider::SandboxInfo>> {
        self.inner.list(labels).await
    }
    async fn upload(
        &self,
        id: &str,
        local: &std::path::Path,
        remote: &str,
    ) -> rfs::provider::ProviderResult<()> {
        self.inner.upload(id, local, remote).await?;
        if self.corrupt && remote.contains("resync") {
            corrupt_uploaded_byte(self.inner.as_ref(), id, remote, 600).await?;
        }
        Ok(())
    }
    async fn exec(
        &self,
        id: &str,
        req: &rfs::provider::ExecRequest,
        sink: &mut dyn rfs::provider::OutputSink,
    ) -> rfs::provider::ProviderResult<rfs::provider::ExecOutcome> {
        self.inner.exec(id, req, sink).await
    }
    async fn open_pty(
        &self,
        id: &str,
        req: &rfs::provider::PtyRequest,
    ) -> rfs::provider::ProviderResult<rfs::provider::PtyChannel> {
        self.inner.open_pty(id, req).await
    }
    async fn destroy(&self, id: &str) -> rfs::provider::ProviderResult<()> {
        self.inner.destroy(id).await
    }
}

fn run_file_only(rfs: &Rfs, repo: &Repo, script: &str, corrupt: bool) -> RunOut {
    let provider = std::sync::Arc::new(FileOnly {
        inner: rfs.provider(),
        corrupt,
    });
    rfs.run_embedded(repo.path(), rfs.prepare(script), provider, None)
}

/// Issue #43: a step replaced the container's `/bin/sh` (which runs a
/// re-sync's listing of the synced root) with a program that writes
/// without end. The re-sync fails naming the bound rfs reads to, quickly,
/// instead of holding the endless stream in rfs's memory.
#[test]
fn a_replaced_docker_shell_writing_without_end_fails_a_resync_at_a_named_bound() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let (repo, c1, c2) = two_commits();
    let script = format!(
        r#"
sync_source(#{{ rev: "{c1}" }});
step("replace sh", "printf '#!/bin/busybox yes\n' > /tmp/sh && chmod 755 /tmp/sh && mv -f /tmp/sh /bin/sh");
sync_source(#{{ rev: "{c2}" }});
"#
    );
    let started = std::time::Instant::now();
    let (child, out_dir) = rfs.spawn(repo.path(), &script);
    let out = wait_bounded(child, out_dir);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("bytes on its stdout, the most rfs reads from it"),
        "{}",
        out.stderr
    );
    eprintln!("{:?}\n{}", started.elapsed(), out.stderr);
    rfs.assert_no_leftovers();
}
