"""moto's server with the CloudFormation gaps that infra/template.yaml runs into filled in.

Usage: python moto_cfn.py PORT   (serves on 127.0.0.1:PORT until killed)

infra/offline/rehearse deploys the real template with the real `sam deploy` against this server.
moto 5.2.5 (pinned there) emulates CloudFormation, but for this template it lacks, and so would
silently skip or fail on:

  1. the SAM transform. Real CloudFormation runs it server-side; here samtranslator (the library
     the AWS transform is built from, the version aws-sam-cli pins) runs it on create/update, with
     the stack's parameters, the fake account and no IAM lookup (the template names no managed
     policy by name).
  2. outputs after a change set. `sam deploy` creates and executes change sets; moto builds a
     stack's outputs only from create_stack/update_stack, so they come back empty.
  3. resource types: AWS::SecretsManager::Secret, AWS::Lambda::Url, AWS::CloudWatch::Alarm and
     AWS::SQS::QueuePolicy. moto skips them with a warning and every !Ref to them becomes null.
     Each is mapped below onto moto's own service backend, with the properties this template
     uses; any other property is refused, so the shim can never silently drop what it does not
     model.
  4. properties moto's own CloudFormation models drop or misread although its service APIs keep
     them: Lambda Architectures; DynamoDB TimeToLiveSpecification, PointInTimeRecoverySpecification
     and SSESpecification (CloudFormation's SSEEnabled is the API's Enabled); IAM Role Policies
     (stored unvalidated, never updated: here they go through PutRolePolicy, which validates the
     document as IAM's syntax check does) and ManagedPolicyArns (ignored: here attached, so the
     policy must exist, and detached again on delete); SecurityGroupEgress (ignored, leaving
     allow-all egress: CloudFormation replaces the default rule with the listed ones).
  5. what an update touches. moto updates a resource only when its template text changed or it
     !Refs a changed parameter; CloudFormation re-resolves everything. So a new GitHubAppId (it
     reaches the launch template through !Sub and a condition) would leave the worker's UserData
     stale, and a new launch template version would not reach the Auto Scaling group (it names
     the version with !GetAtt). Here a resource is also updated when a changed parameter reaches
     it through ${…} in a !Sub or through a condition, or when a resource it !GetAtts was.
  6. StartInstanceRefresh / DescribeInstanceRefreshes (`infra/deploy upgrade-worker`), which moto
     does not implement: recorded per group (which must exist) and reported as Pending; nothing
     is replaced. The AWS CLI still validates the request against the API model.

These shims are ours, not AWS's: what they prove is the template's wiring (every !Ref, !GetAtt,
!Sub, condition and parameter lands on a resource that exists, with the values the binaries get),
not CloudFormation's own validation. Still not modelled at all: CreationPolicy/cfn-signal (the
stack never waits for the worker's bootstrap), IAM evaluation, KMS, S3::BucketPolicy of SAM's
managed bucket stack (skipped with a warning; nothing refers to it).
"""

import json
import os
import sys
import uuid
from typing import Any, Callable

# AWS's managed policies, so that ManagedPolicyArns must name one that exists.
os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"

import boto3  # noqa: E402
from moto.autoscaling.models import autoscaling_backends  # noqa: E402
from moto.autoscaling.responses import AutoScalingResponse  # noqa: E402
from moto.awslambda.models import LambdaFunction, lambda_backends  # noqa: E402
from moto.cloudformation import models as cfn_models  # noqa: E402
from moto.cloudformation.exceptions import UnformattedGetAttTemplateException, ValidationError  # noqa: E402
from moto.cloudformation.parsing import ResourceMap  # noqa: E402
from moto.cloudwatch.models import cloudwatch_backends  # noqa: E402
from moto.core.common_models import CloudFormationModel  # noqa: E402
from moto.core.responses import ActionResult  # noqa: E402
from moto.dynamodb.models import dynamodb_backends  # noqa: E402
from moto.dynamodb.models.table import Table  # noqa: E402
from moto.ec2.models import ec2_backends  # noqa: E402
from moto.ec2.models.security_groups import SecurityGroup  # noqa: E402
from moto.iam.models import Role, iam_backends  # noqa: E402
from moto.secretsmanager.models import secretsmanager_backends  # noqa: E402
from moto.server import main as moto_main  # noqa: E402
from moto.sqs.models import sqs_backends  # noqa: E402
from samcli.yamlhelper import yaml_parse  # noqa: E402
from samtranslator.model.exceptions import InvalidDocumentException  # noqa: E402
from samtranslator.parser.parser import Parser  # noqa: E402
from samtranslator.translator.translator import Translator  # noqa: E402

