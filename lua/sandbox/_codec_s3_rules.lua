-- sandbox._codec_s3_rules: which of the S3 model's constraints S3 itself
-- enforces, and its answer for each, for sandbox.codec.
--
-- Why not the generic check (hypd.aws.constraints.applies leaves S3 out):
-- S3 is not a Coral service. It has no model-driven validation pass and no
-- "N validation errors detected: ..." message; each parameter it checks
-- has its own code and words, and it reports one. And what S3's model
-- constrains is almost only enums (botocore states one pattern, on
-- x-amz-copy-source, and one length, on ListDirectoryBuckets' token,
-- which S3 answers by operation: the handlers do). Bucket names carry no
-- constraint in the model at all (CreateBucket checks them: InvalidBucketName
-- "The specified bucket is not valid.").
--
-- So the walk is the generic one (constraints.check with all = true) and
-- the answer is S3's, for an enum value outside the model's set:
--   * in a header or the query string, only the parameters whose refusal
--     S3 documents, by the enum's shape (RULES); any other header or query
--     enum is left to the handler, never refused in invented words;
--   * in an XML body (a configuration document), MalformedXML: S3 reads
--     the body against its published schema, whose enumerations these are;
--     except LocationConstraint, which S3 refuses by name (BODY_RULES);
--   * max-keys that does not parse or is outside 0..2147483647 (INTEGERS):
--     InvalidArgument "Argument maxKeys must be ...", as S3 answers.
local constraints = require "hypd.aws.constraints"

local M = {}

local MALFORMED = "The XML you provided was not well-formed or did not validate against our published schema"

-- enums of headers and query parameters: S3's code and message; argument:
-- InvalidArgument's ArgumentName (the wire name) and ArgumentValue fields
local RULES = {
  StorageClass = { code = "InvalidStorageClass", message = "The storage class you specified is not valid." },
  ServerSideEncryption = { code = "InvalidArgument", message = "The encryption method specified is not supported",
    argument = true },
  EncodingType = { code = "InvalidArgument", message = "Invalid Encoding Method specified in Request",
    argument = true },
}

-- enums in a body that S3 refuses by name rather than as MalformedXML;
-- field: the extra element of the <Error>
local BODY_RULES = {
  BucketLocationConstraint = { code = "InvalidLocationConstraint",
    message = "The specified location-constraint is not valid", field = "LocationConstraint" },
}

-- integers of the query string S3 refuses in its own words, whether they
-- do not parse or fall outside the range (the model states no range for
-- them): the wire name -> InvalidArgument's message and ArgumentName
local INTEGERS = {
  ["max-keys"] = { min = 0, max = 2147483647, argument = "maxKeys",
    message = "Argument maxKeys must be an integer between 0 and 2147483647" },
}

local function bad_integer(r, text)
  return { code = "InvalidArgument", message = r.message, status = 400,
    fields = { ArgumentName = r.argument, ArgumentValue = text } }
end

-- type_error(detail) -> S3's error for a query value that is not of its
-- type (the codec's { path = wire name, value }), or nil for the codec's
-- own words
function M.type_error(detail)
  local r = type(detail) == "table" and INTEGERS[detail.path]
  if not r then return nil end
  return bad_integer(r, tostring(detail.value))
end

-- the paths constraints.check builds: the members' model names, joined by
-- "." (the first one names the input member the value travels in)
M.PATHS = {
  field = function(p, m) return p == "" and m[1] or p .. "." .. m[1] end,
  item = function(p, i) return p .. "." .. i end,
}

local function has_enum(f)
  if f.kind == "enum" then return true end
  for _, r in ipairs(type(f.limit) == "table" and f.kind ~= "enum" and f.limit or {}) do
    if r.kind == "enum" then return true end
  end
  return false
end

-- answer(f, m) -> S3's error for failure f of a value that travels in
-- input member m, or nil when S3 is not known to refuse it
local function answer(f, m)
  if not has_enum(f) then return nil end
  local wire = m.name or m[1]
  if m.loc then
    local r = f.kind == "enum" and RULES[f.shape]
    if not r then return nil end
    local fields = r.argument and { ArgumentName = wire, ArgumentValue = f.value } or nil
    return { code = r.code, message = r.message, status = 400, fields = fields }
  end
  local r = f.kind == "enum" and BODY_RULES[f.shape]
  if r then
    return { code = r.code, message = r.message, status = 400,
      fields = f.value and { [r.field] = f.value } or nil }
  end
  return { code = "MalformedXML", message = MALFORMED, status = 400 }
end

-- error(model, head, found, input) -> the error S3 answers for the first failure
-- of found (constraints.check with M.PATHS) that S3 refuses, or nil
-- of found (constraints.check with M.PATHS) that S3 refuses, then for an
-- integer of INTEGERS out of its range in input; or nil
function M.error(model, head, found, input)
  local shape = model.shapes[head]
  local members = {}
  for _, m in ipairs(shape and shape[2] or {}) do members[m[1]] = m end
  for _, f in ipairs(found) do
    local m = members[f.path:match("^[^.]+")]
    local err = m and answer(f, m)
    if err then return err end
  end
  for _, m in ipairs(shape and shape[2] or {}) do
    local r = m.loc == "querystring" and INTEGERS[m.name or m[1]]
    local v = r and input[m[1]]
    if type(v) == "number" and (v < r.min or v > r.max) then return bad_integer(r, constraints.number_text(v)) end
  end
  return nil
end

return M
