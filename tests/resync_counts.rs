//! Issue #32, item 3: an incremental re-sync ships exactly what differs
//! from what the sandbox holds, and its journal says so. A file a
//! previous re-sync shipped is not taken for one a step wrote: without
//! steps that change tracked files, `source.resync`'s counts and path
//! lists are `git diff --name-status` between the two commits; a tracked
//! file a step really changed is restored and counted as rewritten; and a
//! sandbox command that passes its deadline fails the re-sync, saying so.

mod common;
use common::*;

use serde_json::Value;

/// Commit everything with a committer time well in the past (the first
/// sync's files then carry a time long before its stamp).
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

/// `git diff --no-renames --name-status -z a b`: the A, M and T paths
/// (what a re-sync must ship) and the D paths (what it must remove), each
/// in byte order.
fn git_diff(repo: &Repo, a: &str, b: &str) -> (Vec<String>, Vec<String>) {
    let out = repo.git(&["diff", "--no-renames", "--name-status", "-z", a, b]);
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    let (mut ship, mut removed) = (vec![], vec![]);
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        match status {
            "A" | "M" | "T" => ship.push(path.to_owned()),
            "D" => removed.push(path.to_owned()),
            other => panic!("unexpected status {other} for {path}"),
        }
    }
    ship.sort();
    removed.sort();
    (ship, removed)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// The journal's `source.resync` from `a` to `b` says what `git diff`
/// says, with `rewritten` (tracked files steps changed) on top.
fn assert_resync_is_the_diff(repo: &Repo, r: &Value, rewritten: &[&str]) {
    let (a, b) = (
        r["from_commit"].as_str().unwrap(),
        r["commit"].as_str().unwrap(),
    );
    let (mut ship, removed) = git_diff(repo, a, b);
    ship.extend(rewritten.iter().map(|s| s.to_string()));
    ship.sort();
    assert_eq!(strings(&r["shipped_paths"]), ship, "shipped, {a}..{b}: {r}");
    assert_eq!(
        strings(&r["removed_paths"]),
        removed,
        "removed, {a}..{b}: {r}"
    );
    assert_eq!(
        strings(&r["rewritten_paths"]),
        rewritten,
        "rewritten, {a}..{b}: {r}"
    );
    assert_eq!(r["shipped"], ship.len(), "{r}");
    assert_eq!(r["removed"], removed.len(), "{r}");
    assert_eq!(r["rewritten"], rewritten.len(), "{r}");
    assert_eq!(
        r["archive_sha256_local"], r["archive_sha256_sandbox"],
        "{r}"
    );
}

/// A history of `n` commits after a first one, each changing a few files
/// in its own way (content, additions, deletions, the executable bit, a
/// symlink's target, a file becoming a directory); `commit` records each.
fn history(repo: &Repo, n: usize, commit: impl Fn(&Repo, &str) -> String) -> Vec<String> {
    for i in 0..40 {
        repo.write(&format!("src/m{}/f{i}.txt", i % 5), &format!("{i}\n"));
    }
    repo.write("run.sh", "#!/bin/sh\necho run\n");
    repo.symlink("current", "src/m0/f0.txt");
    repo.write("grows", "a file for now\n");
    repo.write("stable.txt", "never changes\n");
    let mut commits = vec![commit(repo, "c0")];
    for c in 1..=n {
        for k in 0..c % 4 + 2 {
            let i = (c * 7 + k * 3) % 40;
            repo.write(
                &format!("src/m{}/f{i}.txt", i % 5),
                &format!("{i} at {c}\n"),
            );
        }
        repo.write(&format!("added/a{c}.txt"), &format!("{c}\n"));
        if c % 2 == 0 {
            let _ = std::fs::remove_file(repo.path().join(format!("added/a{}.txt", c - 1)));
        }
        if c % 3 == 0 {
            let exec = c % 2 == 0;
            std::fs::set_permissions(
                repo.path().join("run.sh"),
                std::os::unix::fs::PermissionsExt::from_mode(if exec { 0o755 } else { 0o644 }),
            )
            .unwrap();
        }
        std::fs::remove_file(repo.path().join("current")).unwrap();
        repo.symlink("current", &format!("src/m0/f{}.txt", c % 8 * 5));
        if c == 4 {
            std::fs::remove_file(repo.path().join("grows")).unwrap();
            repo.write("grows/inner.txt", "now a directory\n");
        }
        commits.push(commit(repo, &format!("c{c}")));
    }
    commits
}

