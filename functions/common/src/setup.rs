//! Cold start: everything a function builds once and lends to every invocation. Configuration is
//! read here only (DESIGN §7 names through `beckon_core::config`), the SDK config from the standard
//! AWS chain (`AWS_REGION`, `AWS_ENDPOINT_URL`, the execution role), webhook secrets and tracker
//! credentials from the environment or, when a `*_ARN` is set, from Secrets Manager (once; the
//! fetched secret is the current one, an env value stays accepted as the previous one).
//! Every failure is a [`SetupError`], which becomes the Lambda `Diagnostic` in one place.

use std::sync::Arc;

use aws_config::SdkConfig;
use beckon_core::aws::secrets::{SecretError, Secrets};
use beckon_core::aws::{DynamoLedger, SqsQueue};
use beckon_core::clock::{Clock, SystemClock};
use beckon_core::config::{AwsSettings, ConfigError, Settings};
use beckon_core::event::Tracker;
use beckon_core::ingest::{AckMode, Ingest, IngestConfig, LINEAR_REPLAY_WINDOW};
#[cfg(feature = "github")]
use beckon_core::tracker::github::{GithubApp, GithubAuth, GithubClient, GithubConfig};
#[cfg(feature = "linear")]
use beckon_core::tracker::linear::{LinearAuth, LinearClient, LinearConfig};
use beckon_core::tracker::TrackerError;
use lambda_runtime::Diagnostic;

use beckon_core::ingest::ack::TrackerAck;

/// GitHub's public API, when `BECKON_GITHUB_API_URL` is unset.
#[cfg(feature = "github")]
const DEFAULT_GITHUB_API_URL: &str = "https://api.github.com";
/// Linear's GraphQL endpoint, when `BECKON_LINEAR_API_URL` is unset.
#[cfg(feature = "linear")]
const DEFAULT_LINEAR_API_URL: &str = "https://api.linear.app/graphql";

/// What one warm function holds.
#[derive(Debug)]
pub struct App {
    /// The tracker this function serves.
    pub tracker: Tracker,
    /// Ingest over DynamoDB and SQS.
    pub ingest: Ingest,
}

/// A cold start that cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A variable is missing or malformed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A secret could not be fetched from Secrets Manager.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// A tracker client could not be built (a bad App key).
    #[error("tracker client: {0}")]
    Tracker(#[from] TrackerError),
    /// This build leaves out the tracker's client (each function enables only its own feature).
    #[error("this function was built without beckon-functions' `{0}` feature")]
    NotBuilt(Tracker),
}

/// The one mapping from a failed cold start to what Lambda reports.
impl From<SetupError> for Diagnostic {
    fn from(e: SetupError) -> Diagnostic {
        let kind = match &e {
            SetupError::Config(_) => "Beckon.Config",
            SetupError::Secret(_) => "Beckon.Secret",
            SetupError::Tracker(_) | SetupError::NotBuilt(_) => "Beckon.Tracker",
        };
        Diagnostic { error_type: kind.to_owned(), error_message: e.to_string() }
    }
}

/// Installs the tracing subscriber Lambda expects (`AWS_LAMBDA_LOG_LEVEL`, `AWS_LAMBDA_LOG_FORMAT`).
pub fn init_tracing() {
    lambda_runtime::tracing::init_default_subscriber();
}

impl App {
    /// Builds the function for `tracker` from the process environment.
    ///
    /// # Errors
    /// [`SetupError`] naming the variable, secret or client that is wrong.
    pub async fn from_env(tracker: Tracker) -> Result<App, SetupError> {
        let lookup = |k: &str| std::env::var(k).ok();
        let settings = Settings::load(lookup, None)?;
        let aws = AwsSettings::load(lookup);
        let sdk = beckon_core::aws::config_loader().load().await;
        App::new(tracker, settings, &aws, &sdk).await
    }

