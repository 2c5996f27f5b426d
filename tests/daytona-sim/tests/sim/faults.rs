//! Every fault knob, observed over plain HTTP.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::support::{eventually, fast, T};
use crate::toolbox::upload;

#[tokio::test]
async fn five_xx_burst_with_empty_bodies_then_recovery_and_requests_are_recorded() {
    let t = T::start(fast());
    t.sim.faults().fail_next("GET", "/sandbox", 2, 503, None);
    let a = t.api(Method::GET, "/sandbox", None).await;
    let b = t.api(Method::GET, "/sandbox", None).await;
    let c = t.api(Method::GET, "/sandbox", None).await;
    assert_eq!((a.status, a.body.as_str()), (503, ""));
    assert_eq!((b.status, b.body.as_str()), (503, ""));
    assert_eq!(c.status, 200);
    t.sim.faults().fail_next(
        "*",
        "/sandbox",
        1,
        500,
        Some(r#"{"message":"boom"}"#.into()),
    );
    assert_eq!(
        t.api(Method::GET, "/sandbox", None).await.json()["message"],
        "boom"
    );
    let statuses: Vec<(String, String, u16)> = t
        .sim
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.status))
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("GET".into(), "/sandbox".into(), 503),
            ("GET".into(), "/sandbox".into(), 503),
            ("GET".into(), "/sandbox".into(), 200),
            ("GET".into(), "/sandbox".into(), 500),
        ]
    );
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    t.sim
        .faults()
        .rate_limit_next("POST", &format!("/toolbox/{id}/process/execute"), 1, 3);
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/execute",
            Some(json!({ "command": "true" })),
        )
        .await;
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "3");
    assert_eq!(t.exec(&id, "echo fine").await, (0, "fine\n".into()));
}

#[tokio::test]
async fn slow_responses_until_cleared() {
    let t = T::start(fast());
    t.sim
        .faults()
        .slow("GET", "/sandbox", Duration::from_millis(400));
    let started = Instant::now();
    assert_eq!(t.api(Method::GET, "/sandbox", None).await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(400));
    t.sim.faults().clear();
    let started = Instant::now();
    t.api(Method::GET, "/sandbox", None).await;
    assert!(started.elapsed() < Duration::from_millis(400));
}

#[tokio::test]
async fn dropped_connections_get_no_response() {
    let t = T::start(fast());
    t.sim.faults().drop_next("GET", "/sandbox", 1);
    let url = format!("{}/sandbox", t.sim.api_url());
    let err = t.http.get(&url).bearer_auth(t.sim.api_key()).send().await;
    assert!(
        err.is_err(),
        "connection closed without a response: {err:?}"
    );
    assert_eq!(t.api(Method::GET, "/sandbox", None).await.status, 200);
    assert_eq!(t.sim.requests()[0].status, 0);
}

#[tokio::test]
async fn a_corrupted_upload_lands_with_one_byte_flipped() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    t.sim.faults().corrupt_next_upload();
    assert_eq!(
        upload(&t, &id, "/home/daytona/a.bin", data.clone()).await,
        200
    );
    assert_eq!(
        upload(&t, &id, "/home/daytona/b.bin", data.clone()).await,
        200
    );
    let get = |p: &'static str| {
        let url = format!("{}?path={p}", t.tb_url(&id, "/files/download"));
        let req = t.http.get(url).bearer_auth(t.sim.api_key());
        async move { req.send().await.unwrap().bytes().await.unwrap().to_vec() }
    };
    let a = get("/home/daytona/a.bin").await;
    let b = get("/home/daytona/b.bin").await;
    assert_eq!(a.len(), data.len());
    assert_eq!(
        a.iter().zip(&data).filter(|(x, y)| x != y).count(),
        1,
        "exactly one byte differs"
    );
    assert_eq!(b, data, "only the next upload is corrupted");
}

#[tokio::test]
async fn a_create_can_succeed_on_the_server_after_the_client_gave_up() {
    let t = T::start(fast());
    t.sim
        .faults()
        .create_succeeds_late(Duration::from_millis(1500));
    let url = format!("{}/sandbox", t.sim.api_url());
    let res = t
        .http
        .post(&url)
        .bearer_auth(t.sim.api_key())
        .timeout(Duration::from_millis(300))
        .json(&json!({ "name": "late", "labels": { "run": "late" } }))
        .send()
        .await;
    assert!(res.unwrap_err().is_timeout());
    let exists = eventually(Duration::from_secs(10), || async {
        t.sim.inventory().len() == 1
    })
    .await;
    assert!(exists, "the sandbox exists although the client timed out");
    assert_eq!(t.sim.inventory()[0].name, "late");
    let found = t
        .api(
            Method::GET,
            "/sandbox?labels=%7B%22run%22%3A%22late%22%7D",
            None,
        )
        .await
        .json();
    assert_eq!(
        found["items"][0]["name"], "late",
        "findable by labels to adopt or destroy"
    );
}
