//! A tiny HTTP client for the server under test.

use std::time::Duration;

use reqwest::Method;
use rfs_daytona_sim::{Sim, SimOptions};
use serde_json::{json, Value};

pub struct T {
    pub sim: Sim,
    pub http: reqwest::Client,
}

pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

pub fn fast() -> SimOptions {
    SimOptions {
        delete_lag: Duration::from_millis(400),
        list_lag: Duration::from_millis(0),
        ..SimOptions::default()
    }
}

impl T {
    pub fn start(opts: SimOptions) -> T {
        T {
            sim: Sim::start(opts).expect("sim starts"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    pub async fn raw(
        &self,
        method: Method,
        url: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut req = self
            .http
            .request(method, url)
            .bearer_auth(self.sim.api_key());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("request to {url}: {e}"));
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.text().await.unwrap_or_default();
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn api(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        let url = format!("{}{}", self.sim.api_url(), path);
        self.raw(method, &url, body, &[]).await
    }

    pub fn tb_url(&self, id: &str, path: &str) -> String {
        format!("{}/{}{}", self.sim.toolbox_url(), id, path)
    }

    pub async fn tb(&self, id: &str, method: Method, path: &str, body: Option<Value>) -> Resp {
        let url = self.tb_url(id, path);
        self.raw(method, &url, body, &[("X-Daytona-SDK-Version", "0.190.0")])
            .await
    }

    /// Create a sandbox; returns its id.
    pub async fn create(&self, body: Value) -> String {
        let r = self.api(Method::POST, "/sandbox", Some(body)).await;
        assert_eq!(r.status, 200, "create: {}", r.body);
        let v = r.json();
        assert_eq!(v["state"], "started");
        v["id"].as_str().unwrap().to_string()
    }

    /// `process/execute` → (exitCode, result).
    pub async fn exec(&self, id: &str, command: &str) -> (i64, String) {
        let r = self
            .tb(
                id,
                Method::POST,
                "/process/execute",
                Some(json!({ "command": command })),
            )
            .await;
        assert_eq!(r.status, 200, "execute: {}", r.body);
        let v = r.json();
        (
            v["exitCode"].as_i64().unwrap(),
            v["result"].as_str().unwrap().to_string(),
        )
    }
}

/// Poll `cond` every 20 ms for up to `max`.
pub async fn eventually<F, Fut>(max: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + max;
    while std::time::Instant::now() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
