// Refused requests as the AWS SDK for JavaScript v3 sees them (the clients
// pinned in tests/node): for each service of the sandbox a call with no
// signature (a signer that leaves the request as it is), a wrong secret
// and an unknown access key. Prints one JSON line per case: {case, name,
// status, message} from the error the SDK throws; {case, unparsed} when
// the SDK could not read the answer (its deserialization error).
//
// Env: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

import { createRequire } from "node:module";

const require = createRequire(new URL("../node/package.json", import.meta.url));
const ENV = process.env;
const CALLS = {
  ec2: ["EC2Client", "DescribeVpcsCommand"],
  iam: ["IAMClient", "ListRolesCommand"],
  sts: ["STSClient", "GetCallerIdentityCommand"],
  s3: ["S3Client", "ListBucketsCommand"],
  sagemaker: ["SageMakerClient", "ListClustersCommand"],
  eks: ["EKSClient", "ListClustersCommand"],
  fsx: ["FSxClient", "DescribeFileSystemsCommand"],
};
const CREDS = { accessKeyId: ENV.AWS_ACCESS_KEY_ID, secretAccessKey: ENV.AWS_SECRET_ACCESS_KEY };
const CASES = {
  unsigned: { credentials: CREDS, signer: { sign: async (request) => request } },
  "wrong secret": { credentials: { ...CREDS, secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" } },
  "unknown key": { credentials: { ...CREDS, accessKeyId: "AKIAUNKNOWNKEY000001" } },
};

for (const [svc, [client, command]] of Object.entries(CALLS)) {
  const sdk = require(`@aws-sdk/client-${svc}`);
  for (const [label, opts] of Object.entries(CASES)) {
    const c = new sdk[client]({ region: ENV.AWS_REGION || "us-west-2", endpoint: ENV.AWS_ENDPOINT_URL,
      maxAttempts: 1, ...(svc === "s3" ? { forcePathStyle: true } : {}), ...opts });
    const line = { case: `${svc} ${label}` };
    try {
      await c.send(new sdk[command]({}));
      line.status = 200;
    } catch (e) {
      const status = e.$metadata && e.$metadata.httpStatusCode;
      // a body the SDK could not parse shows as a deserialization error (or an
      // error whose name is the HTTP status alone)
      if (e.$responseBodyText !== undefined || /Deserialization|Unknown|^\d+$/.test(String(e.name))) {
        line.unparsed = `${e.name}: ${e.message}`;
      }
      Object.assign(line, { name: e.name, status, message: e.message });
    }
    process.stdout.write(JSON.stringify(line) + "\n");
  }
}
