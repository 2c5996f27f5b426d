//! The network as a boundary (#34): what a step on `local` can reach under
//! each network policy, through rfs's egress proxy, proved against real
//! HTTP servers in network namespaces these tests create (veth pairs with
//! a documentation address, 203.0.113.0/24, that the default treats as
//! public, and a private 10.x one) and on the host's loopback. Those are
//! the only targets ever contacted.

mod common;
use common::*;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// One network namespace with a veth pair to the host and an HTTP server
/// (busybox httpd) inside; removed (with its server) when dropped.
struct TestNet {
    ns: String,
    host_if: String,
    /// The server's address.
    addr: String,
    server: Option<Child>,
    _www: tempfile::TempDir,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl TestNet {
    /// A namespace whose server answers at `<prefix>.<4k+2>:8080` (`prefix`:
    /// `203.0.113` or `10.199.0`), serving `body` as /index.html.
    fn new(prefix: &str, body: &str) -> TestNet {
        let k = NEXT.fetch_add(1, Ordering::SeqCst);
        assert!(k < 60, "too many test networks");
        let tag = format!("{}{k}", std::process::id() % 100_000);
        let ns = format!("rfsnet{tag}");
        let (host_if, peer) = (format!("rh{tag}"), format!("rp{tag}"));
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        let _ = Command::new("ip").args(["link", "del", &host_if]).output();
        let base = 4 * k;
        let (h, n) = (
            format!("{prefix}.{}", base + 1),
            format!("{prefix}.{}", base + 2),
        );
        ip(&["netns", "add", &ns]);
        let net = TestNet {
            ns: ns.clone(),
            host_if: host_if.clone(),
            addr: n.clone(),
            server: None,
            _www: tempfile::tempdir().unwrap(),
        };
        ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &peer,
        ]);
        ip(&["link", "set", &peer, "netns", &ns]);
        ip(&["addr", "add", &format!("{h}/30"), "dev", &host_if]);
        ip(&["link", "set", &host_if, "up"]);
        ip(&["-n", &ns, "addr", "add", &format!("{n}/30"), "dev", &peer]);
        ip(&["-n", &ns, "link", "set", &peer, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        std::fs::write(net._www.path().join("index.html"), body).unwrap();
        let mut net = net;
        let log = std::fs::File::create(net._www.path().join("access.log")).unwrap();
        let server = Command::new("ip")
            .args(["netns", "exec", &ns, "busybox", "httpd", "-f", "-v", "-p"])
            .arg(format!("{n}:8080"))
            .arg("-h")
            .arg(net._www.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("busybox httpd starts");
        net.server = Some(server);
        net.wait_listening();
        net
    }

    fn wait_listening(&self) {
        for _ in 0..100 {
            let ok = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.ns,
                    "curl",
                    "-sf",
                    "-m",
                    "1",
                    "-o",
                    "/dev/null",
                ])
                .arg(self.url())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the test server in {} did not start", self.ns);
    }

    /// The server's access log: one `client:port: response:CODE` line a
    /// request (the readiness probes included).
    fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self._www.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The host side of the veth pair (where rfs's proxy connects from).
    fn host_addr(&self) -> String {
        let mut p: Vec<&str> = self.addr.split('.').collect();
        let last: u32 = p.pop().unwrap().parse().unwrap();
        format!("{}.{}", p.join("."), last - 1)
    }

    fn url(&self) -> String {
        format!("http://{}:8080/index.html", self.addr)
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// A tiny HTTP server on the host's loopback (a developer's service):
/// answers every request with `body`. Returns its port.
fn host_loopback_server(body: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            use std::io::{Read, Write};
            let mut s = s;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn require_namespaces() {
    assert!(
        rfs::provider::local::availability().is_ok(),
        "user namespaces are not available here: the network policy tests cannot run"
    );
}

/// The stdout lines a step printed (`[name] line`).
fn lines<'a>(out: &'a RunOut, step: &str) -> Vec<&'a str> {
    let tag = format!("[{step}] ");
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix(tag.as_str()))
        .collect()
}

#[test]
fn the_default_reaches_a_public_server_only_through_rfs_and_records_it() {
    require_namespaces();
    let public = TestNet::new("203.0.113", "hello from the public test server");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sync_source();
        let r = step("plain", "curl -sS {url}");
        print(r.stdout);
        let t = step("tunnel", "curl -sS --proxytunnel {url}");
        print(t.stdout);
        let e = step("env", "env | grep -i _proxy= | sort");
        print(e.stdout);"#,
        url = public.url()
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    assert_eq!(lines(&out, "plain"), ["hello from the public test server"]);
    assert_eq!(lines(&out, "tunnel"), ["hello from the public test server"]);
    let env = lines(&out, "env").join("\n");
    for v in [
        "http_proxy=http://127.0.0.1:3128",
        "HTTPS_PROXY=http://127.0.0.1:3128",
        "no_proxy=localhost,127.0.0.1,::1",
    ] {
        assert!(env.contains(v), "{env}");
    }
    let conns = out.entries("net.connect");
    assert_eq!(conns.len(), 2, "{conns:?}");
    for (c, (step, via)) in conns.iter().zip([("plain", "http"), ("tunnel", "connect")]) {
        assert_eq!(c["allowed"], true, "{c}");
        assert_eq!(c["address"], public.addr.as_str(), "{c}");
        assert_eq!(c["port"], 8080);
        assert_eq!(c["step"], step, "{c}");
        assert_eq!(c["via"], via, "{c}");
        assert_eq!(c["rule"], "default: public address");
        assert!(c["bytes_down"].as_u64().unwrap() > 30, "{c}");
        assert!(c["bytes_up"].as_u64().unwrap() > 30, "{c}");
    }
    // The record matches what the server saw: one request per allowed
    // connection, each from the host (rfs's proxy), none from elsewhere.
    let seen: Vec<String> = public
        .access_log()
        .into_iter()
        .filter(|l| l.starts_with(&format!("{}:", public.host_addr())))
        .collect();
    let probes = public.access_log().len() - seen.len();
    assert_eq!(
        probes,
        1,
        "only the readiness probe came from inside: {:?}",
        public.access_log()
    );
    assert_eq!(seen.len(), 2, "{seen:?}");
    let placement = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(placement["policy"], "public", "{placement}");
    assert_eq!(placement["unfiltered"], false, "{placement}");
    let ev = out.evidence();
    assert!(ev.contains("## Network"), "{ev}");
    assert!(ev.contains(&format!("{}:8080", public.addr)), "{ev}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

#[test]
fn the_default_refuses_private_addresses_the_hosts_loopback_and_own_addresses() {
    require_namespaces();
    let private = TestNet::new("10.199.0", "private");
    let public = TestNet::new("203.0.113", "public");
    let port = host_loopback_server("the developer's database");
    // The host side of the veth pair is one of the host's own addresses.
    let own = public.host_addr();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let proxy = "--noproxy '' -x http://127.0.0.1:3128";
    let script = format!(
        r#"sync_source();
        for t in [["private", "{p}"], ["loopback", "http://127.0.0.1:{port}/"], ["own", "http://{own}:9/"], ["metadata", "http://169.254.169.254/"]] {{
            let r = step(t[0], "curl -sS -o /dev/null -w '%{{http_code}}' {proxy} " + t[1] + " ; echo");
            print(r.stdout);
        }}
        let d = step("direct", "curl -sS -m 5 http://127.0.0.1:{port}/ ; echo exit=$?");
        print(d.stdout);"#,
        p = private.url()
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    for s in ["private", "loopback", "own", "metadata"] {
        assert_eq!(lines(&out, s), ["403"], "{s}: {}", out.stdout);
    }
    // Directly, the sandbox's own loopback has nothing of the host's.
    let direct = lines(&out, "direct").join("\n");
    assert!(
        direct.contains("exit=7") && !direct.contains("database"),
        "{direct}"
    );
    let conns = out.entries("net.connect");
    let rules: Vec<(&str, &str)> = conns
        .iter()
        .map(|c| (c["step"].as_str().unwrap(), c["rule"].as_str().unwrap()))
        .collect();
    assert_eq!(conns.len(), 4, "{conns:?}");
    assert!(conns.iter().all(|c| c["allowed"] == false), "{conns:?}");
    assert!(rules[0].1.contains("private (10.0.0.0/8)"), "{rules:?}");
    assert!(rules[1].1.contains("loopback"), "{rules:?}");
    assert!(rules[2].1.contains("the host's own address"), "{rules:?}");
    assert!(rules[3].1.contains("link-local"), "{rules:?}");
    // The refused server never saw a request (only its readiness probe).
    assert_eq!(private.access_log().len(), 1, "{:?}", private.access_log());
    let ev = out.evidence();
    // Each refusal is said in the Network section and next to its step.
    assert!(ev.contains("| **refused** |"), "{ev}");
    assert!(
        ev.contains("- network: 1 connection, 1 refused: 127.0.0.1:"),
        "{ev}"
    );
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
}

#[test]
fn an_allow_list_lets_through_a_listed_private_server_and_nothing_else() {
    require_namespaces();
    let private = TestNet::new("10.199.0", "private service");
    let public = TestNet::new("203.0.113", "public");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["{p}:8080"] }} }});
        sync_source();
        let a = step("listed", "curl -sS {pu}");
        print(a.stdout);
        let b = step("unlisted", "curl -sS -o /dev/null -w '%{{http_code}}' {qu}; echo");
        print(b.stdout);
        let c = step("other_port", "curl -sS -o /dev/null -w '%{{http_code}}' http://{p}:9/; echo");
        print(c.stdout);
        let d = step("unlisted_name", "curl -sS -o /dev/null -w '%{{http_code}}' http://unlisted.invalid/; echo; getent hosts localhost.invalid example.invalid; echo dns=$?");
        print(d.stdout);"#,
        p = private.addr,
        pu = private.url(),
        qu = public.url()
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    assert_eq!(lines(&out, "listed"), ["private service"]);
    assert_eq!(lines(&out, "unlisted"), ["403"]);
    assert_eq!(lines(&out, "other_port"), ["403"]);
    // A name outside the list is refused without being resolved, and the
    // sandbox itself resolves nothing.
    assert_eq!(lines(&out, "unlisted_name"), ["403", "dns=2"]);
    let conns = out.entries("net.connect");
    assert_eq!(conns[3]["name"], "unlisted.invalid");
    assert_eq!(conns[3]["rule"], "not in the allow list");
    assert!(conns[3]["address"].is_null(), "{}", conns[3]);
    assert_eq!(conns[0]["rule"], format!("allow `{}:8080`", private.addr));
    assert_eq!(conns[1]["rule"], "not in the allow list");
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["allow"][0], format!("{}:8080", private.addr), "{fact}");
}