provider_tests! {
    // The report of issue #32: A -> B -> C where C only adds one file
    // shipped the eight files B had shipped again and journaled them as
    // rewritten. Each re-sync ships and removes exactly `git diff`.
    fn a_resync_after_a_resync_ships_only_the_diff(rfs: &Rfs) {
        let repo = Repo::new();
        for i in 0..20 {
            repo.write(&format!("d{}/f{i}.txt", i % 3), &format!("{i}\n"));
        }
        repo.write("gone.txt", "gone\n");
        let a = commit_old(&repo, "A");
        for i in 0..8 {
            repo.write(&format!("d{}/f{i}.txt", i % 3), &format!("{i} in B\n"));
        }
        std::fs::remove_file(repo.path().join("gone.txt")).unwrap();
        let b = commit_old(&repo, "B");
        repo.write("new.txt", "only this\n");
        let c = commit_old(&repo, "C");
        let out = rfs.run(repo.path(), &format!(r#"
            sync_source(#{{ rev: "{a}" }});
            step("build", "echo out > build.log");
            sync_source(#{{ rev: "{b}" }});
            sync_source(#{{ rev: "{c}" }});
            let r = step("check", "cat new.txt d1/f1.txt; test ! -e gone.txt; cat build.log");
            assert(r.stdout == "only this\n1 in B\nout\n");
        "#));
        out.assert_code(0);
        let rs = out.entries("source.resync");
        assert_eq!(rs.len(), 2, "{:?}", out.kinds());
        assert_eq!((rs[0]["from_commit"].as_str(), rs[0]["commit"].as_str()), (Some(&a[..]), Some(&b[..])));
        assert_eq!((rs[1]["from_commit"].as_str(), rs[1]["commit"].as_str()), (Some(&b[..]), Some(&c[..])));
        for r in &rs {
            assert_resync_is_the_diff(&repo, r, &[]);
        }
        assert_eq!(strings(&rs[1]["shipped_paths"]), ["new.txt"]);
        assert_eq!(rs[1]["removed"], 0);
        assert!(
            out.stderr.contains("1 file shipped, 0 removed"),
            "{}",
            out.stderr
        );
        rfs.assert_no_leftovers();
    }

    // A bisect walks back and forth: every re-sync of the walk ships what
    // `git diff` between the two commits names, however many re-syncs came
    // before; a step that leaves untracked outputs changes nothing of it,
    // one that rewrites a tracked file with its own content neither. A
    // tracked file a step really changed is restored and counted apart.
    fn a_bisect_like_walk_of_resyncs_ships_only_each_diff(rfs: &Rfs) {
        let repo = Repo::new();
        let commits = history(&repo, 8, |r, _| r.commit("c"));
        let walk = [8, 4, 6, 5, 2, 3, 7, 1];
        let mut script = format!("sync_source(#{{ rev: \"{}\" }});\n", commits[0]);
        for (k, i) in walk.iter().enumerate() {
            script.push_str(&format!(
                "step(\"build{k}\", \"echo {k} > out.log && mkdir -p target && echo o > target/o{k} && cp src/m1/f1.txt out.tmp && cat out.tmp > src/m1/f1.txt\");\n"
            ));
            if k == 3 {
                script.push_str("step(\"tamper\", \"echo tampered > stable.txt\");\n");
            }
            script.push_str(&format!("sync_source(#{{ rev: \"{}\" }});\n", commits[*i]));
            script.push_str(&format!(
                "let r = step(\"at{k}\", \"echo $RELAYFLOWS_SOURCE_COMMIT; cat stable.txt\");\nassert(r.stdout == \"{}\\nnever changes\\n\");\n",
                commits[*i]
            ));
        }
        let out = rfs.run(repo.path(), &script);
        out.assert_code(0);
        let rs = out.entries("source.resync");
        assert_eq!(rs.len(), walk.len(), "{:?}", out.kinds());
        let mut from = commits[0].clone();
        for (k, (r, i)) in rs.iter().zip(walk).enumerate() {
            assert_eq!(r["from_commit"], from.as_str());
            assert_eq!(r["commit"], commits[i].as_str());
            // stable.txt is the same in every commit; a step changed it
            // before the fourth re-sync.
            let rewritten: &[&str] = if k == 3 { &["stable.txt"] } else { &[] };
            assert_resync_is_the_diff(&repo, r, rewritten);
            from = commits[i].clone();
        }
        rfs.assert_no_leftovers();
    }
}

/// A provider whose re-sync commands pass their deadline (as a provider
/// reports an exec it stopped at its timeout); everything else goes to
/// the real provider. The deadlines asked for are kept.
struct PastDeadline {
    inner: std::sync::Arc<dyn rfs::provider::Provider>,
    asked: std::sync::Mutex<Vec<std::time::Duration>>,
}

#[async_trait::async_trait]
impl rfs::provider::Provider for PastDeadline {
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
        self.inner.upload(id, local, remote).await
    }
    async fn exec(
        &self,
        id: &str,
        req: &rfs::provider::ExecRequest,
        sink: &mut dyn rfs::provider::OutputSink,
    ) -> rfs::provider::ProviderResult<rfs::provider::ExecOutcome> {
        if req.argv.get(3).is_some_and(|a| a == "rfs-apply") {
            self.asked.lock().unwrap().extend(req.timeout);
            return Ok(rfs::provider::ExecOutcome {
                exit: None,
                signal: Some(9),
                timed_out: true,
                cancelled: false,
            });
        }
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

/// The 181 s apply of issue #32 had no bound but half an hour: each
/// command of a re-sync now has a deadline from what it handles, and one
/// that passes it fails the re-sync closed, naming the deadline.
#[test]
fn a_resync_command_past_its_deadline_fails_closed_naming_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("a.txt", "one\n");
    let a = commit_old(&repo, "A");
    repo.write("a.txt", "two\n");
    let b = commit_old(&repo, "B");
    let provider = std::sync::Arc::new(PastDeadline {
        inner: rfs.provider(),
        asked: Default::default(),
    });
    let out = rfs.run_embedded(
        repo.path(),
        rfs.prepare(&format!(
            r#"
            sync_source(#{{ rev: "{a}" }});
            sync_source(#{{ rev: "{b}" }});
            step("never", "true");
            "#
        )),
        provider.clone(),
        None,
    );
    out.assert_code(3);
    assert!(
        out.stderr
            .contains("did not finish within 60 s, its deadline"),
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("source.sync_failed").len(), 1);
    assert!(out.entries("step.start").is_empty());
    assert_eq!(
        *provider.asked.lock().unwrap(),
        [std::time::Duration::from_secs(60)],
        "a one-file delta in a small tree gets the minimum"
    );
    rfs.assert_no_leftovers();
}
