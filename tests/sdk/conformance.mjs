// The sandbox judged by the real AWS SDK for JavaScript v3: one provisioning
// run as a user would make it (network, roles, bucket, EKS to ACTIVE with
// add-ons and access entries, HyperPod to InService with node operations,
// MLflow, training plans, FSx), then modelled errors asserted by the name
// the SDK gives them, then teardown.
//
// Env: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
// (as `hypd sandbox` prints them); CONFORMANCE_TAG names the resources
// (default: random); CONFORMANCE_BUDGET_MS bounds all waiting (default
// 30000); CONFORMANCE_TRACE=1 prints each failed step's request and response
// on stderr.
// Output: TAP, one line per check ("ok N - EKS CreateCluster: ..."), the plan
// last. A failed step never stops the run; steps that need its result report
// "not ok" with the reason. Exit 0 whatever the checks say; 1 only if the
// harness itself breaks.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

import { createRequire } from "node:module";
import { Readable } from "node:stream";

// the clients pinned in tests/node (npm ci there installs them)
const require = createRequire(new URL("../node/package.json", import.meta.url));
const SDK = {};
for (const svc of ["sts", "iam", "ec2", "s3", "eks", "sagemaker", "fsx"]) {
  try {
    SDK[svc] = require(`@aws-sdk/client-${svc}`);
  } catch (e) {
    process.stdout.write(`not ok 1 - the pinned @aws-sdk/client-${svc} loads # ${String(e.message).split("\n")[0]}\n1..1\n`);
    process.exit(1);
  }
}
const CLIENT = { sts: "STSClient", iam: "IAMClient", ec2: "EC2Client", s3: "S3Client", eks: "EKSClient",
  sagemaker: "SageMakerClient", fsx: "FSxClient" };
const LABEL = { sts: "STS", iam: "IAM", ec2: "EC2", s3: "S3", eks: "EKS", sagemaker: "SageMaker", fsx: "FSx" };

const ENV = process.env;
const TRACE = ENV.CONFORMANCE_TRACE === "1";
const REGION = ENV.AWS_REGION || "us-west-2";
const ACCOUNT = "123456789012";
const TAG = ENV.CONFORMANCE_TAG || "c" + Date.now().toString(36).slice(-6);
const DEADLINE = Date.now() + Number(ENV.CONFORMANCE_BUDGET_MS || 30000);
const CREDS = { accessKeyId: ENV.AWS_ACCESS_KEY_ID, secretAccessKey: ENV.AWS_SECRET_ACCESS_KEY };

// ---- clients, with a middleware that remembers the last exchange ----------

let lastExchange = null;

function body(b) {
  if (b == null) return "";
  if (typeof b === "string") return b;
  if (b instanceof Uint8Array) return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString();
  return "[stream]";
}

function makeClient(svc, credentials = CREDS) {
  const c = new SDK[svc][CLIENT[svc]]({
    region: REGION, endpoint: ENV.AWS_ENDPOINT_URL, credentials, maxAttempts: 1,
    requestHandler: { connectionTimeout: 2000, requestTimeout: 5000, throwOnRequestTimeout: true },
    ...(svc === "s3" ? { forcePathStyle: true } : {}),
  });
  c.middlewareStack.add((next) => async (args) => {
    const r = args.request;
    const ex = { method: r.method, path: r.path, query: r.query, headers: { ...r.headers }, body: TRACE ? body(r.body) : "" };
    lastExchange = ex;
    const out = await next(args);
    const res = out.response;
    ex.status = res.statusCode;
    ex.resHeaders = res.headers;
    if (TRACE && res.body && typeof res.body[Symbol.asyncIterator] === "function") {
      const chunks = [];
      for await (const chunk of res.body) chunks.push(chunk);
      const buf = Buffer.concat(chunks);
      ex.resBody = buf.toString();
      res.body = Readable.from([buf]);
    }
    return out;
  }, { step: "deserialize", priority: "low", name: "conformanceTrace" });
  return c;
}

const clients = {};
for (const svc of Object.keys(SDK)) clients[svc] = makeClient(svc);

// after three calls in a row get no HTTP answer at all, the rest fail at once
const called = new Set();
let unanswered = 0;
const noRequestId = new Set();
async function aws(svc, op, input = {}, client = clients[svc]) {
  const Command = SDK[svc][op + "Command"];
  if (!Command) throw new Error(`harness: no ${op}Command in @aws-sdk/client-${svc}`);
  called.add(`${LABEL[svc]} ${op}`);
  if (unanswered >= 3) throw new Error("not sent: the sandbox stopped answering");
  try {
    const out = await client.send(new Command(input));
    unanswered = 0;
    if (!out.$metadata?.requestId) noRequestId.add(`${LABEL[svc]} ${op}`);
    badDates(out, `${LABEL[svc]} ${op}`);
    return out;
  } catch (e) {
    unanswered = e.$metadata?.httpStatusCode ? 0 : unanswered + 1;
    if (e.$metadata?.httpStatusCode && !e.$metadata.requestId) noRequestId.add(`${LABEL[svc]} ${op} (error)`);
    throw e;
  }
}

// badDates(v, where): remembers timestamps the SDK could not parse (Invalid Date)
const invalidDates = new Set();
function badDates(v, where, path = "") {
  if (v instanceof Date) {
    if (Number.isNaN(v.getTime())) invalidDates.add(`${where} ${path}`);
  } else if (v && typeof v === "object" && !(v instanceof Uint8Array) && typeof v.pipe !== "function") {
    for (const [k, x] of Object.entries(v)) if (k !== "$metadata" && k !== "Body") badDates(x, where, path + "." + k);
  }
}

// pages(svc, op, input, pageSize) -> every page, through the SDK's own paginator
async function pages(svc, op, input, pageSize) {
  const paginate = SDK[svc]["paginate" + op];
  if (!paginate) throw new Error(`harness: no paginate${op} in @aws-sdk/client-${svc}`);
  called.add(`${LABEL[svc]} ${op}`);
  const out = [];
  for await (const page of paginate({ client: clients[svc], pageSize }, input)) {
    out.push(page);
    if (out.length > 50) throw new Error("more than 50 pages: the NextToken never ends");
  }
  return out;
}

// ---- TAP ---------------------------------------------------------------------

let n = 0, failed = 0;
const ctx = {};

class Missing extends Error {}

function oneLine(s) { return String(s).replace(/\s+/g, " ").trim().slice(0, 400); }

function describeError(e) {
  if (e instanceof Missing) return e.message;
  const m = e.$metadata || {};
  let s = e.name && e.name !== "Error" ? `${e.name}: ${e.message}` : String(e.message || e);
  if (m.httpStatusCode) s += ` (HTTP ${m.httpStatusCode}`;
  if (m.httpStatusCode && lastExchange) s += `, ${lastExchange.method} ${lastExchange.path}`;
  if (m.httpStatusCode) s += ")";
  return oneLine(s);
}

function trace(label) {
  if (!TRACE || !lastExchange) return;
  const x = lastExchange;
  process.stderr.write(`# --- ${label}\n# > ${x.method} ${x.path}${x.query && Object.keys(x.query).length ?
    "?" + new URLSearchParams(x.query) : ""}\n`);
  for (const [k, v] of Object.entries(x.headers)) process.stderr.write(`# > ${k}: ${v}\n`);
  process.stderr.write(`# > ${oneLine(x.body).slice(0, 2000)}\n# < ${x.status}\n`);
  for (const [k, v] of Object.entries(x.resHeaders || {})) process.stderr.write(`# < ${k}: ${v}\n`);
  process.stderr.write(`# < ${String(x.resBody ?? "").slice(0, 4000).replace(/\n/g, "\n# < ")}\n`);
}

const timings = [];
let stepStart = Date.now();

function report(ok, label, why) {
  n += 1;
  timings.push([Date.now() - stepStart, label]);
  if (ok) {
    process.stdout.write(`ok ${n} - ${label}\n`);
  } else {
    failed += 1;
    process.stdout.write(`not ok ${n} - ${label} # ${why}\n`);
  }
}

// check(label, fn): one TAP line; fn throws to fail
async function check(label, fn) {
  lastExchange = null;
  stepStart = Date.now();
  try {
    await fn();
    report(true, label);
  } catch (e) {
    report(false, label, describeError(e));
    if (!(e instanceof Missing)) trace(label);
  }
}

// expectError(label, fn, name): fn must fail with the modelled error `name`
async function expectError(label, fn, name) {
  lastExchange = null;
  stepStart = Date.now();
  try {
    await fn();
  } catch (e) {
    if (e instanceof Missing) return report(false, label, e.message);
    if (e.name === name) return report(true, label);
    report(false, label, `expected ${name}, got ${describeError(e)}`);
    return trace(label);
  }
  report(false, label, `expected ${name}, but the call succeeded`);
}

// need(...keys): the results of earlier steps this one depends on
function need(...keys) {
  const gone = keys.filter((k) => ctx[k] === undefined);
  if (gone.length) throw new Missing(`needs ${gone.join(", ")}, which an earlier step did not produce`);
  return keys.map((k) => ctx[k]);
}