SAM_TRANSFORM = "AWS::Serverless-2016-10-31"


def _only(kind: str, props: dict[str, Any], known: set[str]) -> None:
    unknown = set(props) - known
    if unknown:
        raise ValidationError(message=f"offline shim for {kind} does not model {sorted(unknown)}")


# --- 1. the SAM transform -------------------------------------------------------------------


def _transform(template: str, parameters: dict[str, Any], account_id: str, region: str) -> str:
    if not template:
        return template
    parsed = yaml_parse(template)
    transforms = parsed.get("Transform")
    transforms = transforms if isinstance(transforms, list) else [transforms] if transforms else []
    if SAM_TRANSFORM not in transforms:
        return template
    if transforms != [SAM_TRANSFORM]:
        raise ValidationError(message=f"offline: only {SAM_TRANSFORM} is modelled, not {transforms}")
    values = {k: v for k, v in parameters.items() if isinstance(v, str)}
    values.update({"AWS::Region": region, "AWS::AccountId": account_id, "AWS::Partition": "aws"})
    try:
        session = boto3.session.Session(region_name=region)  # only read for the region, no AWS call
        translator = Translator(managed_policy_map=None, sam_parser=Parser(), plugins=[], boto_session=session)
        out = translator.translate(sam_template=parsed, parameter_values=values, get_managed_policy_map=lambda: {})
    except InvalidDocumentException as err:
        causes = "; ".join(str(c) for c in err.causes)
        raise ValidationError(message=f"Transform {SAM_TRANSFORM} failed with: {causes}") from err
    return json.dumps(out)


Backend = cfn_models.CloudFormationBackend
_create_stack, _create_change_set, _update_stack = Backend.create_stack, Backend.create_change_set, Backend.update_stack


def create_stack(self: Any, name: str, template: str, parameters: dict[str, Any], *a: Any, **kw: Any) -> Any:
    return _create_stack(
        self, name, _transform(template, parameters, self.account_id, self.region_name), parameters, *a, **kw
    )


def create_change_set(
    self: Any, stack_name: str, change_set_name: str, template: str, parameters: Any, *a: Any, **kw: Any
) -> Any:
    template = _transform(template, parameters, self.account_id, self.region_name)
    return _create_change_set(self, stack_name, change_set_name, template, parameters, *a, **kw)


def update_stack(
    self: Any, name: str, template: str, role_arn: Any, parameters: list[dict[str, Any]], tags: Any
) -> Any:
    values = {p["ParameterKey"]: p.get("ParameterValue") for p in parameters if "ParameterValue" in p}
    template = _transform(template, values, self.account_id, self.region_name)
    return _update_stack(self, name, template, role_arn, parameters, tags)


Backend.create_stack, Backend.create_change_set, Backend.update_stack = create_stack, create_change_set, update_stack

# --- 2. outputs after a change set ----------------------------------------------------------

_execute_change_set = Backend.execute_change_set


def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
    _execute_change_set(self, change_set_name, stack_name)
    for stack in self.stacks.values():
        if stack.name == stack_name or stack.stack_id == stack_name or stack_name is None:
            stack._parse_template()
            stack.output_map = stack._create_output_map()
            stack.description = stack.template_dict.get("Description")


Backend.execute_change_set = execute_change_set

# --- 3. resource types moto's CloudFormation skips -------------------------------------------


class Shim:
    """Common plumbing (a mixin: moto finds models among CloudFormationModel's direct subclasses)."""

    ATTRS: dict[str, str] = {}

    def __init__(self, physical_id: str, attrs: dict[str, str]):
        self.physical_id = physical_id
        self.attrs = attrs

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls.ATTRS

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name not in self.attrs:
            raise UnformattedGetAttTemplateException()
        return self.attrs[attribute_name]

    def is_created(self) -> bool:
        return True

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        pass


