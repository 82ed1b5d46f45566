-- jobs/_batch: the jobs area's name for _batch (the shared helper
-- lua/workflows/_batch.lua, which the diagnostics read too)
return require "_batch"
