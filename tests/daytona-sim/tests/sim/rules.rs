//! Daytona v0.190.0's rules for forks, deletes, network lists and
//! snapshots of sandboxes, each test naming the file and lines of
//! `daytonaio/daytona` (tag v0.190.0, `apps/api/src/...`) it follows.

use std::time::Duration;

use reqwest::Method;
use rfs_daytona_sim::SimOptions;
use serde_json::{json, Value};

use crate::support::{eventually, fast, T};

fn vm() -> SimOptions {
    SimOptions {
        default_snapshot_class: "linux-vm".into(),
        job_lag: Duration::from_millis(600),
        ..fast()
    }
}

async fn state(t: &T, id: &str) -> Value {
    t.api(Method::GET, &format!("/sandbox/{id}"), None)
        .await
        .json()
}

async fn fork(t: &T, id: &str, name: &str) -> (u16, Value) {
    let r = t
        .api(
            Method::POST,
            &format!("/sandbox/{id}/fork"),
            Some(json!({ "name": name })),
        )
        .await;
    let status = r.status;
    (status, r.json())
}

async fn started(t: &T, id: &str) -> bool {
    eventually(Duration::from_secs(10), || async {
        state(t, id).await["state"] == "started"
    })
    .await
}

/// `sandbox/services/sandbox.service.ts:1093-1094`: only `linux-vm` and
/// `windows` sandboxes fork; a `container` one (the class of Daytona's
/// default snapshots) is 422.
#[tokio::test]
async fn forking_a_container_sandbox_is_422_as_sandbox_service_ts_1093() {
    let t = T::start(fast());
    let src = t.create(json!({ "name": "box" })).await;
    assert_eq!(state(&t, &src).await["sandboxClass"], "container");
    let (status, body) = fork(&t, &src, "child").await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["message"], "Forking is not supported for this sandbox");
    assert_eq!(
        state(&t, &src).await["state"],
        "started",
        "the source is untouched"
    );
}

/// `sandbox.service.ts:1142-1143` (the fork is inserted `creating`),
/// `:1176-1185` (the source goes `forking`, pending), `:1103-1104` (a
/// second fork meanwhile: 400), `:2016-2018` (a delete meanwhile: 409,
/// `exceptions/state-change-in-progress.exception.ts:8-10`), and
/// `services/job-state-handler.service.ts:736-776` (the job's end: the
/// source back to `started`, the fork `started`).
#[tokio::test]
async fn a_vm_fork_starts_creating_while_its_source_is_forking_as_sandbox_service_ts_1142_and_1176()
{
    let t = T::start(vm());
    let src = t.create(json!({ "name": "parent" })).await;
    assert_eq!(t.exec(&src, "echo setup > /home/daytona/made").await.0, 0);
    let (status, dto) = fork(&t, &src, "child").await;
    assert_eq!(status, 200, "{dto}");
    assert_eq!(dto["state"], "creating");
    assert_eq!(dto["sandboxClass"], "linux-vm");
    let child = dto["id"].as_str().unwrap().to_owned();
    assert_eq!(state(&t, &src).await["state"], "forking");
    let (second, body) = fork(&t, &src, "child2").await;
    assert_eq!(second, 400, "{body}");
    assert_eq!(body["message"], "Sandbox must be in started state to fork");
    let del = t
        .api(Method::DELETE, &format!("/sandbox/{src}"), None)
        .await;
    assert_eq!(del.status, 409, "{}", del.body);
    assert_eq!(del.json()["message"], "Sandbox state change in progress");
    assert!(started(&t, &child).await, "the fork ends started");
    assert_eq!(state(&t, &src).await["state"], "started");
    let (code, out) = t.exec(&child, "cat /home/daytona/made").await;
    assert_eq!((code, out.trim()), (0, "setup"));
    let (code, _) = t.exec(&child, "echo child > /home/daytona/own").await;
    assert_eq!(code, 0);
    assert_ne!(t.exec(&src, "cat /home/daytona/own").await.0, 0);
    let (again, _) = fork(&t, &src, "child").await;
    assert_eq!(again, 409, "a name in use");
    let (missing, _) = fork(&t, "nope", "x").await;
    assert_eq!(missing, 404);
}

