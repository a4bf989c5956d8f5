//! Consistency of the deployment template (`infra/template.yaml`) with the code, checked offline.
//!
//! cfn-lint (`infra/check`) knows CloudFormation but not Beckon. This test knows Beckon: every
//! `BECKON_*` name the template sets (function environments and the worker's env file in
//! UserData) must be one the binaries read ([`vars::ALL`]); every IAM statement must name its
//! resources, with `"*"` only for the few actions AWS cannot scope; the webhook functions must keep
//! the runtime, architecture and timeout the trackers' deadlines need; and the worker's systemd
//! unit in UserData must be the reviewed file `infra/worker/beckon-worker.service`.
//! The YAML is read with `serde_norway`, which keeps CloudFormation's `!Ref`/`!Sub`/`!If` short
//! forms as tagged values.

// Test helpers outside `#[test]` fns panic with a message on a malformed template, as the tests do.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use beckon_core::config::vars;
use serde_norway::{Mapping, Value};

/// Actions that only accept `Resource: "*"` (AWS offers no resource-level scoping for them).
/// Each entry needs its reason; none is used by the template today.
const STAR_RESOURCE_ALLOWED: &[&str] = &[
    // CloudWatch custom metrics: scoped by a `cloudwatch:namespace` condition instead.
    "cloudwatch:PutMetricData",
    // X-Ray trace upload has no resource type.
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
];

/// The Linear deadline (5 s) is the tighter one: the functions must stop before it.
const MAX_FUNCTION_TIMEOUT_SECS: u64 = 4;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn template() -> Value {
    let path = repo_root().join("infra/template.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn get<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.as_mapping().and_then(|m| m.get(key))
}

fn resources(tpl: &Value) -> Vec<(String, &Value)> {
    get(tpl, "Resources")
        .and_then(Value::as_mapping)
        .expect("the template has Resources")
        .iter()
        .map(|(k, v)| (k.as_str().expect("resource ids are strings").to_owned(), v))
        .collect()
}

fn of_type<'a>(tpl: &'a Value, ty: &str) -> Vec<(String, &'a Value)> {
    resources(tpl).into_iter().filter(|(_, r)| get(r, "Type").and_then(Value::as_str) == Some(ty)).collect()
}

/// Every `BECKON_[A-Z0-9_]+` token in `text`.
fn beckon_names(text: &str, out: &mut BTreeSet<String>) {
    let mut rest = text;
    while let Some(at) = rest.find("BECKON_") {
        let tail = &rest[at..];
        let len =
            tail.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).unwrap_or(tail.len());
        out.insert(tail[..len].to_owned());
        rest = &tail[len..];
    }
}

/// Every string scalar and mapping key under `value`, tagged values included.
fn walk_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Sequence(items) => items.iter().for_each(|v| walk_strings(v, out)),
        Value::Mapping(map) => map.iter().for_each(|(k, v)| {
            walk_strings(k, out);
            walk_strings(v, out);
        }),
        Value::Tagged(tagged) => walk_strings(&tagged.value, out),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The function's property, or the `Globals.Function` default SAM merges in.
fn function_prop<'a>(tpl: &'a Value, function: &'a Value, key: &str) -> Option<&'a Value> {
    get(function, "Properties")
        .and_then(|p| get(p, key))
        .or_else(|| get(tpl, "Globals").and_then(|g| get(g, "Function")).and_then(|f| get(f, key)))
}

