//! Wire shapes: JSON captured from codex-cli 0.169.0 (`shared/codex/examples.md`, trimmed to the
//! fields that matter) against our types, whole objects compared.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn line(value: &serde_json::Value) -> String {
    value.to_string()
}

#[test]
fn outgoing_requests_match_the_wire() {
    let init = InitializeParams {
        client_info: ClientInfo {
            name: "probe_client".into(),
            title: Some("Probe Client".into()),
            version: "0.0.1".into(),
        },
        capabilities: InitializeCapabilities { experimental_api: true },
    };
    let request = OutgoingRequest {
        id: RequestId::Integer(1),
        method: InitializeParams::METHOD,
        params: serde_json::to_value(&init).unwrap(),
    };
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "probe_client", "title": "Probe Client", "version": "0.0.1"}, "capabilities": {"experimentalApi": true}}})
    );

    let resume = ThreadResumeParams {
        thread_id: "01a1fc72-2637-7850-98ba-7819c9c3508c".into(),
        cwd: "/ws".into(),
        approval_policy: ApprovalPolicy::Never,
        sandbox: SandboxMode::DangerFullAccess,
        exclude_turns: true,
    };
    assert_eq!(
        serde_json::to_value(&resume).unwrap(),
        json!({"threadId": "01a1fc72-2637-7850-98ba-7819c9c3508c", "cwd": "/ws", "approvalPolicy": "never", "sandbox": "danger-full-access", "excludeTurns": true})
    );

    let start = ThreadStartParams {
        cwd: "/ws".into(),
        approval_policy: ApprovalPolicy::OnRequest,
        sandbox: SandboxMode::WorkspaceWrite,
        dynamic_tools: vec![DynamicToolSpec::Function {
            name: "comment_reply".into(),
            description: "Reply".into(),
            input_schema: json!({"type": "object", "properties": {"body": {"type": "string"}}, "required": ["body"]}),
        }],
        developer_instructions: None,
    };
    assert_eq!(
        serde_json::to_value(&start).unwrap(),
        json!({"cwd": "/ws", "approvalPolicy": "on-request", "sandbox": "workspace-write",
               "dynamicTools": [{"type": "function", "name": "comment_reply", "description": "Reply",
                                 "inputSchema": {"type": "object", "properties": {"body": {"type": "string"}}, "required": ["body"]}}]})
    );

    let turn = TurnStartParams {
        thread_id: "t".into(),
        input: vec![UserInput::Text { text: "hi".into() }],
        sandbox_policy: Some(SandboxPolicy::WorkspaceWrite {
            writable_roots: vec!["/ws/.git".into()],
            network_access: false,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: false,
        }),
    };
    assert_eq!(
        serde_json::to_value(&turn).unwrap(),
        json!({"threadId": "t", "input": [{"type": "text", "text": "hi"}],
               "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/ws/.git"], "networkAccess": false, "excludeTmpdirEnvVar": false, "excludeSlashTmp": false}})
    );

    let interrupt = TurnInterruptParams { thread_id: "t".into(), turn_id: "u".into() };
    assert_eq!(serde_json::to_value(&interrupt).unwrap(), json!({"threadId": "t", "turnId": "u"}));

    let initialized = OutgoingNotification { method: INITIALIZED, params: json!({}) };
    assert_eq!(serde_json::to_value(&initialized).unwrap(), json!({"method": "initialized", "params": {}}));
}

#[test]
fn responses_to_server_requests_match_the_wire() {
    let tool = OutgoingResponse::Result {
        id: RequestId::Integer(0),
        result: serde_json::to_value(DynamicToolCallResponse {
            content_items: vec![ToolContentItem::InputText { text: "posted comment 123".into() }],
            success: true,
        })
        .unwrap(),
    };
    assert_eq!(
        serde_json::to_value(&tool).unwrap(),
        json!({"id": 0, "result": {"contentItems": [{"type": "inputText", "text": "posted comment 123"}], "success": true}})
    );
    let decline = serde_json::to_value(ApprovalResponse { decision: ApprovalDecision::Decline }).unwrap();
    assert_eq!(decline, json!({"decision": "decline"}));
    let refusal = OutgoingResponse::Error {
        id: RequestId::String("x".into()),
        error: JsonRpcError { code: METHOD_NOT_FOUND, message: "no".into(), data: None },
    };
    assert_eq!(serde_json::to_value(&refusal).unwrap(), json!({"id": "x", "error": {"code": -32601, "message": "no"}}));
}

