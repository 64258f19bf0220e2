// Package config loads sepp's configuration: an optional TOML file
// (conventionally sepp.toml) with the sections [server], [storage],
// [limits], [auth], [[queues]] and [[webhooks]], overridden by a few SEPP_*
// environment variables.
//
// Every key is optional and a missing file is fine: Default holds the values
// used for anything not set. Load (or LoadWith, which takes the environment
// as a function so tests need no os.Setenv) reads the file, applies the
// environment and validates the result. A bad configuration yields one
// *Error naming the file, line and key, and saying what to do, for example:
//
//	sepp.toml:7: storage.dedup_window_ms: must be > 0, got -5 (the dedup window in milliseconds; default 86400000)
//
// A loaded *Config is read-only: Config.Queue and Config.Declared, which sit
// on the enqueue hot path, answer from a map built at load time. The user
// documentation of every key lives in docs/configuration.md.
package config