function assert(cond, msg) { if (!cond) throw new Error(msg); }
function eq(got, want, what) {
  if (got !== want) throw new Error(`${what}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// until(what, fn, done): polls fn (every 20 ms of real time; the sandbox runs
// on a virtual clock or a fast speed) until done(value); fails at the budget
async function until(what, fn, done) {
  let last;
  for (;;) {
    last = await fn();
    if (done(last)) return last;
    if (Date.now() > DEADLINE) throw new Error(`${what} stayed ${JSON.stringify(last)} (wait budget spent)`);
    await sleep(20);
  }
}

const tags = (...kv) => { const t = []; for (let i = 0; i < kv.length; i += 2) t.push({ Key: kv[i], Value: kv[i + 1] }); return t; };
const trust = (service) => JSON.stringify({ Version: "2012-10-17",
  Statement: [{ Effect: "Allow", Principal: { Service: service }, Action: "sts:AssumeRole" }] });
const MISSING_ID = "0123456789abcdef0";

// ---- the run -------------------------------------------------------------------

async function identity() {
  await check("STS GetCallerIdentity: the sandbox account and user", async () => {
    const r = await aws("sts", "GetCallerIdentity");
    eq(r.Account, ACCOUNT, "Account");
    assert(/^arn:aws:iam::123456789012:/.test(r.Arn), "Arn " + r.Arn);
    assert(r.UserId, "a UserId");
  });
}

async function network() {
  await check("EC2 DescribeAvailabilityZones: at least two available zones", async () => {
    const r = await aws("ec2", "DescribeAvailabilityZones", {});
    const zones = r.AvailabilityZones.filter((z) => z.State === "available");
    assert(zones.length >= 2, `${zones.length} zones`);
    assert(zones.every((z) => z.ZoneName.startsWith(REGION) && z.ZoneId), "zone names and ids in " + REGION);
    ctx.azs = zones.slice(0, 2).map((z) => z.ZoneName);
  });
  await check("EC2 CreateVpc: a tagged /16 VPC", async () => {
    const r = await aws("ec2", "CreateVpc", { CidrBlock: "10.90.0.0/16", TagSpecifications: [{ ResourceType: "vpc",
      Tags: tags("Name", `${TAG}-vpc`, "hypd:cluster-tag", TAG) }] });
    assert(/^vpc-[0-9a-f]+$/.test(r.Vpc.VpcId), "VpcId " + r.Vpc.VpcId);
    eq(r.Vpc.CidrBlock, "10.90.0.0/16", "CidrBlock");
    ctx.vpc = r.Vpc.VpcId;
  });
  await check("EC2 ModifyVpcAttribute: DNS hostnames on", async () => {
    const [vpc] = need("vpc");
    await aws("ec2", "ModifyVpcAttribute", { VpcId: vpc, EnableDnsHostnames: { Value: true } });
  });
  await check("EC2 DescribeVpcAttribute: DNS hostnames read back", async () => {
    const [vpc] = need("vpc");
    const r = await aws("ec2", "DescribeVpcAttribute", { VpcId: vpc, Attribute: "enableDnsHostnames" });
    eq(r.EnableDnsHostnames?.Value, true, "EnableDnsHostnames.Value");
  });
  await check("EC2 DescribeVpcs: found by its tag", async () => {
    const [vpc] = need("vpc");
    const r = await aws("ec2", "DescribeVpcs", { Filters: [{ Name: "tag:hypd:cluster-tag", Values: [TAG] }] });
    eq(r.Vpcs.length, 1, "VPCs with the tag");
    eq(r.Vpcs[0].VpcId, vpc, "VpcId");
  });
  await check("EC2 CreateSubnet: two public and two private subnets in two zones", async () => {
    const [vpc, azs] = need("vpc", "azs");
    const cidrs = ["10.90.10.0/24", "10.90.11.0/24", "10.90.7.0/24", "10.90.8.0/24"];
    const ids = [];
    for (let i = 0; i < 4; i++) {
      const r = await aws("ec2", "CreateSubnet", { VpcId: vpc, CidrBlock: cidrs[i], AvailabilityZone: azs[i % 2],
        TagSpecifications: [{ ResourceType: "subnet", Tags: tags("Name", `${TAG}-${i < 2 ? "public" : "private"}-${i % 2}`) }] });
      eq(r.Subnet.VpcId, vpc, "Subnet.VpcId");
      eq(r.Subnet.AvailabilityZone, azs[i % 2], "Subnet.AvailabilityZone");
      assert(r.Subnet.AvailableIpAddressCount > 0, "AvailableIpAddressCount");
      ids.push(r.Subnet.SubnetId);
    }
    ctx.subnets = ids;
  });
  await check("EC2 DescribeSubnets: the VPC's four subnets", async () => {
    const [vpc] = need("vpc", "subnets");
    const r = await aws("ec2", "DescribeSubnets", { Filters: [{ Name: "vpc-id", Values: [vpc] }] });
    eq(r.Subnets.length, 4, "subnets in the VPC");
  });
  await check("EC2 CreateTags: subnets tagged for load balancers", async () => {
    const [subnets] = need("subnets");
    await aws("ec2", "CreateTags", { Resources: subnets.slice(0, 2), Tags: tags("kubernetes.io/role/elb", "1") });
    const r = await aws("ec2", "DescribeTags", { Filters: [{ Name: "key", Values: ["kubernetes.io/role/elb"] },
      { Name: "resource-id", Values: subnets.slice(0, 2) }] });
    eq(r.Tags.length, 2, "tags read back by DescribeTags");
  });
  await check("EC2 CreateInternetGateway: an internet gateway", async () => {
    const r = await aws("ec2", "CreateInternetGateway", {});
    assert(/^igw-/.test(r.InternetGateway.InternetGatewayId), "InternetGatewayId");
    ctx.igw = r.InternetGateway.InternetGatewayId;
  });
  await check("EC2 AttachInternetGateway: attached to the VPC", async () => {
    const [igw, vpc] = need("igw", "vpc");
    await aws("ec2", "AttachInternetGateway", { InternetGatewayId: igw, VpcId: vpc });
    const r = await aws("ec2", "DescribeInternetGateways", { InternetGatewayIds: [igw] });
    eq(r.InternetGateways[0].Attachments?.[0]?.VpcId, vpc, "attachment");
  });
  await check("EC2 CreateRouteTable: a public route table", async () => {
    const [vpc] = need("vpc");
    const r = await aws("ec2", "CreateRouteTable", { VpcId: vpc });
    assert(/^rtb-/.test(r.RouteTable.RouteTableId), "RouteTableId");
    ctx.rtb = r.RouteTable.RouteTableId;
  });
  await check("EC2 CreateRoute: default route to the internet gateway", async () => {
    const [rtb, igw] = need("rtb", "igw");
    const r = await aws("ec2", "CreateRoute", { RouteTableId: rtb, DestinationCidrBlock: "0.0.0.0/0", GatewayId: igw });
    eq(r.Return, true, "Return");
  });
  await check("EC2 AssociateRouteTable: the public subnets use it", async () => {
    const [rtb, subnets] = need("rtb", "subnets");
    for (const s of subnets.slice(0, 2)) {
      const r = await aws("ec2", "AssociateRouteTable", { RouteTableId: rtb, SubnetId: s });
      assert(/^rtbassoc-/.test(r.AssociationId), "AssociationId " + r.AssociationId);
    }
  });
  await check("EC2 DescribeRouteTables: routes and associations read back", async () => {
    const [rtb] = need("rtb");
    const r = await aws("ec2", "DescribeRouteTables", { RouteTableIds: [rtb] });
    const t = r.RouteTables[0];
    assert(t.Routes.some((x) => x.DestinationCidrBlock === "0.0.0.0/0"), "a 0.0.0.0/0 route");
    assert(t.Associations.filter((a) => a.SubnetId).length === 2, "two subnet associations");
  });
  await check("EC2 AllocateAddress: an Elastic IP for the NAT gateway", async () => {
    const r = await aws("ec2", "AllocateAddress", { Domain: "vpc" });
    assert(/^eipalloc-/.test(r.AllocationId), "AllocationId");
    assert(r.PublicIp, "PublicIp");
    ctx.eip = r.AllocationId;
  });
  await check("EC2 CreateNatGateway: a NAT gateway in a public subnet", async () => {
    const [subnets, eip] = need("subnets", "eip");
    const r = await aws("ec2", "CreateNatGateway", { SubnetId: subnets[0], AllocationId: eip });
    assert(/^nat-/.test(r.NatGateway.NatGatewayId), "NatGatewayId");
    ctx.nat = r.NatGateway.NatGatewayId;
  });
  await check("EC2 DescribeNatGateways: the NAT gateway becomes available", async () => {
    const [nat] = need("nat");
    await until("the NAT gateway", async () =>
      (await aws("ec2", "DescribeNatGateways", { NatGatewayIds: [nat] })).NatGateways[0].State, (s) => s === "available");
  });
  await check("EC2 CreateSecurityGroup: a group for the cluster", async () => {
    const [vpc] = need("vpc");
    const r = await aws("ec2", "CreateSecurityGroup", { GroupName: `${TAG}-hyperpod`, Description: "HyperPod and EFA",
      VpcId: vpc });
    assert(/^sg-/.test(r.GroupId), "GroupId");
    ctx.sg = r.GroupId;
  });
  await check("EC2 AuthorizeSecurityGroupIngress: all traffic within the group (EFA)", async () => {
    const [sg] = need("sg");
    const r = await aws("ec2", "AuthorizeSecurityGroupIngress", { GroupId: sg,
      IpPermissions: [{ IpProtocol: "-1", UserIdGroupPairs: [{ GroupId: sg }] }] });
    eq(r.Return, true, "Return");
  });
  await check("EC2 AuthorizeSecurityGroupEgress: all traffic to the group (EFA)", async () => {
    const [sg] = need("sg");
    const r = await aws("ec2", "AuthorizeSecurityGroupEgress", { GroupId: sg,
      IpPermissions: [{ IpProtocol: "-1", UserIdGroupPairs: [{ GroupId: sg }] }] });
    eq(r.Return, true, "Return");
  });
  await check("EC2 DescribeSecurityGroups: the self-referencing rule reads back", async () => {
    const [sg] = need("sg");
    const r = await aws("ec2", "DescribeSecurityGroups", { GroupIds: [sg] });
    const perms = r.SecurityGroups[0].IpPermissions;
    assert(perms.some((p) => p.IpProtocol === "-1" && p.UserIdGroupPairs?.some((g) => g.GroupId === sg)),
      "ingress rule " + JSON.stringify(perms));
  });
  await check("EC2 CreateVpcEndpoint: an S3 gateway endpoint", async () => {
    const [vpc, rtb] = need("vpc", "rtb");
    const r = await aws("ec2", "CreateVpcEndpoint", { VpcId: vpc, VpcEndpointType: "Gateway",
      ServiceName: `com.amazonaws.${REGION}.s3`, RouteTableIds: [rtb] });
    assert(/^vpce-/.test(r.VpcEndpoint.VpcEndpointId), "VpcEndpointId");
    ctx.vpce = r.VpcEndpoint.VpcEndpointId;
  });
  await check("EC2 DescribeVpcEndpoints: the endpoint reads back", async () => {
    const [vpce] = need("vpce");
    const r = await aws("ec2", "DescribeVpcEndpoints", { VpcEndpointIds: [vpce] });
    eq(r.VpcEndpoints[0].ServiceName, `com.amazonaws.${REGION}.s3`, "ServiceName");
  });
}

async function roles() {
  await check("IAM CreateRole: the EKS cluster role", async () => {
    const r = await aws("iam", "CreateRole", { RoleName: `${TAG}-eks-role`, AssumeRolePolicyDocument: trust("eks.amazonaws.com"),
      Tags: tags("hypd:cluster-tag", TAG) });
    eq(r.Role.Arn, `arn:aws:iam::${ACCOUNT}:role/${TAG}-eks-role`, "Role.Arn");
    assert(/^AROA/.test(r.Role.RoleId), "RoleId " + r.Role.RoleId);
    assert(r.Role.CreateDate instanceof Date, "CreateDate is a timestamp");
    ctx.eksRole = r.Role.Arn;
  });
  await check("IAM AttachRolePolicy: AmazonEKSClusterPolicy", async () => {
    need("eksRole");
    await aws("iam", "AttachRolePolicy", { RoleName: `${TAG}-eks-role`,
      PolicyArn: "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" });
  });
  await check("IAM CreateRole: the HyperPod execution role", async () => {
    const r = await aws("iam", "CreateRole", { RoleName: `${TAG}-hp-exec`, Path: "/hypd/",
      AssumeRolePolicyDocument: trust("sagemaker.amazonaws.com") });
    eq(r.Role.Arn, `arn:aws:iam::${ACCOUNT}:role/hypd/${TAG}-hp-exec`, "Role.Arn");
    ctx.execRole = r.Role.Arn;
  });
  await check("IAM AttachRolePolicy: AmazonSageMakerClusterInstanceRolePolicy", async () => {
    need("execRole");
    await aws("iam", "AttachRolePolicy", { RoleName: `${TAG}-hp-exec`,
      PolicyArn: "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy" });
  });
  await check("IAM ListAttachedRolePolicies: the managed policy is attached", async () => {
    need("execRole");
    const r = await aws("iam", "ListAttachedRolePolicies", { RoleName: `${TAG}-hp-exec` });
    assert(r.AttachedPolicies.some((p) => p.PolicyName === "AmazonSageMakerClusterInstanceRolePolicy"),
      JSON.stringify(r.AttachedPolicies));
  });
  await check("IAM PutRolePolicy: an inline policy for node description", async () => {
    need("execRole");
    await aws("iam", "PutRolePolicy", { RoleName: `${TAG}-hp-exec`, PolicyName: "SageMakerDescribeClusterNode",
      PolicyDocument: JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow",
        Action: "sagemaker:DescribeClusterNode", Resource: "*" }] }) });
  });
  await check("IAM GetRolePolicy: the inline policy reads back", async () => {
    need("execRole");
    const r = await aws("iam", "GetRolePolicy", { RoleName: `${TAG}-hp-exec`, PolicyName: "SageMakerDescribeClusterNode" });
    assert(r.PolicyDocument.startsWith("%7B"), "the document is URL-encoded, as IAM returns it");
    const doc = JSON.parse(decodeURIComponent(r.PolicyDocument));
    eq(doc.Statement[0].Action, "sagemaker:DescribeClusterNode", "Statement[0].Action");
  });
  await check("IAM ListRolePolicies: one inline policy", async () => {
    need("execRole");
    const r = await aws("iam", "ListRolePolicies", { RoleName: `${TAG}-hp-exec` });
    eq(JSON.stringify(r.PolicyNames), JSON.stringify(["SageMakerDescribeClusterNode"]), "PolicyNames");
  });
  await check("IAM UpdateAssumeRolePolicy: pods.eks.amazonaws.com may assume it too", async () => {
    need("execRole");
    await aws("iam", "UpdateAssumeRolePolicy", { RoleName: `${TAG}-hp-exec`, PolicyDocument: JSON.stringify({
      Version: "2012-10-17", Statement: [
        { Effect: "Allow", Principal: { Service: "sagemaker.amazonaws.com" }, Action: "sts:AssumeRole" },
        { Effect: "Allow", Principal: { Service: "pods.eks.amazonaws.com" }, Action: ["sts:AssumeRole", "sts:TagSession"] }] }) });
  });
  await check("IAM GetRole: the trust policy was updated", async () => {
    need("execRole");
    const r = await aws("iam", "GetRole", { RoleName: `${TAG}-hp-exec` });
    assert(r.Role.AssumeRolePolicyDocument.startsWith("%7B"), "the document is URL-encoded, as IAM returns it");
    const doc = JSON.parse(decodeURIComponent(r.Role.AssumeRolePolicyDocument));
    eq(doc.Statement.length, 2, "trust statements");
    eq(r.Role.Path, "/hypd/", "Path");
  });
  await check("IAM CreatePolicy: a customer managed policy", async () => {
    const r = await aws("iam", "CreatePolicy", { PolicyName: `${TAG}-s3-access`, PolicyDocument: JSON.stringify({
      Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "s3:*", Resource: "*" }] }) });
    eq(r.Policy.Arn, `arn:aws:iam::${ACCOUNT}:policy/${TAG}-s3-access`, "Policy.Arn");
    ctx.policy = r.Policy.Arn;
  });
  await check("IAM GetPolicy: the policy reads back", async () => {
    const [policy] = need("policy");
    const r = await aws("iam", "GetPolicy", { PolicyArn: policy });
    eq(r.Policy.PolicyName, `${TAG}-s3-access`, "PolicyName");
    eq(r.Policy.DefaultVersionId, "v1", "DefaultVersionId");
  });
  await check("IAM AttachRolePolicy: the customer policy on the execution role", async () => {
    const [policy] = need("policy", "execRole");
    await aws("iam", "AttachRolePolicy", { RoleName: `${TAG}-hp-exec`, PolicyArn: policy });
  });
  await check("IAM TagRole: a tag on the execution role", async () => {
    need("execRole");
    await aws("iam", "TagRole", { RoleName: `${TAG}-hp-exec`, Tags: tags("team", "ml") });
    const r = await aws("iam", "ListRoleTags", { RoleName: `${TAG}-hp-exec` });
    assert(r.Tags.some((t) => t.Key === "team" && t.Value === "ml"), JSON.stringify(r.Tags));
  });
  await check("IAM ListRoles: one role a page, with IsTruncated and Marker", async () => {
    need("eksRole", "execRole");
    const first = await aws("iam", "ListRoles", { MaxItems: 1 });
    eq(first.Roles.length, 1, "roles on the first page");
    eq(first.IsTruncated, true, "IsTruncated");
    assert(first.Marker, "a Marker");
    const all = (await pages("iam", "ListRoles", {}, 1)).flatMap((p) => p.Roles.map((r) => r.RoleName));
    assert(all.includes(`${TAG}-eks-role`) && all.includes(`${TAG}-hp-exec`), "both roles across the pages");
    eq(new Set(all).size, all.length, "no role twice");
  });
  await check("IAM ListRoles: both roles under their paths", async () => {
    need("eksRole", "execRole");
    const r = await aws("iam", "ListRoles", { PathPrefix: "/hypd/" });
    assert(r.Roles.some((x) => x.RoleName === `${TAG}-hp-exec`), "the execution role under /hypd/");
    assert(!r.Roles.some((x) => x.RoleName === `${TAG}-eks-role`), "the EKS role is not under /hypd/");
  });
  await check("IAM CreateRole: an operator role the account may assume", async () => {
    const r = await aws("iam", "CreateRole", { RoleName: `${TAG}-operator`, MaxSessionDuration: 7200,
      AssumeRolePolicyDocument: JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow",
        Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` }, Action: "sts:AssumeRole" }] }) });
    eq(r.Role.MaxSessionDuration, 7200, "MaxSessionDuration");
    ctx.operatorRole = r.Role.Arn;
  });
  await check("STS AssumeRole: a session on the operator role", async () => {
    const [role] = need("operatorRole");
    const r = await aws("sts", "AssumeRole", { RoleArn: role, RoleSessionName: "conformance", DurationSeconds: 3600 });
    assert(r.Credentials.AccessKeyId && r.Credentials.SecretAccessKey && r.Credentials.SessionToken, "credentials");
    assert(r.Credentials.Expiration instanceof Date, "Expiration is a timestamp");
    eq(r.AssumedRoleUser.Arn, `arn:aws:sts::${ACCOUNT}:assumed-role/${TAG}-operator/conformance`, "AssumedRoleUser.Arn");
    ctx.session = { accessKeyId: r.Credentials.AccessKeyId, secretAccessKey: r.Credentials.SecretAccessKey,
      sessionToken: r.Credentials.SessionToken };
  });
  await check("STS GetCallerIdentity: the assumed-role session is who it says", async () => {
    const [session] = need("session");
    const c = makeClient("sts", session);
    const r = await aws("sts", "GetCallerIdentity", {}, c);
    c.destroy();
    eq(r.Arn, `arn:aws:sts::${ACCOUNT}:assumed-role/${TAG}-operator/conformance`, "Arn");
  });
}

