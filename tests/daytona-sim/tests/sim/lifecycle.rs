//! Sandbox lifecycle over the REST API: soft delete, 409, list shapes and lag, labels, auth, policies.

use std::time::{Duration, Instant};

use reqwest::Method;
use rfs_daytona_sim::{ListShape, SimOptions};
use serde_json::{json, Value};

use crate::support::{eventually, fast, T};

#[tokio::test]
async fn delete_is_soft_then_404_and_a_second_delete_is_409() {
    let t = T::start(fast());
    let id = t
        .create(json!({ "name": "life", "labels": { "relayflows/run": "r1" } }))
        .await;
    let got = t
        .api(Method::GET, &format!("/sandbox/{id}"), None)
        .await
        .json();
    assert_eq!(got["name"], "life");
    assert_eq!(got["labels"]["relayflows/run"], "r1");
    assert_eq!(got["user"], "daytona");
    assert!(got["toolboxProxyUrl"]
        .as_str()
        .unwrap()
        .ends_with("/toolbox"));
    // by name too
    assert_eq!(t.api(Method::GET, "/sandbox/life", None).await.status, 200);

    let del = t.api(Method::DELETE, &format!("/sandbox/{id}"), None).await;
    assert_eq!(del.status, 200);
    let dto = del.json();
    assert_eq!(
        dto["state"], "started",
        "the delete answer carries the old state"
    );
    assert_eq!(dto["desiredState"], "destroyed");

    let during = t.api(Method::GET, &format!("/sandbox/{id}"), None).await;
    assert_eq!(during.status, 200);
    assert_eq!(during.json()["state"], "destroying");
    assert_eq!(t.sim.inventory()[0].state, "destroying");
    let again = t.api(Method::DELETE, &format!("/sandbox/{id}"), None).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.json()["message"], "Sandbox state change in progress");
    // the name is free again at once
    assert_eq!(t.api(Method::GET, "/sandbox/life", None).await.status, 404);

    let gone = eventually(Duration::from_secs(3), || async {
        t.api(Method::GET, &format!("/sandbox/{id}"), None)
            .await
            .status
            == 404
    })
    .await;
    assert!(gone, "GET turns 404 after the delete lag");
    let nf = t
        .api(Method::GET, &format!("/sandbox/{id}"), None)
        .await
        .json();
    assert_eq!(nf["statusCode"], 404);
    assert_eq!(nf["error"], "Not Found");
    assert_eq!(
        nf["message"],
        format!("Sandbox with ID or name {id} not found")
    );
    assert_eq!(
        t.api(Method::DELETE, &format!("/sandbox/{id}"), None)
            .await
            .status,
        404
    );
    assert!(t.sim.inventory().is_empty());
}

