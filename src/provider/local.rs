//! Local provider: a sandbox is a fresh directory under the state directory.
