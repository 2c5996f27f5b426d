//! A provider's failures are kinds a caller can match (issue #21, item 6):
//! the same mistake gives the same `ProviderError` variant on every
//! provider, with the provider's own message, so an embedder never has
//! to read the text to tell a malformed request from a command that could
//! not start or a sandbox that is gone.

mod common;
use common::*;

use std::time::Duration;

use rfs::destroy_verified;
use rfs::provider::{labels, Collect, CreateSpec, ExecRequest, Provider, ProviderError};
use tokio_util::sync::CancellationToken;

fn req(argv: &[&str], cwd: &str) -> ExecRequest {
    ExecRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.to_string(),
        env: Vec::new(),
        timeout: Some(Duration::from_secs(30)),
        cancel: CancellationToken::new(),
    }
}

async fn exec(p: &dyn Provider, id: &str, r: ExecRequest) -> Result<(), ProviderError> {
    p.exec(id, &r, &mut Collect::default()).await.map(|_| ())
}

provider_tests! {
    #[not_under_gvisor = "creates its sandbox through the provider API, with no journal for the gVisor pass to check"]
    fn each_kind_of_refusal_is_the_same_variant_on_every_provider(rfs: &Rfs) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let p = rfs.provider();
        let mut l = labels::rfs_selector();
        l.insert(labels::RUN_ID.into(), uuid_like());
        let spec = CreateSpec {
            run_id: l[labels::RUN_ID].clone(),
            labels: l,
            max_lifetime: Duration::from_secs(600),
            isolation: rfs::provider::isolation::IsolationRequest::from_settings(rfs.isolation, None)
                .unwrap(),
            ..Default::default()
        };
        let info = rt.block_on(p.create(&spec)).expect("create");
        let id = info.id.clone();
        let missing = format!("{}/no/such/dir", info.home);
        let results = rt.block_on(async {
            [
                ("empty argv", exec(p.as_ref(), &id, req(&[], &info.home)).await),
                ("relative cwd", exec(p.as_ref(), &id, req(&["true"], "rel/dir")).await),
                ("missing cwd", exec(p.as_ref(), &id, req(&["true"], &missing)).await),
            ]
        });
        rt.block_on(destroy_verified(p.as_ref(), &id, Duration::from_secs(30)))
            .expect("destroyed and verified gone");
        for (what, r) in results {
            match (what, &r) {
                ("empty argv" | "relative cwd", Err(ProviderError::Invalid(_))) => {}
                ("missing cwd", Err(ProviderError::NotStarted(m))) => {
                    assert!(m.contains("does not exist"), "{}: {m}", rfs.prov.name());
                }
                _ => panic!("{}: {what} gave {r:?}", rfs.prov.name()),
            }
        }
        let gone = rt.block_on(exec(p.as_ref(), &id, req(&["true"], &info.home)));
        assert!(
            matches!(gone, Err(ProviderError::NotFound { .. } | ProviderError::NotRunning(_))),
            "{}: exec in a destroyed sandbox gave {gone:?}",
            rfs.prov.name()
        );
    }
}
