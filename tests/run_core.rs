//! The core contract on every provider: one shared sandbox, pinned source,
//! bound env, cwd mapping, failures and cleanup — observed from outside.

mod common;
use common::*;

const REPRODUCER: &str = include_str!("../examples/two-step-reproducer.rhai");

provider_tests! {
    fn reproducer_passes_and_cleans_up(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), REPRODUCER);
        out.assert_code(0);
        let id = out.sandbox_id();
        // Both steps saw the same sandbox id, equal to the journal's.
        assert!(out.stdout.contains(&format!("[probe-continuity] {id}")), "{}", out.stdout);
        let pin = &out.entries("source.pin")[0];
        assert_eq!(pin["commit"], repo.head());
        assert_eq!(pin["tree_digest"], repo.tree());
        let attempts = out.entries("step.attempt");
        assert_eq!(attempts.len(), 2);
        assert!(attempts.iter().all(|a| a["sandbox_id"] == id.as_str()));
        let cleanup = &out.entries("cleanup.verified")[0];
        assert_eq!(cleanup["sandbox_id"], id.as_str());
        assert_eq!(cleanup["get_by_id"], "not found");
        assert_eq!(cleanup["in_inventory"], false);
        assert!(out.evidence().contains(&id));
        rfs.assert_no_leftovers();
    }

    fn sandbox_id_matches_labels_and_every_binding(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            let sb = sandbox();
            let src = sync_source();
            let r = step("env", "echo \"$RELAYFLOWS_SANDBOX_ID|$RELAYFLOWS_SOURCE_COMMIT|$RELAYFLOWS_TREE_DIGEST|$RELAYFLOWS_SOURCE_WORKDIR|$RELAYFLOWS_RUN_ID|$(pwd)\"");
            let want = `${sb.id}|${src.commit}|${src.tree_digest}|${src.workdir}|`;
            assert(r.stdout.starts_with(want), r.stdout + " vs " + want);
        "#);
        out.assert_code(0);
        let placement = &out.entries("placement")[0];
        let labels = &placement["labels"];
        assert_eq!(labels["relayflows/source-commit"], repo.head());
        assert_eq!(labels["relayflows/tree-digest"], repo.tree());
        assert_eq!(labels["relayflows/created-by"], "rfs");
        let run_id = out.entries("run.start")[0]["run_id"].clone();
        assert_eq!(labels["relayflows/run-id"], run_id);
        assert!(labels["relayflows/owner-pid"].as_str().unwrap().parse::<u32>().is_ok());
        // Placement is journaled before the first step starts.
        let kinds = out.kinds();
        let place = kinds.iter().position(|k| k == "placement").unwrap();
        let step = kinds.iter().position(|k| k == "step.start").unwrap();
        assert!(place < step);
        // The step ran in the synced root (run from the repository root).
        let line = out.stdout.lines().find(|l| l.starts_with("[env] ")).unwrap();
        let fields: Vec<&str> = line.trim_start_matches("[env] ").split('|').collect();
        assert_eq!(fields[4], run_id.as_str().unwrap());
        assert_eq!(fields[5], fields[3], "cwd is the synced root");
        rfs.assert_no_leftovers();
    }

    fn binding_env_cannot_be_overridden(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            let r = step("spoof", "echo $RELAYFLOWS_SANDBOX_ID", #{ env: #{ RELAYFLOWS_SANDBOX_ID: "fake", OTHER: "x" } });
            assert(r.stdout.trimmed() == sandbox().id, r.stdout);
        "#);
        out.assert_code(0);
        rfs.assert_no_leftovers();
    }

    fn steps_share_one_tree_and_retries_reuse_the_sandbox(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            sync_source();
            step("write", "echo one > shared.txt");
            let r = step("flaky", "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo $RELAYFLOWS_SANDBOX_ID >> ids; [ $n -ge 3 ]", #{ retries: 2 });
            assert(r.attempts == 3, `attempts ${r.attempts}`);
            let ids = step("read", "cat shared.txt; sort -u ids | wc -l");
            assert(ids.stdout.contains("one"));
            assert(ids.stdout.trimmed().ends_with("1"), ids.stdout);
        "#);
        out.assert_code(0);
        let attempts: Vec<_> = out.entries("step.attempt").into_iter().filter(|a| a["name"] == "flaky").collect();
        assert_eq!(attempts.len(), 3);
        assert_eq!(out.entries("placement").len(), 1, "one sandbox for the whole run");
        rfs.assert_no_leftovers();
    }

    fn failing_step_fails_the_run_at_its_script_line(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), "sync_source();\nlet ok = step(\"ok\", \"true\");\nstep(\"boom\", \"echo bad >&2; exit 7\");\nstep(\"never\", \"true\");\n");
        out.assert_code(1);
        assert!(out.stderr.contains("step `boom` failed: exit 7"), "{}", out.stderr);
        // miette points at line 3, the call site.
        assert!(out.stderr.contains("3 │ step(\"boom\""), "{}", out.stderr);
        assert!(out.entries("step.start").iter().all(|s| s["name"] != "never"));
        assert_eq!(out.entries("run.end")[0]["outcome"], "failed");
        assert!(!out.entries("cleanup.verified").is_empty());
        rfs.assert_no_leftovers();
    }

    fn step_failure_is_catchable_and_allow_failure_returns_exit(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            let caught = false;
            try { step("boom", "exit 3"); } catch (e) { caught = e.contains("exit 3"); }
            assert(caught, "step failure is catchable");
            let r = step("soft", "echo out; echo err >&2; exit 4", #{ allow_failure: true });
            assert(r.exit == 4 && !r.ok && r.stdout == "out\n" && r.stderr == "err\n", `${r}`);
        "#);
        out.assert_code(0);
        rfs.assert_no_leftovers();
    }

    fn timeout_kills_the_whole_process_group(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            let r = step("slow", "sleep 300 & echo started; sleep 301", #{ timeout: 1, allow_failure: true });
            assert(r.timed_out && !r.ok, `${r}`);
            let ps = step("ps", "ps -ef 2>/dev/null || ps");
            assert(!ps.stdout.contains("sleep 300"), ps.stdout);
            assert(!ps.stdout.contains("sleep 301"), ps.stdout);
        "#);
        out.assert_code(0);
        let a = &out.entries("step.attempt")[0];
        assert_eq!(a["timed_out"], true);
        rfs.assert_no_leftovers();
    }

    fn cwd_defaults_to_the_invoking_dir_mapped_into_the_synced_root(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("sub/dir/file.txt", "x");
        repo.write("..cache/keep", "y");
        repo.commit("dirs");
        let out = rfs.run(&repo.path().join("sub/dir"), r#"
            let src = sync_source();
            let r = step("pwd", "pwd; ls");
            assert(r.stdout.contains(src.workdir + "/sub/dir\n"), r.stdout);
            assert(r.stdout.contains("file.txt"), r.stdout);
            let c = step("dotdot-name", "pwd", #{ cwd: "..cache" });
            assert(c.stdout.trimmed().ends_with("/..cache"), c.stdout);
            let up = step("up", "pwd", #{ cwd: "sub/dir/../.." });
            assert(up.stdout.trimmed() == src.workdir, up.stdout);
        "#);
        out.assert_code(0);
        rfs.assert_no_leftovers();
    }

    fn missing_cwd_is_a_clear_refusal_naming_path_and_sandbox(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"step("x", "echo RAN", #{ cwd: "no/such/dir" });"#);
        out.assert_code(3);
        let id = out.sandbox_id();
        assert!(out.stderr.contains("`no/such/dir`") && out.stderr.contains("does not exist in sandbox") && out.stderr.contains(&id), "{}", out.stderr);
        assert!(!out.stdout.contains("RAN"));
        rfs.assert_no_leftovers();
    }

    fn symlink_created_at_run_time_cannot_smuggle_the_cwd_out(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            step("plant", "ln -s /etc evil && ln -s .. up");
            step("escape", "echo RAN", #{ cwd: "evil" });
        "#);
        out.assert_code(3);
        assert!(out.stderr.contains("outside the synced root"), "{}", out.stderr);
        assert!(!out.stdout.contains("RAN"));
        rfs.assert_no_leftovers();
    }

    #[not_under_gvisor = "creates no sandbox: nothing of it runs under gVisor"]
    fn print_goes_to_console_and_journal(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"print("hello from the script"); debug("dbg");"#);
        out.assert_code(0);
        assert!(out.stdout.contains("hello from the script"));
        assert_eq!(out.entries("print")[0]["text"], "hello from the script");
        assert_eq!(out.entries("cleanup.none").len(), 1, "no sandbox was needed");
        rfs.assert_no_leftovers();
    }

    fn large_output_is_bounded_in_memory_but_complete_in_the_log(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run_with(repo.path(), r#"
            let r = step("big", "yes 0123456789 | head -c 2000000");
            assert(r.stdout.len() < 1200000, `captured ${r.stdout.len()}`);
            assert(r.stdout.contains("bytes elided"));
        "#, &["--quiet"]);
        out.assert_code(0);
        let log = std::fs::metadata(out.out_dir.join("steps/001-big.stdout.log")).unwrap();
        assert_eq!(log.len(), 2_000_000);
        rfs.assert_no_leftovers();
    }

    fn ctrl_c_mid_step_kills_the_step_and_still_cleans_up(rfs: &Rfs) {
        let repo = Repo::new();
        let (child, out_dir) = rfs.spawn(repo.path(), r#"sync_source(); step("long", "sleep 3141"); step("never", "true");"#);
        wait_for_journal(&out_dir, "step.start");
        // Give the provider a moment to actually start the command.
        std::thread::sleep(std::time::Duration::from_millis(300));
        sigint(&child);
        let out = finish(child.wait_with_output().unwrap(), out_dir);
        out.assert_code(130);
        assert_eq!(out.entries("run.end")[0]["outcome"], "interrupted");
        assert!(out.entries("step.start").iter().all(|s| s["name"] != "never"));
        assert_eq!(out.entries("cleanup.verified")[0]["sandbox_id"], out.sandbox_id().as_str());
        assert!(!process_running("sleep\x003141"), "the step's process survived Ctrl-C");
        rfs.assert_no_leftovers();
    }
}