#[test]
fn a_program_that_ignores_the_proxy_gets_no_route() {
    require_namespaces();
    let public = TestNet::new("203.0.113", "public");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sync_source();
        let r = step("bypass", "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 {a} 8080 2>&1; echo exit=$?; env -i PATH=$PATH curl -sS -m 5 {u} 2>&1; echo exit=$?; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
        print(r.stdout);"#,
        u = public.url(),
        a = public.addr
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    let text = lines(&out, "bypass");
    assert!(!text.join("\n").contains("public"), "{text:?}");
    assert_eq!(
        text.iter().filter(|l| l.starts_with("exit=")).count(),
        2,
        "{text:?}"
    );
    assert!(!text.contains(&"exit=0"), "{text:?}");
    // The sandbox's network namespace has its loopback and nothing else.
    assert_eq!(text.last(), Some(&"lo"), "{text:?}");
    assert!(
        !text
            .iter()
            .any(|l| l.starts_with("eth") || l.starts_with("rh")),
        "{text:?}"
    );
    assert!(out.entries("net.connect").is_empty());
}

#[test]
fn network_false_reaches_nothing_not_even_the_proxy() {
    require_namespaces();
    let public = TestNet::new("203.0.113", "public");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sandbox(#{{ network: false }});
        sync_source();
        let r = step("none", "curl -sS -m 5 -x http://127.0.0.1:3128 {u} 2>&1; echo exit=$?; env | grep -ci _proxy= ; true");
        print(r.stdout);"#,
        u = public.url()
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    let text = lines(&out, "none").join("\n");
    assert!(text.contains("exit=7") && text.ends_with('0'), "{text}");
    assert!(out.entries("net.connect").is_empty());
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["policy"], "off", "{fact}");
}

#[test]
fn host_network_is_refused_without_the_flag_and_unfiltered_with_it() {
    require_namespaces();
    let port = host_loopback_server("the developer's database");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sandbox(#{{ network: "host" }});
        sync_source();
        let r = step("host", "curl -sS -m 5 http://127.0.0.1:{port}/");
        print(r.stdout);"#
    );
    let out = rfs.run(repo.path(), &script);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("--allow-host-network"),
        "{}",
        out.stderr
    );
    assert!(out.entries("placement").is_empty());
    assert!(out.entries("step.start").is_empty());
    for (args, env) in [
        (vec!["--allow-host-network"], vec![]),
        (vec![], vec![("RFS_ALLOW_HOST_NETWORK", "1")]),
    ] {
        let out = rfs.run_with_env(repo.path(), &script, &args, &env);
        out.assert_code(0);
        assert_eq!(lines(&out, "host"), ["the developer's database"]);
        let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
        assert_eq!(fact["policy"], "host", "{fact}");
        assert_eq!(fact["unfiltered"], true, "{fact}");
        assert!(out.evidence().contains("UNFILTERED"), "{}", out.evidence());
    }
}

