//! Tests of the Daytona-API test server itself, over plain HTTP.

mod daemon;
mod faults;
mod lifecycle;
mod rules;
mod support;
mod toolbox;
