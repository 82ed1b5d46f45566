-- The on-demand list prices the sandbox's Price List API serves (USD), for
-- what the simulated account runs: facts from public price tables, kept as
-- data like the instance-type table. A price not found in a public source
-- is absent: hypd then says the price is unknown (it never invents one).
--
-- Each entry: { service code, product family, unit, USD per unit, attributes }.
-- The attributes are the product's Price List attributes (servicecode,
-- regionCode and location are added per region by sandbox.services.pricing).
--
-- Regions: us-east-1 and us-west-2. For every price below the two regions
-- list the same figure; each source names the region it quotes.
--
-- Sources (read 2026-12-02):
--   AmazonSageMaker instances: SageMaker AI on-demand training rates per
--     instance-hour, us-east-1 and us-west-2, as quoted in public code that
--     pins them to the AWS Price List API (AmazonSageMaker, Training;
--     "verified against the AWS Pricing API ... 2026-07-02" for the g5 rows)
--     and in several other public tables that agree. HyperPod's own rate card
--     was not found in a public source reachable here, so these rates stand
--     for the HyperPod cluster instances of the same types. Types whose
--     public figures disagree (ml.p5.48xlarge: 98.32 and 113.14) or that no
--     source quoted (ml.g6e.*, ml.trn1.*, ml.p4de.*) are left out.
--   AmazonEKS cluster: $0.10 per cluster-hour (standard Kubernetes version
--     support), aws.amazon.com/eks/pricing, the same in both regions.
--   AmazonEC2 NAT Gateway: $0.045 per NAT gateway-hour (us-east-1, as
--     aws.amazon.com/vpc/pricing lists and FinOps guides quote it; us-west-2
--     lists the same). Data processed ($0.045 per GB) is not priced: a plan
--     cannot know the traffic.
--   AmazonFSx Lustre: PERSISTENT_2 SSD at 125 MB/s/TiB $0.145 per GB-month
--     (US East, aws.amazon.com/fsx/lustre/pricing, and c3x.dev's estimate of
--     1.2 TB at 125 MB/s/TiB = ~$174 a month); other throughputs and
--     deployment types were not found and are absent.
local function hourly(itype, usd)
  return { "AmazonSageMaker", "ML Instance", "Hrs", usd,
    { instanceName = itype, component = "HyperPod", usagetype = "HyperPod:" .. itype,
      operation = "RunInstance" } }
end

local M = {}

M.REGIONS = { ["us-east-1"] = { location = "US East (N. Virginia)", prefix = "USE1" },
  ["us-west-2"] = { location = "US West (Oregon)", prefix = "USW2" } }

M.PRODUCTS = {
  hourly("ml.t3.medium", "0.05"),
  hourly("ml.m5.large", "0.115"), hourly("ml.m5.xlarge", "0.23"), hourly("ml.m5.2xlarge", "0.461"),
  hourly("ml.m5.4xlarge", "0.922"),
  hourly("ml.c5.large", "0.102"), hourly("ml.c5.xlarge", "0.204"), hourly("ml.c5.2xlarge", "0.408"),
  hourly("ml.g5.xlarge", "1.408"), hourly("ml.g5.2xlarge", "1.515"), hourly("ml.g5.4xlarge", "2.03"),
  hourly("ml.g5.8xlarge", "3.06"), hourly("ml.g5.12xlarge", "7.09"), hourly("ml.g5.16xlarge", "5.12"),
  hourly("ml.g5.24xlarge", "10.18"), hourly("ml.g5.48xlarge", "20.36"),
  hourly("ml.g6.xlarge", "1.127"), hourly("ml.g6.2xlarge", "1.222"), hourly("ml.g6.4xlarge", "1.654"),
  hourly("ml.g6.8xlarge", "2.518"), hourly("ml.g6.12xlarge", "5.752"), hourly("ml.g6.24xlarge", "8.344"),
  hourly("ml.g6.48xlarge", "16.688"),
  hourly("ml.p4d.24xlarge", "37.688"),
  { "AmazonEKS", "Compute", "Hours", "0.10",
    { usagetype = "AmazonEKS-Hours:perCluster", operation = "CreateOperation", tiertype = "HAStandard" } },
  { "AmazonEC2", "NAT Gateway", "Hrs", "0.045",
    { usagetype = "NatGateway-Hours", operation = "NatGateway", group = "NGW:NatGateway" } },
  { "AmazonFSx", "Storage", "GB-Mo", "0.145",
    { fileSystemType = "Lustre", deploymentOption = "Persistent_2", throughputCapacity = "125",
      storageType = "SSD", usagetype = "Persistent_2-125-Storage" } },
}

return M
