-- hypd.aws.retry: the AWS SDKs' "standard" retry mode.
--
-- Up to max_attempts (default 3) attempts; exponential backoff with full
-- jitter (base 0.1 s, 0.5 s for throttling, capped at 20 s); a retry quota
-- per client (500 tokens; a retry costs 5, or 10 after a timeout; a success
-- returns what its retries took, or 1 when it needed none).
--
-- Safety: a call that changes something and has no idempotency token is
-- retried only when the service cannot have acted on it: throttling errors
-- (rejected before processing) and connections that were never made. A
-- 5xx, a timeout or a reset after sending is not retried for such a call.
local sys = require "hypd.sys"

local M = {}

M.THROTTLING = {}
for code in ([[Throttling ThrottlingException ThrottledException RequestThrottledException
  TooManyRequestsException ProvisionedThroughputExceededException TransactionInProgressException
  RequestLimitExceeded BandwidthLimitExceeded LimitExceededException RequestThrottled SlowDown
  PriorRequestNotComplete EC2ThrottledException]]):gmatch("%S+") do
  M.THROTTLING[code] = true
end

M.TRANSIENT = {}
for code in ([[RequestTimeout RequestTimeoutException InternalError InternalFailure
  InternalServerError InternalServiceError ServiceUnavailable ServiceUnavailableException
  IDPCommunicationError]]):gmatch("%S+") do
  M.TRANSIENT[code] = true
end

local QUOTA_MAX, RETRY_COST, TIMEOUT_COST, NO_RETRY_INCREMENT = 500, 5, 10, 1
local BASE, THROTTLE_BASE, MAX_BACKOFF = 0.1, 0.5, 20

-- classify(err) -> "throttling" | "transient" | "timeout" | "unsent" | nil
function M.classify(err)
  if M.THROTTLING[err.code] or err.status == 429 then return "throttling" end
  if err.code == "CONNECT" then return "unsent" end
  if err.code == "TIMEOUT" then return "timeout" end
  if err.code == "RESET" then return "transient" end
  if M.TRANSIENT[err.code] or (err.status and err.status >= 500 and err.status <= 599) then
    return "transient"
  end
end

-- safe_to_retry(kind, safe_call) -> boolean
function M.safe_to_retry(kind, safe_call)
  if not kind then return false end
  if safe_call then return true end
  return kind == "throttling" or kind == "unsent"
end

-- the per-client state: quota tokens
local Client = {}
Client.__index = Client

function M.client()
  return setmetatable({ tokens = QUOTA_MAX }, Client)
end

-- acquire(kind) -> cost, or nil when the quota is spent
function Client:acquire(kind)
  local cost = kind == "timeout" and TIMEOUT_COST or RETRY_COST
  if self.tokens < cost then return nil end
  self.tokens = self.tokens - cost
  return cost
end

function Client:success(spent)
  self.tokens = math.min(QUOTA_MAX, self.tokens + (spent > 0 and spent or NO_RETRY_INCREMENT))
end

-- delay(attempt, kind [, rand]) -> seconds to wait before attempt+1
function M.delay(attempt, kind, rand)
  local base = kind == "throttling" and THROTTLE_BASE or BASE
  local ceiling = math.min(MAX_BACKOFF, base * 2 ^ (attempt - 1))
  rand = rand or function()
    local b = sys.random_bytes(4)
    return (string.unpack("<I4", b)) / 4294967296
  end
  return rand() * ceiling
end

return M
