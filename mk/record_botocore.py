#!/usr/bin/env python3
"""Records request/response pairs from the machine's boto3 (botocore) for
tests/lua/aws_protocol_test.lua.

    python3 mk/record_botocore.py [--out tests/data/aws/recorded]

For each case below, boto3 builds and signs the request; a `before-send`
handler records it (method, path, decoded query pairs, headers, body) and
answers with the canned response written here from the AWS API reference,
without any network. boto3's parsed result (or its error) is recorded too.
Each pair is one file <service>-<operation>[-case].json:

  { service, operation, params,
    request:  { method, path, query_string (as sent), query: [[k, v], ...]
                decoded and sorted, headers, body, json (when the body is JSON) },
    response: { status, headers, body },
    parsed:   { ... }            (or error: { code, message, status, request_id, type }) }

Normalization: datetimes become ISO 8601 UTC "2023-11-14T22:13:20.123Z"
(milliseconds only when not zero), bytes and streaming bodies become text,
ResponseMetadata keeps only RequestId. Dropped request headers (signing,
transport, SDK telemetry): see DROP. Params are reordered to the model's
member order so form and XML bodies are comparable byte for byte.

boto3 customizations hypd does not copy are switched off where they change
the wire: S3 ListObjects(V2) gets EncodingType explicitly (boto would add
encoding-type=url and decode keys), IAM's policy documents stay text (the
after-call json_decode_policies handler is unregistered), flexible checksums
are computed only when required (and their headers dropped: hypd sends
Content-MD5 where a checksum is required).

CI does not run this script; the JSON files are committed.
"""
import argparse
import base64
import datetime
import io
import json
import os
import sys
from urllib.parse import parse_qsl, urlsplit

import boto3
import botocore
from botocore import handlers
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.response import StreamingBody

DROP = {
    "authorization", "x-amz-date", "x-amz-security-token", "user-agent",
    "amz-sdk-invocation-id", "amz-sdk-request", "x-amz-content-sha256",
    "content-length", "expect", "x-amz-sdk-checksum-algorithm",
    "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha1", "x-amz-checksum-sha256", "x-amz-trailer",
    "x-amz-decoded-content-length", "transfer-encoding",
}

ACCOUNT = "123456789012"
T0 = 1700000000  # 2023-11-14T22:13:20Z


class Raw(io.BytesIO):
    """What AWSResponse and StreamingBody read a canned body from."""

    def stream(self, **_):
        yield self.getvalue()


def xml_doc(root, ns, inner):
    return '<?xml version="1.0" encoding="UTF-8"?>\n<%s xmlns="%s">%s</%s>' % (root, ns, inner, root)


STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
IAM_NS = "https://iam.amazonaws.com/doc/2010-05-08/"
EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
CFN_NS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
JSON_H = {"content-type": "application/x-amz-json-1.1", "x-amzn-requestid": "11111111-2222-3333-4444-555555555555"}
REST_H = {"content-type": "application/json", "x-amzn-requestid": "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"}
XML_H = {"content-type": "text/xml"}
S3_H = {"x-amz-request-id": "4442587FB7D0A2F9", "x-amz-id-2": "hostid"}


def query_ok(op, ns, result):
    return xml_doc(op + "Response", ns, "<%sResult>%s</%sResult><ResponseMetadata><RequestId>"
                   "c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>" % (op, result, op))


def query_error(typ, code, message):
    return xml_doc("ErrorResponse", IAM_NS, "<Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error>"
                   "<RequestId>4c8b3e1e-8a4c-11e0-a4d7-2b3e3c6d1e11</RequestId>" % (typ, code, message))


def role_xml(name, extra=""):
    return ("<Path>/</Path><RoleName>%s</RoleName><RoleId>AROAEXAMPLE%s</RoleId>"
            "<Arn>arn:aws:iam::%s:role/%s</Arn><CreateDate>2023-11-14T22:13:20Z</CreateDate>"
            "<AssumeRolePolicyDocument>%%7B%%22Version%%22%%3A%%222012-10-17%%22%%7D</AssumeRolePolicyDocument>"
            "<MaxSessionDuration>3600</MaxSessionDuration>%s" % (name, name.upper(), ACCOUNT, name, extra))