fn env_keys(tpl: &Value, function: &Value) -> BTreeSet<String> {
    function_prop(tpl, function, "Environment")
        .and_then(|e| get(e, "Variables"))
        .and_then(Value::as_mapping)
        .map(|m| m.keys().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn user_data(tpl: &Value) -> String {
    let (_, lt) = of_type(tpl, "AWS::EC2::LaunchTemplate").into_iter().next().expect("a launch template");
    let data = get(lt, "Properties")
        .and_then(|p| get(p, "LaunchTemplateData"))
        .and_then(|d| get(d, "UserData"))
        .and_then(|u| get(u, "Fn::Base64"))
        .expect("UserData is Fn::Base64 of a !Sub");
    let Value::Tagged(sub) = data else { panic!("UserData is not a !Sub: {data:?}") };
    assert_eq!(sub.tag, "Sub");
    let script = match &sub.value {
        Value::String(s) => s.as_str(),
        Value::Sequence(parts) => parts.first().and_then(Value::as_str).expect("!Sub [script, vars]"),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::Mapping(_) | Value::Tagged(_)) => {
            panic!("unexpected !Sub body: {other:?}")
        }
    };
    let mut all = vec![script];
    walk_strings(&sub.value, &mut all);
    all.join("\n")
}

#[test]
fn every_beckon_variable_in_the_template_is_one_the_binaries_read() {
    let tpl = template();
    let known: BTreeSet<&str> = vars::ALL.into_iter().collect();

    let mut everywhere = BTreeSet::new();
    let mut strings = Vec::new();
    walk_strings(&tpl, &mut strings);
    strings.iter().for_each(|s| beckon_names(s, &mut everywhere));
    let unknown: Vec<_> = everywhere.iter().filter(|n| !known.contains(n.as_str())).collect();
    assert!(unknown.is_empty(), "the template sets names no binary reads (not in vars::ALL): {unknown:?}");

    // Not vacuous: both functions and the worker's env file carry the aws backend's essentials.
    let functions = of_type(&tpl, "AWS::Serverless::Function");
    assert_eq!(functions.len(), 2, "the two webhook functions");
    for (id, f) in &functions {
        let keys = env_keys(&tpl, f);
        for name in [vars::BACKEND, vars::TABLE_NAME, vars::QUEUE_URL, vars::AGENT_HANDLE] {
            assert!(keys.contains(name), "{id} does not set {name}: {keys:?}");
        }
        for key in &keys {
            assert!(known.contains(key.as_str()), "{id} sets {key}, which is not in vars::ALL");
        }
        // Secrets by ARN, never by value.
        for name in [vars::GITHUB_WEBHOOK_SECRET, vars::LINEAR_WEBHOOK_SECRET] {
            assert!(!keys.contains(name), "{id} passes the secret {name} by value; use {name}_ARN");
        }
    }
    let mut worker = BTreeSet::new();
    beckon_names(&user_data(&tpl), &mut worker);
    for name in [vars::BACKEND, vars::TABLE_NAME, vars::QUEUE_URL, vars::CODEX_BIN, vars::CODEX_CONFIG] {
        assert!(worker.contains(name), "the worker's env file does not set {name}: {worker:?}");
    }
}

/// A statement list entry, with `!If [cond, a, b]` expanded to both branches.
fn statements<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Sequence(items) => items.iter().for_each(|v| statements(v, out)),
        Value::Tagged(t) if t.tag == "If" => {
            if let Value::Sequence(parts) = &t.value {
                parts.iter().skip(1).for_each(|v| statements(v, out));
            }
        }
        // `!Ref AWS::NoValue` (the false branch of an optional statement).
        Value::Tagged(t) if t.tag == "Ref" => {}
        Value::Mapping(_) => out.push(value),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Tagged(_)) => {
            panic!("unexpected statement shape: {other:?}")
        }
    }
}

