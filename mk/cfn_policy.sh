#!/bin/sh
# Rewrites the hypd policy embedded in the CloudFormation template (the host
# role's inline policy, between the "BEGIN hypd iam-policy" and "END hypd
# iam-policy" comments) from `hypd iam-policy`, so the template carries
# exactly the policy the tools declare. `make deploy-template` runs it;
# run it again after the tools' AWS actions change.
# usage: mk/cfn_policy.sh [TEMPLATE]   (HYPD names the binary, default build/hypd)
set -eu
HYPD=${HYPD:-build/hypd}
template=${1:-deploy/cloudformation/hypd.yaml}
policy=$(mktemp /tmp/hypd-policy.XXXXXX)
trap 'rm -f "$policy" "$policy.yaml"' EXIT
# stderr names the tools the policy covers: not part of the document
"$HYPD" iam-policy >"$policy" 2>/dev/null
[ "$(grep -c '# BEGIN hypd iam-policy' "$template")" -eq 1 ] &&
	[ "$(grep -c '# END hypd iam-policy' "$template")" -eq 1 ] || {
	echo "mk/cfn_policy.sh: $template needs one '# BEGIN hypd iam-policy' and one '# END hypd iam-policy' line" >&2
	exit 1
}
# JSON is YAML's flow style: the document goes in as printed, indented
# under PolicyDocument, at the BEGIN comment's indentation
awk -v pf="$policy" '
/# BEGIN hypd iam-policy/ {
	print
	ind = $0
	sub(/[^ ].*/, "", ind)
	print ind "PolicyDocument:"
	while ((getline l < pf) > 0) print ind "  " l
	skip = 1
	next
}
/# END hypd iam-policy/ { skip = 0 }
!skip { print }' "$template" >"$policy.yaml"
if cmp -s "$policy.yaml" "$template"; then
	echo "$template: the embedded policy is current" >&2
else
	cat "$policy.yaml" >"$template"
	echo "$template: the embedded policy rewritten from $HYPD iam-policy" >&2
fi
