/*
 * sigv4_bench.c: signatures per second of hypd's SigV4 signer on three
 * realistic requests, signed round robin on one thread:
 *   - SageMaker CreateCluster, awsJson1.1 POST with a 514-byte body;
 *   - EKS DescribeCluster, GET /clusters/eks1;
 *   - the EKS token: STS GetCallerIdentity presigned for 60 s.
 * The same requests as sigv4_botocore.py and sigv4_smithy.mjs; run all three
 * with sigv4_compare.sh.
 *
 *   sigv4_bench [SECONDS]      (default 1, or SIGV4_BENCH_SECONDS)
 * Prints "RESULT hypd <signatures/s> <sig A> <sig B> <sig C>".
 */
#include "sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T20150830 1440938160  /* 2015-08-30T12:36:00Z */

static const char create_cluster[] =
	"{\"ClusterName\":\"hp-demo\",\"InstanceGroups\":[{\"InstanceCount\":2,\"InstanceGroupName\":\"workers\","
	"\"ExecutionRole\":\"arn:aws:iam::123456789012:role/HyperPodExec\",\"InstanceType\":\"ml.g5.8xlarge\","
	"\"LifeCycleConfig\":{\"SourceS3Uri\":\"s3://bucket/lifecycle/\",\"OnCreate\":\"on_create.sh\"},"
	"\"ThreadsPerCore\":1}],\"VpcConfig\":{\"SecurityGroupIds\":[\"sg-0123\"],\"Subnets\":[\"subnet-0123\"]},"
	"\"Tags\":[{\"Key\":\"team\",\"Value\":\"ml\"}],\"Orchestrator\":{\"Eks\":{\"ClusterArn\":"
	"\"arn:aws:eks:us-west-2:123456789012:cluster/eks1\"}},\"NodeRecovery\":\"Automatic\"}";

static const sigv4_header sm_h[] = {
	{ "Host", "api.sagemaker.us-west-2.amazonaws.com" },
	{ "Content-Type", "application/x-amz-json-1.1" },
	{ "X-Amz-Target", "SageMaker.CreateCluster" },
};
static const sigv4_header eks_h[] = {
	{ "Host", "eks.us-west-2.amazonaws.com" },
	{ "Accept", "application/json" },
};
static const sigv4_header sts_h[] = {
	{ "Host", "sts.us-west-2.amazonaws.com" },
	{ "x-k8s-aws-id", "eks1" },
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *env = getenv("SIGV4_BENCH_SECONDS");
	double seconds = argc > 1 ? atof(argv[1]) : env ? atof(env) : 1.0, t0, dt;
	sigv4_input req[3];
	sigv4_output out;
	char sig[3][65], err[128];
	long n = 0, i;
	int k;

	memset(req, 0, sizeof req);
	for (k = 0; k < 3; k++) {
		req[k].access_key = "AKIDEXAMPLE";
		req[k].secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
		req[k].region = "us-west-2";
		req[k].when = T20150830;
		req[k].normalize_path = 1;
	}
	req[0].method = "POST";
	req[0].path = "/";
	req[0].headers = sm_h;
	req[0].nheaders = 3;
	req[0].payload = create_cluster;
	req[0].payload_len = sizeof create_cluster - 1;
	req[0].service = "sagemaker";
	req[1].method = "GET";
	req[1].path = "/clusters/eks1";
	req[1].headers = eks_h;
	req[1].nheaders = 2;
	req[1].service = "eks";
	req[2].method = "GET";
	req[2].path = "/";
	req[2].query = "Action=GetCallerIdentity&Version=2011-06-15";
	req[2].headers = sts_h;
	req[2].nheaders = 2;
	req[2].service = "sts";
	req[2].expires = 60;

	for (k = 0; k < 3; k++) {
		if ((k == 2 ? sigv4_presign : sigv4_sign)(&req[k], &out, err, sizeof err)) {
			fprintf(stderr, "sigv4_bench: %s\n", err);
			return 1;
		}
		memcpy(sig[k], out.signature, sizeof sig[k]);
		sigv4_output_free(&out);
	}
	t0 = now();
	do {
		for (i = 0; i < 3000; i++) {
			k = (int)(i % 3);
			if ((k == 2 ? sigv4_presign : sigv4_sign)(&req[k], &out, err, sizeof err))
				return 1;
			sigv4_output_free(&out);
		}
		n += 3000;
		dt = now() - t0;
	} while (dt < seconds);
	printf("RESULT hypd %.0f %s %s %s\n", (double)n / dt, sig[0], sig[1], sig[2]);
	return 0;
}
