//! A reached process limit under gVisor (#35): the limit counts gVisor's
//! own threads and stubs, so a fork bomb that reaches it takes the gVisor
//! sandbox down with the step. What must hold: the step ends with the
//! limit named, later steps of the run are refused with a clear error
//! (not run elsewhere), and nothing of the bomb is left on the host.

mod common;
use common::*;

#[test]
fn a_fork_bomb_under_gvisor_stops_at_the_limit_named_takes_its_sandbox_down_and_leaves_no_process()
{
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let m = 840_000 + std::process::id() % 9_999;
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"sandbox(#{{ isolation: "gvisor", pids: 160 }});
            let r = step("bomb", "i=0; while [ $i -lt 300 ]; do sleep {m} & i=$((i+1)); done; echo all-started", #{{ allow_failure: true, timeout: 60 }});
            print(`ok=${{r.ok}}`);
            step("after", "echo still-usable");"#
        ),
    );
    out.assert_code(1);
    assert!(out.stdout.contains("ok=false"), "{}", out.stdout);
    assert!(!out.stdout.contains("all-started"), "{}", out.stdout);
    let end = &out.entries("step.end")[0];
    assert_eq!(end["limit"], "process limit 160 reached", "{end}");
    assert!(!out.stdout.contains("still-usable"), "{}", out.stdout);
    assert!(
        out.stderr.contains("the gVisor sandbox ended"),
        "{}",
        out.stderr
    );
    // Nothing of its gVisor sandbox (whose processes name its id) nor of
    // the bomb is left on the host (arguments are NUL-separated).
    let id = out.sandbox_id();
    assert!(
        !process_running(&id),
        "a gVisor process of {id} outlived the run"
    );
    assert!(
        !process_running(&format!("sleep\0{m}")),
        "the fork bomb outlived its sandbox"
    );
    rfs.assert_no_leftovers();
}
