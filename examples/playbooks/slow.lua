-- slow: sleeps, noting each minute. Under simulated time (HYPD_CLOCK=virtual)
-- the sleeps pass at once; with --timeout the run fails with TIMEOUT.
--   HYPD_CLOCK=virtual hypd run examples/playbooks/slow.lua seconds:=3600
--   hypd run --timeout 1 examples/playbooks/slow.lua seconds:=60
local function main(args)
  local seconds = args.seconds or 60
  local started = hypd.now()
  while hypd.now() - started < seconds do
    hypd.sleep(math.min(60, seconds - (hypd.now() - started)))
    hypd.log.info("slept %d of %d s", math.floor(hypd.now() - started), seconds)
  end
  return { slept = math.floor(hypd.now() - started + 0.5) }
end

return { main = main }