class Secret(Shim, CloudFormationModel):
    __module__ = "offline.shims"  # moto files models by the second part of their module name
    ATTRS = {"Id": ""}

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SecretsManager::Secret"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "Name"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> "Secret":
        props = cloudformation_json.get("Properties", {})
        _only(cls.cloudformation_type(), props, {"Name", "Description", "SecretString", "GenerateSecretString", "Tags"})
        backend = secretsmanager_backends[account_id][region_name]
        value = props.get("SecretString")
        gen = props.get("GenerateSecretString")
        if gen is not None:
            _only("GenerateSecretString", gen, {"PasswordLength", "ExcludePunctuation", "ExcludeCharacters"})
            value = json.loads(
                backend.get_random_password(
                    password_length=int(gen.get("PasswordLength", 32)),
                    exclude_characters=gen.get("ExcludeCharacters", ""),
                    exclude_numbers=False,
                    exclude_punctuation=bool(gen.get("ExcludePunctuation", False)),
                    exclude_uppercase=False,
                    exclude_lowercase=False,
                    include_space=False,
                    require_each_included_type=True,
                )
            )["RandomPassword"]
        # Neither SecretString nor GenerateSecretString: CloudFormation creates a secret without a
        # value (GetSecretValue fails until one is put), which is what create_secret does here too.
        created = json.loads(
            backend.create_secret(
                name=resource_name,
                secret_string=value,
                secret_binary=None,
                description=props.get("Description"),
                tags=props.get("Tags"),
                kms_key_id=None,
                client_request_token=None,
                replica_regions=[],
                force_overwrite=False,
            )
        )
        return cls(created["ARN"], {"Id": created["ARN"]})

    def delete(self, account_id: str, region_name: str) -> None:
        secretsmanager_backends[account_id][region_name].delete_secret(self.physical_id, None, True)


class FunctionUrl(Shim, CloudFormationModel):
    __module__ = "offline.shims"  # moto files models by the second part of their module name
    ATTRS = {"FunctionArn": "", "FunctionUrl": ""}

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Lambda::Url"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> "FunctionUrl":
        props = cloudformation_json.get("Properties", {})
        _only(cls.cloudformation_type(), props, {"TargetFunctionArn", "AuthType", "InvokeMode", "Cors"})
        config = {k: props[k] for k in ("AuthType", "InvokeMode", "Cors") if k in props}
        url = lambda_backends[account_id][region_name].create_function_url_config(props["TargetFunctionArn"], config)
        # The real attribute ends in "/" (https://ID.lambda-url.REGION.on.aws/); moto's has none.
        return cls(url.function.function_arn, {"FunctionArn": url.function.function_arn, "FunctionUrl": url.url + "/"})

    def delete(self, account_id: str, region_name: str) -> None:
        backend = lambda_backends[account_id][region_name]
        if any(f.function_arn == self.physical_id for f in backend.list_functions()):  # gone with its function
            backend.delete_function_url_config(self.physical_id)


class Alarm(Shim, CloudFormationModel):
    __module__ = "offline.shims"  # moto files models by the second part of their module name
    ATTRS = {"Arn": ""}

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> "Alarm":
        p = cloudformation_json.get("Properties", {})
        _only(
            cls.cloudformation_type(),
            p,
            {
                "AlarmName", "AlarmDescription", "Namespace", "MetricName", "Dimensions", "Statistic", "Period",
                "EvaluationPeriods", "Threshold", "ComparisonOperator", "TreatMissingData", "AlarmActions", "OKActions",
            },
        )  # fmt: skip
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=resource_name,
            namespace=p["Namespace"],
            metric_name=p["MetricName"],
            comparison_operator=p["ComparisonOperator"],
            evaluation_periods=int(p["EvaluationPeriods"]),
            period=int(p["Period"]),
            threshold=float(p["Threshold"]),
            statistic=p["Statistic"],
            description=p.get("AlarmDescription", ""),
            dimensions=p.get("Dimensions", []),
            alarm_actions=p.get("AlarmActions") or [],
            ok_actions=p.get("OKActions") or [],
            treat_missing_data=p.get("TreatMissingData"),
        )
        return cls(resource_name, {"Arn": alarm.alarm_arn})

    def delete(self, account_id: str, region_name: str) -> None:
        cloudwatch_backends[account_id][region_name].delete_alarms([self.physical_id])