/// Every `PolicyDocument.Statement` in the template (inline role policies, managed policies and
/// resource policies alike). Trust policies (`AssumeRolePolicyDocument`) have no resources.
fn policy_statements(value: &Value, out: &mut Vec<Value>) {
    match value {
        Value::Mapping(map) => {
            for (k, v) in map {
                if k.as_str() == Some("PolicyDocument") {
                    let mut found = Vec::new();
                    statements(get(v, "Statement").expect("a PolicyDocument has Statement"), &mut found);
                    out.extend(found.into_iter().cloned());
                }
                policy_statements(v, out);
            }
        }
        Value::Sequence(items) => items.iter().for_each(|v| policy_statements(v, out)),
        Value::Tagged(t) => policy_statements(&t.value, out),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

fn as_list(value: &Value) -> Vec<&Value> {
    match value {
        Value::Sequence(items) => items.iter().collect(),
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Mapping(_)
        | Value::Tagged(_)) => vec![other],
    }
}

#[test]
fn every_iam_statement_names_its_resources() {
    let tpl = template();
    let mut found = Vec::new();
    policy_statements(&tpl, &mut found);
    assert!(found.len() >= 10, "expected the functions' and the worker's statements, found {}", found.len());

    for statement in &found {
        let sid = get(statement, "Sid").and_then(Value::as_str).unwrap_or("<no Sid>");
        assert!(get(statement, "NotResource").is_none(), "{sid}: NotResource grants everything else");
        assert!(get(statement, "NotAction").is_none(), "{sid}: NotAction grants everything else");
        let resource = get(statement, "Resource").unwrap_or_else(|| panic!("{sid}: no explicit Resource"));
        let actions: Vec<&str> = as_list(get(statement, "Action").unwrap_or_else(|| panic!("{sid}: no Action")))
            .into_iter()
            .filter_map(Value::as_str)
            .collect();
        let allows = get(statement, "Effect").and_then(Value::as_str) == Some("Allow");
        if allows {
            let wild: Vec<_> = actions.iter().filter(|a| a.contains('*')).collect();
            assert!(wild.is_empty(), "{sid}: wildcard actions in an Allow: {wild:?}");
        }
        for r in as_list(resource) {
            if r.as_str().is_some_and(|s| s == "*" || s.ends_with(":*:*")) {
                let unscoped: Vec<_> = actions.iter().filter(|a| !STAR_RESOURCE_ALLOWED.contains(a)).collect();
                assert!(unscoped.is_empty(), "{sid}: Resource \"*\" for actions AWS can scope: {unscoped:?}");
            }
        }
    }

    // The SAM functions use the explicit roles above, never SAM policy templates (which would hide
    // their statements from this test).
    for (id, f) in of_type(&tpl, "AWS::Serverless::Function") {
        let props = get(f, "Properties").expect("properties");
        assert!(get(props, "Role").is_some(), "{id}: needs an explicit Role");
        assert!(get(props, "Policies").is_none(), "{id}: Policies (SAM policy templates) are not inspectable");
    }
}

#[test]
fn webhook_functions_fit_the_trackers_deadlines() {
    let tpl = template();
    let log_groups: BTreeSet<String> = of_type(&tpl, "AWS::Logs::LogGroup")
        .into_iter()
        .filter(|(_, g)| get(g, "Properties").and_then(|p| get(p, "RetentionInDays")).is_some())
        .map(|(id, _)| id)
        .collect();
    let mut binaries = BTreeSet::new();
    for (id, f) in of_type(&tpl, "AWS::Serverless::Function") {
        let prop = |key| function_prop(&tpl, f, key).unwrap_or_else(|| panic!("{id}: no {key}"));
        assert_eq!(prop("Runtime").as_str(), Some("provided.al2023"), "{id}");
        assert_eq!(prop("Handler").as_str(), Some("bootstrap"), "{id}");
        assert_eq!(prop("Architectures"), &Value::Sequence(vec![Value::from("arm64")]), "{id}");
        let timeout = prop("Timeout").as_u64().unwrap_or_else(|| panic!("{id}: Timeout is not a number"));
        assert!((1..=MAX_FUNCTION_TIMEOUT_SECS).contains(&timeout), "{id}: Timeout {timeout} s misses Linear's 5 s");
        prop("ReservedConcurrentExecutions");
        let url = prop("FunctionUrlConfig");
        assert_eq!(get(url, "AuthType").and_then(Value::as_str), Some("NONE"), "{id}: the HMAC is the guard");

        let log_group =
            get(prop("LoggingConfig"), "LogGroup").unwrap_or_else(|| panic!("{id}: no LoggingConfig.LogGroup"));
        let Value::Tagged(r) = log_group else { panic!("{id}: LogGroup is not a !Ref") };
        let target = r.value.as_str().unwrap_or_default();
        assert!(log_groups.contains(target), "{id}: logs to {target}, not a log group with retention");

        let metadata = get(f, "Metadata").unwrap_or_else(|| panic!("{id}: no Metadata"));
        assert_eq!(get(metadata, "BuildMethod").and_then(Value::as_str), Some("rust-cargolambda"), "{id}");
        let binary = get(metadata, "BuildProperties").and_then(|b| get(b, "Binary")).and_then(Value::as_str);
        binaries.insert(binary.unwrap_or_else(|| panic!("{id}: no BuildProperties.Binary")).to_owned());
    }
    let expected: BTreeSet<String> = ["github-webhook", "linear-webhook"].map(str::to_owned).into();
    assert_eq!(binaries, expected);
}

#[test]
fn worker_vm_is_closed_and_runs_the_reviewed_unit() {
    let tpl = template();
    let (_, lt) = of_type(&tpl, "AWS::EC2::LaunchTemplate").into_iter().next().expect("a launch template");
    let data = get(lt, "Properties").and_then(|p| get(p, "LaunchTemplateData")).expect("LaunchTemplateData");
    let tokens = get(data, "MetadataOptions").and_then(|m| get(m, "HttpTokens")).and_then(Value::as_str);
    assert_eq!(tokens, Some("required"), "IMDSv2 must be required");
    for (id, sg) in of_type(&tpl, "AWS::EC2::SecurityGroup") {
        let props =
            get(sg, "Properties").map(Value::as_mapping).unwrap_or_default().cloned().unwrap_or_else(Mapping::new);
        assert!(!props.contains_key("SecurityGroupIngress"), "{id}: the worker takes no inbound traffic");
    }
    assert!(of_type(&tpl, "AWS::EC2::SecurityGroupIngress").is_empty(), "no ingress rules anywhere");

    let path = repo_root().join("infra/worker/beckon-worker.service");
    let unit = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let script = user_data(&tpl);
    let embedded = script
        .split_once("<<'UNIT'\n")
        .and_then(|(_, rest)| rest.split_once("\nUNIT\n"))
        .map(|(body, _)| format!("{body}\n"))
        .expect("UserData writes the unit with a <<'UNIT' heredoc");
    pretty_assertions::assert_eq!(embedded, unit, "UserData's unit differs from infra/worker/beckon-worker.service");
    for line in ["User=beckon", "EnvironmentFile=/etc/beckon/env", "ExecStart=/usr/local/bin/beckon worker"] {
        assert!(unit.lines().any(|l| l == line), "the unit lacks {line}");
    }
    for forbidden in ["RestrictNamespaces=", "PrivateUsers=", "SystemCallFilter="] {
        assert!(!unit.lines().any(|l| l.starts_with(forbidden)), "{forbidden} would break Codex's bubblewrap sandbox");
    }
}
