"""Translate infra/template.yaml (SAM) to plain CloudFormation offline, for cfn-lint.

cfn-lint alone does not run the SAM transform, so mistakes inside AWS::Serverless::Function
(runtime, architecture, timeout, function URL, generated resource names) would pass unseen.
samtranslator expands them here with a fake region and account and no AWS calls; SAM-level
errors are printed and exit 2. Usage: python sam2cfn.py TEMPLATE OUT.json
"""

import json
import os
import sys

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from cfnlint.decode import decode  # parses the !Ref/!GetAtt/!Sub short forms  # noqa: E402
from samtranslator.model.exceptions import InvalidDocumentException  # noqa: E402
from samtranslator.parser.parser import Parser  # noqa: E402
from samtranslator.translator.translator import Translator  # noqa: E402


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    template, matches = decode(src)
    if matches:
        print(*matches, sep="\n")
        return 2
    template = json.loads(json.dumps(template, default=str))
    for resource in template.get("Resources", {}).values():
        # A local CodeUri is what `sam build` packages; the translator wants an S3 location, as
        # `sam validate` fakes it too.
        if resource.get("Type") == "AWS::Serverless::Function":
            props = resource.setdefault("Properties", {})
            if not str(props.get("CodeUri", ".")).startswith("s3://"):
                props["CodeUri"] = "s3://offline-bucket/code.zip"
    try:
        out = Translator(managed_policy_map=None, sam_parser=Parser(), plugins=[]).translate(
            sam_template=template,
            parameter_values={"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"},
            # Offline: no IAM lookup. The template uses no managed policy *names* (only full ARNs).
            get_managed_policy_map=lambda: {},
        )
    except InvalidDocumentException as err:
        for cause in err.causes:
            print("SAM error:", cause)
        return 2
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
