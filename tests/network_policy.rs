//! The network as a boundary (#34): what a step on `local` can reach under
//! each network policy, through rfs's egress proxy, proved against real
//! HTTP servers in network namespaces these tests create (veth pairs with
//! a documentation address, 203.0.113.0/24, that the default treats as
//! public, and a private 10.x one) and on the host's loopback. Those are
//! the only targets ever contacted.

mod common;
use common::*;
#[path = "common/netns.rs"]
mod netns;
use netns::*;

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
    // The proxy, with a proxy user name of this command's own.
    for k in ["http_proxy", "HTTPS_PROXY"] {
        assert!(
            env.lines()
                .any(|l| l.starts_with(&format!("{k}=http://rfs"))
                    && l.ends_with(":rfs@127.0.0.1:3128")),
            "{env}"
        );
    }
    assert!(env.contains("no_proxy=localhost,127.0.0.1,::1"), "{env}");
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

/// An allow list may name private and public addresses, but an entry
/// that covers the host itself — its loopback (a developer's database),
/// the metadata endpoint, everything (`0.0.0.0/0`) — is as wide as the
/// host's network: refused before anything runs, naming the flag; with
/// the person's flag the listed host service is reached.
/// A script's allow list holding `entry` is refused before anything
/// runs, naming the entry and `--allow-host-network`.
#[track_caller]
fn assert_allow_entry_needs_the_flag(rfs: &Rfs, repo: &Repo, entry: &str) {
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["{entry}"] }} }});
        step("x", "true");"#
    );
    let out = rfs.run(repo.path(), &script);
    assert_eq!(out.code, 3, "{entry}: {}", out.stderr);
    assert!(
        out.stderr.contains(&format!("allow entry `{entry}`"))
            && out.stderr.contains("--allow-host-network"),
        "{entry}: {}",
        out.stderr
    );
    assert!(out.entries("placement").is_empty(), "{entry}");
    assert!(out.entries("step.start").is_empty(), "{entry}");
}

#[test]
fn an_allow_list_cannot_reach_the_hosts_loopback_or_metadata_without_the_flag() {
    require_namespaces();
    let port = host_loopback_server("the developer's database");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for entry in ["127.0.0.1", "169.254.169.254", "0.0.0.0/0", "::/0"] {
        assert_allow_entry_needs_the_flag(&rfs, &repo, entry);
    }
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["127.0.0.1:{port}"] }} }});
        let r = step("host", "curl -sS -m 5 --noproxy '' http://127.0.0.1:{port}/");
        print(r.stdout);"#
    );
    let out = rfs.run_with(repo.path(), &script, &["--allow-host-network"]);
    out.assert_code(0);
    // (Through the proxy: the sandbox's own loopback is not the host's.)
    assert_eq!(lines(&out, "host"), ["the developer's database"]);
    rfs.assert_no_leftovers();
}

/// A script alone could allow-list NAT64, 6to4 and IPv4-compatible or
/// -translated forms of loopback and the metadata endpoint
/// (`64:ff9b::/96`, `2002::/16`, `64:ff9b::7f00:1`, `::7f00:1`): accepted
/// without a flag, `64:ff9b::a9fe:a9fe` was relayed through a NAT64
/// gateway. Each is judged as the IPv4 it reaches and refused naming the
/// flag.
#[test]
fn a_script_cannot_allow_list_the_host_through_nat64_6to4_or_ipv4_compatible_forms() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for entry in [
        "64:ff9b::/96",
        "2002::/16",
        "64:ff9b::7f00:1",
        "::7f00:1",
        "::ffff:0:a9fe:a9fe",
        "64:ff9b::a9fe:a9fe",
    ] {
        assert_allow_entry_needs_the_flag(&rfs, &repo, entry);
    }
    rfs.assert_no_leftovers();
}

/// The person's own `--network` allow list covering the host
/// (`0.0.0.0/0` its loopback, a range holding the host's own address)
/// reached it with no `--allow-host-network`, silently, contrary to the
/// trust model. It is refused naming the flag, and runs with it.
#[test]
fn the_persons_allow_list_covering_the_host_needs_allow_host_network() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for net in ["0.0.0.0/0", "127.0.0.0/8,pypi.org"] {
        let out = rfs.run_with(repo.path(), r#"step("x", "true");"#, &["--network", net]);
        assert_eq!(out.code, 3, "{net}: {}", out.stderr);
        assert!(
            out.stderr.contains("--allow-host-network") && out.stderr.contains("--network flag"),
            "{net}: {}",
            out.stderr
        );
        assert!(out.entries("step.start").is_empty(), "{net}");
    }
    let out = rfs.run_with(
        repo.path(),
        r#"step("x", "true");"#,
        &["--network", "0.0.0.0/0", "--allow-host-network"],
    );
    out.assert_code(0);
    rfs.assert_no_leftovers();
}

