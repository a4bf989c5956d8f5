//! Test support for the AWS backend: the moto emulator `scripts/test` starts, an SDK config that
//! points at it with dummy credentials (never the process's AWS settings), and fresh, uniquely
//! named tables and queues, so tests share one emulator without sharing state.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use beckon_core::aws::provision::{self, Plan, Provisioned};

/// Where `scripts/test` exports the emulator's endpoint.
pub const ENDPOINT_VAR: &str = "BECKON_TEST_AWS_ENDPOINT";

/// The region every test resource lives in.
pub const REGION: &str = "us-east-1";

/// The emulator endpoint; panics with instructions when it is not running.
pub fn endpoint() -> String {
    std::env::var(ENDPOINT_VAR).unwrap_or_else(|_| {
        panic!("{ENDPOINT_VAR} is unset: this test needs the moto emulator; run scripts/test (it starts moto)")
    })
}

/// An SDK config for `endpoint`: explicit region, static dummy credentials, nothing from the environment.
pub fn sdk_config(endpoint: &str) -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(beckon_core::aws::https_client())
        .region(Region::new(REGION))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new("test", "test", None, None, "static")))
        .endpoint_url(endpoint)
        .build()
}

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// A fresh table, FIFO queue and FIFO DLQ (after `max_receive_count` receives).
pub async fn fresh(config: &SdkConfig, max_receive_count: u32) -> Provisioned {
    let base = unique("beckon-test");
    let plan = Plan {
        table_name: base.clone(),
        queue_name: format!("{base}.fifo"),
        dlq_name: format!("{base}-dlq.fifo"),
        max_receive_count,
        visibility_timeout_secs: 30,
    };
    provision::ensure(config, &plan).await.expect("provision table and queues on moto")
}
