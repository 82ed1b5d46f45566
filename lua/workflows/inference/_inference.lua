-- inference/_inference: the inference area's name for _inference (the
-- shared helper lua/workflows/_inference.lua, which the diagnostics read too)
return require "_inference"
