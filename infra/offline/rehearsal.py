"""Helpers of infra/offline/rehearse (the README's deploy, run against the moto emulator).

Subcommands (all talk to the emulator through AWS_ENDPOINT_URL, set by rehearse):
  build REPO                 stand in for `sam build`: REPO/.aws-sam/build as sam lays it out
  network                    the README's prerequisite VPC and subnet; prints "VPC SUBNET"
  guided K=V... -- CMD...    run CMD (infra/deploy deploy --guided), answering the prompts
                             "Parameter K" with V, y to "Function Url has no authentication",
                             and Enter (the default) to every other prompt
  check-stack STACK          assert what the deployed stack created (see check_stack)
  userdata STACK DIR         write every launch template version's rendered UserData to DIR
  github-app-convert PEM -- CMD...
                             serve GitHub's manifest conversion over HTTPS (REHEARSAL_TLS_*),
                             run CMD (infra/deploy github-app-convert CODE), check what it stored
  functions STACK BIN_DIR    run the real webhook binaries with the deployed functions'
                             environment against a local Lambda Runtime API: signed deliveries in,
                             tasks in the deployed table and queue out
  worker STACK BIN_DIR WORK  run the real `beckon worker` with the env file the deployed UserData
                             writes; it must claim the queued task, then stop cleanly on SIGTERM
"""

import ast
import base64
import hashlib
import hmac
import json
import os
import queue
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parents[2]


def fail(message: str) -> None:
    sys.exit(f"rehearsal: FAILED: {message}")


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)


def client(service: str) -> Any:
    return boto3.client(service)


# --- build ------------------------------------------------------------------------------------


def build(repo: str) -> None:
    """What `sam build` leaves behind for `sam deploy`: .aws-sam/build/template.yaml, the source
    template with each function's CodeUri pointing at its own artifact directory, and that
    directory holding `bootstrap`. The real build cross-compiles the Rust functions for arm64
    (cargo-lambda); here `bootstrap` is a placeholder, since moto never runs a function."""
    from samcli.yamlhelper import yaml_dump, yaml_parse

    out = Path(repo) / ".aws-sam" / "build"
    template = yaml_parse((Path(repo) / "infra" / "template.yaml").read_text())
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        check(resource["Metadata"]["BuildMethod"] == "rust-cargolambda", f"{logical_id}: not a cargo-lambda build")
        resource["Properties"]["CodeUri"] = logical_id
        artifact = out / logical_id
        artifact.mkdir(parents=True, exist_ok=True)
        (artifact / "bootstrap").write_text("#!/bin/sh\necho 'placeholder: the rehearsal never runs it' >&2\nexit 1\n")
        (artifact / "bootstrap").chmod(0o755)
    (out / "template.yaml").write_text(yaml_dump(template))


def network() -> None:
    ec2 = client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.1.0/24")["Subnet"]["SubnetId"]
    print(vpc, subnet)


# --- guided deploy ----------------------------------------------------------------------------


def guided(argv: list[str]) -> None:
    import pexpect

    split = argv.index("--")
    answers = dict(a.split("=", 1) for a in argv[:split])
    command = argv[split + 1 :]
    child = pexpect.spawn(command[0], command[1:], encoding="utf-8", timeout=300, dimensions=(50, 200))
    child.logfile_read = sys.stdout
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    asked: set[str] = set()
    while child.expect([r"\[[^\]\n]*\]: $", pexpect.EOF]) == 0:
        prompt = ansi.sub("", (child.before + child.after).splitlines()[-1]).strip()
        parameter = re.match(r"Parameter (\w+) \[", prompt)
        if parameter and parameter.group(1) in answers:
            asked.add(parameter.group(1))
            child.sendline(answers[parameter.group(1)])
        elif re.search(r"Function Url has no authentication\. Is this okay\?", prompt):
            child.sendline("y")
        else:
            child.sendline("")
    child.close()
    check(child.exitstatus == 0, f"guided deploy exited with {child.exitstatus}")
    check(asked == set(answers), f"never asked for {sorted(set(answers) - asked)}")


# --- the deployed stack -----------------------------------------------------------------------


