//! Secrets Manager: secrets given by ARN (`BECKON_*_ARN`), read once at start-up by whichever
//! binary needs them (the Lambda functions per cold start, `beckon worker` once). Values are
//! returned wrapped and never logged; errors name the ARN and the SDK's reason, not the value.

use secrecy::SecretString;

/// A secret that could not be read. Not retryable by the caller: start-up fails with it.
#[derive(Debug, thiserror::Error)]
#[error("secret {arn}: {detail}")]
pub struct SecretError {
    /// The ARN asked for.
    pub arn: String,
    /// Why it could not be read.
    pub detail: String,
}

/// Reads secrets by ARN.
#[derive(Debug, Clone)]
pub struct Secrets(aws_sdk_secretsmanager::Client);

impl Secrets {
    /// A reader over `sdk`'s configuration.
    pub fn new(sdk: &aws_config::SdkConfig) -> Secrets {
        Secrets(aws_sdk_secretsmanager::Client::new(sdk))
    }

    /// The `SecretString` of `arn`.
    ///
    /// # Errors
    /// [`SecretError`] when the call fails or the secret holds no string.
    pub async fn fetch(&self, arn: &str) -> Result<SecretString, SecretError> {
        let out = self.0.get_secret_value().secret_id(arn).send().await.map_err(|e| SecretError {
            arn: arn.to_owned(),
            detail: aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string(),
        })?;
        out.secret_string
            .map(SecretString::from)
            .ok_or_else(|| SecretError { arn: arn.to_owned(), detail: "no SecretString".to_owned() })
    }

    /// The `SecretString` of `arn`, or `None` while the secret has no value yet (the deployment
    /// creates the tracker secrets empty; a GitHub-only install never fills the Linear one) or
    /// holds only whitespace. Secrets Manager answers both "no such secret" and "no current value"
    /// with `ResourceNotFoundException`, so a wrong ARN also reads as `None`: callers log the ARN.
    ///
    /// # Errors
    /// [`SecretError`] when the call fails for any other reason.
    pub async fn fetch_optional(&self, arn: &str) -> Result<Option<SecretString>, SecretError> {
        use aws_sdk_secretsmanager::error::SdkError;
        use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;
        match self.0.get_secret_value().secret_id(arn).send().await {
            Ok(out) => Ok(out.secret_string.filter(|s| !s.trim().is_empty()).map(SecretString::from)),
            Err(SdkError::ServiceError(e)) if matches!(e.err(), GetSecretValueError::ResourceNotFoundException(_)) => {
                Ok(None)
            }
            Err(e) => Err(SecretError {
                arn: arn.to_owned(),
                detail: aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string(),
            }),
        }
    }
}
