//! Closing the terminal rfs runs in (issue #20, class 8): under tmux,
//! `kill-session` hangs up the REPL's terminal while it is idle, with its
//! stderr on that terminal. Writes to the dead terminal must not stop the
//! cleanup: the sandbox is destroyed and verified gone, and the journal
//! ends with `run.end`.

mod common;
use common::*;

use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("tmux runs")
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn journal_has(out_dir: &std::path::Path, kind: &str) -> bool {
    std::fs::read_to_string(out_dir.join("journal.jsonl"))
        .is_ok_and(|t| t.contains(&format!("\"kind\":\"{kind}\"")))
}

#[test]
fn killing_the_repl_terminal_tears_the_sandbox_down() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out_dir = rfs.state.path().join("hangup-out");
    let name = format!("rfs-hangup-{}", uuid_like());
    let command = format!(
        "cd '{}' && RFS_STATE_DIR='{}' RELAYFLOWS_SANDBOX_PROVIDER=local exec '{}' repl --out '{}'",
        repo.path().display(),
        rfs.state.path().display(),
        rfs_bin().display(),
        out_dir.display()
    );
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "120",
        "-y",
        "40",
        &command,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !last.contains("\nrfs>") {
        assert!(
            Instant::now() < deadline,
            "no prompt; the pane shows:\n{last}"
        );
        std::thread::sleep(Duration::from_millis(50));
        let cap = tmux(&["capture-pane", "-p", "-t", &name]);
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&cap.stdout),
            String::from_utf8_lossy(&cap.stderr)
        );
    }
    // `-l`: literally (a trailing `;` would be tmux's command separator).
    tmux(&["send-keys", "-t", &name, "-l", "step(\"made\", \"true\");"]);
    tmux(&["send-keys", "-t", &name, "Enter"]);
    wait_until("the step's end", || journal_has(&out_dir, "step.end"));
    // Idle at the prompt again, then the terminal goes away.
    wait_until("the prompt after the step", || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &name]).stdout)
            .matches("rfs>")
            .count()
            >= 2
    });
    tmux(&["kill-session", "-t", &name]);
    wait_until("run.end in the journal", || {
        journal_has(&out_dir, "run.end")
    });
    assert!(
        journal_has(&out_dir, "cleanup.verified"),
        "the sandbox was not torn down"
    );
    rfs.assert_no_leftovers();
}