#[test]
fn a_malformed_allow_entry_is_refused_before_anything_runs_with_its_span() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for (entry, why) in [
        ("10.0.0.0/33", "prefix"),
        ("", "empty"),
        ("host:70000", "out of range"),
    ] {
        let script = format!(
            "sandbox(#{{ network: #{{ allow: [\"{entry}\"] }} }});\nsync_source();\nstep(\"x\", \"true\");\n"
        );
        let (path, _) = rfs.prepare(&script);
        let check = rfs
            .cmd(repo.path())
            .arg("check")
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&check.stdout).to_string()
            + String::from_utf8_lossy(&check.stderr).as_ref();
        assert!(!check.status.success(), "{text}");
        assert!(
            text.contains(why) && text.contains(":1:"),
            "{entry}: {text}"
        );
        let out = rfs.run(repo.path(), &script);
        assert_ne!(out.code, 0);
        assert!(out.stderr.contains(why), "{}", out.stderr);
        let journal = out.out_dir.join("journal.jsonl");
        assert!(!journal.exists() || out.entries("placement").is_empty());
    }
}

#[test]
fn a_refusal_is_in_the_json_summary_and_junit_and_a_forged_record_fails_verify() {
    require_namespaces();
    let private = TestNet::new("10.199.0", "private");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let junit = rfs.state.path().join("junit.xml");
    let script = format!(
        r#"sync_source();
        step("fetch", "curl -sS -o /dev/null -w '%{{http_code}}' {u}; echo");"#,
        u = private.url()
    );
    let out = rfs.run_with(
        repo.path(),
        &script,
        &["--json", "--junit", junit.to_str().unwrap()],
    );
    // A refused connection does not fail the step by itself.
    out.assert_code(0);
    let summary: serde_json::Value = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("a summary line");
    let net = &summary["network"];
    assert_eq!(net["policy"], "public", "{net}");
    assert_eq!(net["connections"], 1, "{net}");
    assert_eq!(net["refused"][0]["step"], "fetch", "{net}");
    assert_eq!(
        net["refused"][0]["destination"],
        format!("{}:8080", private.addr),
        "{net}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("name=\"network_refused\" value=\"1\""),
        "{xml}"
    );
    assert!(xml.contains("private (10.0.0.0/8) (step fetch)"), "{xml}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    // A Network section that says the connection was allowed fails verify.
    let ev = out.out_dir.join("EVIDENCE.md");
    let text = std::fs::read_to_string(&ev).unwrap();
    assert!(text.contains("| **refused** |"), "{text}");
    std::fs::write(&ev, text.replace("| **refused** |", "| allowed |")).unwrap();
    let (ok, why) = rfs_verify(&rfs, repo.path(), &out.out_dir);
    assert!(!ok, "a forged Network section verified:\n{why}");
    std::fs::write(&ev, &text).unwrap();
    // So does a journal whose net.connect fact was rewritten.
    let j = out.out_dir.join("journal.jsonl");
    let journal = std::fs::read_to_string(&j).unwrap();
    assert!(journal.contains("\"allowed\":false"), "{journal}");
    std::fs::write(&j, journal.replace("\"allowed\":false", "\"allowed\":true")).unwrap();
    let (ok, why) = rfs_verify(&rfs, repo.path(), &out.out_dir);
    assert!(!ok, "a forged net.connect fact verified:\n{why}");
}

