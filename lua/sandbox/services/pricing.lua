-- The simulated AWS Price List Query API (global: its endpoint is
-- api.pricing.us-east-1; a product's region is its regionCode attribute):
-- GetProducts and DescribeServices over the prices of sandbox.data.prices,
-- as AWS answers them. A product is a Price List document; GetProducts
-- gives each as a JSON *string* (PriceList is a list of strings), with
--   { product = { productFamily, attributes, sku }, serviceCode, version,
--     publicationDate, terms = { OnDemand = { "<sku>.JRTCKXETXF" = {
--       offerTermCode, sku, effectiveDate, termAttributes,
--       priceDimensions = { "<sku>.JRTCKXETXF.6YS6EN2CT7" = { rateCode,
--         unit, description, beginRange, endRange, appliesTo,
--         pricePerUnit = { USD = "0.0450000000" } } } } } } }
-- Filters match product attributes (and productFamily, sku, servicecode),
-- case-insensitively as AWS does, by Type TERM_MATCH or EQUALS (the whole
-- value), CONTAINS (a part), ANY_OF / NONE_OF (comma-separated values).
-- Paging: MaxResults 1..100 (default 100), NextToken from the last answer.
local data = require "sandbox.data.prices"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = { scope = "global", operations = {}, transitions = {} }
local ops = M.operations

local TYPES = { "TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF" }
local ON_DEMAND, RATE = "JRTCKXETXF", "6YS6EN2CT7" -- AWS's codes of the on-demand offer term and its rate
local PUBLISHED = "2026-11-01T00:00:00Z"

-- sku(service, region, family, attributes) -> a stable 16-character SKU
local function sku_of(...)
  local parts = { ... }
  local a = parts[4]
  local keys = {}
  for k in pairs(a) do keys[#keys + 1] = k end
  table.sort(keys)
  local text = { parts[1], parts[2], parts[3] }
  for _, k in ipairs(keys) do text[#text + 1] = k .. "=" .. a[k] end
  return sys.digest("sha256", table.concat(text, "|"), "hex"):sub(1, 16):upper()
end

local function describe(service, family, attrs, usd, unit)
  local what = attrs.instanceName or attrs.usagetype or family
  return string.format("$%s per %s for %s %s", usd, unit, service, what)
end

-- products() -> every product of every region: { service, family, sku, attributes, unit, usd }
local products
local function all()
  if products then return products end
  products = {}
  local regions = {}
  for r in pairs(data.REGIONS) do regions[#regions + 1] = r end
  table.sort(regions)
  for _, region in ipairs(regions) do
    local where = data.REGIONS[region]
    for _, p in ipairs(data.PRODUCTS) do
      local service, family, unit, usd, base = p[1], p[2], p[3], p[4], p[5]
      local attrs = { servicecode = service, regionCode = region, location = where.location,
        locationType = "AWS Region" }
      for k, v in pairs(base) do attrs[k] = v end
      if attrs.usagetype and region ~= "us-east-1" then attrs.usagetype = where.prefix .. "-" .. attrs.usagetype end
      products[#products + 1] = { service = service, family = family, unit = unit, usd = usd, attributes = attrs,
        sku = sku_of(service, region, family, attrs) }
    end
  end
  return products
end

local function field_value(p, field)
  local f = field:lower()
  if f == "productfamily" then return p.family end
  if f == "sku" then return p.sku end
  for k, v in pairs(p.attributes) do
    if k:lower() == f then return v end
  end
end

local function split(v)
  local out = {}
  for part in tostring(v):gmatch("[^,]+") do out[#out + 1] = part:lower():match("^%s*(.-)%s*$") end
  return out
end

local function matches(p, filters)
  for _, f in ipairs(filters) do
    local have = field_value(p, f.Field)
    local lhave, want = have and tostring(have):lower(), tostring(f.Value):lower()
    local ok
    if f.Type == "TERM_MATCH" or f.Type == "EQUALS" then ok = lhave == want
    elseif f.Type == "CONTAINS" then ok = lhave ~= nil and lhave:find(want, 1, true) ~= nil
    else
      local any = false
      for _, v in ipairs(split(f.Value)) do any = any or lhave == v end
      ok = (f.Type == "ANY_OF") == any
    end
    if not ok then return false end
  end
  return true
end

-- document(p) -> the product's Price List document, as JSON text
local function document(p)
  local term = p.sku .. "." .. ON_DEMAND
  local attrs = json.object()
  for k, v in pairs(p.attributes) do attrs[k] = v end
  local usd = string.format("%.10f", tonumber(p.usd))
  return json.encode {
    product = { productFamily = p.family, attributes = attrs, sku = p.sku },
    serviceCode = p.service, version = "20261101000000", publicationDate = PUBLISHED,
    terms = { OnDemand = { [term] = {
      priceDimensions = { [term .. "." .. RATE] = {
        unit = p.unit, endRange = "Inf", beginRange = "0", appliesTo = json.array(),
        description = describe(p.service, p.family, p.attributes, p.usd, p.unit),
        rateCode = term .. "." .. RATE, pricePerUnit = { USD = usd } } },
      sku = p.sku, effectiveDate = PUBLISHED, offerTermCode = ON_DEMAND, termAttributes = json.object() } } },
  }
end

local function format_version(ctx, input)
  if input.FormatVersion ~= nil and input.FormatVersion ~= "aws_v1" then
    ctx.error("InvalidParameterException", "Input has invalid parameters: FormatVersion must be aws_v1")
  end
end

-- page(ctx, list, input) -> the page of list input asks for, and the next token
local function page(ctx, list, input)
  local max = input.MaxResults
  if max ~= nil and (max < 1 or max > 100) then
    ctx.error("ValidationException", "1 validation error detected: Value '" .. tostring(max) .. "' at " ..
      "'maxResults' failed to satisfy constraint: Member must have value " .. (max < 1 and "greater than or equal " ..
      "to 1" or "less than or equal to 100"))
  end
  max = max or 100
  local start = 1
  if input.NextToken ~= nil then
    local n = tonumber(tostring(input.NextToken):match("^pl%-(%d+)$"))
    if not n or n < 1 or n > #list + 1 then
      ctx.error("InvalidNextTokenException", "The nextToken provided is invalid.")
    end
    start = n
  end
  local out = json.array()
  for i = start, math.min(#list, start + max - 1) do out[#out + 1] = list[i] end
  return out, start + max <= #list and ("pl-" .. (start + max)) or nil
end

function ops.GetProducts(ctx, input)
  format_version(ctx, input)
  local filters = input.Filters or {}
  for i, f in ipairs(filters) do
    local known = false
    for _, t in ipairs(TYPES) do known = known or f.Type == t end
    if not known then
      ctx.error("ValidationException", string.format("1 validation error detected: Value '%s' at " ..
        "'filters.%d.member.type' failed to satisfy constraint: Member must satisfy enum value set: [%s]",
        tostring(f.Type), i, table.concat(TYPES, ", ")))
    end
  end
  local found = {}
  for _, p in ipairs(all()) do
    if p.service == input.ServiceCode and matches(p, filters) then found[#found + 1] = p end
  end
  table.sort(found, function(a, b) return a.sku < b.sku end)
  local list, nxt = page(ctx, found, input)
  for i, p in ipairs(list) do list[i] = document(p) end
  return { FormatVersion = "aws_v1", PriceList = list, NextToken = nxt }
end

function ops.DescribeServices(ctx, input)
  format_version(ctx, input)
  local names, order = {}, {}
  for _, p in ipairs(all()) do
    if not names[p.service] then names[p.service] = {}; order[#order + 1] = p.service end
    names[p.service].productFamily = true
    for k in pairs(p.attributes) do names[p.service][k] = true end
  end
  table.sort(order)
  local list = {}
  for _, code in ipairs(order) do
    if input.ServiceCode == nil or input.ServiceCode == code then
      local attrs = {}
      for k in pairs(names[code]) do attrs[#attrs + 1] = k end
      table.sort(attrs)
      list[#list + 1] = { ServiceCode = code, AttributeNames = attrs }
    end
  end
  if input.ServiceCode ~= nil and #list == 0 then
    ctx.error("NotFoundException", "Requested service " .. tostring(input.ServiceCode) .. " was not found")
  end
  local out, nxt = page(ctx, list, input)
  return { FormatVersion = "aws_v1", Services = out, NextToken = nxt }
end

return M