const ON_CREATE = "#!/bin/bash\nset -euo pipefail\necho on_create\n";

async function bucket() {
  ctx.bucketName = `sagemaker-${TAG}-lifecycle`;
  const Bucket = ctx.bucketName;
  await check("S3 CreateBucket: the lifecycle bucket", async () => {
    const r = await aws("s3", "CreateBucket", { Bucket, CreateBucketConfiguration: { LocationConstraint: REGION } });
    assert(r.Location, "Location");
    ctx.bucket = Bucket;
  });
  await check("S3 HeadBucket: the bucket exists", async () => {
    need("bucket");
    const r = await aws("s3", "HeadBucket", { Bucket });
    eq(r.$metadata.httpStatusCode, 200, "status");
  });
  await check("S3 GetBucketLocation: in the sandbox region", async () => {
    need("bucket");
    const r = await aws("s3", "GetBucketLocation", { Bucket });
    eq(r.LocationConstraint, REGION, "LocationConstraint");
  });
  await check("S3 ListBuckets: lists the bucket", async () => {
    need("bucket");
    const r = await aws("s3", "ListBuckets", {});
    assert(r.Buckets.some((b) => b.Name === Bucket && b.CreationDate instanceof Date), "the bucket with a CreationDate");
  });
  await check("S3 PutObject: the lifecycle script", async () => {
    need("bucket");
    const r = await aws("s3", "PutObject", { Bucket, Key: "lifecycle/on_create.sh", Body: ON_CREATE,
      ContentType: "text/x-sh" });
    assert(/^"[0-9a-f]{32}"$/.test(r.ETag), "ETag " + r.ETag);
    ctx.etag = r.ETag;
    await aws("s3", "PutObject", { Bucket, Key: "lifecycle/on_create_main.sh", Body: "#!/bin/bash\necho main\n" });
    ctx.lifecycle = `s3://${Bucket}/lifecycle/`;
  });
  await check("S3 HeadObject: size and content type", async () => {
    need("lifecycle");
    const r = await aws("s3", "HeadObject", { Bucket, Key: "lifecycle/on_create.sh" });
    eq(r.ContentLength, Buffer.byteLength(ON_CREATE), "ContentLength");
    eq(r.ContentType, "text/x-sh", "ContentType");
  });
  await check("S3 GetObject: the script reads back byte for byte", async () => {
    need("lifecycle");
    const r = await aws("s3", "GetObject", { Bucket, Key: "lifecycle/on_create.sh" });
    eq(await r.Body.transformToString(), ON_CREATE, "Body");
    eq(r.ETag, ctx.etag, "ETag as PutObject gave it");
  });
  await check("S3 ListObjectsV2: both scripts under the prefix", async () => {
    need("lifecycle");
    const r = await aws("s3", "ListObjectsV2", { Bucket, Prefix: "lifecycle/" });
    eq(r.KeyCount, 2, "KeyCount");
    eq(r.Contents.map((o) => o.Key).sort().join(","), "lifecycle/on_create.sh,lifecycle/on_create_main.sh", "keys");
  });
  await check("S3 ListObjectsV2: one key a page, with continuation tokens", async () => {
    need("lifecycle");
    const ps = await pages("s3", "ListObjectsV2", { Bucket, Prefix: "lifecycle/" }, 1);
    eq(ps.length, 2, "pages");
    eq(ps[0].IsTruncated, true, "IsTruncated on the first page");
    assert(ps[0].NextContinuationToken, "NextContinuationToken");
    eq(ps.map((p) => p.Contents[0].Key).join(","), "lifecycle/on_create.sh,lifecycle/on_create_main.sh", "keys in order");
  });
  await check("S3 GetObject: a byte range is a 206 with Content-Range", async () => {
    need("lifecycle");
    const r = await aws("s3", "GetObject", { Bucket, Key: "lifecycle/on_create.sh", Range: "bytes=0-10" });
    eq(await r.Body.transformToString(), ON_CREATE.slice(0, 11), "Body");
    eq(r.$metadata.httpStatusCode, 206, "status");
    eq(r.ContentRange, `bytes 0-10/${Buffer.byteLength(ON_CREATE)}`, "ContentRange");
  });
  await check("S3 PutObject: a streamed body (aws-chunked with a trailing checksum)", async () => {
    need("bucket");
    const data = "x".repeat(100000) + "\n";
    await aws("s3", "PutObject", { Bucket, Key: "data/stream.txt", Body: Readable.from([Buffer.from(data)]),
      ContentLength: data.length });
    const r = await aws("s3", "GetObject", { Bucket, Key: "data/stream.txt" });
    eq(await r.Body.transformToString(), data, "Body read back");
  });
  await check("S3 CreateMultipartUpload: a two-part upload completes", async () => {
    need("bucket");
    const Key = "data/multipart.bin";
    const up = await aws("s3", "CreateMultipartUpload", { Bucket, Key });
    assert(up.UploadId, "UploadId");
    const partA = Buffer.alloc(5 * 1024 * 1024, 97), partB = Buffer.from("tail\n");
    const parts = [];
    for (const [i, b] of [partA, partB].entries()) {
      const r = await aws("s3", "UploadPart", { Bucket, Key, UploadId: up.UploadId, PartNumber: i + 1, Body: b });
      parts.push({ PartNumber: i + 1, ETag: r.ETag });
    }
    const done = await aws("s3", "CompleteMultipartUpload", { Bucket, Key, UploadId: up.UploadId,
      MultipartUpload: { Parts: parts } });
    assert(/-2"$/.test(done.ETag), "a multipart ETag ends in -2: " + done.ETag);
    const h = await aws("s3", "HeadObject", { Bucket, Key });
    eq(h.ContentLength, partA.length + partB.length, "ContentLength");
  });
  await check("S3 CopyObject: a backup copy", async () => {
    need("lifecycle");
    const r = await aws("s3", "CopyObject", { Bucket, Key: "backup/on_create.sh",
      CopySource: `${Bucket}/lifecycle/on_create.sh` });
    assert(r.CopyObjectResult?.ETag, "CopyObjectResult.ETag");
  });
  await check("S3 DeleteObject: the backup copy is gone", async () => {
    need("lifecycle");
    await aws("s3", "DeleteObject", { Bucket, Key: "backup/on_create.sh" });
    const r = await aws("s3", "ListObjectsV2", { Bucket, Prefix: "backup/" });
    eq(r.KeyCount, 0, "KeyCount");
  });
  await check("S3 PutBucketTagging: tags on the bucket", async () => {
    need("bucket");
    await aws("s3", "PutBucketTagging", { Bucket, Tagging: { TagSet: tags("hypd:cluster-tag", TAG) } });
    const r = await aws("s3", "GetBucketTagging", { Bucket });
    eq(r.TagSet[0]?.Value, TAG, "TagSet");
  });
}

async function eks() {
  const name = `eks-cluster-${TAG}`;
  await check("EKS CreateCluster: a cluster is CREATING", async () => {
    const [role, subnets, sg] = need("eksRole", "subnets", "sg");
    const r = await aws("eks", "CreateCluster", { name, version: "1.34", roleArn: role,
      resourcesVpcConfig: { subnetIds: subnets.slice(2), securityGroupIds: [sg], endpointPublicAccess: true,
        endpointPrivateAccess: true },
      accessConfig: { authenticationMode: "API_AND_CONFIG_MAP", bootstrapClusterCreatorAdminPermissions: true },
      tags: { "hypd:cluster-tag": TAG } });
    eq(r.cluster.name, name, "cluster.name");
    eq(r.cluster.status, "CREATING", "cluster.status");
    eq(r.cluster.arn, `arn:aws:eks:${REGION}:${ACCOUNT}:cluster/${name}`, "cluster.arn");
    ctx.eksName = name;
    ctx.eksArn = r.cluster.arn;
  });
  await check("EKS DescribeCluster: ACTIVE with endpoint, CA and OIDC issuer", async () => {
    need("eksName");
    const c = await until("the EKS cluster", async () => (await aws("eks", "DescribeCluster", { name })).cluster,
      (x) => x.status !== "CREATING");
    eq(c.status, "ACTIVE", "status");
    eq(c.version, "1.34", "version");
    assert(/^https:\/\//.test(c.endpoint), "endpoint " + c.endpoint);
    assert(c.certificateAuthority?.data, "certificateAuthority.data");
    assert(/^https:\/\/oidc\.eks\./.test(c.identity?.oidc?.issuer), "OIDC issuer " + c.identity?.oidc?.issuer);
    assert(c.createdAt instanceof Date, "createdAt is a timestamp");
    eq(c.resourcesVpcConfig?.vpcId, ctx.vpc, "resourcesVpcConfig.vpcId");
    ctx.eksActive = true;
    ctx.oidc = c.identity?.oidc?.issuer;
  });
  await check("EKS ListClusters: lists the cluster", async () => {
    need("eksName");
    const r = await aws("eks", "ListClusters", {});
    assert(r.clusters.includes(name), JSON.stringify(r.clusters));
  });
  await check("IAM CreateOpenIDConnectProvider: the cluster's OIDC issuer", async () => {
    const [oidc] = need("oidc");
    const r = await aws("iam", "CreateOpenIDConnectProvider", { Url: oidc, ClientIDList: ["sts.amazonaws.com"],
      ThumbprintList: ["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"] });
    eq(r.OpenIDConnectProviderArn, `arn:aws:iam::${ACCOUNT}:oidc-provider/${oidc.replace(/^https:\/\//, "")}`,
      "OpenIDConnectProviderArn");
    ctx.oidcArn = r.OpenIDConnectProviderArn;
  });
  await check("IAM ListOpenIDConnectProviders: lists the provider", async () => {
    const [arn] = need("oidcArn");
    const r = await aws("iam", "ListOpenIDConnectProviders", {});
    assert(r.OpenIDConnectProviderList.some((p) => p.Arn === arn), JSON.stringify(r.OpenIDConnectProviderList));
  });
  await check("EKS DescribeAddonVersions: versions for eks-pod-identity-agent", async () => {
    const r = await aws("eks", "DescribeAddonVersions", { addonName: "eks-pod-identity-agent", kubernetesVersion: "1.34" });
    const a = r.addons.find((x) => x.addonName === "eks-pod-identity-agent");
    assert(a && a.addonVersions.length > 0, "at least one version");
    ctx.podIdVersion = a.addonVersions[0].addonVersion;
  });
  for (const addon of ["eks-pod-identity-agent", "cert-manager"]) {
    await check(`EKS CreateAddon: ${addon}`, async () => {
      need("eksActive");
      const r = await aws("eks", "CreateAddon", { clusterName: name, addonName: addon, resolveConflicts: "OVERWRITE",
        ...(addon === "cert-manager" ? { configurationValues: JSON.stringify({ replicaCount: 1 }) } : {}) });
      eq(r.addon.addonName, addon, "addon.addonName");
      eq(r.addon.status, "CREATING", "addon.status");
      ctx["addon:" + addon] = true;
    });
  }
  await check("EKS DescribeAddon: both add-ons become ACTIVE", async () => {
    need("addon:eks-pod-identity-agent", "addon:cert-manager");
    for (const addon of ["eks-pod-identity-agent", "cert-manager"]) {
      const a = await until(addon, async () => (await aws("eks", "DescribeAddon", { clusterName: name, addonName: addon })).addon,
        (x) => x.status !== "CREATING");
      eq(a.status, "ACTIVE", addon + " status");
      assert(a.addonVersion, addon + " addonVersion");
    }
  });
  await check("EKS ListAddons: both add-ons", async () => {
    need("eksActive");
    const r = await aws("eks", "ListAddons", { clusterName: name });
    eq([...r.addons].sort().join(","), "cert-manager,eks-pod-identity-agent", "addons");
  });
  await check("EKS CreateAccessEntry: the execution role gets an entry", async () => {
    const [role] = need("eksActive", "execRole").slice(1);
    const r = await aws("eks", "CreateAccessEntry", { clusterName: name, principalArn: role, type: "STANDARD" });
    eq(r.accessEntry.principalArn, role, "accessEntry.principalArn");
    eq(r.accessEntry.type, "STANDARD", "accessEntry.type");
    ctx.accessEntry = role;
  });
  await check("EKS AssociateAccessPolicy: cluster admin for the entry", async () => {
    const [role] = need("accessEntry");
    const r = await aws("eks", "AssociateAccessPolicy", { clusterName: name, principalArn: role,
      policyArn: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", accessScope: { type: "cluster" } });
    eq(r.associatedAccessPolicy?.policyArn, "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", "policyArn");
  });
  await check("EKS ListAssociatedAccessPolicies: the admin policy", async () => {
    const [role] = need("accessEntry");
    const r = await aws("eks", "ListAssociatedAccessPolicies", { clusterName: name, principalArn: role });
    eq(r.associatedAccessPolicies.length, 1, "associated policies");
  });
  await check("EKS ListAccessEntries: the creator and the execution role", async () => {
    const [role] = need("accessEntry");
    const r = await aws("eks", "ListAccessEntries", { clusterName: name });
    assert(r.accessEntries.includes(role), JSON.stringify(r.accessEntries));
  });
  await check("EKS DescribeAccessEntry: the entry reads back", async () => {
    const [role] = need("accessEntry");
    const r = await aws("eks", "DescribeAccessEntry", { clusterName: name, principalArn: role });
    eq(r.accessEntry.clusterName, name, "accessEntry.clusterName");
    assert(r.accessEntry.accessEntryArn, "accessEntryArn");
  });
  await check("EKS CreatePodIdentityAssociation: the training operator's service account", async () => {
    const [role] = need("eksActive", "execRole").slice(1);
    const r = await aws("eks", "CreatePodIdentityAssociation", { clusterName: name, namespace: "aws-hyperpod",
      serviceAccount: "hp-training-operator-controller-manager", roleArn: role });
    assert(r.association.associationId, "associationId");
    ctx.podIdentity = r.association.associationId;
  });
  await check("EKS ListPodIdentityAssociations: the association", async () => {
    const [id] = need("podIdentity");
    const r = await aws("eks", "ListPodIdentityAssociations", { clusterName: name, namespace: "aws-hyperpod" });
    assert(r.associations.some((a) => a.associationId === id), JSON.stringify(r.associations));
  });
  await check("EKS TagResource: a tag on the cluster", async () => {
    const [arn] = need("eksArn");
    await aws("eks", "TagResource", { resourceArn: arn, tags: { team: "ml" } });
    const r = await aws("eks", "ListTagsForResource", { resourceArn: arn });
    eq(r.tags.team, "ml", "tags.team");
  });
}

async function hyperpod() {
  const name = `hp-cluster-${TAG}`;
  const group = (ig, count) => ({ InstanceGroupName: ig, InstanceType: "ml.g5.8xlarge", InstanceCount: count,
    ExecutionRole: ctx.execRole, ThreadsPerCore: 1,
    LifeCycleConfig: { SourceS3Uri: ctx.lifecycle, OnCreate: "on_create.sh" },
    InstanceStorageConfigs: [{ EbsVolumeConfig: { VolumeSizeInGB: 500 } }] });
  await check("SageMaker CreateCluster: a HyperPod cluster on EKS", async () => {
    const [eksArn, , subnets, sg] = need("eksArn", "execRole", "subnets", "sg", "lifecycle", "eksActive");
    const r = await aws("sagemaker", "CreateCluster", { ClusterName: name, InstanceGroups: [group(`${TAG}-ig`, 2)],
      VpcConfig: { SecurityGroupIds: [sg], Subnets: [subnets[2]] }, Orchestrator: { Eks: { ClusterArn: eksArn } },
      NodeRecovery: "Automatic", Tags: tags("hypd:cluster-tag", TAG) });
    assert(new RegExp(`^arn:aws:sagemaker:${REGION}:${ACCOUNT}:cluster/[a-z0-9]+$`).test(r.ClusterArn),
      "ClusterArn " + r.ClusterArn);
    ctx.hp = r.ClusterArn;
  });
  await check("SageMaker DescribeCluster: Creating, then InService", async () => {
    need("hp");
    const first = await aws("sagemaker", "DescribeCluster", { ClusterName: name });
    assert(["Creating", "InService"].includes(first.ClusterStatus), "first status " + first.ClusterStatus);
    const c = await until("the HyperPod cluster", () => aws("sagemaker", "DescribeCluster", { ClusterName: name }),
      (x) => x.ClusterStatus !== "Creating");
    eq(c.ClusterStatus, "InService", "ClusterStatus");
    eq(c.InstanceGroups[0].CurrentCount, 2, "InstanceGroups[0].CurrentCount");
    eq(c.InstanceGroups[0].TargetCount, 2, "InstanceGroups[0].TargetCount");
    eq(c.InstanceGroups[0].InstanceGroupName, `${TAG}-ig`, "InstanceGroups[0].InstanceGroupName");
    eq(c.InstanceGroups[0].ExecutionRole, ctx.execRole, "InstanceGroups[0].ExecutionRole");
    eq(c.InstanceGroups[0].LifeCycleConfig?.SourceS3Uri, ctx.lifecycle, "InstanceGroups[0].LifeCycleConfig.SourceS3Uri");
    eq(c.VpcConfig?.Subnets?.[0], ctx.subnets[2], "VpcConfig.Subnets[0]");
    eq(c.Orchestrator?.Eks?.ClusterArn, ctx.eksArn, "Orchestrator.Eks.ClusterArn");
    eq(c.NodeRecovery, "Automatic", "NodeRecovery");
    assert(c.CreationTime instanceof Date, "CreationTime is a timestamp");
    ctx.hpReady = true;
  });
  await check("SageMaker ListClusters: lists the cluster", async () => {
    need("hp");
    const r = await aws("sagemaker", "ListClusters", { NameContains: TAG });
    assert(r.ClusterSummaries.some((s) => s.ClusterName === name && s.ClusterArn === ctx.hp), JSON.stringify(r.ClusterSummaries));
  });
  await check("SageMaker ListClusterNodes: two running nodes", async () => {
    need("hpReady");
    const r = await aws("sagemaker", "ListClusterNodes", { ClusterName: name });
    eq(r.ClusterNodeSummaries.length, 2, "nodes");
    for (const node of r.ClusterNodeSummaries) {
      eq(node.InstanceStatus.Status, "Running", "InstanceStatus.Status");
      assert(/^i-[0-9a-f]+$/.test(node.InstanceId), "InstanceId " + node.InstanceId);
      eq(node.InstanceType, "ml.g5.8xlarge", "InstanceType");
      assert(node.LaunchTime instanceof Date, "LaunchTime is a timestamp");
    }
    ctx.nodes = r.ClusterNodeSummaries.map((x) => x.InstanceId);
  });
  await check("SageMaker DescribeClusterNode: one node in detail", async () => {
    const [nodes] = need("nodes");
    const r = await aws("sagemaker", "DescribeClusterNode", { ClusterName: name, NodeId: nodes[0] });
    eq(r.NodeDetails.InstanceId, nodes[0], "NodeDetails.InstanceId");
    eq(r.NodeDetails.InstanceGroupName, `${TAG}-ig`, "NodeDetails.InstanceGroupName");
    assert(r.NodeDetails.PrivateDnsHostname || r.NodeDetails.PrivatePrimaryIp, "a private address");
  });
  await check("SageMaker UpdateCluster: a second instance group", async () => {
    need("hpReady");
    const r = await aws("sagemaker", "UpdateCluster", { ClusterName: name, InstanceGroups: [group(`${TAG}-extra`, 1)] });
    eq(r.ClusterArn, ctx.hp, "ClusterArn");
    const c = await until("the updated cluster", () => aws("sagemaker", "DescribeCluster", { ClusterName: name }),
      (x) => x.ClusterStatus !== "Updating");
    eq(c.ClusterStatus, "InService", "ClusterStatus");
    eq(c.InstanceGroups.length, 2, "instance groups");
    const nodes = await until("three nodes running", async () =>
      (await aws("sagemaker", "ListClusterNodes", { ClusterName: name })).ClusterNodeSummaries,
    (xs) => xs.length === 3 && xs.every((x) => x.InstanceStatus.Status === "Running"));
    ctx.extraNode = nodes.find((x) => x.InstanceGroupName === `${TAG}-extra`)?.InstanceId;
  });
  await check("SageMaker ListClusterNodes: one node a page, with NextToken", async () => {
    need("extraNode");
    const ps = await pages("sagemaker", "ListClusterNodes", { ClusterName: name }, 1);
    const ids = ps.flatMap((p) => p.ClusterNodeSummaries.map((x) => x.InstanceId));
    eq(ids.length, 3, "nodes across the pages");
    eq(new Set(ids).size, 3, "distinct nodes");
  });
  await check("SageMaker BatchRebootClusterNodes: a node reboots", async () => {
    const [nodes] = need("nodes");
    const r = await aws("sagemaker", "BatchRebootClusterNodes", { ClusterName: name, NodeIds: [nodes[0]] });
    eq(JSON.stringify(r.Successful), JSON.stringify([nodes[0]]), "Successful");
  });
  await check("SageMaker BatchReplaceClusterNodes: a node is replaced", async () => {
    const [nodes] = need("nodes");
    const r = await aws("sagemaker", "BatchReplaceClusterNodes", { ClusterName: name, NodeIds: [nodes[1]] });
    eq(JSON.stringify(r.Successful), JSON.stringify([nodes[1]]), "Successful");
  });
  await check("SageMaker BatchDeleteClusterNodes: an unknown node is NodeIdNotFound", async () => {
    need("hpReady");
    const r = await aws("sagemaker", "BatchDeleteClusterNodes", { ClusterName: name, NodeIds: ["i-" + MISSING_ID] });
    eq(r.Failed?.[0]?.Code, "NodeIdNotFound", "Failed[0].Code");
    eq(r.Failed?.[0]?.NodeId, "i-" + MISSING_ID, "Failed[0].NodeId");
  });
  await check("SageMaker BatchDeleteClusterNodes: the extra node is deleted", async () => {
    const [node] = need("extraNode");
    const r = await aws("sagemaker", "BatchDeleteClusterNodes", { ClusterName: name, NodeIds: [node] });
    eq(JSON.stringify(r.Successful), JSON.stringify([node]), "Successful");
  });
  await check("SageMaker UpdateClusterSoftware: a software update starts", async () => {
    need("hpReady");
    const r = await aws("sagemaker", "UpdateClusterSoftware", { ClusterName: name });
    eq(r.ClusterArn, ctx.hp, "ClusterArn");
    const c = await until("the software update", () => aws("sagemaker", "DescribeCluster", { ClusterName: name }),
      (x) => !["Updating", "SystemUpdating"].includes(x.ClusterStatus));
    eq(c.ClusterStatus, "InService", "ClusterStatus");
  });
  await check("SageMaker AddTags: a tag on the cluster", async () => {
    const [arn] = need("hp");
    await aws("sagemaker", "AddTags", { ResourceArn: arn, Tags: tags("team", "ml") });
    const r = await aws("sagemaker", "ListTags", { ResourceArn: arn });
    assert(r.Tags.some((t) => t.Key === "team" && t.Value === "ml"), JSON.stringify(r.Tags));
  });
}

async function mlflow() {
  const name = `${TAG}-mlflow`;
  await check("SageMaker CreateMlflowTrackingServer: a Small tracking server", async () => {
    const [role] = need("execRole", "bucket");
    const r = await aws("sagemaker", "CreateMlflowTrackingServer", { TrackingServerName: name,
      ArtifactStoreUri: `s3://${ctx.bucket}/mlflow/`, RoleArn: role, TrackingServerSize: "Small",
      AutomaticModelRegistration: false });
    assert(new RegExp(`^arn:aws:sagemaker:${REGION}:${ACCOUNT}:mlflow-tracking-server/${name}$`).test(r.TrackingServerArn),
      "TrackingServerArn " + r.TrackingServerArn);
    ctx.mlflow = r.TrackingServerArn;
  });
  await check("SageMaker DescribeMlflowTrackingServer: Created with a URL", async () => {
    need("mlflow");
    const s = await until("the tracking server", () => aws("sagemaker", "DescribeMlflowTrackingServer",
      { TrackingServerName: name }), (x) => x.TrackingServerStatus !== "Creating");
    eq(s.TrackingServerStatus, "Created", "TrackingServerStatus");
    assert(s.TrackingServerUrl, "TrackingServerUrl");
    eq(s.TrackingServerSize, "Small", "TrackingServerSize");
    ctx.mlflowReady = true;
  });
  await check("SageMaker ListMlflowTrackingServers: lists the server", async () => {
    need("mlflow");
    const r = await aws("sagemaker", "ListMlflowTrackingServers", {});
    assert(r.TrackingServerSummaries.some((s) => s.TrackingServerName === name), JSON.stringify(r.TrackingServerSummaries));
  });
  await check("SageMaker CreatePresignedMlflowTrackingServerUrl: a presigned URL", async () => {
    need("mlflowReady");
    const r = await aws("sagemaker", "CreatePresignedMlflowTrackingServerUrl", { TrackingServerName: name,
      ExpiresInSeconds: 300 });
    assert(/^https:\/\//.test(r.AuthorizedUrl), "AuthorizedUrl " + r.AuthorizedUrl);
  });
}

async function trainingPlans() {
  await check("SageMaker ListTrainingPlans: an Active plan for HyperPod", async () => {
    const r = await aws("sagemaker", "ListTrainingPlans", { Filters: [{ Name: "Status", Value: "Active" }] });
    const p = r.TrainingPlanSummaries.find((x) => x.TargetResources?.includes("hyperpod-cluster"));
    assert(p, "an Active hyperpod-cluster plan among " + JSON.stringify(r.TrainingPlanSummaries.map((x) => x.TrainingPlanName)));
    assert(r.TrainingPlanSummaries.every((x) => x.Status === "Active"), "the Status filter holds");
    ctx.planName = p.TrainingPlanName;
  });
  await check("SageMaker DescribeTrainingPlan: reserved capacity with its zone", async () => {
    const [name] = need("planName");
    const r = await aws("sagemaker", "DescribeTrainingPlan", { TrainingPlanName: name });
    eq(r.Status, "Active", "Status");
    assert(r.StartTime instanceof Date && r.EndTime instanceof Date, "StartTime and EndTime are timestamps");
    const rc = r.ReservedCapacitySummaries?.[0];
    assert(rc && rc.InstanceType && rc.TotalInstanceCount > 0, "ReservedCapacitySummaries " +
      JSON.stringify(r.ReservedCapacitySummaries));
    assert(rc.AvailabilityZone?.startsWith(REGION), "AvailabilityZone " + rc.AvailabilityZone);
    ctx.plan = { arn: r.TrainingPlanArn, type: rc.InstanceType, zone: rc.AvailabilityZone, inUse: r.InUseInstanceCount };
  });
  await check("SageMaker UpdateCluster: an instance group on the training plan", async () => {
    const [plan, subnets, sg, azs] = need("plan", "subnets", "sg", "azs", "hpReady");
    const subnet = subnets.slice(2).find((_, i) => azs[i % 2] === plan.zone);
    assert(subnet, `a private subnet in the plan's zone ${plan.zone} (subnets are in ${azs.join(", ")})`);
    const name = `hp-cluster-${TAG}`;
    await aws("sagemaker", "UpdateCluster", { ClusterName: name, InstanceGroups: [{
      InstanceGroupName: `${TAG}-plan`, InstanceType: plan.type, InstanceCount: 1, ExecutionRole: ctx.execRole,
      ThreadsPerCore: 2, TrainingPlanArn: plan.arn, LifeCycleConfig: { SourceS3Uri: ctx.lifecycle, OnCreate: "on_create.sh" },
      OverrideVpcConfig: { SecurityGroupIds: [sg], Subnets: [subnet] } }] });
    const c = await until("the cluster on the plan", () => aws("sagemaker", "DescribeCluster", { ClusterName: name }),
      (x) => x.ClusterStatus !== "Updating");
    eq(c.ClusterStatus, "InService", "ClusterStatus");
    const g = c.InstanceGroups.find((x) => x.InstanceGroupName === `${TAG}-plan`);
    eq(g?.TrainingPlanArn, plan.arn, "the group's TrainingPlanArn");
    const r = await aws("sagemaker", "DescribeTrainingPlan", { TrainingPlanName: ctx.planName });
    eq(r.InUseInstanceCount, (plan.inUse ?? 0) + 1, "InUseInstanceCount");
  });
  await check("SageMaker SearchTrainingPlanOfferings: offerings for ml.p5.48xlarge", async () => {
    const r = await aws("sagemaker", "SearchTrainingPlanOfferings", { InstanceType: "ml.p5.48xlarge", InstanceCount: 2,
      DurationHours: 48, TargetResources: ["hyperpod-cluster"] });
    assert(r.TrainingPlanOfferings.length > 0, "at least one offering");
    const o = r.TrainingPlanOfferings[0];
    assert(o.TrainingPlanOfferingId, "TrainingPlanOfferingId");
    assert(o.TargetResources.includes("hyperpod-cluster"), "TargetResources");
    ctx.offering = o.TrainingPlanOfferingId;
  });
  await check("SageMaker CreateTrainingPlan: a plan from the offering", async () => {
    const [offering] = need("offering");
    const r = await aws("sagemaker", "CreateTrainingPlan", { TrainingPlanName: `${TAG}-plan`,
      TrainingPlanOfferingId: offering });
    assert(/:training-plan\//.test(r.TrainingPlanArn), "TrainingPlanArn " + r.TrainingPlanArn);
    const d = await aws("sagemaker", "DescribeTrainingPlan", { TrainingPlanName: `${TAG}-plan` });
    eq(d.TrainingPlanArn, r.TrainingPlanArn, "DescribeTrainingPlan.TrainingPlanArn");
  });
}

async function fsx() {
  await check("FSx CreateFileSystem: a PERSISTENT_2 Lustre file system", async () => {
    const [subnets, sg] = need("subnets", "sg");
    const r = await aws("fsx", "CreateFileSystem", { FileSystemType: "LUSTRE", StorageCapacity: 1200, StorageType: "SSD",
      SubnetIds: [subnets[2]], SecurityGroupIds: [sg], Tags: tags("hypd:cluster-tag", TAG),
      LustreConfiguration: { DeploymentType: "PERSISTENT_2", PerUnitStorageThroughput: 250, DataCompressionType: "LZ4" } });
    const f = r.FileSystem;
    assert(/^fs-[0-9a-f]+$/.test(f.FileSystemId), "FileSystemId " + f.FileSystemId);
    eq(f.Lifecycle, "CREATING", "Lifecycle");
    ctx.fs = f.FileSystemId;
    ctx.fsArn = f.ResourceARN;
  });
  await check("FSx DescribeFileSystems: AVAILABLE with a DNS and mount name", async () => {
    const [fs] = need("fs");
    const f = await until("the file system", async () =>
      (await aws("fsx", "DescribeFileSystems", { FileSystemIds: [fs] })).FileSystems[0], (x) => x.Lifecycle !== "CREATING");
    eq(f.Lifecycle, "AVAILABLE", "Lifecycle");
    assert(f.DNSName, "DNSName");
    assert(f.LustreConfiguration?.MountName, "LustreConfiguration.MountName");
    eq(f.VpcId, ctx.vpc, "VpcId");
    ctx.fsReady = true;
  });
  await check("FSx TagResource: a tag on the file system", async () => {
    const [arn] = need("fsArn");
    await aws("fsx", "TagResource", { ResourceARN: arn, Tags: tags("team", "ml") });
    const r = await aws("fsx", "ListTagsForResource", { ResourceARN: arn });
    assert(r.Tags.some((t) => t.Key === "team"), JSON.stringify(r.Tags));
  });
  await check("FSx CreateDataRepositoryAssociation: linked to the bucket", async () => {
    const [fs] = need("fsReady", "fs", "bucket").slice(1);
    const r = await aws("fsx", "CreateDataRepositoryAssociation", { FileSystemId: fs, FileSystemPath: "/s3",
      DataRepositoryPath: `s3://${ctx.bucket}/data/`, BatchImportMetaDataOnCreate: true });
    assert(r.Association?.AssociationId, "AssociationId");
    ctx.dra = r.Association.AssociationId;
  });
  await check("FSx DescribeDataRepositoryAssociations: the association", async () => {
    const [dra] = need("dra");
    const r = await aws("fsx", "DescribeDataRepositoryAssociations", { AssociationIds: [dra] });
    eq(r.Associations[0]?.FileSystemPath, "/s3", "FileSystemPath");
  });
}

async function modelledErrors() {
  await expectError("EKS DescribeCluster: a missing cluster is ResourceNotFoundException",
    () => aws("eks", "DescribeCluster", { name: `${TAG}-missing` }), "ResourceNotFoundException");
  await expectError("EKS CreateCluster: a second cluster of the same name is ResourceInUseException", () => {
    const [role, subnets] = need("eksName", "eksRole", "subnets").slice(1);
    return aws("eks", "CreateCluster", { name: ctx.eksName, roleArn: role, resourcesVpcConfig: { subnetIds: subnets.slice(2) } });
  }, "ResourceInUseException");
  await expectError("EKS DescribeAddon: a missing add-on is ResourceNotFoundException", () => {
    need("eksName");
    return aws("eks", "DescribeAddon", { clusterName: ctx.eksName, addonName: "vpc-cni" });
  }, "ResourceNotFoundException");
  await expectError("EKS CreateAddon: an add-on created twice is ResourceInUseException", () => {
    need("addon:cert-manager");
    return aws("eks", "CreateAddon", { clusterName: ctx.eksName, addonName: "cert-manager" });
  }, "ResourceInUseException");
  await expectError("SageMaker DescribeCluster: a missing cluster is ResourceNotFound",
    () => aws("sagemaker", "DescribeCluster", { ClusterName: `${TAG}-missing` }), "ResourceNotFound");
  await expectError("SageMaker CreateCluster: an unknown instance type is ValidationException", () => {
    const [role, subnets, sg, eksArn] = need("execRole", "subnets", "sg", "eksArn");
    return aws("sagemaker", "CreateCluster", { ClusterName: `${TAG}-bad`, InstanceGroups: [{ InstanceGroupName: "g",
      InstanceType: "ml.nonesuch.8xlarge", InstanceCount: 1, ExecutionRole: role,
      LifeCycleConfig: { SourceS3Uri: ctx.lifecycle ?? "s3://x/", OnCreate: "on_create.sh" } }],
    VpcConfig: { SecurityGroupIds: [sg], Subnets: [subnets[2]] }, Orchestrator: { Eks: { ClusterArn: eksArn } } });
  }, "ValidationException");
  await expectError("SageMaker CreateCluster: a second cluster of the same name is ResourceInUse", () => {
    const [role, subnets, sg, eksArn] = need("hp", "execRole", "subnets", "sg", "eksArn").slice(1);
    return aws("sagemaker", "CreateCluster", { ClusterName: `hp-cluster-${TAG}`, InstanceGroups: [{
      InstanceGroupName: "g", InstanceType: "ml.g5.8xlarge", InstanceCount: 1, ExecutionRole: role,
      LifeCycleConfig: { SourceS3Uri: ctx.lifecycle, OnCreate: "on_create.sh" } }],
    VpcConfig: { SecurityGroupIds: [sg], Subnets: [subnets[2]] }, Orchestrator: { Eks: { ClusterArn: eksArn } } });
  }, "ResourceInUse");
  await expectError("SageMaker ListClusterNodes: a missing cluster is ResourceNotFound",
    () => aws("sagemaker", "ListClusterNodes", { ClusterName: `${TAG}-missing` }), "ResourceNotFound");
  await expectError("SageMaker DescribeTrainingPlan: a missing plan is ResourceNotFound",
    () => aws("sagemaker", "DescribeTrainingPlan", { TrainingPlanName: `${TAG}-missing` }), "ResourceNotFound");
  await expectError("SageMaker DescribeMlflowTrackingServer: a missing server is ResourceNotFound",
    () => aws("sagemaker", "DescribeMlflowTrackingServer", { TrackingServerName: `${TAG}-missing` }), "ResourceNotFound");
  await expectError("IAM GetRole: a missing role is NoSuchEntityException",
    () => aws("iam", "GetRole", { RoleName: `${TAG}-missing` }), "NoSuchEntityException");
  await expectError("IAM CreateRole: a second role of the same name is EntityAlreadyExistsException", () => {
    need("eksRole");
    return aws("iam", "CreateRole", { RoleName: `${TAG}-eks-role`, AssumeRolePolicyDocument: trust("eks.amazonaws.com") });
  }, "EntityAlreadyExistsException");
  await expectError("IAM CreateRole: a trust policy that is not JSON is MalformedPolicyDocumentException",
    () => aws("iam", "CreateRole", { RoleName: `${TAG}-malformed`, AssumeRolePolicyDocument: "{not json" }),
    "MalformedPolicyDocumentException");
  await expectError("IAM DeleteRole: a role with attached policies is DeleteConflictException", () => {
    need("execRole");
    return aws("iam", "DeleteRole", { RoleName: `${TAG}-hp-exec` });
  }, "DeleteConflictException");
  await expectError("S3 GetObject: a missing key is NoSuchKey", () => {
    need("bucket");
    return aws("s3", "GetObject", { Bucket: ctx.bucket, Key: "lifecycle/missing.sh" });
  }, "NoSuchKey");
  await expectError("S3 ListObjectsV2: a missing bucket is NoSuchBucket",
    () => aws("s3", "ListObjectsV2", { Bucket: `${TAG}-missing-bucket` }), "NoSuchBucket");
  await expectError("S3 HeadObject: a missing key is NotFound", () => {
    need("bucket");
    return aws("s3", "HeadObject", { Bucket: ctx.bucket, Key: "lifecycle/missing.sh" });
  }, "NotFound");
  await expectError("S3 CreateBucket: creating an owned bucket again is BucketAlreadyOwnedByYou", () => {
    need("bucket");
    return aws("s3", "CreateBucket", { Bucket: ctx.bucket, CreateBucketConfiguration: { LocationConstraint: REGION } });
  }, "BucketAlreadyOwnedByYou");
  await expectError("EC2 DescribeVpcs: a missing VPC is InvalidVpcID.NotFound",
    () => aws("ec2", "DescribeVpcs", { VpcIds: ["vpc-" + MISSING_ID] }), "InvalidVpcID.NotFound");
  await expectError("EC2 DescribeSubnets: a missing subnet is InvalidSubnetID.NotFound",
    () => aws("ec2", "DescribeSubnets", { SubnetIds: ["subnet-" + MISSING_ID] }), "InvalidSubnetID.NotFound");
  await expectError("EC2 CreateSubnet: a CIDR outside the VPC is InvalidSubnet.Range", () => {
    const [vpc, azs] = need("vpc", "azs");
    return aws("ec2", "CreateSubnet", { VpcId: vpc, CidrBlock: "172.31.0.0/24", AvailabilityZone: azs[0] });
  }, "InvalidSubnet.Range");
  await expectError("EC2 DeleteVpc: a VPC with subnets is DependencyViolation", () => {
    const [vpc] = need("vpc", "subnets");
    return aws("ec2", "DeleteVpc", { VpcId: vpc });
  }, "DependencyViolation");
  await expectError("FSx DescribeFileSystems: a missing file system is FileSystemNotFound",
    () => aws("fsx", "DescribeFileSystems", { FileSystemIds: ["fs-" + MISSING_ID] }), "FileSystemNotFound");
}

async function teardown() {
  await check("SageMaker DeleteMlflowTrackingServer: the server is deleting", async () => {
    need("mlflow");
    const r = await aws("sagemaker", "DeleteMlflowTrackingServer", { TrackingServerName: `${TAG}-mlflow` });
    eq(r.TrackingServerArn, ctx.mlflow, "TrackingServerArn");
  });
  await check("SageMaker DeleteCluster: the HyperPod cluster goes away", async () => {
    const [hp] = need("hp");
    const r = await aws("sagemaker", "DeleteCluster", { ClusterName: `hp-cluster-${TAG}` });
    eq(r.ClusterArn, hp, "ClusterArn");
    await until("the deleted HyperPod cluster", async () => {
      try {
        return (await aws("sagemaker", "DescribeCluster", { ClusterName: `hp-cluster-${TAG}` })).ClusterStatus;
      } catch (e) {
        if (e.name === "ResourceNotFound") return "gone";
        throw e;
      }
    }, (s) => s === "gone");
    ctx.hpGone = true;
  });
  await check("EKS DeletePodIdentityAssociation: the association is deleted", async () => {
    const [id] = need("podIdentity");
    const r = await aws("eks", "DeletePodIdentityAssociation", { clusterName: ctx.eksName, associationId: id });
    eq(r.association?.associationId, id, "association.associationId");
  });
  await check("EKS DisassociateAccessPolicy: the admin policy is removed", async () => {
    const [role] = need("accessEntry");
    await aws("eks", "DisassociateAccessPolicy", { clusterName: ctx.eksName, principalArn: role,
      policyArn: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy" });
  });
  await check("EKS DeleteAccessEntry: the entry is deleted", async () => {
    const [role] = need("accessEntry");
    await aws("eks", "DeleteAccessEntry", { clusterName: ctx.eksName, principalArn: role });
  });
  await check("EKS DeleteAddon: cert-manager is DELETING", async () => {
    need("addon:cert-manager");
    const r = await aws("eks", "DeleteAddon", { clusterName: ctx.eksName, addonName: "cert-manager" });
    eq(r.addon.status, "DELETING", "addon.status");
  });
  await check("EKS DeleteCluster: the cluster is DELETING, then gone", async () => {
    need("eksName");
    const r = await aws("eks", "DeleteCluster", { name: ctx.eksName });
    eq(r.cluster.status, "DELETING", "cluster.status");
    await until("the deleted EKS cluster", async () => {
      try {
        return (await aws("eks", "DescribeCluster", { name: ctx.eksName })).cluster.status;
      } catch (e) {
        if (e.name === "ResourceNotFoundException") return "gone";
        throw e;
      }
    }, (s) => s === "gone");
  });
  await check("FSx DeleteFileSystem: the file system is DELETING", async () => {
    const [fs] = need("fs");
    const r = await aws("fsx", "DeleteFileSystem", { FileSystemId: fs });
    eq(r.Lifecycle, "DELETING", "Lifecycle");
  });
  await check("S3 DeleteObjects: every object is deleted", async () => {
    need("lifecycle");
    const listed = await aws("s3", "ListObjectsV2", { Bucket: ctx.bucket });
    const r = await aws("s3", "DeleteObjects", { Bucket: ctx.bucket, Delete: {
      Objects: (listed.Contents ?? []).map((o) => ({ Key: o.Key })) } });
    assert(r.Deleted?.some((d) => d.Key === "lifecycle/on_create.sh"), "Deleted " + JSON.stringify(r.Deleted));
    eq(r.Errors?.length ?? 0, 0, "Errors");
  });
  await check("S3 DeleteBucket: the empty bucket is deleted", async () => {
    need("bucket");
    await aws("s3", "DeleteBucket", { Bucket: ctx.bucket });
  });
  await check("IAM DetachRolePolicy: the managed policies are detached", async () => {
    need("execRole", "policy");
    for (const arn of ["arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy", ctx.policy]) {
      await aws("iam", "DetachRolePolicy", { RoleName: `${TAG}-hp-exec`, PolicyArn: arn });
    }
  });
  await check("IAM DeleteRolePolicy: the inline policy is deleted", async () => {
    need("execRole");
    await aws("iam", "DeleteRolePolicy", { RoleName: `${TAG}-hp-exec`, PolicyName: "SageMakerDescribeClusterNode" });
  });
  await check("IAM DeleteRole: the execution role is deleted", async () => {
    need("execRole");
    await aws("iam", "DeleteRole", { RoleName: `${TAG}-hp-exec` });
  });
  await check("IAM DeleteRole: the operator role is deleted", async () => {
    need("operatorRole");
    await aws("iam", "DeleteRole", { RoleName: `${TAG}-operator` });
  });
  await check("IAM DeletePolicy: the customer policy is deleted", async () => {
    const [policy] = need("policy");
    await aws("iam", "DeletePolicy", { PolicyArn: policy });
  });
  await check("EC2 DeleteNatGateway: the NAT gateway is deleting", async () => {
    const [nat] = need("nat");
    const r = await aws("ec2", "DeleteNatGateway", { NatGatewayId: nat });
    eq(r.NatGatewayId, nat, "NatGatewayId");
  });
}

async function main() {
  await identity();
  await network();
  await roles();
  await bucket();
  await eks();
  await hyperpod();
  await mlflow();
  await trainingPlans();
  await fsx();
  await modelledErrors();
  await teardown();
  await check("all services: every answer carries a request id the SDK finds", async () => {
    assert(noRequestId.size === 0, "none from " + [...noRequestId].join(", "));
  });
  await check("all services: every timestamp parses to a valid date", async () => {
    assert(invalidDates.size === 0, "invalid: " + [...invalidDates].slice(0, 10).join(", "));
  });
  for (const c of Object.values(clients)) c.destroy();
  timings.sort((a, b) => b[0] - a[0]);
  process.stdout.write(`# slowest: ${timings.slice(0, 4).map(([ms, l]) => `${l.split(":")[0]} ${ms} ms`).join(", ")}\n`);
  process.stdout.write(`# ${called.size} distinct operations called, ${n - failed} of ${n} checks passed\n`);
  process.stdout.write(`1..${n}\n`);
}

main().then(() => { process.exitCode = 0; }, (e) => {
  process.stdout.write(`not ok ${n + 1} - harness crashed # ${oneLine(e && e.stack || e)}\n1..${n + 1}\n`);
  process.exitCode = 1;
});