/// A flood of refused connections, each with a 60 KB name, grew rfs's
/// memory and the bundle without bound (1,500 in 0.6 s: 730 MB, a 350
/// MB bundle). Names are cut at DNS's 253 bytes, repeats are counted,
/// and at most a bounded number of records wait per step: 2,000 refusals
/// leave a bundle of a few MB whose journal verifies and says them all.
#[test]
fn a_flood_of_refused_connections_keeps_the_record_and_the_bundle_bounded() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "flood.py",
        r#"import os, socket
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["http_proxy"])
host, port = proxy.hostname, proxy.port
for i in range(2000):
    name = ("x%d." % (i % 1000)) + "a" * 60000 + ".example"
    s = socket.create_connection((host, int(port)))
    s.sendall(("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (name, name)).encode())
    s.recv(4096)
    s.close()
print("sent")
"#,
    );
    repo.commit("a flood");
    let out = rfs.run(
        repo.path(),
        r#"sandbox(#{ network: #{ allow: ["pypi.org"] } });
        sync_source();
        step("flood", "python3 flood.py");"#,
    );
    out.assert_code(0);
    let conns = out.entries("net.connect");
    let attempts: u64 = conns
        .iter()
        .map(|c| 1 + c["repeated"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(attempts, 2000, "every attempt is counted");
    assert!(
        conns.len() <= 1000,
        "{} records for 1,000 names",
        conns.len()
    );
    assert!(conns
        .iter()
        .all(|c| c["name"].as_str().map_or(0, str::len) <= 253));
    let size: u64 = files_under(&out.out_dir)
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    assert!(size < 5 << 20, "the bundle holds {size} bytes");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

/// Host-header fronting: an absolute-URI request for an allowed address
/// was forwarded with any `Host` header while the journal showed only the
/// allowed destination. A `Host` differing from the request's authority
/// is refused, and the server never sees the request.
#[test]
fn a_host_header_differing_from_the_requests_authority_is_refused() {
    require_namespaces();
    let private = TestNet::new("10.198.0", "private service");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["{p}:8080"] }} }});
        let a = step("fronted", "curl -sS -o /dev/null -w '%{{http_code}}' -H 'Host: 169.254.169.254' {pu}; echo");
        print(a.stdout);
        let b = step("plain", "curl -sS {pu}");
        print(b.stdout);"#,
        p = private.addr,
        pu = private.url()
    );
    let before = private.access_log().len();
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    assert_eq!(lines(&out, "fronted"), ["400"]);
    assert_eq!(lines(&out, "plain"), ["private service"]);
    let log = private.access_log();
    assert_eq!(
        log.len(),
        before + 1,
        "only the plain request arrived: {log:?}"
    );
    rfs.assert_no_leftovers();
}

/// Slow connections starved later steps: the proxy serves 512 at once
/// with no header timeout, so a background process holding 600 silent
/// connections made a later step's request wait forever. A connection
/// that sends no request within the header timeout is closed.
#[test]
fn silent_connections_of_a_background_process_cannot_starve_a_later_step() {
    let rfs = Rfs::new(Prov::Local);
    let holder = "held = [socket.create_connection((host, port)) for _ in range(600)]";
    let out = later_step_after_a_holder(&rfs, "10.197.0", holder);
    out.assert_code(0);
    assert_eq!(lines(&out, "later"), ["private service"]);
    rfs.assert_no_leftovers();
}

/// Idle tunnels starved later steps: a background process holding every
/// one of the proxy's 512 upstream connections with silent `CONNECT`
/// tunnels made a later step's request wait until its timeout. When
/// every slot is taken, the tunnel idle the longest makes room, and is
/// journaled saying rfs closed it and why.
#[test]
fn idle_tunnels_of_a_background_process_cannot_starve_a_later_step() {
    let rfs = Rfs::new(Prov::Local);
    let holder = r#"held = []
for _ in range(600):
    s = socket.create_connection((host, port))
    s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
    s.recv(4096)
    held.append(s)"#;
    let out = later_step_after_a_holder(&rfs, "10.195.0", holder);
    out.assert_code(0);
    assert_eq!(lines(&out, "later"), ["private service"]);
    let conns = out.entries("net.connect");
    assert!(
        conns.iter().any(|c| c["error"]
            .as_str()
            .is_some_and(|e| e.contains("closed by rfs's proxy after") && e.contains("in use"))),
        "no tunnel was said closed for a waiting one"
    );
    rfs.assert_no_leftovers();
}