#[test]
fn daytona_enforces_an_address_allow_list_itself_and_refuses_names_it_cannot() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ network: #{ allow: ["10.1.2.3", "192.0.2.0/24"] } }); step("x", "true");"#,
        &["--keep"],
    );
    out.assert_code(0);
    let id = out.sandbox_id();
    let created = rfs
        .sim()
        .inventory()
        .into_iter()
        .find(|s| s.id == id)
        .expect("the kept sandbox");
    assert_eq!(
        created.network_allow_list.as_deref(),
        Some("10.1.2.3/32,192.0.2.0/24")
    );
    assert!(!created.network_block_all);
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["policy"], "allow", "{fact}");
    assert!(
        fact["enforced_by"]
            .as_str()
            .unwrap()
            .contains("Daytona networkAllowList"),
        "{fact}"
    );
    let rm = rfs.cmd(repo.path()).args(["rm", &id]).output().unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    // A name (or a port) cannot be enforced there: refused, nothing made.
    for (entry, why) in [("pypi.org", "host name"), ("10.1.2.3:443", "port")] {
        let script =
            format!(r#"sandbox(#{{ network: #{{ allow: ["{entry}"] }} }}); step("x", "true");"#);
        let out = rfs.run(repo.path(), &script);
        assert_ne!(out.code, 0);
        assert!(
            out.stderr.contains("cannot be enforced") && out.stderr.contains(why),
            "{}",
            out.stderr
        );
        assert!(out.entries("placement").is_empty());
    }
    // The default is Daytona's own network, said as unfiltered.
    let out = rfs.run(repo.path(), r#"step("x", "true");"#);
    out.assert_code(0);
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["unfiltered"], true, "{fact}");
    rfs.finish();
}