fn ids(v: &Value) -> Vec<String> {
    let items = if v.is_array() { v } else { &v["items"] };
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn list_filters_by_json_labels_and_pages_with_a_cursor() {
    let t = T::start(fast());
    let a1 = t
        .create(json!({ "labels": { "run": "a", "k": "1" } }))
        .await;
    let a2 = t
        .create(json!({ "labels": { "run": "a", "k": "2" } }))
        .await;
    let b = t.create(json!({ "labels": { "run": "b" } })).await;

    let r = t
        .api(
            Method::GET,
            "/sandbox?labels=%7B%22run%22%3A%22a%22%7D",
            None,
        )
        .await;
    assert_eq!(r.status, 200);
    let got = ids(&r.json());
    assert!(
        got.contains(&a1) && got.contains(&a2) && !got.contains(&b),
        "{got:?}"
    );
    assert!(r.json()["nextCursor"].is_null());
    // all pairs must match
    let both = t
        .api(
            Method::GET,
            "/sandbox?labels=%7B%22run%22%3A%22a%22%2C%22k%22%3A%222%22%7D",
            None,
        )
        .await;
    assert_eq!(ids(&both.json()), vec![a2.clone()]);
    let bad = t.api(Method::GET, "/sandbox?labels=run%3Da", None).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["message"], "Invalid labels JSON format");

    // paging: follow nextCursor until null
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/sandbox?limit=1&cursor={c}"),
            None => "/sandbox?limit=1".to_string(),
        };
        let page = t.api(Method::GET, &q, None).await.json();
        seen.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    seen.sort();
    let mut all = vec![a1, a2, b];
    all.sort();
    assert_eq!(seen, all);

    let paginated = t
        .api(Method::GET, "/sandbox/paginated?page=1&limit=2", None)
        .await
        .json();
    assert_eq!(paginated["total"], 3);
    assert_eq!(paginated["totalPages"], 2);
    assert_eq!(paginated["items"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn bare_array_list_shape() {
    let t = T::start(SimOptions {
        list_shape: ListShape::BareArray,
        ..fast()
    });
    let id = t.create(json!({ "labels": { "x": "y" } })).await;
    let v = t
        .api(Method::GET, "/sandbox?labels=%7B%22x%22%3A%22y%22%7D", None)
        .await
        .json();
    assert!(v.is_array(), "{v}");
    assert_eq!(ids(&v), vec![id]);
}

#[tokio::test]
async fn list_lags_and_a_deleted_sandbox_reappears_while_get_stays_monotonic() {
    let t = T::start(SimOptions {
        list_lag: Duration::from_millis(200),
        delete_lag: Duration::from_millis(1200),
        reappear_after_delete: true,
        ..SimOptions::default()
    });
    let id = t.create(json!({ "labels": { "lag": "1" } })).await;
    let list = || async {
        t.api(
            Method::GET,
            "/sandbox?labels=%7B%22lag%22%3A%221%22%7D",
            None,
        )
        .await
        .json()
    };
    assert!(
        ids(&list().await).is_empty(),
        "a new sandbox is not listed before the list lag"
    );
    assert!(
        eventually(Duration::from_secs(2), || async {
            ids(&list().await).contains(&id)
        })
        .await
    );

    assert_eq!(
        t.api(Method::DELETE, &format!("/sandbox/{id}"), None)
            .await
            .status,
        200
    );
    let start = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    let mut get_seen: Vec<u16> = Vec::new();
    while start.elapsed() < Duration::from_millis(1800) {
        let l = list().await;
        let state = l["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id.as_str())
            .map(|i| i["state"].as_str().unwrap().to_string())
            .unwrap_or_else(|| "absent".into());
        if seen.last() != Some(&state) {
            seen.push(state);
        }
        let g = t
            .api(Method::GET, &format!("/sandbox/{id}"), None)
            .await
            .status;
        if get_seen.last() != Some(&g) {
            get_seen.push(g);
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    assert_eq!(
        seen,
        vec!["started", "absent", "started", "destroying", "absent"],
        "list is non-monotonic"
    );
    assert_eq!(get_seen, vec![200, 404], "GET by id is monotonic");
}

#[tokio::test]
async fn auth_needs_the_key_or_a_jwt_with_the_organization() {
    let t = T::start(fast());
    let url = format!("{}/sandbox", t.sim.api_url());
    let none = t.http.get(&url).send().await.unwrap();
    assert_eq!(none.status().as_u16(), 401);
    let wrong = t.http.get(&url).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let v: Value = wrong.json().await.unwrap();
    assert_eq!(v["statusCode"], 401);
    let jwt = t
        .http
        .get(&url)
        .bearer_auth(t.sim.jwt())
        .header(
            "X-Daytona-Organization-ID",
            rfs_daytona_sim::ORGANIZATION_ID,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(jwt.status().as_u16(), 200);
    let jwt_no_org = t
        .http
        .get(&url)
        .bearer_auth(t.sim.jwt())
        .send()
        .await
        .unwrap();
    assert_eq!(jwt_no_org.status().as_u16(), 403);
    // config is public, like Daytona's
    let cfg = t
        .http
        .get(format!("{}/config", t.sim.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(cfg.status().as_u16(), 200);
    let id = t.create(json!({})).await;
    let tb = t.http.get(t.tb_url(&id, "/work-dir")).send().await.unwrap();
    assert_eq!(tb.status().as_u16(), 401);
    assert_eq!(
        t.tb(&id, Method::GET, "/work-dir", None).await.json()["dir"],
        "/home/daytona"
    );
}

#[tokio::test]
async fn unknown_snapshot_and_resources_with_a_snapshot_are_refused() {
    let t = T::start(fast());
    let r = t
        .api(
            Method::POST,
            "/sandbox",
            Some(json!({ "snapshot": "no-such-snap" })),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "Snapshot no-such-snap not found. Did you add it through the Daytona Dashboard?"
    );
    let r = t
        .api(
            Method::POST,
            "/sandbox",
            Some(json!({ "snapshot": "daytona-small", "cpu": 2 })),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "Cannot specify Sandbox resources when using a snapshot"
    );
    let ok = t
        .api(
            Method::POST,
            "/sandbox",
            Some(json!({ "snapshot": "daytona-small" })),
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["snapshot"], "daytona-small");
    assert!(
        t.sim.inventory().len() == 1,
        "refused creates leave nothing"
    );
}

#[tokio::test]
async fn auto_stop_then_auto_delete_unless_kept_alive() {
    let t = T::start(SimOptions {
        auto_stop_tick: Duration::from_millis(150),
        ..fast()
    });
    // dead-man: stop after 2 idle "minutes", delete at once when stopped
    let idle = t
        .create(json!({ "autoStopInterval": 2, "autoDeleteInterval": 0 }))
        .await;
    let kept = t
        .create(json!({ "autoStopInterval": 2, "autoDeleteInterval": 0 }))
        .await;
    let started = Instant::now();
    let mut kept_ok = true;
    while started.elapsed() < Duration::from_millis(900) {
        assert_eq!(
            t.api(
                Method::POST,
                &format!("/sandbox/{kept}/last-activity"),
                None
            )
            .await
            .status,
            201
        );
        let s = t.api(Method::GET, &format!("/sandbox/{kept}"), None).await;
        kept_ok &= s.status == 200 && s.json()["state"] == "started";
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(kept_ok, "keep-alive keeps a sandbox started");
    let gone = eventually(Duration::from_secs(3), || async {
        t.api(Method::GET, &format!("/sandbox/{idle}"), None)
            .await
            .status
            == 404
    })
    .await;
    assert!(gone, "an idle ephemeral sandbox stops and deletes itself");
    assert_eq!(
        t.sim
            .inventory()
            .iter()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>(),
        vec![kept]
    );
}

fn host_processes_mentioning(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                out.push(cmd);
            }
        }
    }
    out
}

#[tokio::test]
async fn shutdown_leaves_no_process_and_no_directory() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    let dir = t.sim.sandboxes_dir();
    assert!(dir.join(&id).is_dir());
    let marker = "sleep 7391";
    assert_eq!(
        t.tb(
            &id,
            Method::POST,
            "/process/session",
            Some(json!({ "sessionId": "bg" }))
        )
        .await
        .status,
        201
    );
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/session/bg/exec",
            Some(json!({ "command": format!("{marker} &"), "runAsync": true })),
        )
        .await;
    assert_eq!(r.status, 202);
    let pty = t
        .tb(
            &id,
            Method::POST,
            "/process/pty",
            Some(json!({ "id": "p1" })),
        )
        .await;
    assert_eq!(pty.status, 201);
    assert!(
        eventually(Duration::from_secs(3), || async {
            !host_processes_mentioning(marker).is_empty()
        })
        .await
    );
    assert!(
        !host_processes_mentioning(&dir.to_string_lossy()).is_empty(),
        "the sandbox init runs"
    );
    let T { sim, .. } = t;
    sim.shutdown();
    assert!(!dir.exists(), "sandbox directories removed");
    assert!(
        host_processes_mentioning(marker).is_empty(),
        "sandbox processes killed"
    );
    assert!(
        host_processes_mentioning(&dir.to_string_lossy()).is_empty(),
        "no init left"
    );
}