SUBNET = ("<item><subnetId>subnet-0a1</subnetId><subnetArn>arn:aws:ec2:us-west-2:%s:subnet/subnet-0a1</subnetArn>"
          "<state>available</state><ownerId>%s</ownerId><vpcId>vpc-1</vpcId><cidrBlock>10.1.0.0/20</cidrBlock>"
          "<ipv6CidrBlockAssociationSet/><availableIpAddressCount>4091</availableIpAddressCount>"
          "<availabilityZone>us-west-2a</availabilityZone><availabilityZoneId>usw2-az1</availabilityZoneId>"
          "<defaultForAz>false</defaultForAz><mapPublicIpOnLaunch>false</mapPublicIpOnLaunch>"
          "<tagSet><item><key>Name</key><value>a b</value></item><item><key>hypd</key><value/></item></tagSet>"
          "<privateDnsNameOptionsOnLaunch><hostnameType>ip-name</hostnameType>"
          "<enableResourceNameDnsARecord>false</enableResourceNameDnsARecord></privateDnsNameOptionsOnLaunch>"
          "</item>") % (ACCOUNT, ACCOUNT)

HP_CLUSTER = {
    "ClusterArn": "arn:aws:sagemaker:us-west-2:%s:cluster/abc123" % ACCOUNT,
    "ClusterName": "hp1", "ClusterStatus": "InService", "CreationTime": T0 + 0.123,
    "InstanceGroups": [{
        "CurrentCount": 2, "TargetCount": 2, "InstanceGroupName": "workers",
        "InstanceType": "ml.g5.8xlarge",
        "LifeCycleConfig": {"SourceS3Uri": "s3://hp-bucket/lc/", "OnCreate": "on_create.sh"},
        "ExecutionRole": "arn:aws:iam::%s:role/hp-exec" % ACCOUNT, "ThreadsPerCore": 1,
        "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
        "OnStartDeepHealthChecks": [], "Status": "InService",
    }],
    "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-0a1"]},
    "Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:%s:cluster/eks1" % ACCOUNT}},
    "NodeRecovery": "Automatic",
}

EKS_CLUSTER = {
    "name": "eks1", "arn": "arn:aws:eks:us-west-2:%s:cluster/eks1" % ACCOUNT, "createdAt": T0 + 0.5,
    "version": "1.31", "endpoint": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
    "roleArn": "arn:aws:iam::%s:role/eks" % ACCOUNT,
    "resourcesVpcConfig": {"subnetIds": ["subnet-0a1", "subnet-0b2"], "securityGroupIds": [],
                           "clusterSecurityGroupId": "sg-0c", "vpcId": "vpc-1", "endpointPublicAccess": True,
                           "endpointPrivateAccess": False, "publicAccessCidrs": ["0.0.0.0/0"]},
    "kubernetesNetworkConfig": {"serviceIpv4Cidr": "172.20.0.0/16", "ipFamily": "ipv4"},
    "logging": {"clusterLogging": [{"types": ["api", "audit"], "enabled": False}]},
    "identity": {"oidc": {"issuer": "https://oidc.eks.us-west-2.amazonaws.com/id/ABC"}},
    "status": "ACTIVE", "certificateAuthority": {"data": "LS0tLS1CRUdJTg=="}, "platformVersion": "eks.12",
    "tags": {"team": "ml"}, "accessConfig": {"authenticationMode": "API_AND_CONFIG_MAP"},
}

