//! Docker provider (bollard). Implemented in its own change.
