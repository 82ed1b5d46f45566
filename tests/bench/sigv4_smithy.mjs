// Signatures per second of @smithy/signature-v4 (with @aws-crypto/sha256-js,
// both pinned in tests/node/package.json) on the requests of sigv4_bench.c,
// signed round robin: SageMaker CreateCluster POST, EKS DescribeCluster GET,
// STS GetCallerIdentity presigned for 60 s. applyChecksum is off so that the
// three signers compute the same canonical requests.
//
//   node tests/bench/sigv4_smithy.mjs [SECONDS]     (npm ci in tests/node first)
// Prints "RESULT smithy <signatures/s> <sig A> <sig B> <sig C>".
import { createRequire } from "node:module";

const require = createRequire(new URL("../node/package.json", import.meta.url));
const { SignatureV4 } = require("@smithy/signature-v4");
const { Sha256 } = require("@aws-crypto/sha256-js");

const seconds = Number(process.argv[2] ?? process.env.SIGV4_BENCH_SECONDS ?? 1);
const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const signingDate = new Date("2015-08-30T12:36:00Z");
const signer = (service) =>
  new SignatureV4({ service, region: "us-west-2", sha256: Sha256, credentials, applyChecksum: false });
const sm = signer("sagemaker"), eks = signer("eks"), sts = signer("sts");
const body =
  '{"ClusterName":"hp-demo","InstanceGroups":[{"InstanceCount":2,"InstanceGroupName":"workers",' +
  '"ExecutionRole":"arn:aws:iam::123456789012:role/HyperPodExec","InstanceType":"ml.g5.8xlarge",' +
  '"LifeCycleConfig":{"SourceS3Uri":"s3://bucket/lifecycle/","OnCreate":"on_create.sh"},' +
  '"ThreadsPerCore":1}],"VpcConfig":{"SecurityGroupIds":["sg-0123"],"Subnets":["subnet-0123"]},' +
  '"Tags":[{"Key":"team","Value":"ml"}],"Orchestrator":{"Eks":{"ClusterArn":' +
  '"arn:aws:eks:us-west-2:123456789012:cluster/eks1"}},"NodeRecovery":"Automatic"}';

const sig = (s) => s.split("Signature=").pop();
async function signSm() {
  const r = await sm.sign({ method: "POST", protocol: "https:", hostname: "api.sagemaker.us-west-2.amazonaws.com",
    path: "/", query: {}, body,
    headers: { host: "api.sagemaker.us-west-2.amazonaws.com", "content-type": "application/x-amz-json-1.1",
               "x-amz-target": "SageMaker.CreateCluster" } }, { signingDate });
  return sig(r.headers.authorization);
}
async function signEks() {
  const r = await eks.sign({ method: "GET", protocol: "https:", hostname: "eks.us-west-2.amazonaws.com",
    path: "/clusters/eks1", query: {},
    headers: { host: "eks.us-west-2.amazonaws.com", accept: "application/json" } }, { signingDate });
  return sig(r.headers.authorization);
}
async function signSts() {
  const r = await sts.presign({ method: "GET", protocol: "https:", hostname: "sts.us-west-2.amazonaws.com",
    path: "/", query: { Action: "GetCallerIdentity", Version: "2011-06-15" },
    headers: { host: "sts.us-west-2.amazonaws.com", "x-k8s-aws-id": "eks1" } }, { signingDate, expiresIn: 60 });
  return r.query["X-Amz-Signature"];
}

const fns = [signSm, signEks, signSts];
const sigs = [];
for (const f of fns) sigs.push(await f());
let n = 0, dt = 0;
const t0 = process.hrtime.bigint();
do {
  for (let i = 0; i < 100; i++) for (const f of fns) await f();
  n += 300;
  dt = Number(process.hrtime.bigint() - t0) / 1e9;
} while (dt < seconds);
console.log(`RESULT smithy ${Math.round(n / dt)} ${sigs.join(" ")}`);