CASES = [
    # --- awsJson1.1 ---
    ("sagemaker", "CreateCluster", "", {
        "ClusterName": "hp1",
        "InstanceGroups": [{"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 2,
                            "LifeCycleConfig": {"SourceS3Uri": "s3://hp-bucket/lc/", "OnCreate": "on_create.sh"},
                            "ExecutionRole": "arn:aws:iam::%s:role/hp-exec" % ACCOUNT, "ThreadsPerCore": 1,
                            "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]}],
        "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-0a1"]},
        "Tags": [{"Key": "team", "Value": "ml"}],
        "Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:%s:cluster/eks1" % ACCOUNT}},
        "NodeRecovery": "Automatic",
    }, (200, JSON_H, json.dumps({"ClusterArn": HP_CLUSTER["ClusterArn"]}))),
    ("sagemaker", "DescribeCluster", "", {"ClusterName": "hp1"}, (200, JSON_H, json.dumps(HP_CLUSTER))),
    ("sagemaker", "ListClusters", "", {"CreationTimeAfter": "2023-11-01T00:00:00Z", "MaxResults": 10,
                                       "NextToken": "tok1", "SortBy": "CREATION_TIME", "SortOrder": "Descending"},
     (200, JSON_H, json.dumps({"ClusterSummaries": [
         {"ClusterArn": HP_CLUSTER["ClusterArn"], "ClusterName": "hp1", "CreationTime": T0,
          "ClusterStatus": "InService"}], "NextToken": "tok2"}))),
    ("sagemaker", "DescribeCluster", "not-found", {"ClusterName": "hp2"},
     (400, JSON_H, json.dumps({"__type": "com.amazonaws.sagemaker#ResourceNotFound",
                               "message": "Cluster hp2 not found."}))),
    ("fsx", "DescribeFileSystems", "", {"FileSystemIds": ["fs-0123456789abcdef0"], "MaxResults": 5},
     (200, JSON_H, json.dumps({"FileSystems": [{
         "OwnerId": ACCOUNT, "CreationTime": T0 + 0.25, "FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "LUSTRE",
         "Lifecycle": "AVAILABLE", "StorageCapacity": 1200, "StorageType": "SSD", "VpcId": "vpc-1",
         "SubnetIds": ["subnet-0a1"], "NetworkInterfaceIds": ["eni-1"], "DNSName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
         "ResourceARN": "arn:aws:fsx:us-west-2:%s:file-system/fs-0123456789abcdef0" % ACCOUNT,
         "Tags": [{"Key": "team", "Value": "ml"}],
         "LustreConfiguration": {"WeeklyMaintenanceStartTime": "1:05:00", "DeploymentType": "PERSISTENT_2",
                                 "PerUnitStorageThroughput": 250, "MountName": "abcdefgh",
                                 "DataCompressionType": "LZ4", "EfaEnabled": False}}]}))),
    ("logs", "GetLogEvents", "", {"logGroupName": "/aws/sagemaker/Clusters/hp1/abc123",
                                  "logStreamName": "LifecycleConfig/workers/i-0abc", "startTime": 1700000000000,
                                  "limit": 100, "startFromHead": True},
     (200, JSON_H, json.dumps({"events": [
         {"timestamp": 1700000000123, "message": "line one\ttabbed \"quoted\"", "ingestionTime": 1700000001000},
         {"timestamp": 1700000000456, "message": "caf\u00e9 \u2713", "ingestionTime": 1700000001000}],
         "nextForwardToken": "f/1", "nextBackwardToken": "b/0"}))),
    ("ssm", "GetParameter", "", {"Name": "/hypd/config", "WithDecryption": True},
     (200, JSON_H, json.dumps({"Parameter": {"Name": "/hypd/config", "Type": "SecureString", "Value": "s3cr3t",
                                             "Version": 3, "LastModifiedDate": T0, "DataType": "text",
                                             "ARN": "arn:aws:ssm:us-west-2:%s:parameter/hypd/config" % ACCOUNT}}))),
    # --- restJson1 ---
    ("eks", "DescribeCluster", "", {"name": "eks1"}, (200, REST_H, json.dumps({"cluster": EKS_CLUSTER}))),
    ("eks", "CreateCluster", "", {
        "name": "eks1", "version": "1.31", "roleArn": EKS_CLUSTER["roleArn"],
        "resourcesVpcConfig": {"subnetIds": ["subnet-0a1", "subnet-0b2"], "securityGroupIds": [],
                               "endpointPublicAccess": True, "endpointPrivateAccess": False},
        "tags": {"team": "ml"}, "clientRequestToken": "0b7e4c3a-1d2f-4e5a-9b8c-7d6e5f4a3b2c",
        "accessConfig": {"authenticationMode": "API_AND_CONFIG_MAP",
                         "bootstrapClusterCreatorAdminPermissions": True},
    }, (200, REST_H, json.dumps({"cluster": dict(EKS_CLUSTER, status="CREATING")}))),
    ("eks", "ListAddons", "", {"clusterName": "eks1", "maxResults": 10, "nextToken": "tok/1+2 =3"},
     (200, REST_H, json.dumps({"addons": ["vpc-cni", "coredns", "kube-proxy"], "nextToken": None}))),
    ("eks", "CreateAddon", "", {
        "clusterName": "eks1", "addonName": "amazon-cloudwatch-observability", "addonVersion": "v2.1.0-eksbuild.1",
        "serviceAccountRoleArn": "arn:aws:iam::%s:role/cw" % ACCOUNT, "resolveConflicts": "OVERWRITE",
        "clientRequestToken": "5f0e2d1c-3b4a-4958-8677-a6b5c4d3e2f1", "tags": {"team": "ml"},
        "configurationValues": "{\"agent\":{\"config\":{}}}",
    }, (200, REST_H, json.dumps({"addon": {
        "addonName": "amazon-cloudwatch-observability", "clusterName": "eks1", "status": "CREATING",
        "addonVersion": "v2.1.0-eksbuild.1", "health": {"issues": []},
        "addonArn": "arn:aws:eks:us-west-2:%s:addon/eks1/amazon-cloudwatch-observability/x" % ACCOUNT,
        "createdAt": T0, "modifiedAt": T0 + 1, "serviceAccountRoleArn": "arn:aws:iam::%s:role/cw" % ACCOUNT,
        "tags": {"team": "ml"}, "configurationValues": "{\"agent\":{\"config\":{}}}"}}))),
    ("eks", "DescribeCluster", "not-found", {"name": "nope"},
     (404, dict(REST_H, **{"x-amzn-errortype": "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.eks/"}),
      json.dumps({"message": "No cluster found for name: nope.", "clusterName": "nope"}))),
    # --- query ---
    ("sts", "GetCallerIdentity", "", {}, (200, XML_H, query_ok("GetCallerIdentity", STS_NS,
        "<Arn>arn:aws:sts::%s:assumed-role/hp/me</Arn><UserId>AROAEXAMPLE:me</UserId><Account>%s</Account>"
        % (ACCOUNT, ACCOUNT)))),
    ("sts", "AssumeRole", "", {
        "RoleArn": "arn:aws:iam::%s:role/hp" % ACCOUNT, "RoleSessionName": "hypd-session",
        "PolicyArns": [{"arn": "arn:aws:iam::aws:policy/ReadOnlyAccess"}], "DurationSeconds": 3600,
        "Tags": [{"Key": "team", "Value": "ml & ops"}],
    }, (200, XML_H, query_ok("AssumeRole", STS_NS,
        "<Credentials><AccessKeyId>ASIAEXAMPLE</AccessKeyId><SecretAccessKey>secret</SecretAccessKey>"
        "<SessionToken>token+/=</SessionToken><Expiration>2023-11-14T23:13:20Z</Expiration></Credentials>"
        "<AssumedRoleUser><AssumedRoleId>AROAEXAMPLE:hypd-session</AssumedRoleId>"
        "<Arn>arn:aws:sts::%s:assumed-role/hp/hypd-session</Arn></AssumedRoleUser>"
        "<PackedPolicySize>6</PackedPolicySize><SourceIdentity/>" % ACCOUNT))),
    ("sts", "AssumeRole", "denied", {"RoleArn": "arn:aws:iam::%s:role/nope" % ACCOUNT, "RoleSessionName": "s1"},
     (403, XML_H, query_error("Sender", "AccessDenied",
                              "User is not authorized to perform: sts:AssumeRole on resource: role/nope"))),
    ("iam", "CreateRole", "", {
        "Path": "/", "RoleName": "hp-exec",
        "AssumeRolePolicyDocument": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        "Description": "HyperPod execution role", "MaxSessionDuration": 3600,
        "Tags": [{"Key": "team", "Value": "ml"}, {"Key": "owner", "Value": "hypd"}],
    }, (200, XML_H, query_ok("CreateRole", IAM_NS, "<Role>%s</Role>" % role_xml("hp-exec",
        "<Tags><member><Key>team</Key><Value>ml</Value></member></Tags>")))),
    ("iam", "ListRoles", "", {"PathPrefix": "/", "Marker": "m1", "MaxItems": 2},
     (200, XML_H, query_ok("ListRoles", IAM_NS,
        "<IsTruncated>true</IsTruncated><Marker>m2</Marker><Roles><member>%s</member><member>%s</member></Roles>"
        % (role_xml("a"), role_xml("b", "<Description>second</Description>"))))),
    ("iam", "GetRole", "", {"RoleName": "hp-exec"}, (200, XML_H, query_ok("GetRole", IAM_NS, "<Role>%s</Role>" % role_xml(
        "hp-exec", "<RoleLastUsed><LastUsedDate>2023-11-15T01:02:03.456Z</LastUsedDate><Region>us-west-2</Region>"
        "</RoleLastUsed><Tags/>")))),
    ("iam", "GetRole", "no-such-entity", {"RoleName": "nope"},
     (404, XML_H, query_error("Sender", "NoSuchEntity", "The role with name nope cannot be found."))),
    ("cloudformation", "DescribeStacks", "", {"StackName": "hp-stack", "NextToken": "n1"},
     (200, XML_H, query_ok("DescribeStacks", CFN_NS,
        "<Stacks><member><StackId>arn:aws:cloudformation:us-west-2:%s:stack/hp-stack/1</StackId>"
        "<StackName>hp-stack</StackName><Description>HyperPod</Description>"
        "<Parameters><member><ParameterKey>Env</ParameterKey><ParameterValue>dev</ParameterValue></member></Parameters>"
        "<CreationTime>2023-11-14T22:13:20.123Z</CreationTime><StackStatus>CREATE_COMPLETE</StackStatus>"
        "<DisableRollback>false</DisableRollback><NotificationARNs/><Capabilities><member>CAPABILITY_IAM</member>"
        "</Capabilities><Outputs><member><OutputKey>VpcId</OutputKey><OutputValue>vpc-1</OutputValue>"
        "</member></Outputs><Tags><member><Key>team</Key><Value>ml</Value></member></Tags>"
        "<DriftInformation><StackDriftStatus>NOT_CHECKED</StackDriftStatus></DriftInformation>"
        "</member></Stacks>" % ACCOUNT))),
    # --- EC2 query ---
    ("ec2", "DescribeSubnets", "", {
        "Filters": [{"Name": "vpc-id", "Values": ["vpc-1"]}, {"Name": "tag:Name", "Values": ["a b", "c&d"]}],
        "SubnetIds": ["subnet-0a1", "subnet-0b2"], "DryRun": False,
    }, (200, XML_H, xml_doc("DescribeSubnetsResponse", EC2_NS,
        "<requestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</requestId><subnetSet>%s</subnetSet>" % SUBNET))),
    ("ec2", "CreateVpc", "", {
        "CidrBlock": "10.1.0.0/16",
        "TagSpecifications": [{"ResourceType": "vpc", "Tags": [{"Key": "Name", "Value": "hp"},
                                                              {"Key": "hypd", "Value": "1"}]}],
        "InstanceTenancy": "default", "AmazonProvidedIpv6CidrBlock": False,
    }, (200, XML_H, xml_doc("CreateVpcResponse", EC2_NS,
        "<requestId>r-vpc</requestId><vpc><vpcId>vpc-1</vpcId><ownerId>%s</ownerId><state>pending</state>"
        "<cidrBlock>10.1.0.0/16</cidrBlock><cidrBlockAssociationSet><item><cidrBlock>10.1.0.0/16</cidrBlock>"
        "<associationId>vpc-cidr-assoc-1</associationId><cidrBlockState><state>associated</state>"
        "</cidrBlockState></item></cidrBlockAssociationSet><ipv6CidrBlockAssociationSet/>"
        "<dhcpOptionsId>dopt-1</dhcpOptionsId><instanceTenancy>default</instanceTenancy>"
        "<isDefault>false</isDefault><tagSet><item><key>Name</key><value>hp</value></item></tagSet></vpc>"
        % ACCOUNT))),
    ("ec2", "DescribeAvailabilityZones", "", {"AllAvailabilityZones": True,
                                                "Filters": [{"Name": "zone-type", "Values": ["availability-zone"]}]},
     (200, XML_H, xml_doc("DescribeAvailabilityZonesResponse", EC2_NS,
        "<requestId>r-az</requestId><availabilityZoneInfo>" + "".join(
            "<item><zoneName>us-west-2%s</zoneName><zoneState>available</zoneState><regionName>us-west-2</regionName>"
            "<zoneId>usw2-az%d</zoneId><zoneType>availability-zone</zoneType><optInStatus>opt-in-not-required"
            "</optInStatus><groupName>us-west-2-zg-1</groupName><networkBorderGroup>us-west-2</networkBorderGroup>"
            "<messageSet/></item>" % (z, i + 1) for i, z in enumerate("abc")) + "</availabilityZoneInfo>"))),
    ("ec2", "DescribeSubnets", "not-found", {"SubnetIds": ["subnet-9"]},
     (400, XML_H, '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>InvalidSubnetID.NotFound'
      "</Code><Message>The subnet ID 'subnet-9' does not exist</Message></Error></Errors>"
      "<RequestID>c9a1f2d0-ec2e-4f41-a1b2-3c4d5e6f7a8b</RequestID></Response>")),
    # --- restXml ---
    ("s3", "PutObject", "", {"Bucket": "hp-bucket", "Key": "dir/a b+c~d.txt", "Body": "hello world",
                             "ContentType": "text/plain", "Metadata": {"owner": "hp"}},
     (200, dict(S3_H, etag='"5eb63bbbe01eeed093cb22bb8f5acdc3"', **{"x-amz-server-side-encryption": "AES256"}), "")),
    ("s3", "GetObject", "", {"Bucket": "hp-bucket", "Key": "dir/a b+c~d.txt", "Range": "bytes=0-10"},
     (206, dict(S3_H, **{"content-type": "text/plain", "content-length": "11", "etag": '"5eb63bbbe01eeed093cb22bb8f5acdc3"',
                         "last-modified": "Tue, 14 Nov 2023 22:13:20 GMT", "x-amz-meta-owner": "hp",
                         "accept-ranges": "bytes", "content-range": "bytes 0-10/11"}), "hello world")),
    ("s3", "ListObjectsV2", "", {"Bucket": "hp-bucket", "Delimiter": "/", "EncodingType": "url", "MaxKeys": 100,
                                 "Prefix": "dir/"},
     (200, dict(S3_H, **{"content-type": "application/xml"}), xml_doc("ListBucketResult", S3_NS,
        "<Name>hp-bucket</Name><Prefix>dir/</Prefix><KeyCount>3</KeyCount><MaxKeys>100</MaxKeys>"
        "<Delimiter>/</Delimiter><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>"
        "<Contents><Key>dir/a</Key><LastModified>2023-11-14T22:13:20.000Z</LastModified>"
        "<ETag>&quot;5eb63bbbe01eeed093cb22bb8f5acdc3&quot;</ETag><Size>11</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
        "<Contents><Key>dir/b%20c</Key><LastModified>2023-11-15T01:02:03.500Z</LastModified>"
        "<ETag>&quot;x&quot;</ETag><Size>0</Size><StorageClass>STANDARD</StorageClass></Contents>"
        "<CommonPrefixes><Prefix>dir/sub/</Prefix></CommonPrefixes>"))),
    ("s3", "HeadBucket", "", {"Bucket": "hp-bucket"},
     (200, dict(S3_H, **{"x-amz-bucket-region": "us-west-2", "x-amz-access-point-alias": "false"}), "")),
    ("s3", "HeadBucket", "not-found", {"Bucket": "nope"}, (404, dict(S3_H), "")),
    ("s3", "CreateBucket", "", {"Bucket": "hp-bucket",
                                "CreateBucketConfiguration": {"LocationConstraint": "us-west-2"}},
     (200, dict(S3_H, location="/hp-bucket"), "")),
    ("s3", "DeleteObjects", "", {"Bucket": "hp-bucket", "Delete": {
        "Objects": [{"Key": "dir/a"}, {"Key": "dir/b & c"}], "Quiet": False}},
     (200, S3_H, xml_doc("DeleteResult", S3_NS, "<Deleted><Key>dir/a</Key></Deleted>"
                         "<Error><Key>dir/b &amp; c</Key><Code>AccessDenied</Code><Message>Access Denied</Message>"
                         "</Error>"))),
    ("s3", "PutBucketAcl", "", {"Bucket": "hp-bucket", "AccessControlPolicy": {
        "Grants": [{"Grantee": {"ID": "abc", "Type": "CanonicalUser"}, "Permission": "FULL_CONTROL"},
                   {"Grantee": {"URI": "http://acs.amazonaws.com/groups/global/AllUsers", "Type": "Group"},
                    "Permission": "READ"}],
        "Owner": {"DisplayName": "me", "ID": "abc"}}},
     (200, S3_H, "")),
    ("s3", "GetBucketAcl", "", {"Bucket": "hp-bucket"},
     (200, S3_H, xml_doc("AccessControlPolicy", S3_NS,
        "<Owner><ID>abc</ID><DisplayName>me</DisplayName></Owner><AccessControlList>"
        '<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser">'
        "<ID>abc</ID><DisplayName>me</DisplayName></Grantee><Permission>FULL_CONTROL</Permission></Grant>"
        '<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group">'
        "<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission>"
        "</Grant></AccessControlList>"))),
    ("s3", "GetObject", "no-such-key", {"Bucket": "hp-bucket", "Key": "missing"},
     (404, dict(S3_H, **{"content-type": "application/xml"}), '<?xml version="1.0" encoding="UTF-8"?>\n'
      "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>missing</Key>"
      "<RequestId>4442587FB7D0A2F9</RequestId><HostId>hostid</HostId></Error>")),
]


