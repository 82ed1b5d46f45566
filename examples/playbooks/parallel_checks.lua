-- parallel_checks: probes several HTTP endpoints at once and reports each
-- one's status and latency. Shows tasks, HTTP and error tables.
--   hypd run examples/playbooks/parallel_checks.lua urls:='["http://127.0.0.1:3099/"]'
local function probe(url, timeout)
  local resp, err = hypd.http.request { url = url, timeout = timeout }
  if not resp then
    return { url = url, ok = false, error = err.code, message = err.message }
  end
  return { url = url, ok = resp.status < 400, status = resp.status,
           seconds = math.floor(resp.seconds * 1000 + 0.5) / 1000 }
end

local function main(args)
  local urls = args.urls
  if type(urls) ~= "table" or #urls == 0 then
    hypd.errors.refuse("urls", "required", "urls: a non-empty array of URLs is required")
  end
  local timeout = args.timeout or 10
  local tasks = {}
  for i, url in ipairs(urls) do
    tasks[i] = hypd.spawn(probe, { name = "probe " .. url }, url, timeout)
  end
  local results = {}
  for i, t in ipairs(tasks) do
    local _, r = t:wait()
    results[i] = r
  end
  return results
end

return { main = main }