#[test]
fn envelopes_are_classified() {
    let response = IncomingMessage::parse(&line(&json!({"id": 4, "result": {}}))).unwrap();
    assert_eq!(response, IncomingMessage::Response { id: RequestId::Integer(4), result: json!({}) });

    let error = IncomingMessage::parse(
        r#"{"error":{"code":-32600,"message":"thread 01a1 already has an active writer"},"id":4}"#,
    )
    .unwrap();
    assert_eq!(
        error,
        IncomingMessage::Error {
            id: Some(RequestId::Integer(4)),
            error: JsonRpcError {
                code: -32600,
                message: "thread 01a1 already has an active writer".into(),
                data: None
            },
        }
    );

    let request = IncomingMessage::parse(r#"{"method":"item/tool/call","id":"s1","params":{"a":1}}"#).unwrap();
    assert_eq!(
        request,
        IncomingMessage::Request {
            id: RequestId::String("s1".into()),
            method: "item/tool/call".into(),
            params: json!({"a": 1})
        }
    );

    let note =
        IncomingMessage::parse(r#"{"method":"thread/status/changed","params":{"threadId":"t"},"emittedAtMs":1}"#)
            .unwrap();
    assert_eq!(
        note,
        IncomingMessage::Notification { method: "thread/status/changed".into(), params: json!({"threadId": "t"}) }
    );

    assert!(matches!(IncomingMessage::parse("WARNING: proceeding"), Err(FrameError::NotJson(_))));
    assert!(matches!(IncomingMessage::parse(r#"{"hello":1}"#), Err(FrameError::NotJsonRpc(_))));
}

#[test]
fn turn_completed_failed_decodes() {
    let params = json!({
        "threadId": "01a1fc72-3154-7713-a2bd-7c07950f3f13",
        "turn": {"id": "01a1fc72-3162-7b72-a8df-f111cf7a500c", "rootTurnId": "01a1fc72-3162-7b72-a8df-f111cf7a500c",
                 "items": [], "itemsView": "notLoaded", "status": "failed",
                 "error": {"message": "We\u{2019}re currently experiencing high demand, which may cause temporary errors.",
                           "codexErrorInfo": "internalServerError", "additionalDetails": null, "misalignment": null},
                 "startedAt": 1795236704, "completedAt": 1795236704, "durationMs": 58}
    });
    let decoded = ServerNotification::decode("turn/completed".into(), params).unwrap();
    assert_eq!(
        decoded,
        ServerNotification::TurnCompleted(TurnNotification {
            thread_id: "01a1fc72-3154-7713-a2bd-7c07950f3f13".into(),
            turn: Turn {
                id: "01a1fc72-3162-7b72-a8df-f111cf7a500c".into(),
                status: TurnStatus::Failed,
                error: Some(TurnError {
                    message: "We\u{2019}re currently experiencing high demand, which may cause temporary errors."
                        .into(),
                    codex_error_info: Some(json!("internalServerError")),
                    additional_details: None,
                }),
                items: vec![],
                duration_ms: Some(58),
            },
        })
    );
}

#[test]
fn items_decode_including_unknown_kinds() {
    let agent = json!({"item": {"type": "agentMessage", "moderation": null, "id": "msg_1", "text": "done (exit 0): hello",
                                 "phase": null, "memoryCitation": null, "delivery": null, "questions": null,
                                 "startedAtMs": 1, "completedAtMs": 2},
                       "threadId": "t", "turnId": "u", "contentTokenCount": null, "completedAtMs": 2});
    assert_eq!(
        ServerNotification::decode("item/completed".into(), agent).unwrap(),
        ServerNotification::ItemCompleted(ItemNotification {
            item: ThreadItem::AgentMessage { id: "msg_1".into(), text: "done (exit 0): hello".into() },
            thread_id: "t".into(),
            turn_id: "u".into(),
        })
    );

    let command = json!({"item": {"type": "commandExecution", "id": "call_6e682bba_202", "pluginId": null, "scriptPath": null,
                                   "command": "/bin/bash -c 'touch approved_decline.txt && echo made'", "cwd": "/ws",
                                   "processId": null, "source": "agent", "status": "declined",
                                   "commandActions": [{"type": "unknown", "command": "touch approved_decline.txt && echo made"}],
                                   "aggregatedOutput": null, "exitCode": null, "durationMs": null},
                         "threadId": "t", "turnId": "u"});
    assert_eq!(
        ServerNotification::decode("item/completed".into(), command).unwrap(),
        ServerNotification::ItemCompleted(ItemNotification {
            item: ThreadItem::CommandExecution {
                id: "call_6e682bba_202".into(),
                command: "/bin/bash -c 'touch approved_decline.txt && echo made'".into(),
                cwd: "/ws".into(),
                status: ItemStatus::Declined,
                aggregated_output: None,
                exit_code: None,
            },
            thread_id: "t".into(),
            turn_id: "u".into(),
        })
    );

    let file = json!({"type": "fileChange", "id": "call_219",
                      "changes": [{"path": "/ws/patched.txt", "kind": {"type": "add"}, "diff": "patched by mock\n"}],
                      "status": "completed", "startedAtMs": 1, "completedAtMs": 2});
    assert_eq!(
        serde_json::from_value::<ThreadItem>(file).unwrap(),
        ThreadItem::FileChange {
            id: "call_219".into(),
            changes: vec![FileChange {
                path: "/ws/patched.txt".into(),
                kind: json!({"type": "add"}),
                diff: "patched by mock\n".into()
            }],
            status: ItemStatus::Completed,
        }
    );

    let tool = json!({"type": "dynamicToolCall", "id": "call_1", "namespace": null, "tool": "comment_reply",
                      "arguments": {"body": "hi"}, "status": "completed",
                      "contentItems": [{"type": "inputText", "text": "posted"}], "success": true, "durationMs": 3});
    assert_eq!(
        serde_json::from_value::<ThreadItem>(tool).unwrap(),
        ThreadItem::DynamicToolCall {
            id: "call_1".into(),
            namespace: None,
            tool: "comment_reply".into(),
            arguments: json!({"body": "hi"}),
            status: ItemStatus::Completed,
            content_items: Some(vec![ToolContentItem::InputText { text: "posted".into() }]),
            success: Some(true),
        }
    );

    let reasoning =
        json!({"type": "reasoning", "id": "rs_1", "summary": ["Thinking about **the request**."], "content": []});
    assert_eq!(
        serde_json::from_value::<ThreadItem>(reasoning).unwrap(),
        ThreadItem::Reasoning {
            id: "rs_1".into(),
            summary: vec!["Thinking about **the request**.".into()],
            content: vec![]
        }
    );

    let web = json!({"type": "webSearch", "id": "ws_1", "query": "rust"});
    assert_eq!(serde_json::from_value::<ThreadItem>(web.clone()).unwrap(), ThreadItem::Other(web));
}

#[test]
fn usage_error_warning_and_unknown_notifications_decode() {
    let breakdown = json!({"totalTokens": 120, "inputTokens": 100, "cachedInputTokens": 10, "cacheWriteInputTokens": 0,
                           "outputTokens": 20, "reasoningOutputTokens": 5});
    let usage = json!({"threadId": "t", "turnId": "u",
                       "tokenUsage": {"total": breakdown, "last": breakdown, "modelContextWindow": 258400}});
    let expected = TokenUsageBreakdown {
        total_tokens: 120,
        input_tokens: 100,
        cached_input_tokens: 10,
        output_tokens: 20,
        reasoning_output_tokens: 5,
    };
    assert_eq!(
        ServerNotification::decode("thread/tokenUsage/updated".into(), usage).unwrap(),
        ServerNotification::TokenUsageUpdated(TokenUsageNotification {
            thread_id: "t".into(),
            turn_id: "u".into(),
            token_usage: ThreadTokenUsage { total: expected, last: expected, model_context_window: Some(258400) },
        })
    );

    let error = json!({"error": {"message": "boom", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}},
                                 "additionalDetails": null, "misalignment": null},
                       "willRetry": false, "threadId": "t", "turnId": "u"});
    assert_eq!(
        ServerNotification::decode("error".into(), error).unwrap(),
        ServerNotification::Error(ErrorNotification {
            error: TurnError {
                message: "boom".into(),
                codex_error_info: Some(json!({"httpConnectionFailed": {"httpStatusCode": 401}})),
                additional_details: None,
            },
            will_retry: false,
            thread_id: "t".into(),
            turn_id: "u".into(),
        })
    );

    let warning = json!({"threadId": "t", "message": "Model metadata for `mock-model` not found."});
    assert_eq!(
        ServerNotification::decode("warning".into(), warning).unwrap(),
        ServerNotification::Warning(WarningNotification {
            thread_id: Some("t".into()),
            message: "Model metadata for `mock-model` not found.".into(),
        })
    );

    let params = json!({"rateLimits": {"limitId": "codex"}});
    assert_eq!(
        ServerNotification::decode("account/rateLimits/updated".into(), params.clone()).unwrap(),
        ServerNotification::Unknown { method: "account/rateLimits/updated".into(), params }
    );
}

#[test]
fn server_requests_decode() {
    let call = json!({"threadId": "t", "turnId": "u", "callId": "call_1", "namespace": null, "tool": "comment_reply",
                      "arguments": {"body": "hi"}});
    assert_eq!(
        ServerRequest::decode("item/tool/call".into(), call).unwrap(),
        ServerRequest::DynamicToolCall(DynamicToolCallParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: "call_1".into(),
            namespace: None,
            tool: "comment_reply".into(),
            arguments: json!({"body": "hi"}),
        })
    );

    let approval = json!({"kind": "command", "threadId": "t", "turnId": "u", "itemId": "call_6e682bba_197",
                          "startedAtMs": 1, "environmentId": "local",
                          "command": "/bin/bash -c 'touch approved_accept.txt && echo made'", "cwd": "/ws",
                          "commandActions": [], "proposedExecpolicyAmendment": ["touch", "approved_accept.txt"],
                          "availableDecisions": ["accept", "cancel"]});
    assert_eq!(
        ServerRequest::decode("item/commandExecution/requestApproval".into(), approval).unwrap(),
        ServerRequest::CommandApproval(CommandApprovalParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item_id: "call_6e682bba_197".into(),
            command: Some("/bin/bash -c 'touch approved_accept.txt && echo made'".into()),
            reason: None,
        })
    );

    let other = json!({"threadId": "t"});
    assert_eq!(
        ServerRequest::decode("item/tool/requestUserInput".into(), other.clone()).unwrap(),
        ServerRequest::Unsupported { method: "item/tool/requestUserInput".into(), params: other }
    );
}

#[test]
fn responses_decode() {
    let init: InitializeResponse = serde_json::from_value(json!({
        "userAgent": "probe_client/0.169.0 (Debian 12.0.0; x86_64) xterm (probe_client; 0.0.1)",
        "codexHome": "/home", "platformFamily": "unix", "platformOs": "linux"
    }))
    .unwrap();
    assert_eq!(
        init,
        InitializeResponse {
            user_agent: "probe_client/0.169.0 (Debian 12.0.0; x86_64) xterm (probe_client; 0.0.1)".into(),
            codex_home: Some("/home".into()),
        }
    );
    let started: TurnStartResponse = serde_json::from_value(json!({"turn": {
        "id": "01a1fc72-2645-7220-b542-464b29683bea", "rootTurnId": "01a1fc72-2645-7220-b542-464b29683bea",
        "items": [], "itemsView": "notLoaded", "status": "inProgress", "error": null,
        "startedAt": null, "completedAt": null, "durationMs": null}}))
    .unwrap();
    assert_eq!(
        started,
        TurnStartResponse {
            turn: Turn {
                id: "01a1fc72-2645-7220-b542-464b29683bea".into(),
                status: TurnStatus::InProgress,
                error: None,
                items: vec![],
                duration_ms: None,
            }
        }
    );
    let thread: ThreadResponse = serde_json::from_value(json!({
        "thread": {"id": "01a1", "sessionId": "01a1", "path": "/home/sessions/r.jsonl", "turns": [], "status": {"type": "idle"}},
        "model": "mock-model", "modelProvider": "mock", "sandbox": {"type": "dangerFullAccess"}}))
    .unwrap();
    assert_eq!(
        thread,
        ThreadResponse {
            thread: Thread { id: "01a1".into(), path: Some("/home/sessions/r.jsonl".into()) },
            model: Some("mock-model".into()),
        }
    );
    let interrupted: TurnInterruptResponse = serde_json::from_value(json!({})).unwrap();
    assert_eq!(interrupted, TurnInterruptResponse {});
}