def iso(dt):
    dt = dt.astimezone(datetime.timezone.utc)
    out = dt.strftime("%Y-%m-%dT%H:%M:%S")
    ms = dt.microsecond // 1000
    return out + (".%03d" % ms if ms else "") + "Z"


def normalize(v):
    if isinstance(v, datetime.datetime):
        return iso(v)
    if isinstance(v, StreamingBody):
        return v.read().decode("utf-8")
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def ordered(shape, v):
    """v with structure members in the model's order (recursively)."""
    if shape is None:
        return v
    if shape.type_name == "structure" and isinstance(v, dict):
        out = {}
        for name, member in shape.members.items():
            if name in v:
                out[name] = ordered(member, v[name])
        extra = set(v) - set(out)
        if extra:
            sys.exit("unknown members %s for %s" % (sorted(extra), shape.name))
        return out
    if shape.type_name == "list" and isinstance(v, list):
        return [ordered(shape.member, x) for x in v]
    if shape.type_name == "map" and isinstance(v, dict):
        return {k: ordered(shape.value, x) for k, x in v.items()}
    return v


def record(session, service, op, params, canned):
    config = Config(retries={"total_max_attempts": 1}, request_checksum_calculation="when_required",
                    response_checksum_validation="when_required", s3={"addressing_style": "path"})
    client = session.client(service, config=config)
    if service == "iam":
        client.meta.events.unregister("after-call.iam", handlers.json_decode_policies)
    status, headers, body = canned
    seen = {}

    def before_send(request, **_):
        url = urlsplit(request.url)
        hdrs = {}
        for k, v in request.headers.items():
            if k.lower() not in DROP:
                hdrs[k.lower()] = v.decode() if isinstance(v, bytes) else v
        raw = request.body
        if hasattr(raw, "read"):
            raw = raw.read()
        raw = raw or b""
        if isinstance(raw, str):
            raw = raw.encode()
        req = {"method": request.method, "path": url.path, "query_string": url.query,
               "query": sorted([k, v] for k, v in parse_qsl(url.query, keep_blank_values=True)),
               "headers": hdrs, "body": raw.decode("utf-8")}
        if raw and "json" in hdrs.get("content-type", ""):
            req["json"] = json.loads(raw)
        seen["request"] = req
        data = body.encode("utf-8")
        return AWSResponse(request.url, status, dict(headers), Raw(data))

    client.meta.events.register("before-send", before_send)
    model = client.meta.service_model.operation_model(op)
    params = ordered(model.input_shape, params)
    method = getattr(client, botocore.xform_name(op))
    out = {"service": service, "operation": op, "params": params}
    try:
        parsed = method(**params)
        meta = parsed.pop("ResponseMetadata", {})
        parsed = normalize(parsed)
        if meta.get("RequestId"):
            parsed["ResponseMetadata"] = {"RequestId": meta["RequestId"]}
        result = ("parsed", parsed)
    except ClientError as e:
        err = e.response.get("Error", {})
        meta = e.response.get("ResponseMetadata", {})
        result = ("error", {k: v for k, v in {
            "code": err.get("Code"), "message": err.get("Message"), "type": err.get("Type"),
            "status": meta.get("HTTPStatusCode"), "request_id": meta.get("RequestId") or None,
        }.items() if v not in (None, "")})
    out["request"] = seen["request"]
    out["response"] = {"status": status, "headers": headers, "body": body}
    out[result[0]] = result[1]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/aws/recorded")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    session = boto3.session.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                                    region_name="us-west-2")
    for service, op, case, params, canned in CASES:
        pair = record(session, service, op, params, canned)
        pair["botocore"] = botocore.__version__
        name = "%s-%s%s.json" % (service, op, "-" + case if case else "")
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            json.dump(pair, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
        print(name, "error" if "error" in pair else "parsed")


if __name__ == "__main__":
    main()
