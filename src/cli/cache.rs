//! `rfs cache ls` and `rfs cache prune`: the caches rfs keeps between
//! runs (`sandbox(#{ caches })`), under the state directory.

use clap::Subcommand;

use crate::settings;
use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct CacheCommand {
    #[command(subcommand)]
    command: CacheSubcommand,
}

#[derive(Debug, Subcommand)]
enum CacheSubcommand {
    /// List every cache: provider, repository, name, files, bytes and
    /// content digest, and its folder.
    Ls,
    /// Empty caches (all, or those named): the next run that mounts one
    /// starts from nothing. A cache a run holds is left as it is.
    Prune {
        /// Only the caches of this name.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Only this provider's caches.
        #[arg(long, value_name = "PROVIDER")]
        provider: Option<String>,
    },
}

impl CacheCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        let root = crate::caches::root(&settings::state_dir());
        match self.command {
            CacheSubcommand::Ls => {
                let all = crate::caches::list(&root);
                for c in &all {
                    match &c.content {
                        Some(n) => outln!(
                            "{:<8} {:<30} {:<16} {:>6} files {:>12} bytes  sha256 {}  {}",
                            c.provider,
                            c.repo,
                            c.name,
                            n.files,
                            n.bytes,
                            &n.sha256[..16],
                            c.dir.display()
                        ),
                        None => outln!(
                            "{:<8} {:<30} {:<16} (unreadable)  {}",
                            c.provider,
                            c.repo,
                            c.name,
                            c.dir.display()
                        ),
                    }
                }
                if all.is_empty() {
                    errln!("rfs: no caches in {}", root.display());
                }
                Ok(exit_code::SUCCESS)
            }
            CacheSubcommand::Prune { name, provider } => {
                let (mut emptied, mut held) = (0, 0);
                for c in crate::caches::list(&root) {
                    if name.as_ref().is_some_and(|n| *n != c.name)
                        || provider.as_ref().is_some_and(|p| *p != c.provider)
                    {
                        continue;
                    }
                    let done = crate::caches::prune(&c.dir).map_err(|e| {
                        Error::Internal(format!("cannot empty cache {}: {e}", c.dir.display()))
                    })?;
                    if done {
                        emptied += 1;
                        outln!("emptied {}", c.dir.display());
                    } else {
                        held += 1;
                        errln!(
                            "rfs cache prune: {} is held by a run; left as it is",
                            c.dir.display()
                        );
                    }
                }
                errln!("rfs cache prune: emptied {emptied} cache(s), {held} held by a run");
                Ok(exit_code::SUCCESS)
            }
        }
    }
}
