//! The Github webhook Lambda function (function URL, `provided.al2023`): everything lives in
//! `beckon_functions`; this binary only names its tracker.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    beckon_functions::run(beckon_core::event::Tracker::Github).await
}
