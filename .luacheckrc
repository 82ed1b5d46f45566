std = "lua54"
max_line_length = 130
files["lua/playbooks"] = { globals = {}, read_globals = { "hypd" } }
-- playbooks (the built-in tools among them) see hypd and tool{}
files["lua/workflows"] = { read_globals = { "hypd", "tool" } }
files["examples/playbooks"] = { read_globals = { "hypd", "tool" } }
files["recipes"] = { read_globals = { "hypd" } }