#[test]
fn docker_reaches_a_public_server_only_through_rfs_and_never_the_hosts_loopback() {
    if docker_missing() {
        return;
    }
    let public = TestNet::new("203.0.113", "hello from the public test server");
    let private = TestNet::new("10.199.0", "private");
    let port = host_loopback_server("the developer's database");
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    // busybox wget: plain HTTP through the proxy; an empty no_proxy sends
    // even 127.0.0.1 to it.
    let script = format!(
        r#"sync_source();
        let a = step("public", "wget -q -O - {pu}");
        print(a.stdout);
        let b = step("refused", "no_proxy= wget -q -O - http://127.0.0.1:{port}/ 2>&1; echo exit=$?; wget -q -O - {qu} 2>&1; echo exit=$?");
        print(b.stdout);
        let c = step("bypass", "env -i PATH=$PATH wget -q -T 5 -O - {pu} 2>&1; echo exit=$?; wget -q -T 5 -O - http://127.0.0.1:{port}/ 2>&1; echo exit=$?; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
        print(c.stdout);"#,
        pu = public.url(),
        qu = private.url()
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    assert_eq!(lines(&out, "public"), ["hello from the public test server"]);
    let refused = lines(&out, "refused").join("\n");
    assert!(
        !refused.contains("database") && !refused.contains("private"),
        "{refused}"
    );
    assert!(refused.contains("403"), "{refused}");
    let bypass = lines(&out, "bypass");
    assert!(
        !bypass.join("\n").contains("public") && !bypass.join("\n").contains("database"),
        "{bypass:?}"
    );
    assert!(!bypass.contains(&"exit=0"), "{bypass:?}");
    assert_eq!(bypass.last(), Some(&"lo"), "{bypass:?}");
    let conns = out.entries("net.connect");
    assert_eq!(conns.len(), 3, "{conns:?}");
    assert_eq!(conns[0]["allowed"], true);
    assert_eq!(conns[0]["step"], "public");
    assert!(conns[0]["bytes_down"].as_u64().unwrap() > 30, "{conns:?}");
    assert!(
        conns[1]["rule"].as_str().unwrap().contains("loopback"),
        "{conns:?}"
    );
    assert!(
        conns[2]["rule"].as_str().unwrap().contains("private"),
        "{conns:?}"
    );
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["unfiltered"], false, "{fact}");
    assert!(
        fact["enforced_by"]
            .as_str()
            .unwrap()
            .contains("egress proxy"),
        "{fact}"
    );
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

#[test]
fn docker_host_network_is_the_bridge_said_unfiltered_and_needs_the_flag() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let script = r#"sandbox(#{ network: "host" }); step("ifaces", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' '");"#;
    let out = rfs.run(repo.path(), script);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("--allow-host-network"),
        "{}",
        out.stderr
    );
    let out = rfs.run_with(repo.path(), script, &["--allow-host-network"]);
    out.assert_code(0);
    assert!(out.stdout.contains("eth0"), "{}", out.stdout);
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["unfiltered"], true, "{fact}");
    assert!(out.evidence().contains("UNFILTERED"));
}
