//! The network as a boundary (#34) on docker and daytona: the same egress
//! proxy in a container with network mode `none`, the host's network said
//! as unfiltered, and a policy mapped onto Daytona's create request or
//! refused. Targets: only the test's own namespaces and the host's loopback.

mod common;
use common::*;
#[path = "common/netns.rs"]
mod netns;
use netns::*;

/// Daytona v0.190.0 holds IPv4 CIDRs in `networkAllowList` and names in
/// `domainAllowList` (`apps/api/src/sandbox/utils/network-validation.util.ts`):
/// rfs sends each where it belongs, and refuses before anything runs what
/// the server would answer 400 to (an IPv6 address, an 11th entry) or
/// cannot hold (a port).
#[test]
fn daytona_sends_addresses_and_names_to_their_allow_lists_and_refuses_what_daytona_cannot_hold() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ network: #{ allow: ["10.1.2.3", "192.0.2.0/24", "pypi.org", "*.example.com"] } }); step("x", "true");"#,
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
    assert_eq!(
        created.domain_allow_list.as_deref(),
        Some("pypi.org,*.example.com")
    );
    assert!(!created.network_block_all);
    let fact = &out.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(fact["policy"], "allow", "{fact}");
    let by = fact["enforced_by"].as_str().unwrap();
    assert!(
        by.contains("Daytona networkAllowList") && by.contains("Daytona domainAllowList"),
        "{fact}"
    );
    let rm = rfs.cmd(repo.path()).args(["rm", &id]).output().unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    // What Daytona cannot hold: refused by rfs, naming the rule, nothing made.
    let eleven: Vec<String> = (1..=11).map(|i| format!("\"10.0.0.{i}\"")).collect();
    for (entries, why) in [
        ("\"10.1.2.3:443\"".to_owned(), "port"),
        ("\"2001:db8::/32\"".to_owned(), "IPv4 CIDRs only"),
        (eleven.join(", "), "at most 10"),
        ("\"localhost\"".to_owned(), "domainAllowList takes names"),
    ] {
        let script =
            format!(r#"sandbox(#{{ network: #{{ allow: [{entries}] }} }}); step("x", "true");"#);
        let out = rfs.run(repo.path(), &script);
        assert_ne!(out.code, 0);
        assert!(
            out.stderr.contains("cannot") && out.stderr.contains(why),
            "{}",
            out.stderr
        );
        assert!(out.entries("placement").is_empty());
        assert!(
            !rfs.sim()
                .requests()
                .iter()
                .any(|r| r.method == "POST" && r.path == "/sandbox" && r.status == 400),
            "the server was asked (and refused): rfs must refuse first"
        );
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