/// A run in which a background process runs `holder` (Python, with the
/// proxy's `host` and `port`, and a test server's `host:8080` as its
/// argument) until it prints `holding`, then a later step fetches from
/// that server through the proxy.
fn later_step_after_a_holder(rfs: &Rfs, net: &str, holder: &str) -> RunOut {
    require_namespaces();
    let private = TestNet::new(net, "private service");
    let repo = Repo::new();
    repo.write(
        "hold.py",
        &format!(
            r#"import os, socket, sys, time
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["http_proxy"])
host, port = proxy.hostname, proxy.port
{holder}
print("holding", flush=True)
time.sleep(600)
"#
        ),
    );
    repo.commit("a holder");
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["{p}:8080"] }} }});
        sync_source();
        let h = spawn("holder", "python3 hold.py {p}:8080");
        h.wait_for(#{{ line: "holding", timeout: 120 }});
        let b = step("later", "curl -sS -m 60 {pu}");
        print(b.stdout);"#,
        p = private.addr,
        pu = private.url()
    );
    rfs.run(repo.path(), &script)
}

/// Connections were blamed on the wrong step: a daemon started in step
/// `first` that connected while `second` ran was journaled as
/// `second`'s. Each command's processes carry proxy credentials of its
/// own, so a connection is said to be of the command that started the
/// process that opened it: a step, or a background `spawn()`.
#[test]
fn a_connection_is_said_to_be_of_the_command_that_started_its_process() {
    require_namespaces();
    attributed_to_the_command_that_started_it(Prov::Local, "10.193.0");
}

#[test]
fn a_docker_connection_is_said_to_be_of_the_command_that_started_its_process() {
    if docker_missing() {
        return;
    }
    attributed_to_the_command_that_started_it(Prov::Docker, "10.192.0");
}

fn attributed_to_the_command_that_started_it(prov: Prov, net: &str) {
    let private = TestNet::new(net, "private service");
    let rfs = Rfs::new(prov);
    let repo = Repo::new();
    // The test image has busybox's wget, not curl.
    let fetch = |to: &str| match prov {
        Prov::Docker => format!("wget -q -O {to} {}", private.url()),
        _ => format!("curl -sS -o {to} {}", private.url()),
    };
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["{p}:8080"] }} }});
        step("first", "setsid sh -c 'touch /tmp/started; while [ ! -e /tmp/go ]; do sleep 0.1; done; {daemon}' > /dev/null 2>&1 < /dev/null & for i in $(seq 1 100); do [ -e /tmp/started ] && exit 0; sleep 0.05; done; exit 1");
        step("second", "touch /tmp/go; for i in $(seq 1 100); do [ -s /tmp/out ] && exit 0; sleep 0.1; done; exit 1");
        let bg = spawn("bg", "{bg}; echo fetched; sleep 60");
        bg.wait_for(#{{ line: "fetched", timeout: 30 }});
        step("third", "true");"#,
        p = private.addr,
        daemon = fetch("/tmp/out"),
        bg = fetch("/tmp/bg"),
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    let conns = out.entries("net.connect");
    let of = |by: &str| {
        conns
            .iter()
            .find(|c| c["opened_by"] == by)
            .unwrap_or_else(|| panic!("no connection opened by {by}: {conns:?}"))
    };
    assert_eq!(of("step `first`")["step"], "first");
    assert!(of("spawn `bg`")["step"].is_null(), "{conns:?}");
    assert!(
        !conns.iter().any(|c| c["step"] == "second"),
        "blamed on the step running: {conns:?}"
    );
    assert!(
        out.evidence().contains("background: spawn"),
        "{}",
        out.evidence()
    );
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

/// `--keep` lost the egress record: a background connection held open
/// through a kept run was never journaled ("0 connections"). The
/// connections still open when a kept run ends are journaled, saying so.
#[test]
fn a_kept_run_journals_the_connections_still_open() {
    require_namespaces();
    let private = TestNet::new("10.196.0", "private service");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "tunnel.py",
        r#"import os, socket, sys, time
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["http_proxy"])
host, port = proxy.hostname, proxy.port
s = socket.create_connection((host, int(port)))
s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
time.sleep(600)
"#,
    );
    repo.commit("a tunnel");
    let script = format!(
        r#"sandbox(#{{ network: #{{ allow: ["{p}:8080"] }} }});
        sync_source();
        step("daemon", "setsid python3 tunnel.py {p}:8080 > /tmp/t.out 2>&1 < /dev/null & for i in $(seq 1 100); do grep -q 200 /tmp/t.out && exit 0; sleep 0.1; done; exit 1");"#,
        p = private.addr,
    );
    let out = rfs.run_with(repo.path(), &script, &["--keep"]);
    out.assert_code(0);
    let conns = out.entries("net.connect");
    assert!(
        conns.iter().any(|c| c["address"] == private.addr.as_str()
            && c["allowed"] == true
            && c["error"]
                .as_str()
                .is_some_and(|e| e.contains("still open"))),
        "{conns:?}"
    );
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    let rm = rfs
        .cmd(repo.path())
        .args(["rm", &out.sandbox_id()])
        .output()
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    rfs.assert_no_leftovers();
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
