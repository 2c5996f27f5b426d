//! Rootless gVisor (#35): rfs run by an unprivileged user starts its
//! gVisor sandbox with `runsc --rootless`, inside the namespaces
//! sandbox's user and network namespaces, so the sandbox still has only
//! its loopback and rfs's egress proxy (not the host's network, which a
//! plain `runsc --rootless --network=host` would give it), terminals and
//! timeouts work, and nothing of runsc is left. Skipped (one line) where
//! runsc is not usable, unless RFS_REQUIRE_GVISOR=1.

mod common;
use common::*;
#[path = "common/netns.rs"]
mod netns;
use netns::*;
#[path = "common/unprivileged.rs"]
mod unprivileged;
use unprivileged::*;

#[test]
fn rootless_gvisor_keeps_the_sandboxs_network_namespace_terminals_and_timeouts_and_leaves_nothing()
{
    if gvisor_missing() {
        return;
    }
    // A server on the host's own loopback: the sandbox's 127.0.0.1 is
    // its own, so a connection there must not reach it.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let host_port = host.local_addr().unwrap().port();
    let public = TestNet::new("203.0.113", "hello from the public test server");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sync_source();
        step("who", "id -u; uname -r; cat reproducer-marker.txt; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
        step("host-loopback", "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {host_port}), 3)' 2>&1 | tail -1");
        step("proxied", "curl -sS -m 5 {u}");
        let t = attach("sh");
        t.send("echo screen-$((6*7))\n");
        assert_screen(t, "screen-42");
        t.close();
        step("slow", "sleep 30", #{{ timeout: 1, allow_failure: true }});
        print("after slow");"#,
        u = public.url()
    );
    let out = run_unprivileged(&rfs, repo.path(), &script, &["--isolation", "gvisor"]);
    out.assert_code(0);
    let fact = &out.entries("placement")[0]["isolation"];
    assert_eq!(fact["mode"], "gvisor", "{fact}");
    let reason = fact["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("rootless, as uid {}", unprivileged_uid())),
        "{fact}"
    );
    let who = lines(&out, "who");
    assert_eq!(who[0], "0", "the step is root inside gVisor: {who:?}");
    assert_ne!(
        who[1],
        String::from_utf8(
            std::process::Command::new("uname")
                .arg("-r")
                .output()
                .unwrap()
                .stdout
        )
        .unwrap()
        .trim(),
        "gVisor's kernel, not the host's: {who:?}"
    );
    assert_eq!(who[2], "marker", "{who:?}");
    assert_eq!(&who[3..], ["lo"], "only the sandbox's loopback: {who:?}");
    let refused = lines(&out, "host-loopback").join("\n");
    assert!(
        refused.contains("ConnectionRefusedError"),
        "the host's loopback is not the sandbox's: {refused}"
    );
    assert!(
        matches!(host.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's server was reached from the sandbox"
    );
    assert_eq!(
        lines(&out, "proxied"),
        ["hello from the public test server"]
    );
    assert_eq!(out.entries("net.connect").len(), 1);
    assert!(out.stdout.contains("after slow"), "{}", out.stdout);
    let console = format!("{}{}", out.stdout, out.stderr);
    assert!(console.contains("timed out after 1s"), "{console}");
    let runsc_state = rfs.state.path().join("local/runsc");
    let left: Vec<_> = std::fs::read_dir(&runsc_state)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "runsc still knows {left:?}");
    assert!(
        !process_running(&runsc_state.display().to_string()),
        "a runsc process of the run outlived it"
    );
    rfs.assert_no_leftovers();
}

/// `rfs doctor` run by an unprivileged user says gVisor works here
/// rootless, as that user: it starts a real throwaway gVisor sandbox.
#[test]
fn doctor_says_gvisor_works_rootless_as_the_user_running_rfs() {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs_unprivileged(&rfs, repo.path(), &["doctor".as_ref()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let local = text.lines().find(|l| l.starts_with("local")).unwrap_or("");
    assert!(
        local.contains("gVisor works here")
            && local.contains(&format!("(rootless, as uid {})", unprivileged_uid())),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
