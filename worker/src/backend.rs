//! Which ledger an operator command reads: the SQLite file (the default) or, with
//! `BECKON_BACKEND=aws`, the DynamoDB table `BECKON_TABLE_NAME` through the standard AWS chain
//! (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL` for an emulator). Opening only: no writes here.

use std::sync::Arc;

use beckon_core::aws::DynamoLedger;
use beckon_core::clock::SystemClock;
use beckon_core::config::{AwsSettings, ConfigError, Settings};
use beckon_core::ledger::Ledger;

/// The DynamoDB ledger when `settings` ask for the aws backend; `None` for SQLite.
///
/// # Errors
/// When `BECKON_TABLE_NAME` is missing with the aws backend.
pub async fn aws_ledger(settings: &Settings) -> Result<Option<Arc<dyn Ledger>>, ConfigError> {
    if settings.backend != Some(beckon_core::config::Backend::Aws) {
        return Ok(None);
    }
    let aws = AwsSettings::load(|k| std::env::var(k).ok());
    let table = aws.table_name.ok_or_else(|| ConfigError::Invalid {
        name: beckon_core::config::vars::TABLE_NAME,
        reason: "required with BECKON_BACKEND=aws".to_owned(),
    })?;
    let sdk = beckon_core::aws::config_loader().load().await;
    Ok(Some(Arc::new(DynamoLedger::new(&sdk, table, Arc::new(SystemClock)))))
}
