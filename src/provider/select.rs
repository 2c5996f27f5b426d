//! Choosing the provider from flag, environment and default.
