-- IAM users: the simulated account has one, the user whose static keys the
-- sandbox prints (sandbox.auth.USER); no CreateUser is simulated. GetUser
-- answers it by name, or the caller when no name is given and the caller
-- is that user; a role session that names no user gets the ValidationError
-- IAM answers, any other name NoSuchEntity.
local auth = require "sandbox.auth"

local M = { operations = {} }
local ops = M.operations

local NAME = auth.USER:match(":user/(.+)$")
-- when the sandbox's account and its user came to be (a fixed instant:
-- the account is the same in every sandbox)
local CREATED = 1704067200

local function view()
  return { Path = "/", UserName = NAME, UserId = auth.USER_ID, Arn = auth.USER, CreateDate = CREATED }
end

function ops.GetUser(ctx, input)
  local name = input.UserName
  if name == nil then
    local arn = ctx.principal and ctx.principal.arn or ""
    if arn ~= auth.USER then
      ctx.error("ValidationError", "Must specify userName when calling with non-User credentials", 400)
    end
    name = NAME
  end
  if name ~= NAME then ctx.error("NoSuchEntity", "The user with name " .. name .. " cannot be found.", 404) end
  return { User = view() }
end

return M
