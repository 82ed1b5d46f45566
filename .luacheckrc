std = "lua54"
max_line_length = 130
files["lua/playbooks"] = { globals = {}, read_globals = { "hypd" } }
files["examples/playbooks"] = { read_globals = { "hypd" } }
