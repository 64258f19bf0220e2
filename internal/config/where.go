package config

import "strconv"

// keyOrigins is where the keys of a loaded config were set.
type keyOrigins struct {
	file string
	org  origins
}

// Where says where key (a path such as "server.listen") was set, as the
// prefix of a message about its value: "sepp.toml:3: server.listen: ", or
// "SEPP_LISTEN: " when the environment set it; "server.listen: " when it
// kept its default or the config was built in code. Use it for a problem
// found after loading, such as a listen address that cannot be bound.
func (c *Config) Where(key string) string {
	if c.from == nil {
		return key + ": "
	}
	o, ok := c.from.org[key]
	switch {
	case ok && o.env != "":
		return o.env + ": "
	case ok && o.line > 0 && c.from.file != "":
		return c.from.file + ":" + strconv.Itoa(o.line) + ": " + key + ": "
	}
	return key + ": "
}
