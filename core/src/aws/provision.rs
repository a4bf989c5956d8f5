//! What `beckon aws init` creates when it is missing: the ledger table (`pk`/`sk`, GSI `gsi1`,
//! TTL on `expires_at`, on-demand) and the FIFO task queue with its FIFO dead-letter queue and
//! redrive policy, the same shapes `infra/template.yaml` deploys. Idempotent: existing resources
//! are found and left as they are (never altered or deleted). Used by the CLI and by the tests.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;

use super::{GSI1, TTL_ATTRIBUTE};

/// What to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The ledger table.
    pub table_name: String,
    /// The task queue's name (must end in `.fifo`).
    pub queue_name: String,
    /// The dead-letter queue's name (must end in `.fifo`).
    pub dlq_name: String,
    /// Receives before a message moves to the dead-letter queue.
    pub max_receive_count: u32,
    /// The task queue's default visibility timeout, in seconds.
    pub visibility_timeout_secs: u32,
}

/// What exists afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioned {
    /// The table name.
    pub table_name: String,
    /// True when this call created the table.
    pub table_created: bool,
    /// The task queue URL (`BECKON_QUEUE_URL`).
    pub queue_url: String,
    /// The dead-letter queue URL.
    pub dlq_url: String,
}

/// A resource could not be created or inspected.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct ProvisionError {
    /// Which resource.
    pub what: String,
    /// The service's answer.
    pub detail: String,
}

fn fail(what: &str, detail: impl std::fmt::Display) -> ProvisionError {
    ProvisionError { what: what.to_owned(), detail: detail.to_string() }
}

/// Creates what `plan` names when missing.
///
/// # Errors
/// [`ProvisionError`] naming the resource whose creation or lookup failed.
pub async fn ensure(config: &aws_config::SdkConfig, plan: &Plan) -> Result<Provisioned, ProvisionError> {
    let table_created = ensure_table(&aws_sdk_dynamodb::Client::new(config), &plan.table_name).await?;
    let sqs = aws_sdk_sqs::Client::new(config);
    let dlq_url = ensure_queue(&sqs, &plan.dlq_name, Vec::new()).await?;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| fail(&plan.dlq_name, aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| fail(&plan.dlq_name, "no QueueArn attribute"))?;
    let redrive = serde_json::json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": plan.max_receive_count });
    let queue_url = ensure_queue(
        &sqs,
        &plan.queue_name,
        vec![
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
            (QueueAttributeName::VisibilityTimeout, plan.visibility_timeout_secs.to_string()),
        ],
    )
    .await?;
    Ok(Provisioned { table_name: plan.table_name.clone(), table_created, queue_url, dlq_url })
}

async fn ensure_table(ddb: &aws_sdk_dynamodb::Client, name: &str) -> Result<bool, ProvisionError> {
    let err = |e| fail(name, aws_sdk_dynamodb::error::DisplayErrorContext(e));
    match ddb.describe_table().table_name(name).send().await {
        Ok(_) => return Ok(false),
        Err(e) if e.as_service_error().is_some_and(|se| se.is_resource_not_found_exception()) => {}
        Err(e) => return Err(fail(name, aws_sdk_dynamodb::error::DisplayErrorContext(e))),
    }
    let attr = |n: &str| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| fail(name, e))
    };
    let key = |n: &str, t: KeyType| {
        KeySchemaElement::builder().attribute_name(n).key_type(t).build().map_err(|e| fail(name, e))
    };
    let gsi = GlobalSecondaryIndex::builder()
        .index_name(GSI1)
        .key_schema(key("gsi1pk", KeyType::Hash)?)
        .key_schema(key("gsi1sk", KeyType::Range)?)
        .projection(Projection::builder().projection_type(ProjectionType::All).build())
        .build()
        .map_err(|e| fail(name, e))?;
    let created = ddb
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk")?)
        .attribute_definitions(attr("sk")?)
        .attribute_definitions(attr("gsi1pk")?)
        .attribute_definitions(attr("gsi1sk")?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .global_secondary_indexes(gsi)
        .send()
        .await;
    match created {
        Ok(_) => {}
        // Someone else created it between the describe and the create.
        Err(e) if e.as_service_error().is_some_and(|se| se.is_resource_in_use_exception()) => return Ok(false),
        Err(e) => return Err(err(e)),
    }
    aws_sdk_dynamodb::client::Waiters::wait_until_table_exists(ddb)
        .table_name(name)
        .wait(std::time::Duration::from_secs(120))
        .await
        .map_err(|e| fail(name, aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
    let ttl = TimeToLiveSpecification::builder()
        .attribute_name(TTL_ATTRIBUTE)
        .enabled(true)
        .build()
        .map_err(|e| fail(name, e))?;
    ddb.update_time_to_live()
        .table_name(name)
        .time_to_live_specification(ttl)
        .send()
        .await
        .map_err(|e| fail(name, aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
    Ok(true)
}

async fn ensure_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    extra: Vec<(QueueAttributeName, String)>,
) -> Result<String, ProvisionError> {
    if let Ok(found) = sqs.get_queue_url().queue_name(name).send().await {
        if let Some(url) = found.queue_url {
            return Ok(url);
        }
    }
    let mut create = sqs
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
    for (k, v) in extra {
        create = create.attributes(k, v);
    }
    create
        .send()
        .await
        .map_err(|e| fail(name, aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .queue_url
        .ok_or_else(|| fail(name, "CreateQueue returned no URL"))
}