/// `sandbox.service.ts:2020-2029`: a sandbox with a fork child not
/// deleted cannot be deleted (400); once the child's delete is accepted
/// it can. `GET /sandbox/{id}/forks` lists the children
/// (`getForkChildren`, :1243-1261).
#[tokio::test]
async fn a_parent_with_a_live_fork_is_not_deleted_as_sandbox_service_ts_2020() {
    let t = T::start(vm());
    let src = t.create(json!({ "name": "parent" })).await;
    let (_, dto) = fork(&t, &src, "child").await;
    let child = dto["id"].as_str().unwrap().to_owned();
    assert!(started(&t, &child).await);
    assert!(started(&t, &src).await);
    let kids = t
        .api(Method::GET, &format!("/sandbox/{src}/forks"), None)
        .await
        .json();
    assert_eq!(kids[0]["id"], child.as_str(), "{kids}");
    let del = t
        .api(Method::DELETE, &format!("/sandbox/{src}"), None)
        .await;
    assert_eq!(del.status, 400, "{}", del.body);
    assert_eq!(
        del.json()["message"],
        "Cannot delete sandbox which has active fork children. The forks must be deleted first."
    );
    let c = t
        .api(Method::DELETE, &format!("/sandbox/{child}"), None)
        .await;
    assert_eq!(c.status, 200);
    let p = t
        .api(Method::DELETE, &format!("/sandbox/{src}"), None)
        .await;
    assert_eq!(p.status, 200, "{}", p.body);
}

