-- sandbox IAM (global): roles with tags and inline policies, managed
-- policies (the account's and a few AWS-managed ones) with versions and
-- attachments, OpenID Connect providers, instance profiles, the account's
-- one user. Policy
-- documents are validated (MalformedPolicyDocument) and returned
-- URL-encoded, as IAM does. The families live in sandbox/services/iam/*.lua.
local M = { scope = "global", operations = {}, transitions = {} }

for _, family in ipairs { "roles", "policies", "providers", "users", "simulate" } do
  for name, fn in pairs(require("sandbox.services.iam." .. family).operations) do
    M.operations[name] = fn
  end
end

return M