def stack_info(stack: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(parameters, outputs, logical id -> physical id)."""
    cfn = client("cloudformation")
    desc = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    params = {p["ParameterKey"]: p["ParameterValue"] for p in desc.get("Parameters", [])}
    # moto prints List<…> parameters as Python lists; CloudFormation joins them with commas.
    params = {k: ",".join(ast.literal_eval(v)) if v.startswith("['") else v for k, v in params.items()}
    outputs = {o["OutputKey"]: o["OutputValue"] for o in desc.get("Outputs", [])}
    resources = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"]
    }
    check(desc["StackStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), f"stack status {desc['StackStatus']}")
    return params, outputs, resources


def launch_template_versions(stack: str) -> list[dict[str, Any]]:
    _, _, res = stack_info(stack)
    return client("ec2").describe_launch_template_versions(LaunchTemplateId=res["WorkerLaunchTemplate"])[
        "LaunchTemplateVersions"
    ]


def rendered_user_data(version: dict[str, Any]) -> str:
    return base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()


def heredoc(script: str, tag: str) -> str:
    match = re.search(rf"<<'{tag}'\n(.*?)\n{tag}\n", script, re.S)
    check(match is not None, f"the UserData has no <<'{tag}' heredoc")
    return match.group(1) + "\n"  # type: ignore[union-attr]


def bootstrap_config(script: str, directory: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """Runs the part of the rendered bootstrap that writes /etc/beckon/{codex.toml,env}, writing
    into directory instead (and without its chown/chmod), and reads what it wrote:
    the env file as systemd's EnvironmentFile reads it, codex.toml as TOML."""
    import tomllib

    start, end = "install -d -m 0750 -o root -g beckon /etc/beckon\n", "chmod 0640 /etc/beckon/env\n"
    check(start in script and end in script, "the bootstrap no longer writes /etc/beckon as expected")
    part = script[script.index(start) + len(start) : script.index(end)]
    part = "\n".join(line for line in part.splitlines() if not line.startswith(("chown ", "chmod ")))
    directory.mkdir(parents=True, exist_ok=True)
    part = re.sub(r"(>>? *)/etc/beckon/", lambda m: f"{m.group(1)}{directory}/", part)  # only where it writes
    subprocess.run(["bash", "-euo", "pipefail", "-c", part], check=True)
    return env_file((directory / "env").read_text()), tomllib.loads((directory / "codex.toml").read_text())


def env_file(text: str) -> dict[str, str]:
    """An EnvironmentFile as the bootstrap writes it: KEY=VALUE lines, no quoting needed."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            check(re.fullmatch(r"[A-Z][A-Z0-9_]*=[^'\"\\$`\s]*", line) is not None, f"env file line {line!r}")
            key, value = line.split("=", 1)
            check(key not in env, f"{key} twice in the env file")
            env[key] = value
    return env


def iam_statements(role_name: str) -> list[dict[str, Any]]:
    iam = client("iam")
    out = []
    for name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        doc = iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]
        doc = json.loads(doc) if isinstance(doc, str) else doc
        out += doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def check_stack(stack: str) -> None:
    """Every promise infra/README.md and the issue make about the created resources that the
    emulator can show, checked on what exists after the deploy (not on the template text)."""
    params, out, res = stack_info(stack)
    stage = params["Stage"]
    region = boto3.session.Session().region_name
    sqs, ddb, lam, sm = client("sqs"), client("dynamodb"), client("lambda"), client("secretsmanager")

    expected_outputs = {
        "GitHubWebhookUrl", "LinearWebhookUrl", "TaskQueueUrl", "TaskQueueName", "TaskDeadLetterQueueUrl",
        "LedgerTableName", "GitHubWebhookSecretArn", "LinearWebhookSecretArn", "GitHubAppPrivateKeySecretArn",
        "LinearOAuthTokenSecretArn", "WorkerAutoScalingGroupName",
    }  # fmt: skip
    check(set(out) == expected_outputs, f"outputs {sorted(out)} differ from {sorted(expected_outputs)}")

    # The queue: FIFO, explicit dedup ids, per-thread throughput, redrive to a FIFO DLQ.
    check(out["TaskQueueName"] == f"beckon-{stage}-tasks.fifo", f"queue name {out['TaskQueueName']}")
    # moto answers with its own host; the output carries the regional SQS host, as AWS does.
    found = sqs.get_queue_url(QueueName=out["TaskQueueName"])["QueueUrl"]
    check(
        found.split("/")[-2:] == out["TaskQueueUrl"].split("/")[-2:], f"TaskQueueUrl {out['TaskQueueUrl']} vs {found}"
    )
    check(out["TaskQueueUrl"].startswith(f"https://sqs.{region}.amazonaws.com/"), out["TaskQueueUrl"])
    q = sqs.get_queue_attributes(QueueUrl=out["TaskQueueUrl"], AttributeNames=["All"])["Attributes"]
    dlq = sqs.get_queue_attributes(QueueUrl=out["TaskDeadLetterQueueUrl"], AttributeNames=["All"])["Attributes"]
    check(q.get("FifoQueue") == "true" and dlq.get("FifoQueue") == "true", "queue and DLQ must both be FIFO")
    check(q.get("ContentBasedDeduplication") == "false", "the task id is the dedup id, not the body")
    check(q.get("DeduplicationScope") == "messageGroup", f"DeduplicationScope {q.get('DeduplicationScope')}")
    check(q.get("FifoThroughputLimit") == "perMessageGroupId", f"FifoThroughputLimit {q.get('FifoThroughputLimit')}")
    check(q.get("VisibilityTimeout") == params["QueueVisibilityTimeoutSeconds"], "VisibilityTimeout != parameter")
    check(q.get("ReceiveMessageWaitTimeSeconds") == "20", "long polling")
    redrive = json.loads(q["RedrivePolicy"])
    check(redrive["deadLetterTargetArn"] == dlq["QueueArn"], f"redrive goes to {redrive['deadLetterTargetArn']}")
    check(str(redrive["maxReceiveCount"]) == params["QueueMaxReceiveCount"], "maxReceiveCount != parameter")
    dlq_policy = json.loads(dlq.get("Policy", "{}"))
    check(
        [s["Effect"] for s in dlq_policy.get("Statement", [])] == ["Deny"]
        and dlq_policy["Statement"][0]["Resource"] == dlq["QueueArn"],
        f"DLQ policy {dlq_policy}",
    )

    # The ledger: keys and index the code queries, on-demand, TTL on expires_at, PITR, KMS.
    table_name = out["LedgerTableName"]
    check(table_name == f"beckon-{stage}-ledger", f"table name {table_name}")
    table = ddb.describe_table(TableName=table_name)["Table"]
    keys = {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]}
    check(keys == {"pk": "HASH", "sk": "RANGE"}, f"key schema {keys}")
    gsis = {
        g["IndexName"]: {k["AttributeName"]: k["KeyType"] for k in g["KeySchema"]}
        for g in table["GlobalSecondaryIndexes"]
    }
    check(gsis == {"gsi1": {"gsi1pk": "HASH", "gsi1sk": "RANGE"}}, f"GSIs {gsis}")
    check(table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST", "on-demand capacity")
    check(table.get("SSEDescription", {}).get("SSEType") == "KMS", f"SSE {table.get('SSEDescription')}")
    ttl = ddb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    check(ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}, f"TTL {ttl}")
    pitr = ddb.describe_continuous_backups(TableName=table_name)["ContinuousBackupsDescription"]
    check(pitr["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED", "point-in-time recovery")

    # Secrets: the webhook secrets generated, the tracker credentials created without a value
    # (unless the rehearsal already put one in).
    secret_arns = {}
    for output, name, generated in (
        ("GitHubWebhookSecretArn", "github-webhook-secret", True),
        ("LinearWebhookSecretArn", "linear-webhook-secret", True),
        ("GitHubAppPrivateKeySecretArn", "github-app-private-key", False),
        ("LinearOAuthTokenSecretArn", "linear-oauth-token", False),
    ):
        arn = out[output]
        described = sm.describe_secret(SecretId=arn)
        check(described["Name"] == f"beckon/{stage}/{name}", f"{output} names {described['Name']}")
        versions = sm.list_secret_version_ids(SecretId=arn)["Versions"]
        if generated and len(versions) == 1:
            value = sm.get_secret_value(SecretId=arn)["SecretString"]
            check(re.fullmatch(r"[A-Za-z0-9]{64}", value) is not None, f"{name}: not a generated 64-char value")
        elif not generated and not versions:
            # Created without a value: reading it fails until the operator puts one in.
            try:
                sm.get_secret_value(SecretId=arn)
                fail(f"{name} has a value nobody put in")
            except ClientError as err:
                check(err.response["Error"]["Code"] == "ResourceNotFoundException", f"{name}: {err}")
        secret_arns[name] = arn

    # Functions: arm64 provided.al2023 bootstrap behind a public function URL (the HMAC is the
    # guard), reserved concurrency, their log group, and exactly the environment the binaries read.
    function_env = {}
    for tracker, url_output in (("github", "GitHubWebhookUrl"), ("linear", "LinearWebhookUrl")):
        name = f"beckon-{stage}-{tracker}-webhook"
        cfg = lam.get_function_configuration(FunctionName=name)
        check(cfg["Runtime"] == "provided.al2023" and cfg["Handler"] == "bootstrap", f"{name}: runtime")
        check(cfg["Architectures"] == ["arm64"], f"{name}: architectures {cfg['Architectures']}")
        check(1 <= cfg["Timeout"] <= 4, f"{name}: timeout {cfg['Timeout']} s (Linear gives up at 5 s)")
        concurrency = lam.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
        check(str(concurrency) == params["FunctionReservedConcurrency"], f"{name}: reserved concurrency {concurrency}")
        url = lam.get_function_url_config(FunctionName=name)
        check(url["AuthType"] == "NONE" and out[url_output] == url["FunctionUrl"].rstrip("/") + "/", f"{name}: URL")
        check(
            re.fullmatch(rf"https://[a-z0-9]+\.lambda-url\.{region}\.on\.aws/", out[url_output]) is not None, url_output
        )
        policy = json.loads(lam.get_policy(FunctionName=name)["Policy"])["Statement"]
        actions = sorted(s["Action"] for s in policy if s.get("Principal") in ("*", {"AWS": "*"}))
        # Since October 2025 a public function URL needs both permissions; SAM adds both.
        check(actions == ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"], f"{name}: public permissions {actions}")
        logs = client("logs").describe_log_groups(logGroupNamePrefix=f"/aws/lambda/{name}")["logGroups"]
        check(
            [(g["logGroupName"], str(g.get("retentionInDays"))) for g in logs]
            == [(f"/aws/lambda/{name}", params["LogRetentionDays"])],
            f"{name}: log group {logs}",
        )
        env = cfg["Environment"]["Variables"]
        check(
            env["BECKON_TABLE_NAME"] == table_name and env["BECKON_QUEUE_URL"] == out["TaskQueueUrl"],
            f"{name}: backend env",
        )
        check(env["BECKON_BACKEND"] == "aws" and env["BECKON_AGENT_HANDLE"] == params["AgentHandle"], f"{name}: env")
        function_env[tracker] = env
    gh, lin = function_env["github"], function_env["linear"]
    check(gh["BECKON_GITHUB_WEBHOOK_SECRET_ARN"] == secret_arns["github-webhook-secret"], "github secret ARN")
    check(gh["BECKON_GITHUB_APP_PRIVATE_KEY_ARN"] == secret_arns["github-app-private-key"], "github key ARN")
    check(gh.get("BECKON_GITHUB_APP_ID", "") == params["GitHubAppId"], "BECKON_GITHUB_APP_ID != GitHubAppId")
    check(lin["BECKON_LINEAR_WEBHOOK_SECRET_ARN"] == secret_arns["linear-webhook-secret"], "linear secret ARN")
    check(lin["BECKON_LINEAR_OAUTH_TOKEN_ARN"] == secret_arns["linear-oauth-token"], "linear token ARN")
    check(not any("WEBHOOK_SECRET" in k and not k.endswith("_ARN") for k in {**gh, **lin}), "a secret passed by value")

    # IAM, as deployed: every Allow names concrete resources of this stack; each function reads
    # only its tracker's secrets, the worker only the tracker credentials.
    queue_arn, table_arn = q["QueueArn"], table["TableArn"]
    allowed_resources = {queue_arn, table_arn, f"{table_arn}/index/gsi1", *secret_arns.values()}
    roles = {logical: res[logical] for logical in ("GitHubWebhookRole", "LinearWebhookRole", "WorkerRole")}
    secret_reads = {}
    for logical, role in roles.items():
        for st in iam_statements(role):
            check(st["Effect"] == "Allow" and "NotResource" not in st and "NotAction" not in st, f"{logical}: {st}")
            actions = as_list(st["Action"])
            check(not any("*" in a for a in actions), f"{logical}: wildcard action in {st}")
            for r in as_list(st["Resource"]):
                # CloudFormation's log group Arn ends in ":*" (its streams; moto's lacks it), the
                # only "*" allowed.
                log_group = rf"arn:aws:logs:{region}:\d{{12}}:log-group:/aws/lambda/beckon-{stage}-"
                log_group += r"(github|linear)-webhook(:\*)?"
                release = "arn:aws:s3:::" + params["BeckonReleaseUrl"].removeprefix("s3://")
                ok = r in allowed_resources or re.fullmatch(log_group, r) is not None
                ok = ok or (logical == "WorkerRole" and actions == ["s3:GetObject"] and r == release)
                check(ok, f"{logical}: resource {r} in {st}")
            if "secretsmanager:GetSecretValue" in actions:
                secret_reads[logical] = sorted(as_list(st["Resource"]))
    check(
        secret_reads["GitHubWebhookRole"]
        == sorted([secret_arns["github-webhook-secret"], secret_arns["github-app-private-key"]]),
        "github function secrets",
    )
    check(
        secret_reads["LinearWebhookRole"]
        == sorted([secret_arns["linear-webhook-secret"], secret_arns["linear-oauth-token"]]),
        "linear function secrets",
    )
    check(
        secret_reads["WorkerRole"]
        == sorted([secret_arns["github-app-private-key"], secret_arns["linear-oauth-token"]]),
        "worker secrets",
    )
    managed = [
        p["PolicyArn"]
        for p in client("iam").list_attached_role_policies(RoleName=roles["WorkerRole"])["AttachedPolicies"]
    ]
    expected_managed = (
        ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"] if params["EnableSsmSessions"] == "true" else []
    )
    check(managed == expected_managed, f"worker managed policies {managed}")

    # The DLQ alarm watches the DLQ.
    alarms = client("cloudwatch").describe_alarms(AlarmNames=[f"beckon-{stage}-tasks-dlq-not-empty"])["MetricAlarms"]
    check(len(alarms) == 1, "the DLQ alarm")
    alarm = alarms[0]
    check(
        alarm["Dimensions"] == [{"Name": "QueueName", "Value": f"beckon-{stage}-tasks-dlq.fifo"}],
        f"alarm {alarm['Dimensions']}",
    )
    check(alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold", "alarm threshold")

    # The worker VM: launch template (AMI from the SSM parameter, IMDSv2, instance profile of
    # the worker role, closed security group, encrypted disk) and the Auto Scaling group.
    ec2 = client("ec2")
    latest = launch_template_versions(stack)[-1]
    data = latest["LaunchTemplateData"]
    ami = client("ssm").get_parameter(Name="/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64")[
        "Parameter"
    ]["Value"]
    if params["WorkerAmiId"].startswith("/"):
        check(data["ImageId"] == ami, f"AMI {data['ImageId']} is not the SSM parameter's {ami}")
    check(data["InstanceType"] == params["WorkerInstanceType"], "instance type")
    check(
        data["MetadataOptions"]["HttpTokens"] == "required" and data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1,
        "IMDSv2",
    )
    profile_name = data["IamInstanceProfile"]["Arn"].rsplit("/", 1)[1]
    check(profile_name == res["WorkerInstanceProfile"], "instance profile")
    profile_roles = [
        r["RoleName"]
        for r in client("iam").get_instance_profile(InstanceProfileName=profile_name)["InstanceProfile"]["Roles"]
    ]
    check(profile_roles == [roles["WorkerRole"]], f"instance profile roles {profile_roles}")
    ebs = data["BlockDeviceMappings"][0]["Ebs"]
    check(
        ebs["Encrypted"] is True
        and ebs["VolumeType"] == "gp3"
        and str(ebs["VolumeSize"]) == params["WorkerVolumeSizeGiB"],
        "root volume",
    )
    nic = data["NetworkInterfaces"][0]
    check(nic["Groups"] == [res["WorkerSecurityGroup"]], "security group")
    check(str(nic["AssociatePublicIpAddress"]).lower() == params["WorkerAssociatePublicIp"], "public IP parameter")
    sg = ec2.describe_security_groups(GroupIds=[res["WorkerSecurityGroup"]])["SecurityGroups"][0]
    check(sg["VpcId"] == params["VpcId"] and sg["IpPermissions"] == [], f"security group ingress {sg['IpPermissions']}")
    egress = [(p["IpProtocol"], p.get("FromPort"), p.get("ToPort")) for p in sg["IpPermissionsEgress"]]
    check(egress == [("tcp", 443, 443)], f"egress {egress}")
    asg = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[out["WorkerAutoScalingGroupName"]])[
        "AutoScalingGroups"
    ][0]
    check((str(asg["MinSize"]), str(asg["MaxSize"])) == (params["WorkerMinSize"], params["WorkerMaxSize"]), "ASG size")
    check(
        asg["VPCZoneIdentifier"] == params["SubnetIds"],
        f"ASG subnets {asg['VPCZoneIdentifier']!r} vs {params['SubnetIds']!r}",
    )
    check(asg["LaunchTemplate"]["LaunchTemplateId"] == res["WorkerLaunchTemplate"], "ASG launch template")
    check(asg["LaunchTemplate"]["Version"] == str(latest["VersionNumber"]), f"ASG on version {asg['LaunchTemplate']}")
    check(len(asg["Instances"]) == int(params["WorkerMinSize"]), f"{len(asg['Instances'])} worker instances")

    # The bootstrap as rendered: the env file names the resources created above, the unit is the
    # reviewed file byte for byte (after !Sub, which would have eaten any ${…} in it).
    script = rendered_user_data(latest)
    env, codex_toml = bootstrap_config(
        script, Path(os.environ["REHEARSAL_WORK"], f"etc-beckon-v{latest['VersionNumber']}")
    )
    expected_toml: dict[str, Any] = {"model": params["ModelName"]} if params["ModelName"] else {}
    if params["ModelProviderBaseUrl"]:
        expected_toml["model_provider"] = "beckon"
        expected_toml["model_providers"] = {
            "beckon": {
                "name": "Beckon model provider",
                "base_url": params["ModelProviderBaseUrl"],
                "wire_api": "responses",
            }
        }
    check(codex_toml == expected_toml, f"codex.toml {codex_toml}, expected {expected_toml}")
    expected_env = {
        "AWS_REGION": region,
        "BECKON_BACKEND": "aws",
        "BECKON_AGENT_HANDLE": params["AgentHandle"],
        "BECKON_TABLE_NAME": table_name,
        "BECKON_QUEUE_URL": out["TaskQueueUrl"],
        "BECKON_GITHUB_API_URL": params["GitHubApiUrl"],
        "BECKON_GITHUB_APP_PRIVATE_KEY_ARN": secret_arns["github-app-private-key"],
        "BECKON_LINEAR_API_URL": params["LinearApiUrl"],
        "BECKON_LINEAR_OAUTH_TOKEN_ARN": secret_arns["linear-oauth-token"],
        "BECKON_GIT_BASE_URL": params["GitBaseUrl"],
        "BECKON_CODEX_CONFIG": "/etc/beckon/codex.toml",
    }
    if params["GitHubAppId"]:
        expected_env["BECKON_GITHUB_APP_ID"] = params["GitHubAppId"]
    if params["GitHubAppSlug"]:
        expected_env["BECKON_GITHUB_BOT_LOGINS"] = params["GitHubAppSlug"] + "[bot]"
    for key, value in expected_env.items():
        check(env.get(key) == value, f"worker env {key}={env.get(key)!r}, expected {value!r}")
    check(
        env["BECKON_CODEX_BIN"] in script.split("codex_bin=", 1)[1].split("\n", 1)[0],
        "BECKON_CODEX_BIN is not the binary the bootstrap checked",
    )
    unit = heredoc(script, "UNIT")
    check(
        unit == (ROOT / "infra/worker/beckon-worker.service").read_text(),
        "rendered unit differs from infra/worker/beckon-worker.service",
    )
    check(
        f"--stack '{stack}' --resource WorkerGroup --region '{region}'" in script,
        "cfn-signal names this stack's WorkerGroup",
    )
    check(
        f"url='{params['BeckonReleaseUrl']}'" in script and f"echo '{params['BeckonReleaseSha256']}  '" in script,
        "release URL/SHA",
    )
    print(f"rehearsal: stack {stack} checked ({len(res)} resources, launch template version {latest['VersionNumber']})")


def userdata(stack: str, directory: str) -> None:
    Path(directory).mkdir(parents=True, exist_ok=True)
    for version in launch_template_versions(stack):
        path = Path(directory) / f"userdata-v{version['VersionNumber']}.sh"
        path.write_text(rendered_user_data(version))
        print(path)


# --- github-app-convert -------------------------------------------------------------------------


def github_app_convert(argv: list[str]) -> None:
    """GitHub's side of POST /app-manifests/{code}/conversions, over HTTPS with a throwaway CA
    (curl trusts it through CURL_CA_BUNDLE), then what infra/deploy stored in Secrets Manager."""
    pem_path, command = argv[0], argv[argv.index("--") + 1 :]
    pem = Path(pem_path).read_text()
    webhook_secret = "whsec-" + uuid.uuid4().hex
    code = command[-1]
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            seen.append(self.path)
            body = json.dumps(
                {
                    "id": 4242,
                    "slug": "beckon-rehearsal",
                    "html_url": "https://github.com/apps/beckon-rehearsal",
                    "pem": pem,
                    "webhook_secret": webhook_secret,
                }
            ).encode()
            self.send_response(201 if self.path == f"/app-manifests/{code}/conversions" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    port = int(os.environ["REHEARSAL_GITHUB_PORT"])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(os.environ["REHEARSAL_TLS_CERT"], os.environ["REHEARSAL_TLS_KEY"])
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    print(result.stdout, end="")
    print(result.stderr, end="", file=sys.stderr)
    check(result.returncode == 0, f"github-app-convert exited {result.returncode}")
    check(seen == [f"/app-manifests/{code}/conversions"], f"requests {seen}")
    check("App id: 4242  slug: beckon-rehearsal" in result.stdout, "the App id and slug are printed")
    check(
        pem.strip() not in result.stdout + result.stderr and webhook_secret not in result.stdout + result.stderr,
        "a secret was printed",
    )
    _, out, _ = stack_info(os.environ["BECKON_STACK"])
    sm = client("secretsmanager")
    stored_pem = sm.get_secret_value(SecretId=out["GitHubAppPrivateKeySecretArn"])["SecretString"]
    check(stored_pem.rstrip("\n") == pem.rstrip("\n"), "stored App key")
    check(
        sm.get_secret_value(SecretId=out["GitHubWebhookSecretArn"])["SecretString"] == webhook_secret,
        "stored webhook secret",
    )


# --- the binaries against the deployed stack ----------------------------------------------------


class RuntimeApi:
    """The Lambda Runtime API (next / response / error / init error) for one function process,
    with the template's timeout as each invocation's deadline."""

    def __init__(self, timeout_s: int):
        self.events: "queue.Queue[tuple[str, bytes]]" = queue.Queue()
        self.results: dict[str, "queue.Queue[tuple[str, Any]]"] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                request_id, body = api.events.get()
                self.send_response(200)
                self.send_header("Lambda-Runtime-Aws-Request-Id", request_id)
                self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + timeout_s * 1000))
                self.send_header(
                    "Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:f"
                )
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                parts = self.path.split("/")
                kind = "init-error" if self.path.endswith("/init/error") else parts[-1]
                target = api.results.get(parts[-2]) if kind != "init-error" else None
                for q in [target] if target else list(api.results.values()):
                    q.put((kind, json.loads(body or b"null")))
                self.send_response(202)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"

    def invoke(self, event: dict[str, Any], wait_s: float = 60) -> tuple[str, Any]:
        request_id = str(uuid.uuid4())
        self.results[request_id] = queue.Queue()
        self.events.put((request_id, json.dumps(event).encode()))
        try:
            return self.results[request_id].get(timeout=wait_s)
        finally:
            del self.results[request_id]


def url_event(headers: dict[str, str], body: bytes) -> dict[str, Any]:
    return {
        "version": "2.0", "rawPath": "/", "rawQueryString": "", "headers": headers,
        "requestContext": {
            "accountId": "anonymous", "apiId": "rehearsal", "domainName": "rehearsal.lambda-url.us-east-1.on.aws",
            "domainPrefix": "rehearsal", "requestId": str(uuid.uuid4()), "time": "21/Nov/2026:10:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
            "http": {
                "method": "POST", "path": "/", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "x",
            },
        },
        "body": body.decode(), "isBase64Encoded": False,
    }  # fmt: skip


def lambda_env(cfg: dict[str, Any], runtime: RuntimeApi) -> dict[str, str]:
    """What Lambda gives the process: the deployed environment plus the runtime's own variables;
    the emulator's endpoint and dummy credentials stand in for the execution role."""
    env = dict(cfg["Environment"]["Variables"])
    env.update(
        {
            "PATH": os.environ["PATH"],
            "AWS_LAMBDA_RUNTIME_API": runtime.addr,
            "AWS_LAMBDA_FUNCTION_NAME": cfg["FunctionName"],
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(cfg["MemorySize"]),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{cfg['FunctionName']}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "rehearsal",
            "AWS_REGION": os.environ["AWS_REGION"],
        }
    )
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED",
                "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"):  # fmt: skip
        env[key] = os.environ[key]
    return env