class QueuePolicy(Shim, CloudFormationModel):
    __module__ = "offline.shims"  # moto files models by the second part of their module name
    ATTRS: dict[str, str] = {}

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SQS::QueuePolicy"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> "QueuePolicy":
        props = cloudformation_json.get("Properties", {})
        _only(cls.cloudformation_type(), props, {"Queues", "PolicyDocument"})
        backend = sqs_backends[account_id][region_name]
        for url in props["Queues"]:
            backend.set_queue_attributes(
                url.rstrip("/").rsplit("/", 1)[-1], {"Policy": json.dumps(props["PolicyDocument"])}
            )
        return cls(resource_name, {})

    def delete(self, account_id: str, region_name: str) -> None:
        pass


# --- 4. properties moto's models drop ---------------------------------------------------------

Hook = Callable[[Any, dict[str, Any], str, str], Any]


def _around(model: Any, before: Hook | None = None, after: Hook | None = None) -> None:
    """Wraps the model's create and update (moto passes update's arguments by keyword)."""
    create = model.create_from_cloudformation_json.__func__
    update = model.update_from_cloudformation_json.__func__

    def created(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        if before:
            before(None, cloudformation_json, account_id, region_name)
        resource = create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        return after(resource, cloudformation_json, account_id, region_name) if after else resource

    def updated(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        if before:
            before(original_resource, cloudformation_json, account_id, region_name)
        resource = update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
        return after(resource, cloudformation_json, account_id, region_name) if after else resource

    model.create_from_cloudformation_json = classmethod(created)
    model.update_from_cloudformation_json = classmethod(updated)


def _lambda_architectures(fn: Any, cfn: dict[str, Any], account_id: str, region_name: str) -> Any:
    fn.architectures = cfn["Properties"].get("Architectures", ["x86_64"])
    return fn


def _table_sse(_: Any, cfn: dict[str, Any], account_id: str, region_name: str) -> None:
    props = cfn["Properties"]
    sse = props.get("SSESpecification")
    if sse is not None and "SSEEnabled" in sse:
        # CloudFormation spells it SSEEnabled, the API (which moto's model reads) Enabled.
        props["SSESpecification"] = {
            "Enabled": sse["SSEEnabled"],
            **{k: v for k, v in sse.items() if k != "SSEEnabled"},
        }


def _table_ttl_pitr(table: Any, cfn: dict[str, Any], account_id: str, region_name: str) -> Any:
    props = cfn["Properties"]
    backend = dynamodb_backends[account_id][region_name]
    if "TimeToLiveSpecification" in props:
        backend.update_time_to_live(table.name, props["TimeToLiveSpecification"])
    if "PointInTimeRecoverySpecification" in props:
        backend.update_continuous_backups(table.name, props["PointInTimeRecoverySpecification"])
    return table


def _role_policies(role: Any, cfn: dict[str, Any], account_id: str, region_name: str) -> Any:
    backend = iam_backends[account_id]["aws"]
    props = cfn["Properties"]
    for name in list(role.policies):
        role.delete_policy(name)
    for policy in props.get("Policies", []):
        backend.put_role_policy(role.name, policy["PolicyName"], json.dumps(policy["PolicyDocument"]))
    for arn in list(role.managed_policies):
        backend.detach_role_policy(arn, role.name)
    for arn in props.get("ManagedPolicyArns") or []:
        backend.attach_role_policy(arn, role.name)
    return role


def _sg_egress(group: Any, cfn: dict[str, Any], account_id: str, region_name: str) -> Any:
    rules = cfn["Properties"].get("SecurityGroupEgress")
    if rules is None:
        return group
    backend = ec2_backends[account_id][region_name]
    backend.revoke_security_group_egress(group.id, "-1", None, None, [{"CidrIp": "0.0.0.0/0"}], vpc_id=group.vpc_id)  # type: ignore[arg-type]
    for rule in rules:
        _only("SecurityGroupEgress", rule, {"IpProtocol", "FromPort", "ToPort", "CidrIp", "Description"})
        cidr = {"CidrIp": rule["CidrIp"], **({"Description": rule["Description"]} if "Description" in rule else {})}
        backend.authorize_security_group_egress(
            group.id, str(rule["IpProtocol"]), rule.get("FromPort"), rule.get("ToPort"), [cidr], vpc_id=group.vpc_id
        )
    return group


_role_delete = Role.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]


def _role_delete_detaching(
    cls: Any, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
) -> None:
    """As CloudFormation does: detach the managed policies, then delete the role."""
    backend = iam_backends[account_id]["aws"]
    for role in [r for r in backend.roles.values() if r.name == resource_name]:
        for arn in list(role.managed_policies):
            backend.detach_role_policy(arn, role.name)
    _role_delete(cls, resource_name, cloudformation_json, account_id, region_name)


Role.delete_from_cloudformation_json = classmethod(_role_delete_detaching)  # type: ignore[method-assign]
_around(LambdaFunction, after=_lambda_architectures)
_around(Table, before=_table_sse, after=_table_ttl_pitr)
_around(Role, after=_role_policies)
_around(SecurityGroup, after=_sg_egress)

# --- 5. what an update touches -----------------------------------------------------------------

_build_resource_diff = ResourceMap.build_resource_diff


def _mentions(node: Any, params: set[str], conditions: set[str], resources: set[str] | None = None) -> bool:
    """Whether node uses a parameter or condition of these sets, or !GetAtts one of resources."""
    if isinstance(node, list):
        return any(_mentions(n, params, conditions, resources) for n in node)
    if not isinstance(node, dict):
        return False
    for key, value in node.items():
        if key == "Ref" and isinstance(value, str) and value in params:
            return True
        if key == "Condition" and isinstance(value, str) and value in conditions:
            return True
        if key == "Fn::If" and value[0] in conditions:
            return True
        if key == "Fn::Sub":
            text = value[0] if isinstance(value, list) else value
            if any("${" + p + "}" in text for p in params):
                return True
        if key == "Fn::GetAtt" and resources is not None and value[0] in resources:
            return True
        if _mentions(value, params, conditions, resources):
            return True
    return False


def build_resource_diff(
    self: Any, other_template: dict[str, Any], parameters: dict[str, Any] | None = None
) -> dict[str, Any]:
    diff = _build_resource_diff(self, other_template, parameters)
    if not parameters:
        return diff
    changed = {p for p in parameters if self.input_parameters.get(p) != parameters[p]}
    definitions = other_template.get("Conditions", {})
    conditions: set[str] = set()
    while True:
        more = {c for c, d in definitions.items() if c not in conditions and _mentions(d, changed, conditions)}
        if not more:
            break
        conditions |= more
    old, new = self._resource_json_map, other_template["Resources"]
    modify = set(diff["Modify"])
    modify |= {n for n in new if n in old and _mentions(new[n], changed, conditions)}
    while True:
        more = {n for n in new if n in old and n not in modify and _mentions(new[n], set(), set(), modify)}
        if not more:
            break
        modify |= more
    diff["Modify"] = [n for n in new if n in modify]
    return diff


ResourceMap.build_resource_diff = build_resource_diff  # type: ignore[method-assign]

# --- 6. instance refreshes ----------------------------------------------------------------------

_refreshes: dict[str, list[dict[str, Any]]] = {}


def start_instance_refresh(self: Any) -> ActionResult:
    params = self._get_params()
    name = params["AutoScalingGroupName"]
    backend = autoscaling_backends[self.current_account][self.region]
    if not backend.describe_auto_scaling_groups([name]):
        raise ValidationError(message=f"AutoScalingGroup name not found - {name}")
    refresh = {
        "InstanceRefreshId": str(uuid.uuid4()),
        "AutoScalingGroupName": name,
        "Status": "Pending",
        "Preferences": params.get("Preferences", {}),
    }
    _refreshes.setdefault(name, []).insert(0, refresh)
    return ActionResult({"InstanceRefreshId": refresh["InstanceRefreshId"]})


def describe_instance_refreshes(self: Any) -> ActionResult:
    name = self._get_param("AutoScalingGroupName")
    return ActionResult({"InstanceRefreshes": _refreshes.get(name, [])})


AutoScalingResponse.start_instance_refresh = start_instance_refresh  # type: ignore[attr-defined]
AutoScalingResponse.describe_instance_refreshes = describe_instance_refreshes  # type: ignore[attr-defined]

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    moto_main(["-H", "127.0.0.1", "-p", sys.argv[1]])
