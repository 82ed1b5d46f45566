-- _fsx_file_system: an FSx for Lustre file system read, waited for until
-- AVAILABLE, and deleted, for the storage tools and the teardown's sweep of
-- the file systems no storage_delete took.
--   describe(ctx, id) -> the DescribeFileSystems entry | nil
--   wait_available(ctx, id [, since]) -> the AVAILABLE file system
--   delete(ctx, fs): DeleteFileSystem, no final backup
local Names = require "_names"
local errors = hypd.errors

local M = {}

M.AVAILABLE_POLL, M.AVAILABLE_LIMIT = 30, 45 * 60
M.DELETE_POLL, M.DELETE_LIMIT = 30, 30 * 60

function M.describe(ctx, id)
  local out, err = ctx:try("fsx", "DescribeFileSystems", { FileSystemIds = { id } })
  if out then return (out.FileSystems or {})[1] end
  if err.code == "FileSystemNotFound" then return nil end
  error(err, 0)
end

-- delete(ctx, fs): DeleteFileSystem of fs (as described), once it is
-- AVAILABLE; no final backup of a PERSISTENT one (its owner chose to delete
-- it); one already DELETING is left to go
function M.delete(ctx, fs)
  if fs.Lifecycle == "DELETING" then return end
  if fs.Lifecycle == "CREATING" then M.wait_available(ctx, fs.FileSystemId) end
  local req = { FileSystemId = fs.FileSystemId, ClientRequestToken = Names.token(ctx.op_id, nil, 63) }
  if tostring((fs.LustreConfiguration or {}).DeploymentType):match("^PERSISTENT") then
    req.LustreConfiguration = { SkipFinalBackup = true }
  end
  ctx:call("fsx", "DeleteFileSystem", req)
end

-- wait_available(ctx, id [, since]) -> the AVAILABLE file system
function M.wait_available(ctx, id, since)
  -- a plan waits for nothing, but what a file system that exists already
  -- says (its DNS and mount names) is what the volume step compares with:
  -- without it a plan of a finished stage changes the volume to "planned"
  if ctx.plan then
    if id and not hypd.kit.is_planned(id) then return M.describe(ctx, id) end
    return nil
  end
  return ctx:poll { what = "FSx file system " .. id .. " to be AVAILABLE", every = M.AVAILABLE_POLL,
    timeout = M.AVAILABLE_LIMIT, since = since,
    check = function()
      local fs = M.describe(ctx, id)
      if not fs then errors.raise("NOT_FOUND", "FSx file system " .. id .. " is gone", { file_system_id = id }) end
      if fs.Lifecycle == "FAILED" or fs.Lifecycle == "MISCONFIGURED" then
        errors.raise("FAILED", string.format("FSx file system %s is %s: %s", id, fs.Lifecycle,
          tostring((fs.FailureDetails or {}).Message or "no reason given")), { file_system_id = id })
      end
      if fs.Lifecycle == "DELETING" then
        errors.raise("CONFLICT", "FSx file system " .. id .. " is being deleted", { file_system_id = id })
      end
      local why = (fs.FailureDetails or {}).Message -- what FSx says of it, shown with the wait
      return fs.Lifecycle == "AVAILABLE", "FSx file system " .. id .. " " .. tostring(fs.Lifecycle) ..
        ((why and why ~= "") and (": " .. why) or ""), fs
    end }
end

return M