def queue_depth(url: str) -> tuple[int, int]:
    a = client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])


def items(table: str) -> list[dict[str, Any]]:
    return client("dynamodb").scan(TableName=table)["Items"]


def functions(stack: str, bin_dir: str) -> None:
    params, out, _ = stack_info(stack)
    stage, lam, sm = params["Stage"], client("lambda"), client("secretsmanager")
    check(
        queue_depth(out["TaskQueueUrl"]) == (0, 0) and not items(out["LedgerTableName"]), "queue and table start empty"
    )

    # GitHub: the App's webhook secret is the generated one (or the converted one), by ARN.
    cfg = lam.get_function_configuration(FunctionName=f"beckon-{stage}-github-webhook")
    runtime = RuntimeApi(cfg["Timeout"])
    proc = subprocess.Popen([str(Path(bin_dir) / "github-webhook")], env=lambda_env(cfg, runtime))
    try:
        secret = sm.get_secret_value(SecretId=out["GitHubWebhookSecretArn"])["SecretString"]
        payload = json.loads((ROOT / "tests/fixtures/github/issue_comment.created.json").read_text())
        payload["comment"]["body"] = f"@{params['AgentHandle']} hello, what does this repository do?"
        body = json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "content-type": "application/json",
            "x-github-event": "issue_comment",
            "x-github-delivery": str(uuid.uuid4()),
            "x-hub-signature-256": signature,
        }
        kind, answer = runtime.invoke(url_event(headers, body))
        check(kind == "response", f"github-webhook: {kind} {answer}")
        outcome = json.loads(answer["body"])
        check(answer["statusCode"] == 200 and outcome["outcome"] == "enqueued", f"github-webhook answered {answer}")
        github_task = outcome["task_id"]
        forged = dict(headers, **{"x-github-delivery": str(uuid.uuid4()), "x-hub-signature-256": "sha256=" + "0" * 64})
        _, answer = runtime.invoke(url_event(forged, body))
        check(answer["statusCode"] == 401, f"a forged delivery got {answer['statusCode']}")
    finally:
        proc.terminate()
        proc.wait(10)

    # Linear: the signing secret is what `infra/deploy put-secret` stored from a file.
    cfg = lam.get_function_configuration(FunctionName=f"beckon-{stage}-linear-webhook")
    runtime = RuntimeApi(cfg["Timeout"])
    proc = subprocess.Popen([str(Path(bin_dir) / "linear-webhook")], env=lambda_env(cfg, runtime))
    try:
        secret = Path(os.environ["REHEARSAL_LINEAR_SECRET_FILE"]).read_text().strip()
        payload = json.loads((ROOT / "tests/fixtures/linear/AgentSessionEvent.created.json").read_text())
        payload["webhookTimestamp"] = int(time.time() * 1000)
        body = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json; charset=utf-8",
            "linear-delivery": str(uuid.uuid4()),
            "linear-event": "AgentSessionEvent",
            "linear-signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
        }
        kind, answer = runtime.invoke(url_event(headers, body))
        check(kind == "response", f"linear-webhook: {kind} {answer}")
        outcome = json.loads(answer["body"])
        check(answer["statusCode"] == 200 and outcome["outcome"] == "enqueued", f"linear-webhook answered {answer}")
    finally:
        proc.terminate()
        proc.wait(10)

    # Both tasks are in the deployed table and queue; deliveries carry the TTL attribute the
    # table expires on, at least GitHub's 3-day redelivery window ahead.
    check(queue_depth(out["TaskQueueUrl"]) == (2, 0), f"queue depth {queue_depth(out['TaskQueueUrl'])}")
    rows = items(out["LedgerTableName"])
    ttl_attr = client("dynamodb").describe_time_to_live(TableName=out["LedgerTableName"])["TimeToLiveDescription"][
        "AttributeName"
    ]
    expiring = [int(r[ttl_attr]["N"]) for r in rows if ttl_attr in r]
    check(expiring and min(expiring) >= time.time() + 3 * 86400 - 60, f"delivery records expire at {expiring}")
    check(any(github_task in json.dumps(r) for r in rows), "the GitHub task is in the ledger")
    Path(os.environ["REHEARSAL_WORK"], "github-task").write_text(github_task)
    print(f"rehearsal: both webhook binaries enqueued into {out['TaskQueueName']} and {out['LedgerTableName']}")