/// `sandbox.service.ts:1139-1140`: a fork gets its source's
/// `networkBlockAll` and `networkAllowList`, not its `domainAllowList`;
/// `:3067-3133` (`POST /sandbox/{id}/network-settings`, controller
/// `:1072-1120`) sets one.
#[tokio::test]
async fn a_fork_keeps_the_cidr_list_not_the_domain_list_as_sandbox_service_ts_1139() {
    let t = T::start(vm());
    let src = t
        .create(json!({
            "name": "parent",
            "networkAllowList": "10.0.0.0/24",
            "domainAllowList": "example.com,*.example.org",
        }))
        .await;
    let src_dto = state(&t, &src).await;
    assert_eq!(src_dto["domainAllowList"], "example.com,*.example.org");
    let (_, dto) = fork(&t, &src, "child").await;
    assert_eq!(dto["networkAllowList"], "10.0.0.0/24");
    assert!(dto.get("domainAllowList").is_none(), "{dto}");
    let child = dto["id"].as_str().unwrap().to_owned();
    assert!(started(&t, &child).await);
    let r = t
        .api(
            Method::POST,
            &format!("/sandbox/{child}/network-settings"),
            Some(json!({ "domainAllowList": "pypi.org" })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["domainAllowList"], "pypi.org");
    assert_eq!(r.json()["networkAllowList"], "10.0.0.0/24");
    let none = t
        .api(
            Method::POST,
            &format!("/sandbox/{child}/network-settings"),
            Some(json!({})),
        )
        .await;
    assert_eq!(none.status, 400);
    assert_eq!(
        none.json()["message"],
        "At least one of networkBlockAll, networkAllowList or domainAllowList must be provided"
    );
}

/// `sandbox/utils/network-validation.util.ts:12-38` (IPv4 CIDRs with a
/// prefix, at most 10) and `:45-62` (names, `*.` wildcards, at most 10),
/// applied on create (`sandbox.service.ts:655-661`) and on
/// `network-settings` (:3080-3105), each a 400 with the message.
#[tokio::test]
async fn network_lists_are_validated_as_network_validation_util_ts() {
    let t = T::start(fast());
    let eleven: Vec<String> = (1..=11).map(|i| format!("10.0.0.{i}/32")).collect();
    let eleven_names: Vec<String> = (1..=11).map(|i| format!("h{i}.example.com")).collect();
    for (field, list, message) in [
        (
            "networkAllowList",
            "2001:db8::/32".to_owned(),
            "Invalid IP address: \"2001:db8::\" in network \"2001:db8::/32\". Must be a valid IPv4 address",
        ),
        (
            "networkAllowList",
            "10.0.0.1".to_owned(),
            "Invalid network format: \"10.0.0.1\". Missing CIDR prefix length (e.g., /24)",
        ),
        (
            "networkAllowList",
            "10.0.0.0/33".to_owned(),
            "Invalid CIDR prefix length: 10.0.0.0/33. Prefix must be between 0 and 32",
        ),
        (
            "networkAllowList",
            eleven.join(","),
            "Network allow list cannot contain more than 10 networks",
        ),
        (
            "domainAllowList",
            "localhost".to_owned(),
            "Invalid domain: \"localhost\". Must be a valid domain name",
        ),
        (
            "domainAllowList",
            eleven_names.join(","),
            "Domain allow list cannot contain more than 10 domains",
        ),
    ] {
        let r = t
            .api(Method::POST, "/sandbox", Some(json!({ field: list })))
            .await;
        assert_eq!(r.status, 400, "{field} {list}: {}", r.body);
        assert_eq!(r.json()["message"], message);
    }
    assert!(t.sim.inventory().is_empty(), "nothing made");
    let ok = t
        .create(json!({
            "networkAllowList": eleven[..10].join(","),
            "domainAllowList": "example.com,*.example.com",
        }))
        .await;
    let bad = t
        .api(
            Method::POST,
            &format!("/sandbox/{ok}/network-settings"),
            Some(json!({ "networkAllowList": "::1/128" })),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
}

/// `sandbox/dto/sandbox-list-item.dto.ts`: a list item has no network
/// field; `dto/sandbox.dto.ts:104-116` (the sandbox) has all three.
#[tokio::test]
async fn list_items_carry_no_network_fields_as_sandbox_list_item_dto_ts() {
    let t = T::start(fast());
    let id = t
        .create(json!({ "networkAllowList": "10.0.0.0/24", "domainAllowList": "example.com" }))
        .await;
    let got = state(&t, &id).await;
    assert_eq!(got["networkAllowList"], "10.0.0.0/24");
    assert_eq!(got["domainAllowList"], "example.com");
    assert_eq!(got["networkBlockAll"], false);
    let list = t.api(Method::GET, "/sandbox", None).await.json();
    let item = &list["items"][0];
    assert_eq!(item["id"], id.as_str());
    for f in ["networkAllowList", "domainAllowList", "networkBlockAll"] {
        assert!(item.get(f).is_none(), "{f} in a list item: {item}");
    }
}

/// `sandbox.controller.ts:748-779` (`POST /sandbox/{id}/snapshot`, 200
/// with the sandbox), `sandbox.service.ts:1308-1316` (started or stopped,
/// not pending) and `:1365-1375` (`snapshotting`, pending),
/// `utils/persist-snapshot-from-sandbox.util.ts:60-67` (the snapshot
/// appears `active` once done; 404 before, `snapshot.service.ts:527-545`),
/// `sandbox.service.ts:1488-1495` (the sandbox back), `:509-511` (a
/// create from a snapshot not `active`: 400),
/// `snapshot.controller.ts:164-186` (`DELETE /snapshots/{id}`, a UUID)
/// and `snapshot.service.ts:433-450` (`removing`, then gone).
#[tokio::test]
async fn a_snapshot_of_a_sandbox_is_made_used_and_removed_as_sandbox_service_ts_1297() {
    let t = T::start(SimOptions {
        job_lag: Duration::from_millis(600),
        ..fast()
    });
    let src = t.create(json!({ "name": "box" })).await;
    assert_eq!(t.exec(&src, "echo setup > /home/daytona/made").await.0, 0);
    let r = t
        .api(
            Method::POST,
            &format!("/sandbox/{src}/snapshot"),
            Some(json!({ "name": "cp-1" })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["state"], "snapshotting");
    assert_eq!(
        t.api(Method::GET, "/snapshots/cp-1", None).await.status,
        404
    );
    let again = t
        .api(
            Method::POST,
            &format!("/sandbox/{src}/snapshot"),
            Some(json!({ "name": "cp-2" })),
        )
        .await;
    assert_eq!(again.status, 400);
    assert_eq!(
        again.json()["message"],
        "Sandbox must be in started or stopped state to create a snapshot"
    );
    let active = eventually(Duration::from_secs(10), || async {
        let s = t.api(Method::GET, "/snapshots/cp-1", None).await;
        s.status == 200 && s.json()["state"] == "active"
    })
    .await;
    assert!(active);
    assert!(started(&t, &src).await, "the sandbox is back");
    let snap = t.api(Method::GET, "/snapshots/cp-1", None).await.json();
    assert_eq!(snap["sandboxClass"], "container");
    let from = t.create(json!({ "snapshot": "cp-1" })).await;
    let (code, out) = t.exec(&from, "cat /home/daytona/made").await;
    assert_eq!((code, out.trim()), (0, "setup"));
    let by_name = t.api(Method::DELETE, "/snapshots/cp-1", None).await;
    assert_eq!(by_name.status, 400);
    assert_eq!(
        by_name.json()["message"],
        "Validation failed (uuid is expected)"
    );
    let sid = snap["id"].as_str().unwrap();
    let del = t
        .api(Method::DELETE, &format!("/snapshots/{sid}"), None)
        .await;
    assert_eq!(del.status, 200, "{}", del.body);
    assert_eq!(
        t.api(Method::GET, "/snapshots/cp-1", None).await.json()["state"],
        "removing"
    );
    let refused = t
        .api(
            Method::POST,
            "/sandbox",
            Some(json!({ "snapshot": "cp-1" })),
        )
        .await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["message"], "Snapshot cp-1 is removing");
    let gone = eventually(Duration::from_secs(5), || async {
        t.api(Method::GET, "/snapshots/cp-1", None).await.status == 404
    })
    .await;
    assert!(gone);
    assert!(t.sim.snapshots().is_empty());
}
