//! What a repository may choose (#44, finding 5): a committed `rfs.toml`
//! (or a script) that picks `provider = "docker"` or an `image` only
//! narrows what the person running rfs set. The docker container holds
//! none of the engine's default capabilities the namespaces sandbox never
//! gives, and can gain none; Docker's unfiltered bridge needs the
//! person's `--allow-host-network` and is said on the console and never
//! described as refusing anything; an image a repository chose does not
//! hand the credentials it bakes into its environment to the steps.
//!
//! Real engine only; a daemon reached over TCP (a forwarder of the test's
//! own to the local socket) is where rfs cannot place its proxy.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::Command;

fn repo_choosing(toml: &str) -> Repo {
    let repo = Repo::new();
    repo.write("rfs.toml", toml);
    repo.commit("the repository's choices");
    repo
}

#[test]
fn a_repository_choosing_docker_gets_no_raw_socket_device_node_or_gainable_capability() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = repo_choosing("provider = \"docker\"\n");
    let out = rfs.run(
        repo.path(),
        r#"let r = step("caps", "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status; mknod /tmp/null c 1 3 && echo made-a-device || echo no-device");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    let said = |key: &str| {
        out.stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("[caps] ")?.strip_prefix(key))
            .map(str::trim)
            .unwrap_or_else(|| panic!("{key} not printed: {}", out.stdout))
            .to_owned()
    };
    // The test image runs as root: what root keeps is the whole question.
    assert!(out.stdout.contains("[caps] 0\n"), "{}", out.stdout);
    // CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID: bits 0,1,3-7.
    assert_eq!(said("CapBnd:"), "00000000000000fb", "{}", out.stdout);
    assert_eq!(said("CapEff:"), "00000000000000fb", "{}", out.stdout);
    assert_eq!(said("NoNewPrivs:"), "1", "{}", out.stdout);
    assert!(out.stdout.contains("no-device"), "{}", out.stdout);
    rfs.assert_no_leftovers();
}

/// A TCP listener forwarding each connection to the local engine's
/// socket (both ways, half-closes included): a daemon rfs reaches as
/// `tcp://`, whose containers' namespaces it does not enter.
fn daemon_over_tcp() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let Ok(unix) = UnixStream::connect("/var/run/docker.sock") else {
                continue;
            };
            let (mut tcp_r, mut unix_w) = (conn.try_clone().unwrap(), unix.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut tcp_r, &mut unix_w);
                let _ = unix_w.shutdown(Shutdown::Write);
            });
            let (mut unix_r, mut tcp_w) = (unix, conn);
            std::thread::spawn(move || {
                let mut buf = [0u8; 64 * 1024];
                loop {
                    match unix_r.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if tcp_w.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = TcpStream::shutdown(&tcp_w, Shutdown::Write);
            });
        }
    });
    format!("tcp://127.0.0.1:{port}")
}

#[test]
fn a_repositorys_docker_choice_gets_no_unfiltered_bridge_without_the_persons_flag() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = repo_choosing("provider = \"docker\"\n");
    let host = daemon_over_tcp();
    let env = [("DOCKER_HOST", host.as_str())];
    let script = r#"let r = step("ifaces", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' '"); print(r.stdout);"#;
    let out = rfs.run_with_env(repo.path(), script, &[], &env);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("unfiltered") && out.stderr.contains("--allow-host-network"),
        "{}",
        out.stderr
    );
    assert!(
        out.entries("step.start").is_empty(),
        "a step ran before the refusal"
    );
    assert!(out.entries("placement").is_empty(), "a sandbox was made");

    // The person's flag allows it: said on the console and in the
    // evidence, and nothing is described as refused.
    let out = rfs.run_with_env(repo.path(), script, &["--allow-host-network"], &env);
    out.assert_code(0);
    assert!(out.stdout.contains("eth0"), "{}", out.stdout);
    assert!(
        out.stderr.contains("rfs: warning: network UNFILTERED"),
        "{}",
        out.stderr
    );
    let evidence = out.evidence();
    assert!(evidence.contains("UNFILTERED"), "{evidence}");
    assert!(
        !evidence.contains("private ranges and the host's own addresses refused"),
        "{evidence}"
    );
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["unfiltered"], true, "{fact}");
    rfs.assert_no_leftovers();
}

/// An image made from the test image with `env` baked in; removed on drop.
struct BakedImage(String);

impl BakedImage {
    fn new(env: &[&str]) -> BakedImage {
        let u = uuid_like();
        let name = format!("rfs-test-baked-{u}");
        docker(&["create", "--name", &name, DOCKER_TEST_IMAGE]);
        let mut args = vec!["commit".to_string()];
        for e in env {
            args.push("--change".into());
            args.push(format!("ENV {e}"));
        }
        args.push(name.clone());
        args.push(format!("{name}:latest"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let committed = Command::new("docker").args(&args).output().unwrap();
        docker(&["rm", "-f", &name]);
        assert!(
            committed.status.success(),
            "{}",
            String::from_utf8_lossy(&committed.stderr)
        );
        BakedImage(format!("{name}:latest"))
    }
}

impl Drop for BakedImage {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

#[test]
fn an_image_a_repository_chose_does_not_hand_its_baked_token_to_steps() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let token = format!("tok-{}", uuid_like());
    let image = BakedImage::new(&[&format!("DEPLOY_TOKEN={token}"), "TOOL_HOME=/opt/tool"]);
    let repo = repo_choosing(&format!("provider = \"docker\"\nimage = \"{}\"\n", image.0));
    let script = r#"let r = step("env", "echo \"[$DEPLOY_TOKEN][$TOOL_HOME]\""); print(r.stdout);"#;
    // RFS_DOCKER_IMAGE empty: the person names no image, rfs.toml's is used.
    let person_names_none = [("RFS_DOCKER_IMAGE", "")];
    let out = rfs.run_with_env(repo.path(), script, &[], &person_names_none);
    out.assert_code(0);
    assert!(out.stdout.contains("[env] [][/opt/tool]"), "{}", out.stdout);
    let warnings = out.entries("placement.warning");
    assert!(
        warnings.iter().any(|w| {
            let m = w["message"].as_str().unwrap_or_default();
            m.contains("DEPLOY_TOKEN") && m.contains("rfs.toml") && m.contains("--image")
        }),
        "{warnings:?}"
    );
    for f in files_under(&out.out_dir) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&token),
            "{} holds the image's token",
            f.display()
        );
    }

    // The script's own sandbox(#{ image }) is the repository's choice too.
    let by_script = format!(
        r#"sandbox(#{{ image: "{}" }}); let r = step("env", "echo \"[$DEPLOY_TOKEN]\""); print(r.stdout);"#,
        image.0
    );
    let out = rfs.run(repo.path(), &by_script);
    out.assert_code(0);
    assert!(out.stdout.contains("[env] []"), "{}", out.stdout);

    // The person naming the image keeps what it bakes.
    let out = rfs.run_with_env(
        repo.path(),
        script,
        &["--image", &image.0],
        &person_names_none,
    );
    out.assert_code(0);
    assert!(
        out.stdout.contains(&format!("[{token}][/opt/tool]")),
        "{}",
        out.stdout
    );
    rfs.assert_no_leftovers();
}