def worker(stack: str, bin_dir: str, work: str) -> None:
    """`beckon worker` as systemd would start it on the VM: the env file the deployed UserData
    writes (paths that only exist on the VM moved under WORK), the emulator for AWS."""
    params, out, _ = stack_info(stack)
    script = rendered_user_data(launch_template_versions(stack)[-1])
    etc = Path(work, "etc-beckon-worker")
    env, _ = bootstrap_config(script, etc)
    data_dir, codex_config = Path(work, "var-lib-beckon"), etc / "codex.toml"
    data_dir.mkdir(exist_ok=True)
    codex = Path(work, "codex")
    codex.write_text("#!/bin/sh\necho 'codex stand-in: the rehearsal runs no model' >&2\nexit 1\n")
    codex.chmod(0o755)
    moved = {"BECKON_DATA_DIR": str(data_dir), "BECKON_CODEX_CONFIG": str(codex_config), "BECKON_CODEX_BIN": str(codex)}
    for key in moved:
        check(key in env, f"the env file has no {key}")
    env.update(moved)
    for key in ("PATH", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED",
                "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"):  # fmt: skip
        env[key] = os.environ[key]
    env["HOME"] = str(data_dir)
    log = Path(work, "worker.log")
    task = Path(work, "github-task").read_text()
    before = queue_depth(out["TaskQueueUrl"])
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [str(Path(bin_dir) / "beckon"), "worker"], env=env, cwd=data_dir, stdout=sink, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.time() + 30
            while time.time() < deadline and proc.poll() is None and queue_depth(out["TaskQueueUrl"]) == before:
                time.sleep(0.5)
            check(proc.poll() is None, f"beckon worker exited {proc.returncode}:\n{log.read_text()}")
            check(
                queue_depth(out["TaskQueueUrl"]) != before, f"beckon worker claimed nothing in 30 s:\n{log.read_text()}"
            )
            time.sleep(2)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                fail(f"beckon worker did not stop within 30 s of SIGTERM:\n{log.read_text()}")
    check(code == 0, f"beckon worker exited {code} after SIGTERM:\n{log.read_text()}")
    claimed = [r for r in items(out["LedgerTableName"]) if task in json.dumps(r)]
    print(f"rehearsal: beckon worker started from the deployed env file, claimed from {out['TaskQueueName']}")
    print("rehearsal: and stopped cleanly on SIGTERM")
    print("rehearsal: worker log (tail):\n" + "\n".join(log.read_text().splitlines()[-8:]))
    check(bool(claimed), "the task row is still there")


def main() -> None:
    command, args = sys.argv[1], sys.argv[2:]
    try:
        {
            "build": lambda: build(*args),
            "network": network,
            "guided": lambda: guided(args),
            "check-stack": lambda: check_stack(*args),
            "userdata": lambda: userdata(*args),
            "github-app-convert": lambda: github_app_convert(args),
            "functions": lambda: functions(*args),
            "worker": lambda: worker(*args),
        }[command]()
    except ClientError as err:
        fail(f"{command}: {err}")


if __name__ == "__main__":
    main()
