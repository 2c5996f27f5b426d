//! A run's caches (`sandbox(#{ caches })`, see [`crate::caches`]):
//! checked at the `sandbox()` call, locked, digested and journaled before
//! the sandbox is created, digested again and released after it is
//! destroyed.

use std::path::PathBuf;

use super::Run;
use crate::caches::{self, Content, Held};
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::isolation::IsolationRequest;
use rfs_sandbox::provider::CacheMount;
use rfs_sandbox::untrusted_tree;

/// How runs sharing a cache take turns (journaled with each mount).
const LOCK: &str = "exclusive flock on the cache, held from before the sandbox is created until after it is destroyed";

/// A cache this run holds.
pub(crate) struct HeldCache {
    name: String,
    dir: PathBuf,
    at_mount: Content,
    /// Bound into the sandbox as it is (not written back by the
    /// provider): made fit to keep after the sandbox is destroyed.
    bound_as_is: bool,
    _held: Held,
}

impl Run {
    /// Refuse, before anything runs, a cache whose name or path is not
    /// allowed, or a provider that cannot mount one.
    pub(crate) fn check_caches(
        &self,
        opts: &super::SandboxOptions,
        req: &IsolationRequest,
    ) -> Result<()> {
        if opts.caches.is_empty() {
            return Ok(());
        }
        if self.cfg.replay_of.is_some() {
            // The bundle's script is not the repository's: it must neither
            // read nor fill the caches the person's own runs use.
            return Err(self.refuse(
                "caches refused in a replay: a bundle's script may not read or fill the caches of this repository's own runs (a run that used a cache is not reproducible from its commit anyway)"
                    .to_owned(),
            ));
        }
        for (name, path) in &opts.caches {
            self.refuse_secret_in("a cache's name", name)?;
            self.refuse_secret_in("a cache's path", path)?;
            caches::check_name(name).map_err(|m| self.refuse(m))?;
            caches::home_relative(name, path).map_err(|m| self.refuse(m))?;
        }
        self.cfg
            .provider
            .cache_mounts(req)
            .map_err(|why| self.refuse(format!("caches refused: {why}")))
    }

    /// Lock, digest and journal every cache of `opts`; what the provider
    /// mounts.
    pub(crate) fn open_caches(
        &self,
        opts: &super::SandboxOptions,
        req: &IsolationRequest,
    ) -> Result<Vec<CacheMount>> {
        let root = caches::root(&self.cfg.state_dir);
        let repo = caches::repo_key(&self.cfg.invocation_dir);
        let provider = self.cfg.provider.name().to_owned();
        let bound_as_is = self.cfg.provider.caches_bound_as_they_are(req);
        let mut mounts = vec![];
        for (name, path) in &opts.caches {
            let rel = caches::home_relative(name, path).map_err(|m| self.refuse(m))?;
            let dir = caches::dir(&root, &provider, &repo, name);
            caches::create(&root, &provider, &repo, name).map_err(|e| {
                Error::Internal(format!("cannot create cache folder {}: {e}", dir.display()))
            })?;
            let cannot = |e: std::io::Error| {
                Error::Internal(format!("cache `{name}` ({}): {e}", dir.display()))
            };
            let Some((held, waited)) = caches::lock(&dir, caches::LOCK_WAIT).map_err(cannot)?
            else {
                return Err(self.refuse(format!(
                    "cache `{name}` ({}) is held by another run for more than {} s; it is not shared while a run uses it",
                    dir.display(),
                    caches::LOCK_WAIT.as_secs()
                )));
            };
            if bound_as_is {
                // What a sandbox left there whose run never closed its
                // caches (rfs killed) is made fit to keep before the next
                // one mounts it.
                let _ = self.clean_cache(name, &dir);
            }
            let at_mount = caches::content(&dir).map_err(cannot)?;
            self.record(Event::CacheMount {
                name: name.clone(),
                path: path.clone(),
                dir: dir.display().to_string(),
                sha256: at_mount.sha256.clone(),
                files: at_mount.files,
                bytes: at_mount.bytes,
                lock: LOCK.into(),
                waited_ms: super::ms(waited.as_millis()),
            })?;
            mounts.push(CacheMount {
                name: name.clone(),
                host_dir: dir.clone(),
                home_relative: rel,
            });
            self.state().caches.push(HeldCache {
                name: name.clone(),
                dir,
                at_mount,
                bound_as_is,
                _held: held,
            });
        }
        Ok(mounts)
    }

    /// After teardown: make each cache bound as it is fit to keep (what
    /// the sandbox left there is an attacker's, issue #43), journal what
    /// each holds now, empty one over the cap, release it.
    pub(crate) fn close_caches(&self) {
        let held = std::mem::take(&mut self.state().caches);
        let cap = caches::max_bytes();
        for c in held {
            let (cleaned, unkept) = if c.bound_as_is {
                self.clean_cache(&c.name, &c.dir)
            } else {
                (None, false)
            };
            let now = match caches::content(&c.dir) {
                Ok(n) => n,
                Err(e) => {
                    self.warn(&format!(
                        "cache `{}`: cannot read {}: {e}",
                        c.name,
                        c.dir.display()
                    ));
                    continue;
                }
            };
            let emptied = unkept || (now.charged() > cap && caches::empty(&c.dir).is_ok());
            let _ = self.record(Event::CacheEnd {
                name: c.name.clone(),
                changed: now.sha256 != c.at_mount.sha256,
                sha256: now.sha256,
                files: now.files,
                bytes: now.bytes,
                max_bytes: cap,
                emptied,
                cleaned,
                entries: Some(now.entries),
            });
        }
    }

    /// Pass cache `name` at `dir` (held by this run, no sandbox of it
    /// running) through [`untrusted_tree::clean`]: what was removed or
    /// narrowed, said; a cache that cannot be cleaned (an owner rfs cannot
    /// take) is emptied, said too (`true`).
    fn clean_cache(&self, name: &str, dir: &std::path::Path) -> (Option<String>, bool) {
        match untrusted_tree::clean(dir) {
            Ok(done) if done.changed() => {
                let said = caches::cleaned_text(&done);
                self.warn(&format!(
                    "cache `{name}`: what a sandbox left there was made fit to keep on this machine: {said}"
                ));
                (Some(said), false)
            }
            Ok(_) => (None, false),
            Err(e) => {
                let said = match untrusted_tree::empty(dir) {
                    Ok(()) => format!("emptied: it could not be made fit to keep on this machine ({e})"),
                    Err(e2) => format!(
                        "it could not be made fit to keep on this machine ({e}) nor emptied ({e2}): remove {} by hand",
                        dir.display()
                    ),
                };
                self.warn(&format!("cache `{name}`: {said}"));
                (Some(said), true)
            }
        }
    }
}