    /// Builds the function from parsed settings and an SDK config.
    ///
    /// # Errors
    /// As [`App::from_env`].
    pub async fn new(
        tracker: Tracker,
        mut settings: Settings,
        aws: &AwsSettings,
        sdk: &SdkConfig,
    ) -> Result<App, SetupError> {
        let (table, queue_url) = aws.backend()?;
        let secrets = Secrets::new(sdk);
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let mut ack = TrackerAck::default();
        match tracker {
            Tracker::Github => {
                if let Some(arn) = &aws.github_webhook_secret_arn {
                    settings.github_secrets.insert(0, secrets.fetch(arn).await?);
                    settings.github_secrets.truncate(2);
                }
                github_ack(&mut ack, aws, &secrets, &clock).await?;
            }
            Tracker::Linear => {
                if let Some(arn) = &aws.linear_webhook_secret_arn {
                    settings.linear_secrets.insert(0, secrets.fetch(arn).await?);
                    settings.linear_secrets.truncate(2);
                }
                linear_ack(&mut ack, aws, &secrets, &clock).await?;
            }
        }
        let config = IngestConfig {
            github_secrets: settings.github_secrets,
            linear_secrets: settings.linear_secrets,
            rules: settings.rules,
            max_body_bytes: settings.max_body_bytes,
            linear_replay_window: LINEAR_REPLAY_WINDOW,
        };
        let ledger = Arc::new(DynamoLedger::new(sdk, table, clock.clone()));
        let queue = Arc::new(SqsQueue::new(sdk, queue_url));
        let ingest = Ingest::new(config, ledger, queue, clock).with_ack(Arc::new(ack), AckMode::Inline);
        Ok(App { tracker, ingest })
    }
}

/// The 👀 client: a GitHub App (its key from Secrets Manager) or a token; none without either.
#[cfg(feature = "github")]
async fn github_ack(
    ack: &mut TrackerAck,
    aws: &AwsSettings,
    secrets: &Secrets,
    clock: &Arc<dyn Clock>,
) -> Result<(), SetupError> {
    let auth = match (&aws.github_app_id, &aws.github_app_private_key_arn, &aws.github_token) {
        (Some(app_id), Some(arn), _) => {
            Some(GithubAuth::App(GithubApp::from_pem(app_id.clone(), &secrets.fetch(arn).await?)?))
        }
        (_, _, Some(token)) => Some(GithubAuth::Token(token.clone())),
        (None, _, None) | (Some(_), None, None) => None,
    };
    if let Some(auth) = auth {
        let url = aws.github_api_url.as_deref().unwrap_or(DEFAULT_GITHUB_API_URL);
        ack.github = Some(GithubClient::new(GithubConfig::new(url), auth, clock.clone())?);
    }
    Ok(())
}

#[cfg(not(feature = "github"))]
async fn github_ack(_: &mut TrackerAck, _: &AwsSettings, _: &Secrets, _: &Arc<dyn Clock>) -> Result<(), SetupError> {
    Err(SetupError::NotBuilt(Tracker::Github))
}

/// The first-thought client: the app's OAuth token, from the environment or Secrets Manager.
#[cfg(feature = "linear")]
async fn linear_ack(
    ack: &mut TrackerAck,
    aws: &AwsSettings,
    secrets: &Secrets,
    clock: &Arc<dyn Clock>,
) -> Result<(), SetupError> {
    let token = match (&aws.linear_oauth_token, &aws.linear_oauth_token_arn) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(arn)) => Some(secrets.fetch(arn).await?),
        (None, None) => None,
    };
    if let Some(token) = token {
        let url = aws.linear_api_url.as_deref().unwrap_or(DEFAULT_LINEAR_API_URL);
        ack.linear = Some(LinearClient::new(LinearConfig::new(url), LinearAuth::OAuth(token), clock.clone())?);
    }
    Ok(())
}

#[cfg(not(feature = "linear"))]
async fn linear_ack(_: &mut TrackerAck, _: &AwsSettings, _: &Secrets, _: &Arc<dyn Clock>) -> Result<(), SetupError> {
    Err(SetupError::NotBuilt(Tracker::Linear))
}
