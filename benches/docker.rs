//! Micro-benchmark of the Docker provider against the docker CLI.
//!
//! Run through `scripts/bench-docker.sh` (which builds the test image).
//! Measures N sequential execs of `true` through the provider and through
//! `docker exec <ctr> true`, and the create+destroy time of a sandbox.
//! Usage: cargo bench --bench docker -- [EXECS] [SANDBOXES]

use std::process::Command;
use std::time::{Duration, Instant};

use rfs::provider::docker::{DockerOptions, DockerProvider};
use rfs::provider::labels;
use rfs::provider::{Collect, CreateSpec, ExecRequest, Provider};
use tokio_util::sync::CancellationToken;

const IMAGE: &str = "rfs-test-busybox:latest";

fn spec() -> CreateSpec {
    let mut l = labels::rfs_selector();
    l.insert(
        labels::RUN_ID.into(),
        format!("bench-{}", uuid::Uuid::new_v4()),
    );
    CreateSpec {
        run_id: l[labels::RUN_ID].clone(),
        labels: l,
        max_lifetime: Duration::from_secs(600),
        ..Default::default()
    }
}

fn per(total: Duration, n: u32) -> f64 {
    total.as_secs_f64() * 1000.0 / f64::from(n)
}

async fn provider_execs(p: &DockerProvider, id: &str, n: u32) -> Duration {
    let req = ExecRequest {
        argv: vec!["true".into()],
        cwd: "/".into(),
        env: Vec::new(),
        timeout: None,
        cancel: CancellationToken::new(),
    };
    let t0 = Instant::now();
    for _ in 0..n {
        let outcome = p
            .exec(id, &req, &mut Collect::default())
            .await
            .expect("exec");
        assert!(outcome.success(), "{outcome:?}");
    }
    t0.elapsed()
}

fn cli_execs(id: &str, n: u32) -> Duration {
    let t0 = Instant::now();
    for _ in 0..n {
        let status = Command::new("docker")
            .args(["exec", id, "true"])
            .status()
            .expect("docker exec");
        assert!(status.success());
    }
    t0.elapsed()
}

#[tokio::main]
async fn main() {
    // `cargo bench` adds `--bench`; only the numbers count.
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let execs: u32 = args.next().map_or(100, |a| a.parse().expect("EXECS"));
    let sandboxes: u32 = args.next().map_or(10, |a| a.parse().expect("SANDBOXES"));
    let p = DockerProvider::connect(DockerOptions {
        image: Some(IMAGE.into()),
        ..DockerOptions::from_env()
    })
    .expect("connect");
    p.preflight().await.expect("preflight");

    let info = p.create(&spec()).await.expect("create");
    // Warm up both paths.
    provider_execs(&p, &info.id, 5).await;
    cli_execs(&info.id, 5);
    let ours = provider_execs(&p, &info.id, execs).await;
    let cli = cli_execs(&info.id, execs);
    p.destroy(&info.id).await.expect("destroy");

    let mut create = Duration::ZERO;
    let mut destroy = Duration::ZERO;
    for _ in 0..sandboxes {
        let t0 = Instant::now();
        let info = p.create(&spec()).await.expect("create");
        create += t0.elapsed();
        let t1 = Instant::now();
        p.destroy(&info.id).await.expect("destroy");
        destroy += t1.elapsed();
    }

    println!("execs of `true`: {execs}");
    println!(
        "  provider    total {:>8.1} ms  per exec {:>6.1} ms",
        per(ours, 1),
        per(ours, execs)
    );
    println!(
        "  docker CLI  total {:>8.1} ms  per exec {:>6.1} ms",
        per(cli, 1),
        per(cli, execs)
    );
    println!(
        "  ratio provider/CLI: {:.2}x",
        ours.as_secs_f64() / cli.as_secs_f64()
    );
    println!("sandboxes: {sandboxes}");
    println!("  create  per sandbox {:>6.1} ms", per(create, sandboxes));
    println!("  destroy per sandbox {:>6.1} ms", per(destroy, sandboxes));
    println!(
        "  create+destroy      {:>6.1} ms",
        per(create + destroy, sandboxes)
    );
}
